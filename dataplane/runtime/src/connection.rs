//! One WebSocket connection: its socket task ([`super::socket`]: the client's frames through
//! the [`Reader`] — size limit, per-session rate limit, idle timeout, JSON decoding with
//! `bidi_error` for bad frames — and the session's messages out, from a bounded channel),
//! and the session loop that starts the agent's session and drives it
//! until it closes or hands off (the gateway then opens the target's session).
//!
//! Voice sessions ([`super::voice`]) also take audio: raw PCM16 in binary frames or
//! base64 in `bidi_audio_input`, checked by the [`Reader`] (a bad frame gets a recoverable
//! `bidi_error`), limited by an audio byte rate instead of the message rate, and passed
//! in order on a separate bounded channel. Text sessions refuse audio as before. A session
//! whose `session_start.audio` asks for binary output gets its reply audio as binary
//! frames: the socket sends `bidi_audio_stream`'s bytes raw ([`BinaryAudio`]).
//!
//! A connection comes with a place among those still opening ([`Slots`]); it takes a
//! session slot only once its first message passed the grant check, and must send that
//! message within the server's `start_timeout` (pings and bad frames do not extend it).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchboard_serve::frames::{CloseFrame, Conn, Upgraded, Utf8Bytes};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tracing::Instrument;

use super::agent::{AgentRuntime, Exit};
use super::driver::{self, Link, Opening};
use super::identity::{Binding, SessionIdentity};
use super::reader::{AudioIn, Reader};
use super::socket::{self, CLOSE_DRAIN, Out, Outgoing};
use super::state::AppState;
use super::trace;
use super::voice::{self, AudioGate, BinaryAudio, Gate};
use switchboard_core::assertion::IDENTITY_KEY;
use switchboard_core::audio::{FormatError, Negotiated, negotiate};
use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, SessionStart, close_code};
use switchboard_core::{Session, SessionInit};
use switchboard_models::ModelError;
use switchboard_models::sonic::{SonicEvents, SonicSession};

/// Messages queued towards the client before the session waits for the socket.
const OUTBOUND_BUFFER: usize = 256;
/// Decoded client messages queued towards the session; a client that fills it is flooding.
const INBOUND_BUFFER: usize = 64;
/// Checked audio frames queued towards a voice session (10 s of 20 ms frames); a client
/// that fills it is flooding.
const AUDIO_BUFFER: usize = 500;

/// What a connection holds of the server's limits: its place among the connections still
/// opening, until it is traded for a session slot once the grant is checked.
struct Slots {
    opening: Option<OwnedSemaphorePermit>,
    session: Option<OwnedSemaphorePermit>,
}

impl Slots {
    /// A session slot for a connection whose start passed the grant check (its opening
    /// place is given back), or the close when the server is full.
    fn take_session(&mut self, state: &AppState) -> Result<(), (u16, String)> {
        let Ok(session) = state.sessions.clone().try_acquire_owned() else {
            state.shared.metrics.errors.with_label_values(&["", "max_sessions"]).inc();
            let reason =
                format!("the server is at its limit of {} sessions; try again later", state.config.max_sessions);
            return Err((close_code::TRY_AGAIN_LATER, reason));
        };
        self.session = Some(session);
        self.opening = None;
        Ok(())
    }
}

/// Serves one upgraded socket until it closes. `opening` is the place the server took for
/// it among the connections still opening.
pub async fn serve(
    mut socket: Conn<Upgraded>,
    state: Arc<AppState>,
    query_agent: Option<String>,
    opening: OwnedSemaphorePermit,
) {
    let slow = state.config.slow_client_timeout;
    if state.draining.is_cancelled() {
        let reason = Utf8Bytes::from_static("the server is draining; connect to another instance");
        let frame = CloseFrame { code: close_code::TRY_AGAIN_LATER.into(), reason };
        if let Ok(Ok(())) = tokio::time::timeout(slow, socket.close(Some(frame))).await {
            socket.linger(CLOSE_DRAIN).await;
        }
        return;
    }
    let (out_tx, out_rx) = mpsc::channel::<Out>(OUTBOUND_BUFFER);
    // The session's messages come on their own channel straight to the socket (no
    // forwarding task between them).
    let (msg_tx, msg_rx) = mpsc::channel::<ServerMessage>(OUTBOUND_BUFFER);
    let binary = BinaryAudio::default();
    let mut slots = Slots { opening: Some(opening), session: None };
    // When the server starts draining, the session hears it (a gateway then moves it to
    // another pod at its next turn boundary).
    let notice = {
        let (draining, out_tx) = (state.draining.clone(), out_tx.clone());
        let seconds = state.config.drain_timeout.as_secs();
        tokio::spawn(async move {
            draining.cancelled().await;
            let _ = out_tx.send(Out::Message(ServerMessage::BidiConnectionDraining { seconds })).await;
        })
    };
    let (in_tx, mut in_rx) = mpsc::channel::<ClientMessage>(INBOUND_BUFFER);
    let (audio_tx, mut audio_rx) = mpsc::channel::<Bytes>(AUDIO_BUFFER);
    let gate = AudioGate::default();
    let audio_in = AudioIn { tx: audio_tx, gate: gate.clone() };
    let metrics = state.shared.metrics.clone();
    let reader = Reader::new(in_tx, audio_in, state.config.read_limits(), metrics.clone());
    let outgoing = Outgoing { messages: msg_rx, out: out_rx };
    let io = tokio::spawn(socket::run(socket, reader, outgoing, slow, binary.clone(), metrics));
    let audio = AudioOut { gate, binary, frames: &mut audio_rx };
    let outcome = run(&state, query_agent, &mut in_rx, audio, &msg_tx, &mut slots).await;
    // The socket writes what the session queued before anything queued after this.
    drop(msg_tx);
    let (code, reason) = match outcome {
        Some(close) => close,
        None => (close_code::NORMAL, String::new()),
    };
    let _ = out_tx.send(Out::Message(ServerMessage::BidiConnectionClose { reason: reason.clone() })).await;
    let _ = out_tx.send(Out::Close(code, reason)).await;
    drop(out_tx);
    notice.abort();
    // The socket ends once the client acknowledges the close (within CLOSE_DRAIN), or at
    // once when it is gone.
    let _ = io.await;
    drop(slots);
}

/// Starts the session with the right agent, once its first message came within the start
/// timeout and passed the grant check (then it takes its session slot), and drives it.
/// Returns the close code and reason (`None`: the client left before starting).
async fn run(
    state: &Arc<AppState>,
    query_agent: Option<String>,
    inbound: &mut mpsc::Receiver<ClientMessage>,
    audio: AudioOut<'_>,
    outbound: &mpsc::Sender<ServerMessage>,
    slots: &mut Slots,
) -> Option<(u16, String)> {
    let first = match tokio::time::timeout(state.config.start_timeout, inbound.recv()).await {
        Ok(first) => first?,
        Err(_) => {
            state.shared.metrics.errors.with_label_values(&["", "start_timeout"]).inc();
            let reason = format!("no session_start within {} s", state.config.start_timeout.as_secs_f32());
            return Some((close_code::IDLE_TIMEOUT, reason));
        }
    };
    let (start, pending) = match first {
        ClientMessage::SessionStart(start) => (start, None),
        other => (SessionStart::default(), Some(other)),
    };
    let requested = query_agent.or(start.agent.clone());
    let agent = match state.directory.pick(requested.as_deref()) {
        Ok(agent) => agent,
        Err(reason) => return Some((close_code::BAD_START, reason)),
    };
    let granted = match state.grants.accept_start(&start, &agent.core.spec().agent.namespace, agent.core.name()) {
        Ok(granted) => granted,
        Err((message, reason)) => {
            state.shared.metrics.errors.with_label_values(&[agent.core.name(), "context_refused"]).inc();
            let _ = outbound.send(ServerMessage::error(ErrorCode::ContextRefused, message, false)).await;
            return Some((close_code::BAD_START, reason.to_owned()));
        }
    };
    let agent = match agent.variant(granted.variant.as_deref()) {
        Ok(agent) => agent,
        Err(own) => {
            let variant = granted.variant.as_deref().unwrap_or_default();
            state.shared.metrics.errors.with_label_values(&[own.core.name(), "unknown_variant"]).inc();
            tracing::warn!(
                agent = own.core.name(),
                variant,
                "the session's variant is not one this pod runs (yet): the agent's own serves it"
            );
            own
        }
    };
    let region = granted_region(state, &agent, granted.region);
    let audio_batched = granted.audio_batch_ms.map_or(Duration::ZERO, |ms| Duration::from_millis(ms.into()));
    if let Some(refused) = refused_model(&agent, start.model.as_deref()) {
        state.shared.metrics.errors.with_label_values(&[agent.core.name(), "model_not_allowed"]).inc();
        let _ = outbound.send(ServerMessage::error(ErrorCode::ModelNotAllowed, refused, false)).await;
        return Some((close_code::BAD_START, "the session's model is not one its agent offers".to_owned()));
    }
    if let Err(full) = slots.take_session(state) {
        return Some(full);
    }
    let session_id = if granted.session_id.is_empty() { uuid::Uuid::new_v4().to_string() } else { granted.session_id };
    let traceparent = granted.traceparent;
    let init = SessionInit {
        session_id,
        today: crate::tools::builtin::today(),
        model: start.model.clone(),
        carried: granted.carried,
    };
    // The client asked for audio. A text-only agent (the first here, or one a handoff
    // brings) then ignores its audio and says so once; a voice or hybrid agent speaks.
    // (Through a gateway, a text-only agent's pod may be the first this connection meets.)
    let audio_session = start.modalities.iter().any(|m| m.eq_ignore_ascii_case("audio"));
    let (formats, refused_formats) = negotiate(start.audio.as_ref());
    let (session, effects) = start_session(state, &agent, audio_session, init);
    // The session's logs and spans from here on are in its span, under the gateway's.
    let span = trace::session_span(&agent, session.id(), traceparent.as_deref(), session.is_voice());
    let identity = span.in_scope(|| session_identity(state, &agent, &session, granted.identity));
    let mut conversation = Conversation {
        state,
        inbound,
        audio,
        outbound,
        audio_session,
        requested_voice: start.voice,
        identity,
        formats,
        refused_formats,
        region,
        audio_batched,
    };
    let opening = Opening { effects, first: pending.into_iter().collect() };
    Some(conversation.run(agent, session, opening).instrument(span).await)
}

/// The region a session's streams open in, as its grant names it: the agent's fallback
/// region, when this pod has clients there; its own region (none) otherwise — a region
/// this pod does not serve is logged, counted (`unknown_region`) and not used.
fn granted_region(state: &AppState, agent: &AgentRuntime, region: Option<String>) -> Option<String> {
    let region = region?;
    let spec = agent.core.spec();
    if region == spec.model.region {
        return None;
    }
    if state.voice_regions.get(agent.core.name()).is_some_and(|r| r.region == region) {
        return Some(region);
    }
    state.shared.metrics.errors.with_label_values(&[agent.core.name(), "unknown_region"]).inc();
    let shown: String = region.chars().take(32).collect();
    tracing::warn!(
        agent = agent.core.name(),
        region = %shown,
        "the session's region is not one this pod serves (yet): the agent's own serves it"
    );
    None
}

/// Why `session_start.model` cannot be this session's text model, if it cannot: only the
/// agent's `textModelId` and `sessionModels` are offered to sessions.
fn refused_model(agent: &AgentRuntime, model: Option<&str>) -> Option<String> {
    let model = model?;
    let settings = &agent.core.spec().model;
    if settings.allows_session_model(model) {
        return None;
    }
    let offered: Vec<&str> = std::iter::once(settings.text_model_id.as_str())
        .chain(settings.session_models.iter().map(String::as_str))
        .collect();
    let shown: String = model.chars().take(128).collect();
    Some(format!(
        "session_start.model {shown:?} is not a model agent {} offers its sessions; use one of: {} (or leave model out)",
        agent.core.name(),
        offered.join(", ")
    ))
}

/// The identity assertion of `agent`'s new `session`: the grant's, checked as a frame's is.
fn session_identity(
    state: &AppState,
    agent: &AgentRuntime,
    session: &Session,
    granted: Option<String>,
) -> SessionIdentity {
    let spec = agent.core.spec();
    let binding = Binding {
        namespace: &spec.agent.namespace,
        agent: &spec.agent.name,
        asserts: spec.identity_keys.iter().any(|key| key == IDENTITY_KEY),
        session_id: session.id(),
    };
    let key = state.config.gateway_key.clone();
    let (identity, refused) =
        SessionIdentity::new(key, binding, session.memory().get(IDENTITY_KEY), granted.as_deref());
    if let Some(refused) = refused {
        tracing::warn!(agent = %spec.agent.name, session_id = session.id(), "the grant's identity assertion is not used: {refused}");
    }
    identity
}

/// The session's side of the audio channel: the gate the reader checks and the frames.
struct AudioOut<'a> {
    gate: AudioGate,
    /// Whether the writer sends reply audio as binary frames.
    binary: BinaryAudio,
    frames: &'a mut mpsc::Receiver<Bytes>,
}

/// One client's conversation on this server, across the agents it is handed to.
struct Conversation<'a> {
    state: &'a Arc<AppState>,
    inbound: &'a mut mpsc::Receiver<ClientMessage>,
    audio: AudioOut<'a>,
    outbound: &'a mpsc::Sender<ServerMessage>,
    /// The connection carries audio (its `session_start` asked for it).
    audio_session: bool,
    /// The voice the client asked for, over the persona's.
    requested_voice: Option<String>,
    /// The verified caller's identity assertion, for the session's tool calls.
    identity: SessionIdentity,
    /// The audio formats `session_start.audio` chose (the reader decodes the same input).
    formats: Negotiated,
    /// The formats it asked for that are not offered: told once a voice session starts.
    refused_formats: Vec<FormatError>,
    /// The gateway placed the session on the agent's fallback region: its streams open
    /// there ([`granted_region`]).
    region: Option<String>,
    /// How long the gateway holds the caller's audio to send it in larger frames (its
    /// grant's `audio_batch_ms`; zero without).
    audio_batched: Duration,
}

impl Conversation<'_> {
    /// Drives `session` with `agent` until it ends; returns the close code and reason. A
    /// handoff ends it with 4000 after the `handoff` message: the gateway performs it.
    async fn run(&mut self, agent: Arc<AgentRuntime>, mut session: Session, opening: Opening) -> (u16, String) {
        let [name, mode, _] = agent.labels();
        let metrics = &self.state.shared.metrics;
        let gauge = metrics.sessions_active.with_label_values(&[name, mode]);
        metrics.sessions_total.with_label_values(&[name, mode]).inc();
        gauge.inc();
        let exit = if session.is_voice() {
            self.drive_voice(&agent, &mut session, opening).await
        } else {
            Ok(self.drive_text(&agent, &mut session, opening).await)
        };
        gauge.dec();
        match exit {
            Ok(Exit::Closed(reason)) => (close_code::NORMAL, reason),
            Ok(Exit::Failed(code, reason)) => (code, reason),
            Ok(Exit::ClientGone) => (close_code::NORMAL, "the client went away".into()),
            Ok(Exit::Shutdown) => (close_code::GOING_AWAY, "the server is shutting down; reconnect".into()),
            Ok(Exit::Handoff(request)) => (close_code::HANDOFF, format!("handed off to {}", request.target)),
            Err(close) => close,
        }
    }

    /// The link a driver reads and writes through.
    fn link(&mut self) -> Link<'_> {
        let state = self.state;
        Link {
            inbound: self.inbound,
            outbound: self.outbound,
            shared: &state.shared,
            shutdown: &state.shutdown,
            identity: &mut self.identity,
        }
    }

    async fn drive_text(&mut self, agent: &AgentRuntime, session: &mut Session, opening: Opening) -> Exit {
        // Audio that came before the agent was known is not for a text agent.
        while self.audio.frames.try_recv().is_ok() {}
        self.audio.binary.set(false);
        if !self.audio_session {
            self.audio.gate.set(Gate::Refuse);
        } else {
            self.audio.gate.set(Gate::Ignore);
            let message = format!(
                "agent {} is text-only: audio is ignored from now on; send bidi_text_input and read the transcripts",
                agent.core.name()
            );
            let _ = self.outbound.send(ServerMessage::error(ErrorCode::UnsupportedModality, message, true)).await;
        }
        driver::drive(agent, session, opening, self.link()).await
    }

    /// Opens a Nova Sonic stream for `session` and drives it; `Err` is the close when the
    /// stream cannot open.
    async fn drive_voice(
        &mut self,
        agent: &AgentRuntime,
        session: &mut Session,
        opening: Opening,
    ) -> Result<Exit, (u16, String)> {
        self.audio.gate.set(Gate::Accept);
        self.audio.binary.set(self.formats.binary_output);
        let sonic = self.open_voice(agent, session).await?;
        let state = self.state;
        let link = Link {
            inbound: self.inbound,
            outbound: self.outbound,
            shared: &state.shared,
            shutdown: &state.shutdown,
            identity: &mut self.identity,
        };
        let formats = voice::Formats { negotiated: self.formats, refused: std::mem::take(&mut self.refused_formats) };
        Ok(voice::drive(agent, session, sonic, opening, link, self.audio.frames, formats).await)
    }

    /// Opens the agent's voice stream; a replaced stream (handoff, voice change) is
    /// announced to the client as `bidi_connection_restart`.
    async fn open_voice(
        &mut self,
        agent: &AgentRuntime,
        session: &mut Session,
    ) -> Result<(SonicSession, SonicEvents), (u16, String)> {
        let state = self.state;
        let spec = agent.core.spec();
        let name = agent.core.name();
        let persona_voice = &spec.persona.spec.voice;
        let voice_id = match self.requested_voice.clone() {
            // The client's choice, if this agent's model has that voice; otherwise it is
            // told once and the Persona's voice speaks.
            Some(voice) => match switchboard_crds::agent::check_sonic_voice(&spec.model.voice_model_id, &voice) {
                Ok(()) => voice,
                Err(why) => {
                    self.requested_voice = None;
                    state.shared.metrics.errors.with_label_values(&[name, "invalid_voice"]).inc();
                    let message = format!("{why}; speaking with the agent's voice {persona_voice:?}");
                    let _ = self.outbound.send(ServerMessage::error(ErrorCode::InvalidVoice, message, true)).await;
                    persona_voice.clone()
                }
            },
            None => persona_voice.clone(),
        };
        // Frames the gateway already gathered for as long as an event would go to the model
        // as they come: gathered again, they would wait twice.
        let chunk = state.config.voice_audio_chunk;
        let chunk = if self.audio_batched >= chunk { Duration::ZERO } else { chunk };
        let streams = (state.config.voice_rotate_after, chunk);
        let regional =
            self.region.as_ref().and_then(|region| state.voice_regions.get(name).filter(|r| r.region == *region));
        let opened = match (regional, state.voice.get(name)) {
            (Some(regional), _) => {
                // The agent's spec with the fallback's model and region (and no fallback of
                // its own: it is the fallback).
                let mut there = spec.clone();
                there.model.region.clone_from(&regional.region);
                there.model.voice_model_id.clone_from(&regional.model_id);
                there.model.voice_fallback = None;
                let to = format!("{}@{}", regional.model_id, regional.region);
                let labels = [name, spec.mode.as_str(), spec.model.voice_model_id.as_str(), to.as_str(), "placed"];
                state.shared.metrics.fallbacks.with_label_values(&labels).inc();
                tracing::info!(agent = name, region = %regional.region, "the gateway placed the session on the fallback region");
                regional.model.open(&there, session, Some(&voice_id), streams, &state.shared.metrics).await
            }
            (None, Some(model)) => model.open(spec, session, Some(&voice_id), streams, &state.shared.metrics).await,
            (None, None) => Err(ModelError::Config { message: format!("agent {name} has no voice model") }),
        };
        let sonic = match opened {
            Ok(sonic) => sonic,
            Err(error) => {
                let code = error.code();
                state.shared.metrics.errors.with_label_values(&[name, code.metric_label()]).inc();
                let message = format!("the voice model could not start: {error}");
                let _ = self.outbound.send(ServerMessage::error(code.clone(), message, false)).await;
                // A close reason is at most 123 bytes: the bidi_error has the details.
                return Err((close_code::INTERNAL, format!("the voice model could not start ({code})")));
            }
        };
        Ok(sonic)
    }
}

/// Starts `agent`'s session: over Nova Sonic when the connection carries audio and the
/// agent speaks (and has a voice model here), else over its text model.
fn start_session(
    state: &AppState,
    agent: &AgentRuntime,
    audio_session: bool,
    init: SessionInit,
) -> (Session, Vec<switchboard_core::Effect>) {
    let spec = agent.core.spec();
    if audio_session && spec.mode.has_audio() && state.voice.contains_key(&spec.agent.name) {
        Session::start_voice(agent.core.clone(), init)
    } else {
        Session::start(agent.core.clone(), init)
    }
}
