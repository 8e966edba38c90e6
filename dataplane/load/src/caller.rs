//! One simulated caller: a client of the session protocol with the credentials a client
//! would use (`Authorization: Bearer <key>`), playing a [`Conversation`] through a gateway.
//!
//! A voice caller's microphone is on from the moment its session opens until it closes:
//! a 20 ms frame of 16 kHz PCM16 every 20 ms, silence when it is not speaking, its speech
//! when a turn says something — as a phone or a browser sends audio. A turn's time to first
//! audio runs from the frame that ends its speech to the first reply audio; a typed turn's
//! time to first token from the input sent to the first reply text. A handoff gap runs from
//! the `handoff` message to the next agent's first reply. A turn ends with
//! `bidi_response_complete` that is not a handoff's.
//!
//! Everything is bounded: the connection has its timeout, each turn its own, and the
//! caller as a whole the session timeout its driver puts around it; the server's messages
//! are capped in size and only counted. What goes wrong ends the session with a code
//! ([`super::report`] counts them): `connect refused`, `connect timeout`, `http <status>`
//! (the upgrade refused), `close <code>` (the server closed it), `bidi_error <code>` (a
//! fatal error, or one that refused a turn), `timeout start`, `timeout turn`,
//! `connection lost`.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use switchboard_core::protocol::{ClientMessage, ServerKind, SessionStart};
use tokio::net::TcpStream;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::plan::{Conversation, Mode, Turn};
use super::report::CallerOutcome;

/// 20 ms of 16 kHz PCM16 mono.
pub const FRAME_BYTES: usize = 640;
/// The audio frame period.
pub const FRAME: Duration = Duration::from_millis(20);
/// How long the session must be quiet after it opened (its greeting over) before the
/// caller's first turn.
pub const OPENING_QUIET: Duration = Duration::from_millis(300);
/// How long the caller waits for the server to close after it said `close`.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Most distinct unknown message types counted per caller.
const MAX_UNKNOWN_TYPES: usize = 32;

static SILENCE: [u8; FRAME_BYTES] = [0; FRAME_BYTES];

/// How callers connect and behave.
#[derive(Clone, Debug)]
pub struct CallerSettings {
    /// The session URL (`ws://host:port/v1/session`).
    pub url: String,
    /// Sent as `Authorization: Bearer <key>` (an API key or a JWT).
    pub api_key: Option<String>,
    /// Voice or text.
    pub mode: Mode,
    /// The agent to start with instead of the scenario's.
    pub agent: Option<String>,
    /// The longest the WebSocket connection may take to open.
    pub connect_timeout: Duration,
    /// The longest a turn may wait for its answer (after the caller's speech).
    pub turn_timeout: Duration,
    /// The agent speaks first: each caller waits for its greeting to end (up to
    /// `turn_timeout`), however late it starts, before its first turn.
    pub greeting: bool,
    /// The pause between an answer and the caller's next turn.
    pub think: Duration,
    /// The largest server message taken.
    pub max_message_bytes: usize,
}

/// The session's socket.
type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Plays `conversation` once; what happened, whatever happened. The driver bounds the
/// whole call with the session timeout (a future dropped there keeps what `outcome` saw).
pub async fn call(settings: &CallerSettings, conversation: &Conversation, outcome: &mut CallerOutcome) {
    match drive(settings, conversation, outcome).await {
        Ok(()) => outcome.completed = true,
        Err(code) => fail(outcome, code),
    }
}

/// Marks `outcome` failed with `code` (counted among its errors too).
pub fn fail(outcome: &mut CallerOutcome, code: String) {
    outcome.errors.push(code.clone());
    outcome.failure = Some(code);
}

async fn drive(
    settings: &CallerSettings,
    conversation: &Conversation,
    outcome: &mut CallerOutcome,
) -> Result<(), String> {
    let ws = connect(settings).await?;
    let voice = settings.mode == Mode::Voice;
    let mut session = Session { ws, voice, ticker: None, speech: None, end_of_speech: None, gap_from: None, outcome };
    let modalities = if voice { vec!["audio".to_owned(), "text".to_owned()] } else { Vec::new() };
    let agent = settings.agent.clone().or_else(|| conversation.agent.clone());
    session.send(&ClientMessage::SessionStart(SessionStart { agent, modalities, ..SessionStart::default() })).await?;
    session.open(settings.turn_timeout, settings.greeting).await?;
    for (i, (turn, consent)) in conversation.turns.iter().enumerate() {
        if i > 0 {
            session.idle(settings.think).await?;
        }
        session.turn(turn, consent, settings.turn_timeout).await?;
    }
    session.close().await;
    Ok(())
}

/// Opens the WebSocket connection with the caller's credentials.
async fn connect(settings: &CallerSettings) -> Result<Ws, String> {
    let mut request = settings.url.as_str().into_client_request().map_err(|_| "connect invalid_url".to_owned())?;
    if let Some(key) = &settings.api_key {
        let value = format!("Bearer {key}").parse().map_err(|_| "connect invalid_api_key".to_owned())?;
        request.headers_mut().insert("authorization", value);
    }
    let config = WebSocketConfig::default()
        .read_buffer_size(8 * 1024)
        .max_message_size(Some(settings.max_message_bytes))
        .max_frame_size(Some(settings.max_message_bytes));
    let connecting = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
    match tokio::time::timeout(settings.connect_timeout, connecting).await {
        Err(_) => Err("connect timeout".into()),
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(error)) => Err(connect_code(&error)),
    }
}

/// The code of a failed connection.
fn connect_code(error: &WsError) -> String {
    match error {
        WsError::Http(response) => format!("http {}", response.status().as_u16()),
        WsError::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => "connect refused".into(),
        WsError::Url(_) => "connect invalid_url".into(),
        other => {
            tracing::debug!(error = %other, "connecting failed");
            "connect failed".into()
        }
    }
}

/// What a server message means to a caller.
#[derive(Debug, PartialEq)]
enum Heard {
    Opened,
    Audio,
    /// The agent's words: a delta, or (`last`) the final line of its reply.
    ReplyText {
        last: bool,
    },
    Answering,
    Complete {
        handoff: bool,
    },
    Handoff,
    Error {
        code: String,
        recoverable: bool,
    },
    Consent {
        id: String,
        tool: String,
    },
    Unknown(String),
    Other,
}

/// Reads a server message's text: the reply audio by its kind alone (most of the messages),
/// the rest as JSON.
fn hear(text: &str) -> Heard {
    if ServerKind::AudioStream.is(text) {
        return Heard::Audio;
    }
    let Ok(value) = serde_json::from_str::<Value>(text) else { return Heard::Unknown("(not json)".into()) };
    let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
    let flag = |name: &str| value.get(name).and_then(Value::as_bool).unwrap_or(false);
    match value.get("type").and_then(Value::as_str).unwrap_or_default() {
        "bidi_connection_start" => Heard::Opened,
        "bidi_audio_stream" => Heard::Audio,
        "bidi_transcript_stream" if field("role") == "assistant" && !field("text").is_empty() => {
            Heard::ReplyText { last: flag("is_final") }
        }
        "bidi_response_start" => Heard::Answering,
        "bidi_response_complete" => Heard::Complete { handoff: field("stop_reason") == "handoff" },
        "handoff" => Heard::Handoff,
        "bidi_error" => {
            Heard::Error { code: format!("bidi_error {}", field("code")), recoverable: flag("recoverable") }
        }
        "consent_request" => Heard::Consent { id: field("tool_use_id"), tool: field("name") },
        known if ServerKind::from_name(known).is_some() => Heard::Other,
        unknown => Heard::Unknown(unknown.chars().take(64).collect()),
    }
}

/// One session in progress.
struct Session<'a> {
    ws: Ws,
    voice: bool,
    /// The microphone's clock (voice, once the session is open).
    ticker: Option<Interval>,
    /// Speech being sent, and how much of it went.
    speech: Option<(std::sync::Arc<[u8]>, usize)>,
    /// When the last turn's speech ended.
    end_of_speech: Option<Instant>,
    /// A handoff whose next agent has not answered yet.
    gap_from: Option<Instant>,
    outcome: &'a mut CallerOutcome,
}

impl Session<'_> {
    async fn send(&mut self, message: &ClientMessage) -> Result<(), String> {
        let text = serde_json::to_string(message).map_err(|e| format!("encode {e}"))?;
        self.ws.send(Message::text(text)).await.map_err(|_| "connection lost".to_owned())
    }

    /// Sends the next 20 ms of the microphone: speech while there is some, else silence.
    async fn frame(&mut self) -> Result<(), String> {
        let frame = match &mut self.speech {
            Some((pcm, sent)) => {
                let end = (*sent + FRAME_BYTES).min(pcm.len());
                let mut frame = pcm[*sent..end].to_vec();
                frame.resize(FRAME_BYTES, 0);
                *sent = end;
                if end == pcm.len() {
                    self.speech = None;
                    self.end_of_speech = Some(Instant::now());
                }
                Bytes::from(frame)
            }
            None => Bytes::from_static(&SILENCE),
        };
        self.ws.send(Message::binary(frame)).await.map_err(|_| "connection lost".to_owned())
    }

    /// The next server message before `until` (`None` when none came), sending the
    /// microphone's frames meanwhile.
    async fn next(&mut self, until: Instant) -> Result<Option<Heard>, String> {
        loop {
            let tick = async {
                match &mut self.ticker {
                    Some(ticker) => {
                        ticker.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let message = tokio::select! {
                () = tick => {
                    self.frame().await?;
                    continue;
                }
                () = tokio::time::sleep_until(until) => return Ok(None),
                message = self.ws.next() => message,
            };
            let heard = match message {
                Some(Ok(Message::Text(text))) => hear(text.as_str()),
                Some(Ok(Message::Close(frame))) => {
                    let code = frame.as_ref().map_or(1005, |f| u16::from(f.code));
                    let reason = frame.as_ref().map(|f| f.reason.as_str()).unwrap_or_default();
                    tracing::warn!(code, reason, "the server closed a session before its scenario ended");
                    return Err(format!("close {code}"));
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Err("connection lost".into()),
            };
            self.note(&heard);
            return Ok(Some(heard));
        }
    }

    /// Counts what every message counts for, whenever it comes.
    fn note(&mut self, heard: &Heard) {
        let reply = if self.voice { matches!(heard, Heard::Audio) } else { matches!(heard, Heard::ReplyText { .. }) };
        if reply && let Some(at) = self.gap_from.take() {
            self.outcome.handoff_gap_ms.push(ms(at));
        }
        match heard {
            Heard::Handoff => {
                self.outcome.handoffs += 1;
                self.gap_from = Some(Instant::now());
            }
            Heard::Error { code, .. } => self.outcome.errors.push(code.clone()),
            Heard::Unknown(kind) => {
                let known = self.outcome.unknown_messages.len();
                if let Some(n) = self.outcome.unknown_messages.get_mut(kind) {
                    *n += 1;
                } else if known < MAX_UNKNOWN_TYPES {
                    self.outcome.unknown_messages.insert(kind.clone(), 1);
                }
            }
            _ => {}
        }
    }

    /// Waits for `bidi_connection_start`, starts the microphone, and lets the greeting end:
    /// the session quiet for [`OPENING_QUIET`] and no response under way (a response that
    /// started is heard to its end, not talked over). With `greeting`, the agent's first
    /// response is awaited, however late it starts (a loaded gateway greets late).
    async fn open(&mut self, patience: Duration, greeting: bool) -> Result<(), String> {
        let deadline = Instant::now() + patience;
        loop {
            match self.next(deadline).await? {
                None => return Err("timeout start".into()),
                Some(Heard::Opened) => break,
                Some(Heard::Error { code, recoverable: false }) => return Err(code),
                Some(_) => {}
            }
        }
        self.outcome.opened = true;
        if self.voice {
            let mut ticker = tokio::time::interval(FRAME);
            // A frame that is due late goes at once and the clock moves on (no burst of the
            // frames missed: a gateway takes a burst for a flood and closes with 1008); the
            // speech goes on where it was, so none of it is lost, only later.
            ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
            self.ticker = Some(ticker);
        }
        let mut answering = greeting;
        let mut quiet_from = Instant::now();
        loop {
            let until = if answering { deadline } else { (quiet_from + OPENING_QUIET).min(deadline) };
            let Some(heard) = self.next(until).await? else {
                return if answering { Err("timeout greeting".into()) } else { Ok(()) };
            };
            match heard {
                Heard::Error { code, recoverable: false } => return Err(code),
                Heard::Answering => answering = true,
                // A greeting's end: its final line (a voice greeting has no
                // `bidi_response_complete`: it is not a turn of the caller's).
                Heard::Complete { .. } | Heard::ReplyText { last: true } => answering = false,
                _ => {}
            }
            quiet_from = Instant::now();
        }
    }

    /// Lets `pause` pass (the microphone on), taking what comes.
    async fn idle(&mut self, pause: Duration) -> Result<(), String> {
        let until = Instant::now() + pause;
        while let Some(heard) = self.next(until).await? {
            if let Heard::Error { code, recoverable: false } = heard {
                return Err(code);
            }
        }
        Ok(())
    }

    /// Says `turn` and waits for its answer, giving the consent answers listed.
    async fn turn(&mut self, turn: &Turn, consent: &[(String, bool)], patience: Duration) -> Result<(), String> {
        let (spoken, mut since, deadline) = match turn {
            Turn::Text(text) => {
                self.send(&ClientMessage::BidiTextInput { text: text.clone(), id: None }).await?;
                (false, Some(Instant::now()), Instant::now() + patience)
            }
            Turn::Speech(pcm) => {
                let length = Duration::from_millis(pcm.len() as u64 / 32);
                self.speech = Some((pcm.clone(), 0));
                self.end_of_speech = None;
                (true, None, Instant::now() + length + patience)
            }
        };
        let (mut first, mut answering, mut consents) = (false, false, 0usize);
        loop {
            let Some(heard) = self.next(deadline).await? else { return Err("timeout turn".into()) };
            if spoken {
                since = self.end_of_speech;
            }
            let Some(at) = since else { continue };
            match heard {
                Heard::Audio if spoken && !first => {
                    first = true;
                    self.outcome.first_audio_ms.push(ms(at));
                }
                Heard::ReplyText { .. } if !spoken && !first => {
                    first = true;
                    self.outcome.first_token_ms.push(ms(at));
                }
                Heard::Answering => answering = true,
                Heard::Complete { handoff: false } => {
                    if spoken {
                        self.outcome.spoken_turns += 1;
                    } else {
                        self.outcome.typed_turns += 1;
                    }
                    return Ok(());
                }
                Heard::Complete { handoff: true } => answering = false,
                Heard::Error { code, recoverable } if !recoverable || !answering => return Err(code),
                Heard::Consent { id, tool } => {
                    let approved = consent.get(consents).is_some_and(|(t, allow)| *t == tool && *allow);
                    consents += 1;
                    self.send(&ClientMessage::ToolConsent { tool_use_id: id, approved }).await?;
                }
                _ => {}
            }
        }
    }

    /// Says `close` and waits a little for the server to close.
    async fn close(mut self) {
        self.ticker = None;
        if self.send(&ClientMessage::Close {}).await.is_err() {
            return;
        }
        let until = Instant::now() + CLOSE_WAIT;
        while let Ok(Some(_)) = self.next(until).await {}
        let _ = tokio::time::timeout(CLOSE_WAIT, self.ws.close(None)).await;
    }
}

/// Milliseconds since `at`, to a tenth.
fn ms(at: Instant) -> f64 {
    (at.elapsed().as_secs_f64() * 10_000.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_heard_by_kind_and_unknown_types_are_kept_by_name() {
        assert_eq!(hear(r#"{"type":"bidi_audio_stream","audio":"AAAA"}"#), Heard::Audio);
        assert_eq!(
            hear(r#"{"type":"bidi_response_complete","turn":2,"stop_reason":"handoff"}"#),
            Heard::Complete { handoff: true }
        );
        assert_eq!(
            hear(r#"{"type":"bidi_error","message":"full","code":"at_capacity","recoverable":false}"#),
            Heard::Error { code: "bidi_error at_capacity".into(), recoverable: false }
        );
        assert_eq!(
            hear(r#"{"type":"bidi_transcript_stream","role":"assistant","text":"Hi","delta":true,"is_final":false}"#),
            Heard::ReplyText { last: false }
        );
        assert_eq!(
            hear(r#"{"type":"bidi_transcript_stream","role":"assistant","text":"Hi","delta":false,"is_final":true}"#),
            Heard::ReplyText { last: true }
        );
        assert_eq!(
            hear(r#"{"type":"bidi_transcript_stream","role":"user","text":"Hi","delta":false,"is_final":true}"#),
            Heard::Other
        );
        assert_eq!(hear(r#"{"type":"queued","position":3}"#), Heard::Unknown("queued".into()));
        assert_eq!(hear("not json"), Heard::Unknown("(not json)".into()));
    }
}
