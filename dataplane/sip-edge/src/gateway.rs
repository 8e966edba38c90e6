//! One call's session at the gateway: an ordinary client of the session protocol
//! (`/v1/session`), so routing, handoffs, resume, the record and traces treat a call as any
//! other session. [`open`] connects (with the edge's API key), sends `session_start` for
//! the agent the call is for with audio in the call's format both ways as binary frames
//! (G.711 in the phone's law, passed through; 16 kHz PCM16 on a G.722 call, so the agent
//! hears it wideband), and waits for
//! `bidi_connection_start`. What the gateway refuses becomes the SIP answer
//! ([`Refused::admission`]): an unknown agent 404, one not open to the edge 403, a
//! text-only agent 488, the gateway busy or unreachable 503. An Agent in outage mode
//! (`bidi_session_fallback`, then close 4513) is [`Refused::Outage`] with its fallback: the
//! call task puts the caller through to the fallback's person ([`crate::call`]), or, with
//! only a message, the call is refused 503 with the message as its reason and `Retry-After`
//! from the fallback's hint.
//!
//! The capacity queue: when the Agent's model quota is full and it queues, the gateway
//! answers `bidi_session_queued` (again at every new place) before the session starts. [`open`]
//! hands each to the call ([`Queued`]; the call task sends `182 Queued` with the hold message)
//! and waits on past `open_timeout`, for as long as the gateway keeps the place and is heard
//! from (it pings a waiting client every few seconds; [`QUEUE_SILENCE`] without a word ends
//! the wait as unreachable). A refusal for capacity (`capacity_full`, close 1013) becomes 503
//! with `Retry-After` from its `retry_after_seconds`.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::outbound::AnsweredBy;
use switchboard_core::phone::{PHONE_HEADER, PhoneCall};
use switchboard_core::protocol::{
    AudioFormat, AudioSettings, ClientMessage, ErrorCode, FallbackPerson, ServerMessage, SessionStart, close_code,
};
use switchboard_sip::call::Admission;
use switchboard_sip::media::format::Format;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A session's WebSocket.
pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The largest message taken from the gateway: reply audio comes in frames of well under
/// this; anything larger is a broken peer.
const MAX_MESSAGE: usize = 1 << 20;

/// The WebSocket's read buffer, per call. tungstenite's default (128 KiB) is filled with
/// zeros before each read and stays resident: most of a live call's memory, for frames of
/// a few hundred bytes (20 ms of G.711 is 160; 100 ms of 16 kHz PCM16 3,200). A larger
/// message still arrives whole: its length is reserved when its header is read.
const READ_BUFFER: usize = 4 * 1024;

/// How long a call waiting in the gateway's capacity queue may go without a word from the
/// gateway (a message or a ping; it pings waiting clients every 5 s by default) before the
/// edge takes it for gone and refuses the call 503.
pub const QUEUE_SILENCE: Duration = Duration::from_secs(60);

/// The gateway's word that a call's session waits for room (its `bidi_session_queued`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The place in the queue: 1 is next.
    pub position: u32,
    /// The gateway's estimate of the wait, in seconds.
    pub estimated_wait_seconds: u64,
    /// What to tell the caller (the Agent's hold message, or the gateway's sentence); empty
    /// from gateways older than it.
    pub message: String,
    /// The Agent the call waits for (`namespace/name`), also when the caller dialled a
    /// number it claims; empty from gateways older than it.
    pub agent: String,
}

impl Queued {
    /// What the caller's phone is told in the `182 Queued` reason phrase: the gateway's
    /// message, or (an older gateway) the place and the wait.
    pub fn phrase(&self) -> String {
        if self.message.trim().is_empty() {
            format!("Queued: number {} in line, about {} s", self.position, self.estimated_wait_seconds)
        } else {
            self.message.clone()
        }
    }

    /// Whose hold recording the caller hears: the Agent the gateway named (also when the
    /// caller dialled a number it claims), or, from an older gateway, what was `dialled`.
    pub fn agent_or<'a>(&'a self, dialled: &'a str) -> &'a str {
        if self.agent.is_empty() { dialled } else { &self.agent }
    }
}

/// Where the gateway is and how the edge authenticates.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// The session endpoint, e.g. `ws://gateway:8080/v1/session`.
    pub url: String,
    /// The edge's API key (sent as `Authorization: Bearer`), if the gateway wants one.
    pub api_key: Option<String>,
    /// How long connecting and the gateway's answer to `session_start` may take.
    pub open_timeout: Duration,
    /// How long a call whose connection to the gateway dropped tries to resume its session
    /// ([`resume()`]); zero: the call ends with its connection.
    pub resume_for: Duration,
}

/// [`GatewayConfig::resume_for`] by default: long enough for a gateway replica going away
/// to hand its sessions to another (they are parked before the close) and for a blip, short
/// enough that a caller whose gateway is gone for good is not left in silence.
pub const RESUME_FOR: Duration = Duration::from_secs(5);

/// Why the gateway did not open a session for a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No agent by that name (close 4404).
    #[error("no agent {agent}: {message}")]
    UnknownAgent {
        /// The agent asked for.
        agent: String,
        /// What the gateway said.
        message: String,
    },
    /// The agent is not open to the edge's credential (close 4403).
    #[error("agent {agent} is not open to the SIP edge: {message}")]
    NotExposed {
        /// The agent asked for.
        agent: String,
        /// What the gateway said.
        message: String,
    },
    /// The agent only types: it cannot take a call.
    #[error("agent {agent} is text-only and takes no calls")]
    TextOnly {
        /// The agent.
        agent: String,
    },
    /// The gateway refused the edge's credential (close 4401): the edge is misconfigured.
    #[error("the gateway refused the SIP edge's API key: {0}")]
    Unauthorized(String),
    /// The gateway or the agent has no room now (1013, 4429, 4503).
    #[error("the gateway has no room for the call now: {0}")]
    Busy(String),
    /// The Agent's model quota is full and it does not queue, or its queue is full
    /// (`capacity_full`, close 1013).
    #[error("{message}")]
    CapacityFull {
        /// What the gateway said.
        message: String,
        /// When a new call is likely to find room, in seconds (the gateway's estimate).
        retry_after_seconds: Option<u64>,
    },
    /// The gateway could not be reached or did not answer in time (or fell silent while
    /// the call waited in its queue).
    #[error("the gateway at {url} cannot be reached: {reason}")]
    Unreachable {
        /// The gateway's URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The Agent is in outage mode (close 4513): the session went to its fallback.
    #[error("agent {} is in outage mode ({}): {}", .0.agent, .0.cause, .0.message)]
    Outage(Box<Fallback>),
    /// Any other refusal, with the close code.
    #[error("the gateway refused the session (close {code}): {message}")]
    Other {
        /// The close code.
        code: u16,
        /// What the gateway said.
        message: String,
    },
}

/// What an Agent in outage mode offers instead of itself (its `bidi_session_fallback`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// The Agent (`namespace/name`, as the gateway names it).
    pub agent: String,
    /// `switch` or `breaker` (see the protocol); `unknown` when the gateway closed 4513
    /// without saying.
    pub cause: String,
    /// What the caller is told.
    pub message: String,
    /// The person to put the caller through to, when the Agent names one.
    pub person: Option<FallbackPerson>,
    /// When a new session may be served again, in seconds (the gateway's estimate).
    pub retry_after_seconds: Option<u64>,
}

impl Refused {
    /// The SIP answer to the call (RFC 3261 §21): the agent's absence 404, a refusal to
    /// the edge 403, a text-only agent 488, and 503 where another edge or a later try may
    /// do better (the gateway busy, unreachable, or refusing the edge itself).
    pub fn admission(&self) -> Admission {
        let reason = self.to_string();
        match self {
            Self::UnknownAgent { .. } => Admission::NotFound(reason),
            Self::NotExposed { .. } => Admission::Forbidden(reason),
            Self::TextOnly { .. } => Admission::NotAcceptable(reason),
            Self::Busy(_) | Self::Unreachable { .. } | Self::Unauthorized(_) => Admission::Refuse(503, reason),
            Self::CapacityFull { retry_after_seconds, .. } => {
                Admission::Unavailable { reason, retry_after: *retry_after_seconds }
            }
            // What the Agent tells its callers, as the reason (a person, when it names one,
            // is the call task's: it answers and transfers instead).
            Self::Outage(fallback) => {
                Admission::Unavailable { reason: fallback.message.clone(), retry_after: fallback.retry_after_seconds }
            }
            Self::Other { .. } => Admission::Refuse(500, reason),
        }
    }

    /// A bounded label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::UnknownAgent { .. } => "unknown_agent",
            Self::NotExposed { .. } => "not_exposed",
            Self::TextOnly { .. } => "text_only",
            Self::Unauthorized(_) => "unauthorized",
            Self::Busy(_) => "busy",
            Self::CapacityFull { .. } => "capacity_full",
            Self::Unreachable { .. } => "unreachable",
            Self::Outage(_) => "outage",
            Self::Other { .. } => "other",
        }
    }
}

/// An open session: its socket, and what `bidi_connection_start` said.
#[derive(Debug)]
pub struct Session {
    /// The socket, past `bidi_connection_start`.
    pub socket: Socket,
    /// The session's id.
    pub id: String,
    /// Where it stands for a resume, at its start.
    pub position: Position,
}

/// The `session_start` of a call to `agent` whose audio is in `format` (G.711 at 8 kHz, or
/// PCM16 at 16 kHz on a G.722 call).
pub fn session_start(agent: &str, format: Format) -> SessionStart {
    let (encoding, rate) = format.session_encoding();
    let format = || AudioFormat { encoding: encoding.to_owned(), sample_rate: Some(rate) };
    SessionStart {
        agent: Some(agent.to_owned()),
        modalities: vec!["audio".to_owned()],
        audio: Some(AudioSettings { input: Some(format()), output: Some(format()), binary_output: true }),
        ..SessionStart::default()
    }
}

/// Opens the call's session (see the module docs), vouching for `phone` (the caller's
/// number from a trunk, the number dialled) in the [`PHONE_HEADER`] header: the gateway
/// takes it from the edge's credential only ([`switchboard_core::phone`]). The header goes
/// even for a call with no number to tell (`{}`): the session is a phone call all the same
/// (its agent may press keys on it, `send_digits`). The gateway must
/// answer within `config.open_timeout`; an answer that the session waits in the capacity
/// queue goes to `queued` (each new place), and the wait goes on past that timeout.
pub async fn open(
    config: &GatewayConfig,
    agent: &str,
    format: Format,
    phone: &PhoneCall,
    queued: &mut (dyn FnMut(Queued) + Send),
) -> Result<Session, Refused> {
    let headers: Vec<Vouched> = vec![(PHONE_HEADER, phone.to_header())];
    open_for(config, agent, format, headers, Some(queued)).await
}

/// [`open`] for an answered outbound call: `ticket` (the gateway's, from
/// [`ToEdge::Place`](switchboard_core::outbound::ToEdge)) goes in the
/// [`TICKET_HEADER`](switchboard_core::outbound::TICKET_HEADER) header, and the session
/// starts with the call's context in its memory; with answering-machine detection, who
/// answered goes in the [`ANSWERED_BY_HEADER`](switchboard_core::outbound::ANSWERED_BY_HEADER)
/// header, and into that context.
///
/// The callee is on the line: a wait in the capacity queue counts within
/// `config.open_timeout` (nobody hears a 182 on an answered call).
pub async fn open_call(
    config: &GatewayConfig,
    agent: &str,
    format: Format,
    ticket: &str,
    answered_by: Option<AnsweredBy>,
) -> Result<Session, Refused> {
    use switchboard_core::outbound::{ANSWERED_BY_HEADER, TICKET_HEADER};
    let mut headers = vec![(TICKET_HEADER, ticket.to_owned())];
    headers.extend(answered_by.map(|by| (ANSWERED_BY_HEADER, by.as_str().to_owned())));
    open_for(config, agent, format, headers, None).await
}

/// A header only the edge sends: its name and value.
type Vouched = (&'static str, String);

/// A callback for the capacity queue's messages.
type OnQueued<'a> = Option<&'a mut (dyn FnMut(Queued) + Send)>;

async fn open_for(
    config: &GatewayConfig,
    agent: &str,
    format: Format,
    headers: Vec<Vouched>,
    queued: OnQueued<'_>,
) -> Result<Session, Refused> {
    let deadline = tokio::time::Instant::now() + config.open_timeout;
    let unreachable = |reason: String| Refused::Unreachable { url: config.url.clone(), reason };
    let no_answer = || unreachable(format!("no answer within {:?}", config.open_timeout));
    let socket =
        tokio::time::timeout_at(deadline, start(config, agent, format, headers)).await.map_err(|_| no_answer())??;
    answer(config, agent, socket, deadline, queued).await
}

/// The request of a WebSocket to `url` with the edge's API key.
pub(crate) fn request(url: &str, api_key: Option<&str>) -> Result<tungstenite::handshake::client::Request, String> {
    let mut request = url.into_client_request().map_err(|e| e.to_string())?;
    if let Some(key) = api_key {
        let value = HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| "the API key holds characters a header cannot".to_owned())?;
        request.headers_mut().insert("authorization", value);
    }
    Ok(request)
}

/// Connects and sends the call's `session_start`.
async fn start(config: &GatewayConfig, agent: &str, format: Format, headers: Vec<Vouched>) -> Result<Socket, Refused> {
    let unreachable = |reason: String| Refused::Unreachable { url: config.url.clone(), reason };
    let mut socket = connect(config, headers).await?;
    let start = serde_json::to_string(&ClientMessage::SessionStart(session_start(agent, format)))
        .map_err(|e| unreachable(e.to_string()))?;
    socket.send(Message::text(start)).await.map_err(|e| unreachable(e.to_string()))?;
    Ok(socket)
}

/// Connects to the gateway with the edge's API key and `headers`.
async fn connect(config: &GatewayConfig, headers: Vec<Vouched>) -> Result<Socket, Refused> {
    let unreachable = |reason: String| Refused::Unreachable { url: config.url.clone(), reason };
    let mut request = request(&config.url, config.api_key.as_deref()).map_err(unreachable)?;
    for (name, value) in headers {
        let value =
            HeaderValue::from_str(&value).map_err(|_| unreachable(format!("the call's {name} is not a header")))?;
        request.headers_mut().insert(name, value);
    }
    let limits = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
        .read_buffer_size(READ_BUFFER);
    let (socket, _) = tokio_tungstenite::connect_async_with_config(request, Some(limits), true)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    Ok(socket)
}

/// What the gateway said before a close: its `bidi_error` (why), or its
/// `bidi_session_fallback` (what to do instead).
#[derive(Default)]
struct LastWords {
    message: String,
    code: Option<ErrorCode>,
    retry_after_seconds: Option<u64>,
    fallback: Option<Fallback>,
}

/// Reads the gateway's answer to `session_start`: by `deadline`, or, once the session waits
/// in the capacity queue and `queued` takes its messages, for as long as the gateway is
/// heard from at least every [`QUEUE_SILENCE`].
async fn answer(
    config: &GatewayConfig,
    agent: &str,
    mut socket: Socket,
    deadline: tokio::time::Instant,
    mut queued: OnQueued<'_>,
) -> Result<Session, Refused> {
    let unreachable = |reason: String| Refused::Unreachable { url: config.url.clone(), reason };
    let mut said = LastWords::default();
    let mut waiting = false;
    loop {
        let next = if waiting {
            tokio::time::timeout(QUEUE_SILENCE, socket.next()).await.map_err(|_| {
                unreachable(format!(
                    "no word from the gateway for {QUEUE_SILENCE:?} while the call waited in its queue"
                ))
            })?
        } else {
            tokio::time::timeout_at(deadline, socket.next())
                .await
                .map_err(|_| unreachable(format!("no answer within {:?}", config.open_timeout)))?
        };
        let Some(frame) = next else { break };
        match frame {
            Ok(Message::Text(text)) => match serde_json::from_str::<ServerMessage>(text.as_str()) {
                Ok(ServerMessage::BidiConnectionStart { session_id, mode, .. }) if mode == "text" => {
                    let _ = close(&mut socket).await;
                    tracing::debug!(session = %session_id, agent, "text-only agent: its session closed");
                    return Err(Refused::TextOnly { agent: agent.to_owned() });
                }
                Ok(ServerMessage::BidiConnectionStart { session_id, resume_token, seq, .. }) => {
                    return Ok(Session { socket, id: session_id, position: Position::start(resume_token, seq) });
                }
                Ok(ServerMessage::BidiError { message, code, retry_after_seconds, .. }) => {
                    said.message = message;
                    said.code = Some(code);
                    said.retry_after_seconds = retry_after_seconds;
                }
                Ok(ServerMessage::BidiSessionFallback { agent, cause, message, person, retry_after_seconds }) => {
                    said.fallback = Some(Fallback { agent, cause, message, person, retry_after_seconds });
                }
                Ok(ServerMessage::BidiSessionQueued { position, estimated_wait_seconds, message, agent }) => {
                    if let Some(queued) = queued.as_deref_mut() {
                        waiting = true;
                        queued(Queued { position, estimated_wait_seconds, message, agent });
                    }
                }
                _ => {}
            },
            Ok(Message::Close(frame)) => {
                let (code, reason) =
                    frame.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((1005, String::new()));
                if code == close_code::OUTAGE {
                    return Err(outage(agent, said.fallback, reason));
                }
                let message = if said.message.is_empty() { reason } else { said.message };
                if said.code == Some(ErrorCode::CapacityFull) {
                    return Err(Refused::CapacityFull { message, retry_after_seconds: said.retry_after_seconds });
                }
                return Err(refusal(agent, code, message));
            }
            Ok(_) => {}
            Err(error) => return Err(unreachable(error.to_string())),
        }
    }
    Err(unreachable("the gateway closed the connection without an answer".into()))
}

/// The refusal a close code before `bidi_connection_start` stands for.
fn refusal(agent: &str, code: u16, message: String) -> Refused {
    let agent = agent.to_owned();
    match code {
        close_code::UNKNOWN_AGENT => Refused::UnknownAgent { agent, message },
        close_code::NOT_EXPOSED => Refused::NotExposed { agent, message },
        close_code::UNAUTHORIZED => Refused::Unauthorized(message),
        close_code::TRY_AGAIN_LATER | close_code::TOO_MANY_SESSIONS | close_code::NO_READY_POD => {
            Refused::Busy(message)
        }
        code => Refused::Other { code, message },
    }
}

/// The refusal of a close 4513: the fallback the gateway sent before it, or (a gateway that
/// closed 4513 without one) a fallback with no person and the close's reason.
fn outage(agent: &str, fallback: Option<Fallback>, reason: String) -> Refused {
    let fallback = fallback.unwrap_or_else(|| Fallback {
        agent: agent.to_owned(),
        cause: "unknown".to_owned(),
        message: if reason.is_empty() { "The assistant is unavailable at the moment.".to_owned() } else { reason },
        person: None,
        retry_after_seconds: None,
    });
    Refused::Outage(Box::new(fallback))
}

/// Ends the session as a client does: `close`, then the WebSocket close.
pub async fn close(socket: &mut Socket) -> Result<(), tungstenite::Error> {
    let text = serde_json::to_string(&ClientMessage::Close {}).unwrap_or_default();
    socket.send(Message::text(text)).await?;
    socket.close(Some(tungstenite::protocol::CloseFrame { code: CloseCode::Normal, reason: "hung up".into() })).await
}

mod resume;
pub use resume::{Position, Resumed, resume, resumes_after};

/// Sends what the call queues to the gateway, in order, until the queue closes.
pub(crate) async fn write(
    mut sink: futures_util::stream::SplitSink<Socket, Message>,
    mut outgoing: tokio::sync::mpsc::Receiver<Message>,
) {
    while let Some(message) = outgoing.recv().await {
        let closing = matches!(message, Message::Close(_));
        if sink.send(message).await.is_err() || closing {
            break;
        }
    }
}

#[cfg(test)]
mod tests;
