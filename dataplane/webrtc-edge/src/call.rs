//! One call's task: the sans-I/O [`Call`] driven by its datagrams, its timers and its
//! session's frames, and the session opened through the gateway's own session code once
//! the data channel brings the client's first message.
//!
//! Between the call and its session is an in-process WebSocket (a `tokio::io::duplex`
//! pipe, the gateway's frame layer at both ends): the session sees a client like any
//! other. Both ways:
//! - client to session: the data channel's messages as text frames — `session_start`
//!   first, its `audio` set to the PCM the call transcodes to (PCM16 16 kHz in, 24 kHz
//!   out, reply audio as binary frames) — and the caller's decoded Opus as binary PCM16
//!   16 kHz frames (none before the session is open);
//! - session to client: text frames onto the data channel unchanged; binary frames (the
//!   agent's PCM16 24 kHz) to Opus, paced in real time; `bidi_interruption` drops what is
//!   queued of the reply at once.
//!
//! How a call's end reaches the session is how a WebSocket's would: the client's `DELETE`
//! or its DTLS or data channel closing is a goodbye (a close frame: the session ends); ICE
//! lost past the grace period, or the call failing, is a client gone without one (the pipe
//! dropped: the session parks, resumable with its token from a new call). A session that
//! ends closes the call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use switchboard_core::protocol::{AudioSettings, ClientMessage, SessionStart, close_code, decode_client};
use switchboard_serve::frames::{Conn, Limits, Message, Role};
use switchboard_webrtc::call::LATENCY_TARGET;
use switchboard_webrtc::{Call, CallEvent, CloseReason};
use tokio::io::DuplexStream;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_tungstenite::tungstenite::Utf8Bytes;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use super::demux::{Incoming, ufrag_of};
use super::metrics::AudioReport;
use super::{Command, Edge};
use switchboard_gateway::Gateway;
use switchboard_gateway::auth::Admission;
use switchboard_gateway::session::ClientIo;

/// Bytes the pipe between a call and its session buffers each way.
const PIPE_BYTES: usize = 64 * 1024;
/// The largest message the session sends the call (a long reply's audio chunk is tens of
/// KiB).
const MAX_FROM_SESSION: usize = 4 * 1024 * 1024;
/// Bytes for the session the call queues while the session does not read; caller audio
/// beyond it is dropped (its text never is): two seconds of 16 kHz PCM. Audio that waited
/// longer would reach the agent too late to answer, as stale packets do before the decoder
/// ([`switchboard_webrtc::audio::MAX_LATENESS`]); a quarter of a megabyte held eight
/// seconds.
const MOST_QUEUED: usize = 64 * 1024;
/// Reply audio the call queues (48 kHz samples: a minute); more is dropped.
const MOST_REPLY_AUDIO: usize = 48_000 * 60;

/// What a call's task starts with.
#[derive(Debug)]
pub struct Setup {
    pub(super) gateway: Arc<Gateway>,
    pub(super) edge: Arc<Edge>,
    /// Its resource id.
    pub(super) id: String,
    /// Its number at the demultiplexer.
    pub(super) number: u64,
    pub(super) call: Call,
    /// `?agent=` of the offer.
    pub(super) agent: Option<String>,
    pub(super) admission: Admission,
    /// The gateway's session slot, held until the session ends.
    pub(super) permit: OwnedSemaphorePermit,
    /// The edge's call slot.
    pub(super) slot: OwnedSemaphorePermit,
    pub(super) datagrams: mpsc::Receiver<Incoming>,
    pub(super) commands: mpsc::Receiver<Command>,
}

/// Where the call's session is.
enum Session {
    /// Not opened yet: the admission and slot it will hold.
    Waiting(Admission, OwnedSemaphorePermit),
    /// Open: the client's end of its pipe.
    Open(Conn<DuplexStream>),
    /// Over.
    Done,
}

struct Task {
    gateway: Arc<Gateway>,
    edge: Arc<Edge>,
    call: Call,
    agent: Option<String>,
    session: Session,
    /// How the call ended, for the metric (`ended` unless something else ends it).
    outcome: &'static str,
    /// Whether media found a path yet (the ICE metric's `connected`, then `moved`).
    connected_once: bool,
    /// The number of the last message the session sent, as the gateway numbers them
    /// ([`numbered`]); None until known.
    seq: Option<u64>,
    /// What of the call's audio statistics the metrics have counted.
    audio: AudioReport,
}

/// Runs the call until it and its session are over.
pub async fn run(setup: Setup) {
    let Setup { gateway, edge, id, number, call, agent, admission, permit, slot, mut datagrams, mut commands } = setup;
    let start_by = tokio::time::Instant::now() + gateway.config.start_timeout;
    edge.metrics.live.inc();
    let mut task = Task {
        gateway: gateway.clone(),
        edge: edge.clone(),
        call,
        agent,
        session: Session::Waiting(admission, permit),
        outcome: "ended",
        connected_once: false,
        seq: None,
        audio: AudioReport::default(),
    };
    tracing::debug!(call = %id, "WebRTC call answered");
    loop {
        task.pump();
        if task.call.is_closed() {
            break;
        }
        let timeout = task.call.poll_timeout().map(tokio::time::Instant::from_std);
        let waiting = matches!(task.session, Session::Waiting(..));
        tokio::select! {
            biased;
            command = commands.recv() => match command {
                Some(Command::Patch(fragment, if_match, reply)) => {
                    let answered = task.call.patch_if_match(Instant::now(), &fragment, if_match.as_deref());
                    if let Ok(Some(answer)) = &answered
                        && let Some(ufrag) = ufrag_of(answer)
                    {
                        edge.demux.rename(number, ufrag);
                    }
                    let _ = reply.send(answered);
                }
                Some(Command::End) | None => task.call.close(Instant::now()),
            },
            datagram = datagrams.recv() => {
                let Some(Incoming { proto, source, contents }) = datagram else { break };
                if let Some(local) = edge.local(proto) {
                    task.call.handle_datagram(Instant::now(), proto, source, local, &contents);
                }
            }
            frame = next_frame(&mut task.session) => task.session_frame(frame),
            () = sleep_until(timeout) => task.call.handle_timeout(Instant::now()),
            // The gateway stops: a call whose session is open ends with it (the session is
            // closed by the gateway's drain); one still waiting for its session_start ends now.
            () = gateway.shutdown.cancelled(), if waiting => task.call.close(Instant::now()),
            () = tokio::time::sleep_until(start_by), if waiting => {
                tracing::info!(call = %id, "no session_start on the data channel in time: the call ends");
                task.call.close(Instant::now());
                task.outcome = "no_session_start";
            }
        }
        task.report_audio(false);
    }
    task.pump();
    task.report_audio(true);
    edge.demux.remove(number);
    edge.forget(&id);
    if let Session::Open(mut conn) = std::mem::replace(&mut task.session, Session::Done) {
        // Whatever the session still had queued for it goes before the close.
        let _ = tokio::time::timeout(Duration::from_secs(1), conn.flush()).await;
    }
    drop(slot);
    edge.metrics.live.dec();
    edge.metrics.calls.with_label_values(&[task.outcome]).inc();
    tracing::debug!(call = %id, outcome = task.outcome, "WebRTC call over");
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn next_frame(session: &mut Session) -> Option<Result<Message, switchboard_serve::frames::Error>> {
    match session {
        Session::Open(conn) => conn.next().await,
        _ => std::future::pending().await,
    }
}

impl Task {
    /// Adds the call's audio statistics to the metrics (every 5 s, and at its end).
    fn report_audio(&mut self, last: bool) {
        let (stats, out) = (self.call.inbound_stats(), self.call.outbound_transcoding());
        self.edge.metrics.report_audio(&mut self.audio, stats, out, last);
    }

    /// Sends what the call has to send and acts on its events, until it has nothing more;
    /// then writes what is queued for the session, as far as the pipe takes it now.
    fn pump(&mut self) {
        loop {
            while let Some(datagram) = self.call.poll_transmit() {
                self.edge.send(&datagram);
            }
            let Some(event) = self.call.poll_event() else { break };
            self.event(event);
        }
        if let Session::Open(conn) = &mut self.session
            && conn.queued() > 0
            && let Some(Err(_)) = futures_util::FutureExt::now_or_never(conn.flush())
        {
            // The session is gone: nothing more reaches it.
            self.session = Session::Done;
            self.call.close(Instant::now());
        }
    }

    fn event(&mut self, event: CallEvent) {
        match event {
            CallEvent::Text(text) => match &mut self.session {
                Session::Waiting(..) => self.open(text),
                Session::Open(conn) => {
                    let _ = conn.feed(Message::text(text));
                }
                Session::Done => {}
            },
            CallEvent::Audio(pcm) => {
                if let Session::Open(conn) = &mut self.session
                    && conn.queued() < MOST_QUEUED
                {
                    let bytes: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
                    let _ = conn.feed(Message::Binary(Bytes::from(bytes)));
                    tracing::trace!(target: LATENCY_TARGET, samples = pcm.len(), queued = conn.queued(), "caller audio to the session");
                }
            }
            CallEvent::Closed(reason) => self.closed(reason),
            CallEvent::Connected => tracing::debug!("WebRTC call connected"),
            CallEvent::Path(path) => {
                let outcome = if self.connected_once { "moved" } else { "connected" };
                self.connected_once = true;
                tracing::debug!(
                    candidate = path.candidate_label(),
                    transport = path.transport_label(),
                    outcome,
                    "WebRTC media path"
                );
                let labels = [outcome, path.candidate_label(), path.transport_label()];
                self.edge.metrics.ice.with_label_values(&labels).inc();
            }
            CallEvent::Disconnected => tracing::debug!("WebRTC call lost its client; waiting for it"),
            CallEvent::Reconnected => tracing::debug!("WebRTC call found its client again"),
            CallEvent::ChannelOpen | CallEvent::Refused(_) => {}
        }
    }

    /// Opens the session with the client's first message (`session_start`, adjusted).
    fn open(&mut self, first: String) {
        let Session::Waiting(admission, permit) = std::mem::replace(&mut self.session, Session::Done) else { return };
        let (start, then) = first_messages(first, self.edge.call_config.audio_settings());
        // A resume's replay numbers on from the client's last_seq.
        self.seq = match decode_client(&start) {
            Ok(ClientMessage::SessionStart(SessionStart { resume_token: Some(_), last_seq, .. })) => last_seq,
            _ => None,
        };
        let (edge_end, session_end) = tokio::io::duplex(PIPE_BYTES);
        let limit = self.gateway.config.max_message_bytes;
        let limits = Limits { max_message: limit, max_frame: limit };
        let server = Conn::new(ClientIo::Edge(session_end), Role::Server, limits, BytesMut::new());
        let limits = Limits { max_message: MAX_FROM_SESSION, max_frame: MAX_FROM_SESSION };
        let mut client = Conn::new(edge_end, Role::Client, limits, BytesMut::new());
        let _ = client.feed(Message::text(start));
        if let Some(then) = then {
            let _ = client.feed(Message::text(then));
        }
        let gateway = self.gateway.clone();
        let agent = self.agent.take();
        self.gateway.tracker.spawn(async move {
            switchboard_gateway::session::serve(server, gateway, agent, admission).await;
            drop(permit);
        });
        self.session = Session::Open(client);
    }

    /// A frame from the session.
    fn session_frame(&mut self, frame: Option<Result<Message, switchboard_serve::frames::Error>>) {
        let now = Instant::now();
        match frame {
            Some(Ok(Message::Text(text))) => {
                if is_interruption(text.as_str()) {
                    self.call.flush_audio();
                }
                let (seq, text) = numbered(self.seq, text.as_str());
                self.seq = seq;
                if let Err(error) = self.call.send_text(now, &text) {
                    // The client does not read its data channel: it counts as gone, as a
                    // WebSocket client that does not read (the session parks).
                    tracing::info!(%error, "the WebRTC client does not read its data channel: the call ends");
                    self.session = Session::Done;
                    self.call.close(now);
                }
            }
            Some(Ok(Message::Binary(data))) => {
                // Reply audio is numbered too, though it goes on the track.
                self.seq = self.seq.map(|n| n + 1);
                if self.call.queued_audio() > MOST_REPLY_AUDIO {
                    tracing::debug!("reply audio over a minute queued: a chunk dropped");
                    return;
                }
                let pcm: Vec<i16> = data.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
                tracing::trace!(
                    target: LATENCY_TARGET,
                    samples = pcm.len(),
                    queued = self.call.queued_audio(),
                    "reply audio from the session"
                );
                self.call.send_audio(now, &pcm);
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
            // The session ended (or failed): so does the call.
            Some(Ok(Message::Close(_)) | Err(_)) | None => {
                self.session = Session::Done;
                self.call.close(now);
            }
        }
    }

    /// The call is over: its session is told as a WebSocket's would be.
    fn closed(&mut self, reason: CloseReason) {
        // ICE that never connected, or lost its client for good.
        let path = self.call.path();
        if path.is_none() || matches!(reason, CloseReason::IceFailed) {
            let labels =
                path.map_or(["failed", "none", "none"], |p| ["failed", p.candidate_label(), p.transport_label()]);
            self.edge.metrics.ice.with_label_values(&labels).inc();
        }
        if self.outcome == "ended" {
            self.outcome = match &reason {
                CloseReason::Local => "ended",
                CloseReason::Remote => "client_closed",
                CloseReason::IceFailed => "ice_failed",
                CloseReason::Failed(_) => "failed",
                CloseReason::TooLarge(_) => "too_large",
            };
        }
        let Session::Open(conn) = &mut self.session else {
            self.session = Session::Done;
            return;
        };
        let close = match &reason {
            CloseReason::Local | CloseReason::Remote => Some((close_code::NORMAL, "the WebRTC call ended")),
            CloseReason::TooLarge(_) => Some((close_code::TOO_BIG, "message too big")),
            // Gone without a goodbye: the session parks for the client's resume.
            CloseReason::IceFailed | CloseReason::Failed(_) => None,
        };
        tracing::debug!(?reason, "WebRTC call closed");
        match close {
            Some((code, why)) => {
                let _ = conn.feed(Message::Close(Some(CloseFrame { code: code.into(), reason: Utf8Bytes::from(why) })));
            }
            None => self.session = Session::Done,
        }
    }
}

/// What the session gets for the client's first data-channel message: `session_start` with
/// `audio` set to what the call transcodes (whatever the client asked: its audio is the Opus
/// track) and modalities audio and text where it named none; another message after such a
/// session_start; text that is no message as it came (the session refuses it as a
/// WebSocket's).
fn first_messages(first: String, audio: AudioSettings) -> (String, Option<String>) {
    match decode_client(&first) {
        Ok(ClientMessage::SessionStart(mut start)) => {
            start.audio = Some(audio);
            if start.modalities.is_empty() {
                start.modalities = vec!["audio".into(), "text".into()];
            }
            (encode(start), None)
        }
        Ok(_) => (encode(SessionStart { audio: Some(audio), ..SessionStart::default() }), Some(first)),
        Err(_) => (first, None),
    }
}

fn encode(start: SessionStart) -> String {
    serde_json::to_string(&ClientMessage::SessionStart(start)).unwrap_or_default()
}

/// A session message for the data channel, numbered. The gateway numbers every message it
/// sends a client, reply audio included, for resume (`session_start.last_seq`); a WebSocket
/// client counts them from `bidi_connection_start.seq`, but a WebRTC client gets the audio
/// on its track, where it cannot count messages. So the edge counts (from each
/// `bidi_connection_start`'s `seq`, or a resume's `last_seq`, whose replay comes first) and
/// gives every other message on the data channel its number as `seq`: a client resumes
/// with the `seq` of the last message it received, and gets nothing twice. Returns the
/// number of `text` (None while unknown: before the first start of a resume without
/// `last_seq`) and the text to send.
fn numbered(last: Option<u64>, text: &str) -> (Option<u64>, std::borrow::Cow<'_, str>) {
    #[derive(serde::Deserialize)]
    struct Start {
        seq: Option<u64>,
    }
    if text.contains("bidi_connection_start")
        && let Ok(ClientOrServer::BidiConnectionStart(start)) = serde_json::from_str::<ClientOrServer<Start>>(text)
    {
        return (start.seq.or(last.map(|n| n + 1)), text.into());
    }
    let Some(seq) = last.map(|n| n + 1) else { return (None, text.into()) };
    let numbered = match text.strip_prefix('{') {
        Some(rest) if !rest.trim_start().starts_with('}') => format!("{{\"seq\":{seq},{rest}").into(),
        _ => text.into(),
    };
    (Some(seq), numbered)
}

/// A server message's kind, for [`numbered`]: `bidi_connection_start` or another.
#[derive(serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ClientOrServer<T> {
    BidiConnectionStart(T),
    #[serde(other)]
    Other,
}

/// Whether a server message is `bidi_interruption` (barge-in).
fn is_interruption(text: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(borrow, rename = "type")]
        kind: &'a str,
    }
    // Cheap first: most messages are not.
    text.contains("bidi_interruption")
        && serde_json::from_str::<Kind<'_>>(text).is_ok_and(|k| k.kind == "bidi_interruption")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audio() -> AudioSettings {
        switchboard_webrtc::CallConfig::default().audio_settings()
    }

    fn start_of(text: &str) -> SessionStart {
        match decode_client(text) {
            Ok(ClientMessage::SessionStart(start)) => start,
            other => panic!("a session_start: {other:?}"),
        }
    }

    #[test]
    fn session_start_gets_the_calls_audio_and_keeps_the_rest() {
        let first = r#"{"type":"session_start","agent":"triage","voice":"matthew","audio":{"input":{"encoding":"pcmu","sample_rate":8000}}}"#;
        let (start, then) = first_messages(first.into(), audio());
        let start = start_of(&start);
        assert_eq!(start.audio, Some(audio()), "the client's own audio settings are replaced");
        assert_eq!((start.agent.as_deref(), start.voice.as_deref()), (Some("triage"), Some("matthew")));
        assert_eq!(start.modalities, ["audio", "text"], "a call speaks");
        assert_eq!(then, None);
        let text_only = r#"{"type":"session_start","modalities":["text"]}"#;
        assert_eq!(start_of(&first_messages(text_only.into(), audio()).0).modalities, ["text"], "as asked");
    }

    #[test]
    fn another_first_message_follows_a_session_start_and_garbage_goes_as_it_came() {
        let first = r#"{"type":"bidi_text_input","text":"hello"}"#;
        let (start, then) = first_messages(first.into(), audio());
        assert_eq!(start_of(&start).audio, Some(audio()));
        assert_eq!(then.as_deref(), Some(first));
        let (start, then) = first_messages("{\"type\":\"nope\"}".into(), audio());
        assert_eq!((start.as_str(), then), ("{\"type\":\"nope\"}", None));
    }

    #[test]
    fn messages_on_the_data_channel_carry_the_gateways_numbers() {
        // Unknown until a start (a resume without last_seq): as they come.
        let (seq, text) = numbered(None, r#"{"type":"bidi_response_start"}"#);
        assert_eq!((seq, text.as_ref()), (None, r#"{"type":"bidi_response_start"}"#));
        let start =
            r#"{"type":"bidi_connection_start","session_id":"s","agent":"a","mode":"voice","model":"m","seq":7}"#;
        let (seq, text) = numbered(None, start);
        assert_eq!((seq, text.as_ref()), (Some(7), start), "a start is numbered already");
        let (seq, text) = numbered(seq, r#"{"type":"bidi_transcript_stream","text":"{\"seq\":1}"}"#);
        assert_eq!(seq, Some(8));
        assert_eq!(text, r#"{"seq":8,"type":"bidi_transcript_stream","text":"{\"seq\":1}"}"#);
        let parsed: serde_json::Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(parsed["seq"], 8);
        // Not an object, or an empty one: as it came, still counted.
        assert_eq!(numbered(Some(8), "[1]"), (Some(9), "[1]".into()));
        assert_eq!(numbered(Some(9), "{ }"), (Some(10), "{ }".into()));
    }

    #[test]
    fn only_a_bidi_interruption_flushes_reply_audio() {
        assert!(is_interruption(r#"{"type":"bidi_interruption","seq":4}"#));
        assert!(!is_interruption(r#"{"type":"bidi_transcript_stream","text":"bidi_interruption"}"#));
        assert!(!is_interruption(r#"{"type":"bidi_interruption""#));
    }
}
