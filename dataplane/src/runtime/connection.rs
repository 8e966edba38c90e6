//! One WebSocket connection: a reader task (size limit, per-session rate limit, idle
//! timeout, JSON decoding with `bidi_error` for bad frames), a writer task fed by a
//! bounded channel, and the session loop that starts the agent's session, drives it and —
//! in local mode — moves it in-process to another agent on a handoff.
//!
//! Voice sessions ([`super::voice`]) also take audio: raw PCM16 in binary frames or
//! base64 in `bidi_audio_input`, checked by the reader (a bad frame gets a recoverable
//! `bidi_error`), limited by an audio byte rate instead of the message rate, and passed
//! in order on a separate bounded channel. Text sessions refuse audio as before.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use super::driver::{self, Exit};
use super::server::AppState;
use super::voice::{self, AudioGate, Gate, audio};
use crate::core::{Session, SessionInit};
use crate::protocol::{ClientMessage, ServerMessage, SessionStart, close_code, decode_client};

/// Messages queued towards the client before the session waits for the socket.
const OUTBOUND_BUFFER: usize = 256;
/// How long to wait for a client to acknowledge a close.
const CLOSE_DRAIN: Duration = Duration::from_secs(2);
/// Decoded client messages queued towards the session; a client that fills it is flooding.
const INBOUND_BUFFER: usize = 64;
/// Checked audio frames queued towards a voice session (10 s of 20 ms frames); a client
/// that fills it is flooding.
const AUDIO_BUFFER: usize = 500;

enum Out {
    Message(ServerMessage),
    Close(u16, String),
}

/// Serves one upgraded socket until it closes.
pub async fn serve(socket: WebSocket, state: Arc<AppState>, query_agent: Option<String>) {
    let (sink, stream) = socket.split();
    let (out_tx, out_rx) = mpsc::channel::<Out>(OUTBOUND_BUFFER);
    // The session's messages come on their own channel straight to the writer (no
    // forwarding task between them).
    let (msg_tx, msg_rx) = mpsc::channel::<ServerMessage>(OUTBOUND_BUFFER);
    let writer = tokio::spawn(write_loop(sink, msg_rx, out_rx));
    let close = |code: u16, reason: String| {
        let out_tx = out_tx.clone();
        async move {
            let _ = out_tx.send(Out::Close(code, reason)).await;
        }
    };
    if state.draining.is_cancelled() {
        close(close_code::TRY_AGAIN_LATER, "the server is draining; connect to another instance".into()).await;
        drop((out_tx, msg_tx));
        let _ = writer.await;
        return;
    }
    let Ok(permit) = state.sessions.clone().try_acquire_owned() else {
        state.shared.metrics.errors.with_label_values(&["", "max_sessions"]).inc();
        let reason = format!("the server is at its limit of {} sessions; try again later", state.config.max_sessions);
        close(close_code::TRY_AGAIN_LATER, reason).await;
        drop((out_tx, msg_tx));
        let _ = writer.await;
        return;
    };
    let (in_tx, mut in_rx) = mpsc::channel::<ClientMessage>(INBOUND_BUFFER);
    let (audio_tx, mut audio_rx) = mpsc::channel::<Bytes>(AUDIO_BUFFER);
    let gate = AudioGate::default();
    let audio_in = AudioIn { tx: audio_tx, gate: gate.clone() };
    let reader = tokio::spawn(read_loop(stream, in_tx, audio_in, out_tx.clone(), state.clone()));
    let mut audio = (gate, &mut audio_rx);
    let outcome = run(&state, query_agent, &mut in_rx, &mut audio, &msg_tx).await;
    // The writer sends what the session queued before anything queued after this.
    drop(msg_tx);
    let (code, reason) = match outcome {
        Some(close) => close,
        None => (close_code::NORMAL, String::new()),
    };
    let _ = out_tx.send(Out::Message(ServerMessage::BidiConnectionClose { reason: reason.clone() })).await;
    let _ = out_tx.send(Out::Close(code, reason)).await;
    drop(out_tx);
    let _ = writer.await;
    // The reader ends when the client acknowledges the close; do not wait forever.
    let reader_abort = reader.abort_handle();
    if tokio::time::timeout(CLOSE_DRAIN, reader).await.is_err() {
        reader_abort.abort();
    }
    drop(permit);
}

/// Writes the session's messages (`messages`, first while it has any, so everything the
/// session queued goes out before the close that follows it) and the connection's own
/// (`out`) to the socket. Messages are fed without a flush each, and flushed once nothing
/// more is queued: one socket write for a burst (audio chunks), none held back.
async fn write_loop(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    mut messages: mpsc::Receiver<ServerMessage>,
    mut out: mpsc::Receiver<Out>,
) {
    let mut session_open = true;
    loop {
        let next = tokio::select! {
            biased;
            message = messages.recv(), if session_open => match message {
                Some(message) => Out::Message(message),
                None => {
                    session_open = false;
                    continue;
                }
            },
            next = out.recv() => match next {
                Some(next) => next,
                None => break,
            },
        };
        let fed = match next {
            Out::Message(message) => sink.feed(Message::Text(Utf8Bytes::from(message.to_json()))).await,
            Out::Close(code, reason) => {
                let frame = CloseFrame { code, reason: Utf8Bytes::from(reason) };
                let _ = sink.send(Message::Close(Some(frame))).await;
                break;
            }
        };
        let idle = messages.is_empty() && out.is_empty();
        if fed.is_err() || (idle && sink.flush().await.is_err()) {
            break;
        }
    }
    let _ = sink.close().await;
}

/// Reads frames, enforcing limits; on a fatal problem sends the close and stops.
async fn read_loop(
    mut stream: futures_util::stream::SplitStream<WebSocket>,
    in_tx: mpsc::Sender<ClientMessage>,
    audio_in: AudioIn,
    out_tx: mpsc::Sender<Out>,
    state: Arc<AppState>,
) {
    let config = &state.config;
    let mut bucket = TokenBucket::new(config.rate_per_second, config.rate_burst);
    let mut audio_bucket = audio::AudioBucket::default();
    // After a fatal problem the close is sent and the rest of the client's frames are
    // read and dropped until it acknowledges the close, so the TCP connection is not
    // reset under frames the client already sent (which would lose the close frame).
    let fatal = |code: u16, reason: String, kind: &'static str| {
        state.shared.metrics.errors.with_label_values(&["", kind]).inc();
        let out_tx = out_tx.clone();
        async move {
            let _ = out_tx.send(Out::Close(code, reason)).await;
        }
    };
    let drain = |mut stream: futures_util::stream::SplitStream<WebSocket>| async move {
        let _ = tokio::time::timeout(CLOSE_DRAIN, async {
            while let Some(Ok(frame)) = stream.next().await {
                if matches!(frame, Message::Close(_)) {
                    break;
                }
            }
        })
        .await;
    };
    loop {
        let frame = match tokio::time::timeout(config.idle_timeout, stream.next()).await {
            Err(_) => {
                let reason = format!("no message for {} s; the session was closed", config.idle_timeout.as_secs());
                fatal(close_code::NORMAL, reason, "idle_timeout").await;
                drop(in_tx);
                return drain(stream).await;
            }
            Ok(None) => return,
            Ok(Some(Err(e))) => {
                let text = e.to_string();
                if text.contains("too long") || text.contains("Space limit") || text.contains("capacity") {
                    let reason = format!("a message exceeded the limit of {} bytes", config.max_message_bytes);
                    fatal(close_code::TOO_BIG, reason, "message_too_big").await;
                    drop(in_tx);
                    return drain(stream).await;
                }
                return;
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let gate = audio_in.gate.get();
        let audio_frame = match &frame {
            Message::Binary(_) if gate == Gate::Ignore => continue,
            Message::Binary(data) if gate == Gate::Accept => Some(audio::check_pcm(data.clone())),
            Message::Text(text) if gate != Gate::Refuse && text.contains("bidi_audio_input") => {
                match decode_client(text.as_str()) {
                    Ok(ClientMessage::BidiAudioInput { .. }) if gate == Gate::Ignore => continue,
                    Ok(ClientMessage::BidiAudioInput { audio }) => Some(audio::decode_base64(&audio)),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(checked) = audio_frame {
            match checked {
                Err(error) => {
                    state.shared.metrics.errors.with_label_values(&["", error.code()]).inc();
                    let _ =
                        out_tx.send(Out::Message(ServerMessage::error(error.code(), error.to_string(), true))).await;
                }
                Ok(pcm) if !audio_bucket.take(pcm.len(), Instant::now()) => {
                    let reason = format!(
                        "audio arrives faster than {}x real time (16 kHz PCM16); send it as it is recorded",
                        audio::AUDIO_RATE_FACTOR
                    );
                    fatal(close_code::RATE_LIMITED, reason, "audio_rate_limited").await;
                    drop(in_tx);
                    return drain(stream).await;
                }
                Ok(pcm) => match audio_in.tx.try_send(pcm) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        let reason = "too much audio is waiting for the session; slow down".to_owned();
                        fatal(close_code::RATE_LIMITED, reason, "audio_flood").await;
                        drop(in_tx);
                        return drain(stream).await;
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return,
                },
            }
            continue;
        }
        let text = match frame {
            Message::Text(text) => text,
            Message::Binary(_) => {
                let error = ServerMessage::error(
                    "unsupported_frame",
                    "binary frames carry audio; text sessions take JSON text frames",
                    true,
                );
                let _ = out_tx.send(Out::Message(error)).await;
                continue;
            }
            Message::Close(_) => return,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        if !bucket.take(Instant::now()) {
            let reason = format!(
                "more than {} messages per second (burst {}); slow down",
                config.rate_per_second, config.rate_burst
            );
            fatal(close_code::RATE_LIMITED, reason, "rate_limited").await;
            drop(in_tx);
            return drain(stream).await;
        }
        match decode_client(text.as_str()) {
            Ok(message) => match in_tx.try_send(message) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    fatal(close_code::RATE_LIMITED, "too many messages are waiting; slow down".into(), "flood").await;
                    drop(in_tx);
                    return drain(stream).await;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            },
            Err(error) => {
                state.shared.metrics.errors.with_label_values(&["", error.code()]).inc();
                let _ = out_tx.send(Out::Message(ServerMessage::error(error.code(), error.to_string(), true))).await;
            }
        }
    }
}

/// Starts the session with the right agent and drives it across in-process handoffs.
/// Returns the close code and reason.
/// The reader's side of the audio channel.
struct AudioIn {
    tx: mpsc::Sender<Bytes>,
    gate: AudioGate,
}

async fn run(
    state: &Arc<AppState>,
    query_agent: Option<String>,
    inbound: &mut mpsc::Receiver<ClientMessage>,
    audio: &mut (AudioGate, &mut mpsc::Receiver<Bytes>),
    outbound: &mpsc::Sender<ServerMessage>,
) -> Option<(u16, String)> {
    let first = inbound.recv().await?;
    let (start, pending) = match first {
        ClientMessage::SessionStart(start) => (start, None),
        other => (SessionStart::default(), Some(other)),
    };
    let requested = query_agent.or(start.agent.clone());
    let agent = match state.directory.pick(requested.as_deref()) {
        Ok(agent) => agent,
        Err(reason) => return Some((close_code::BAD_START, reason)),
    };
    let session_id = uuid::Uuid::new_v4().to_string();
    let init = SessionInit {
        session_id: session_id.clone(),
        today: crate::tools::builtin::today(),
        memory: start.memory.clone(),
        history: start.history.clone(),
        handoff: start.handoff.clone(),
    };
    let audio_session = voice::wants_audio(agent.core.spec().mode, &start.modalities);
    let (mut session, mut effects) = start_session(state, &agent, audio_session, init);
    let mut agent = agent;
    let mut pending: Vec<ClientMessage> = pending.into_iter().collect();
    let mut previous_voice: Option<String> = None;
    loop {
        let [name, mode, _] = agent.labels();
        let gauge = state.shared.metrics.sessions_active.with_label_values(&[name, mode]);
        state.shared.metrics.sessions_total.with_label_values(&[name, mode]).inc();
        gauge.inc();
        let first: Vec<ClientMessage> = std::mem::take(&mut pending);
        let exit = if session.is_voice() {
            let (gate, frames) = audio;
            gate.set(Gate::Accept);
            let spec = agent.core.spec();
            let model = state.voice.get(name).cloned();
            let voice_id = start.voice.clone().unwrap_or_else(|| spec.persona.spec.voice.clone());
            let opened = match model {
                Some(model) => model.open(spec, &mut session, Some(&voice_id), state.config.voice_rotate_after).await,
                None => Err(crate::model::ModelError::Config { message: format!("agent {name} has no voice model") }),
            };
            let sonic = match opened {
                Ok(sonic) => sonic,
                Err(error) => {
                    gauge.dec();
                    state
                        .shared
                        .metrics
                        .errors
                        .with_label_values(&[name, &format!("model_{}", error.metric_label())])
                        .inc();
                    let message = format!("the voice model could not start: {error}");
                    let code = format!("model_{}", error.metric_label());
                    let _ = outbound.send(ServerMessage::error(&code, message, false)).await;
                    // A close reason is at most 123 bytes: the bidi_error has the details.
                    return Some((close_code::INTERNAL, format!("the voice model could not start ({code})")));
                }
            };
            if let Some(previous) = previous_voice.replace(voice_id.clone()) {
                let reason = if previous == voice_id { "handoff" } else { "voice_change" };
                state.shared.metrics.stream_restarts.with_label_values(&[name, reason]).inc();
                let _ =
                    outbound.send(ServerMessage::BidiConnectionRestart { reason: reason.into(), generation: 1 }).await;
            }
            let shared = &state.shared;
            voice::drive(
                &agent,
                &mut session,
                sonic,
                effects,
                first,
                inbound,
                frames,
                outbound,
                shared,
                &state.shutdown,
            )
            .await
        } else {
            if audio_session {
                audio.0.set(Gate::Ignore);
                let message = format!(
                    "agent {name} is text-only: audio is ignored from now on; send bidi_text_input and read the transcripts"
                );
                let _ = outbound.send(ServerMessage::error("unsupported_modality", message, true)).await;
            }
            driver::drive(&agent, &mut session, effects, first, inbound, outbound, &state.shared, &state.shutdown).await
        };
        gauge.dec();
        // Inputs the user sent while the handing-over agent was busy go to the next agent.
        pending = session.take_queued().into_iter().map(|text| ClientMessage::BidiTextInput { text }).collect();
        match next_step(state, exit, &session_id, audio_session) {
            Step::Close(code, reason) => return Some((code, reason)),
            Step::Continue(next_agent, next_session, next_effects) => {
                agent = next_agent;
                session = *next_session;
                effects = next_effects;
            }
        }
    }
}

enum Step {
    Close(u16, String),
    Continue(Arc<driver::AgentRuntime>, Box<Session>, Vec<crate::core::Effect>),
}

/// Starts `agent`'s session: over Nova Sonic when the connection carries audio and the
/// agent speaks (and has a voice model here), else over its text model.
fn start_session(
    state: &AppState,
    agent: &driver::AgentRuntime,
    audio_session: bool,
    init: SessionInit,
) -> (Session, Vec<crate::core::Effect>) {
    let spec = agent.core.spec();
    if audio_session && spec.mode.has_audio() && state.voice.contains_key(&spec.agent.name) {
        Session::start_voice(agent.core.clone(), init)
    } else {
        Session::start(agent.core.clone(), init)
    }
}

fn next_step(state: &Arc<AppState>, exit: Exit, session_id: &str, audio_session: bool) -> Step {
    match exit {
        Exit::Closed(reason) => Step::Close(close_code::NORMAL, reason),
        Exit::ClientGone => Step::Close(close_code::NORMAL, "the client went away".into()),
        Exit::Shutdown => Step::Close(close_code::GOING_AWAY, "the server is shutting down; reconnect".into()),
        Exit::Handoff(request) => {
            if !state.directory.in_process_handoffs {
                return Step::Close(close_code::HANDOFF, format!("handed off to {}", request.target));
            }
            let Some(target) = state.directory.agents.get(&request.target).cloned() else {
                return Step::Close(
                    close_code::INTERNAL,
                    format!("handoff target {:?} is not running here", request.target),
                );
            };
            let init = SessionInit {
                session_id: session_id.to_owned(),
                today: crate::tools::builtin::today(),
                memory: BTreeMap::new(),
                history: Vec::new(),
                handoff: Some(request.context),
            };
            let (session, effects) = start_session(state, &target, audio_session, init);
            Step::Continue(target, Box::new(session), effects)
        }
    }
}

/// A token bucket: `rate` tokens per second, at most `burst` saved.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: u32, burst: u32) -> Self {
        Self { rate: f64::from(rate), burst: f64::from(burst.max(1)), tokens: f64::from(burst.max(1)), last: None }
    }

    /// Takes one token at `now`; false when none is left.
    pub fn take(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}
