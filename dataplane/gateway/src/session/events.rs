//! The session machine's vocabulary: the [`Event`]s the relay task feeds it, the
//! [`Effect`]s it asks for, the [`Phase`] that says what the task waits on next, and the
//! [`Note`]s that become metrics and logs.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard_core::grant::Carried;
use tokio_tungstenite::tungstenite::Message as UpMessage;
use tokio_tungstenite::tungstenite::Utf8Bytes;

use crate::GatewayConfig;
use crate::auth::Refusal;
use crate::directory::{Directory, RouteError, Target};
use crate::resume::Frame;
use crate::upstream::ConnectError;

/// A close to send: code and reason (at most 123 bytes; details go in a `bidi_error`).
pub type Close = (u16, String);

/// The limits and timings a session machine applies.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Messages kept for replay.
    pub replay_messages: usize,
    /// Bytes of messages kept for replay.
    pub replay_bytes: usize,
    /// Client messages a second (bursts of twice that).
    pub session_rate: u32,
    /// No message either way for this long ends the session.
    pub idle_timeout: Duration,
    /// Largest client message.
    pub max_message_bytes: usize,
    /// How long the runtime may finish its turn after the client went.
    pub park_grace: Duration,
    /// Whether a draining gateway moves the session at once (a shared store).
    pub movable: bool,
    /// How often the client and the runtime are pinged.
    pub ping_interval: Duration,
    /// Silence (not even a pong) after which a client counts as gone (the session parks)
    /// or a runtime as lost (the session moves to another pod).
    pub ping_timeout: Duration,
    /// Whether the conversation record is kept ([`Effect::Record`]).
    pub record: bool,
}

impl Limits {
    /// The limits of a gateway with `config`; `movable` with a shared store.
    pub fn new(config: &GatewayConfig, movable: bool) -> Self {
        Self {
            replay_messages: config.replay_messages,
            replay_bytes: config.replay_bytes,
            session_rate: config.session_rate,
            idle_timeout: config.idle_timeout,
            max_message_bytes: config.max_message_bytes,
            park_grace: config.park_grace,
            movable,
            ping_interval: config.ping_interval,
            ping_timeout: config.ping_timeout,
            record: false,
        }
    }
}

/// A frame (or the end) of the client's socket.
#[derive(Clone, Debug)]
pub enum ClientFrame {
    /// A text frame.
    Text(Utf8Bytes),
    /// A binary frame (raw audio).
    Binary(Bytes),
    /// Ping or pong: the client is there, but this is no activity.
    Control,
    /// The client closed the session.
    Close,
    /// The socket ended without a close: the client may resume.
    Gone,
    /// A message over the size limit.
    Oversized,
}

/// A frame (or the end) of the runtime connection.
#[derive(Clone, Debug)]
pub enum RuntimeFrame {
    /// A text frame.
    Text(Utf8Bytes),
    /// A binary frame.
    Binary(Bytes),
    /// The runtime closed (1005 when it gave no code).
    Closed {
        /// The close code.
        code: u16,
        /// Its reason.
        reason: String,
    },
    /// The connection broke without a close.
    Lost,
    /// Ping or pong: the runtime is there.
    Control,
}

/// Why a send to the client failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendFailure {
    /// The socket is gone.
    Gone,
    /// The client did not read in time.
    Slow,
}

/// What happened.
#[derive(Debug)]
pub enum Event {
    /// A client frame; `budget` is the client key's message budget's verdict on it
    /// (shared by the key's sessions, so checked by the task).
    Client(ClientFrame, Result<(), Refusal>),
    /// A runtime frame.
    Runtime(RuntimeFrame),
    /// The runtime session asked for by [`Phase::Opening`] is open on this pod, or not.
    Opened(Result<SocketAddr, OpenError>),
    /// The pause of [`Phase::Backoff`] is over.
    RetryDue,
    /// The routing directory changed.
    DirectoryChanged,
    /// An Agent's outage switch (or a namespace's) flipped, its fallback changed, or a
    /// breaker tripped or recovered ([`switchboard_outage::notice`]): the session tells its
    /// client if its Agent's did.
    OutageSwitched,
    /// The gateway drains.
    Draining,
    /// The client resumed on another socket while this one seemed alive.
    Superseded,
    /// A resume through another replica took the session from its snapshot (this holder's
    /// lease had lapsed): it lives there now, and must not go on here.
    TakenOver,
    /// The gateway shuts down.
    Shutdown,
    /// The idle deadline ([`super::machine::Machine::idle_deadline`]) passed.
    IdleDue,
    /// A send to the client failed.
    ClientSendFailed(SendFailure),
    /// The runtime connection refused a message queued with `keep`.
    RuntimeSendFailed(UpMessage),
    /// The settle deadline of [`Phase::Settling`] passed.
    SettleDue,
    /// Time to ping both sides (every [`Limits::ping_interval`]), and to see who went
    /// silent.
    PingDue,
}

/// What the task does for the machine, in order.
#[derive(Debug)]
pub enum Effect {
    /// Send to the client.
    Client(Frame),
    /// Close the client's socket with this close (the session moves elsewhere).
    CloseClient(Close),
    /// Send to the runtime; with `keep`, a refused message comes back as
    /// [`Event::RuntimeSendFailed`] (kept for the next connection).
    Runtime {
        /// The message.
        message: UpMessage,
        /// Report a refusal.
        keep: bool,
    },
    /// Close the runtime connection (politely, briefly).
    CloseRuntime,
    /// Ping the client.
    PingClient,
    /// Ping the runtime.
    PingRuntime,
    /// Register the session under its newest resume key, releasing `previous`.
    Hold {
        /// The newest key.
        key: String,
        /// The key it replaces.
        previous: Option<String>,
    },
    /// Keep this as the session's snapshot (a shared store only): what a resume through
    /// another replica takes should this gateway die holding the session. Asked for at the
    /// moments the session is whole: a typed input taken, a turn's end, a handoff.
    Snapshot(Box<crate::resume::Parked>),
    /// Sign an identity assertion for this verified caller (the `verifiedUser` memory value)
    /// in the session's current Agent, and send it to the runtime (`identity_assertion`);
    /// dropped when no runtime connection is open (the next one's grant carries one).
    AssertIdentity(serde_json::Value),
    /// Count and log.
    Note(Note),
    /// For the conversation record (only when [`Limits::record`]): a message delivered to
    /// the client for the first time, or one the client sent. Never a replay, never audio.
    Record(Recorded),
}

/// What the conversation record is handed.
#[derive(Debug)]
pub enum Recorded {
    /// A runtime's message, delivered to the client (or kept for it while it is away).
    Server(Utf8Bytes),
    /// A client's message, forwarded to the runtime.
    Client(Utf8Bytes),
}

/// What the metrics and logs are told.
#[derive(Clone, Debug, PartialEq)]
pub enum Note {
    /// A new session is open (on `Machine::target`).
    Routed,
    /// A parked session is back.
    Resumed,
    /// The session moved from one Agent to another.
    Handoff {
        /// `<namespace>/<name>` of the source.
        from: String,
        /// Of the target.
        to: String,
    },
    /// The first frame of the target after a handoff, this long after the source closed.
    HandoffGap {
        /// Source.
        from: String,
        /// Target.
        to: String,
        /// Seconds.
        seconds: f64,
    },
    /// A handoff did not happen.
    HandoffFailed {
        /// Source.
        from: String,
        /// The target asked for.
        to: String,
        /// Why.
        error: HandoffError,
    },
    /// The session moves to another pod of its Agent.
    Migrated {
        /// `runtime_lost`, `runtime_draining`, `handoff_failed`.
        reason: String,
        /// The pod it leaves, if it had one.
        from: Option<SocketAddr>,
    },
    /// A session refused or ended for this reason (a metric label).
    Refused(&'static str),
    /// Opening a runtime session failed (it is tried again).
    OpenFailed(OpenError),
    /// The Agent was removed: the session ends.
    AgentRemoved,
    /// The pod drains and no other is ready: the session stays.
    WaitingForPod,
    /// The client answered nothing, not even a ping, for this long: it counts as gone.
    ClientSilent(Duration),
    /// The runtime answered nothing for this long: it counts as lost.
    RuntimeSilent(Duration),
}

/// What the task waits on: a view of the machine's state (`machine::state`).
#[derive(Debug)]
pub enum Phase<'a> {
    /// Open a runtime session as asked, then feed [`Event::Opened`].
    Opening(&'a OpenRequest),
    /// Wait this long, then feed [`Event::RetryDue`].
    Backoff(Duration),
    /// Relay: client and runtime frames, timers, signals.
    Live,
    /// The client is gone: feed the runtime's frames until this deadline
    /// ([`Event::SettleDue`]); the client is not read.
    Settling(Instant),
    /// The session is over for this task.
    Done(&'a Ending),
}

/// How the session leaves the task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It ended: nothing waits for a resume; the client (if still there) gets this close.
    Close(Close),
    /// The client is gone: the session waits for it in the store.
    Park,
    /// The agent ended the session while the client was away: nothing to park.
    Detach,
    /// A resumed session could not be opened: it goes back to the store as it was, and the
    /// client is told to try again (`no_runtime`, with this error's message).
    ResumeFailed(OpenError),
    /// A resume elsewhere took the session ([`Event::TakenOver`]): nothing is parked,
    /// recorded or released here.
    TakenOver,
}

/// Why a runtime session could not be opened ([`Event::Opened`]). Its message is what the
/// client is told (`no_runtime`, `handoff_failed`) and what the log says.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The Agent has no ready pod (or none but the one to avoid is busy).
    #[error("agent {agent} has no ready pod")]
    NoReadyPod {
        /// The Agent's name.
        agent: String,
    },
    /// The pod could not be reached, or the session could not be started on it.
    #[error("{0}")]
    Connect(#[from] ConnectError),
}

/// Why a handoff did not happen. Its message is what the client (`handoff_failed`), the
/// source agent (the last line of its conversation) and the log are told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandoffError {
    /// The current user turn has made as many handoffs as it may
    /// ([`super::machine::handoff::MAX_HANDOFFS_PER_TURN`]).
    #[error("more than {limit} handoffs in one turn; the agents may be passing the caller back and forth")]
    TooMany {
        /// How many one turn may make.
        limit: u32,
    },
    /// The source may not hand off there, or the target has no pod to take it.
    #[error("{0}")]
    Route(#[from] RouteError),
    /// The target's runtime session could not be opened.
    #[error("{0}")]
    Open(#[from] OpenError),
}

/// A runtime session to open.
#[derive(Clone, Debug)]
pub struct OpenRequest {
    /// The Agent (and its ready pods).
    pub target: Target,
    /// A pod not to pick if another is ready.
    pub avoid: Option<SocketAddr>,
    /// What the session carries there, signed into its grant: the handoff that brings it
    /// (with its own memory and history), or what the session kept ([`Kept::carried`]).
    ///
    /// [`Kept::carried`]: super::kept::Kept::carried
    pub carried: Carried,
    /// The variant of the Agent the session runs, when it runs variants.
    pub variant: Option<String>,
    /// The fallback region the session's streams open in, when it was placed there.
    pub region: Option<String>,
}

/// Where the task and the machine meet: the current time and routing.
#[derive(Clone, Copy, Debug)]
pub struct Cx<'a> {
    /// Now.
    pub now: Instant,
    /// The latest routing directory.
    pub directory: &'a Directory,
    /// Which Agents' breakers are tripped here, for the sessions under way
    /// ([`switchboard_outage::notice`]).
    pub outages: &'a switchboard_outage::notice::Switches,
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn an_open_error_says_what_it_said_as_a_string_and_keeps_its_cause() {
        let none = OpenError::NoReadyPod { agent: "triage".into() };
        assert_eq!(none.to_string(), "agent triage has no ready pod");
        assert!(none.source().is_none());
        let cause = ConnectError { addr: SocketAddr::from(([10, 0, 0, 1], 8080)), message: "refused".into() };
        let refused = OpenError::from(cause.clone());
        assert_eq!(refused.to_string(), cause.to_string(), "the client and the log read the connect error's text");
        assert_eq!(refused.to_string(), "cannot open a session on the runtime pod 10.0.0.1:8080: refused");
        let source = refused.source().and_then(|s| s.downcast_ref::<ConnectError>());
        assert_eq!(source, Some(&cause), "the connect error is its source");
    }

    #[test]
    fn a_handoff_error_says_what_it_said_as_a_string_and_keeps_its_cause() {
        let too_many = HandoffError::TooMany { limit: 4 };
        assert_eq!(
            too_many.to_string(),
            "more than 4 handoffs in one turn; the agents may be passing the caller back and forth"
        );
        let route = RouteError::NoReadyPod("idv".into());
        let refused = HandoffError::from(route.clone());
        assert_eq!(refused.to_string(), route.to_string());
        assert_eq!(refused.source().and_then(|s| s.downcast_ref::<RouteError>()), Some(&route));
        let open = OpenError::NoReadyPod { agent: "idv".into() };
        assert_eq!(HandoffError::from(open.clone()).to_string(), "agent idv has no ready pod");
    }
}
