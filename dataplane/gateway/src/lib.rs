//! Switchboard's session gateway: the one endpoint clients talk to. It follows the
//! operator's routing table and every Agent's ready endpoints ([`watch`] publishes them as
//! a [`Directory`]), sends each new session to the least-loaded ready pod of its Agent
//! ([`balancer`]), relays the session protocol both ways, and performs what a runtime pod
//! cannot: handoffs to another Agent's pods on the same client socket, moving a session
//! off a lost or draining pod, and owning the session's memory, which it gives runtimes
//! signed ([`upstream`]; see `switchboard_core::grant`). One session is one task
//! ([`session`]); the axum app, limits and drain are in [`server`]. On a cluster it
//! publishes its public key for the operator to give runtime pods ([`publish`]). Other
//! client channels (the WebRTC edge) plug in through [`channels`] without this crate
//! knowing them.

/// Who may open a session (its own crate, `switchboard-auth`), under the path it always had.
pub use switchboard_auth as auth;
pub mod balancer;
pub mod budget;
pub mod calls;
pub mod capacity;
pub mod channels;
pub mod directory;
pub mod metrics;
pub mod outage;
mod phone;
pub mod publish;
pub mod record;
pub mod resume;
pub mod server;
pub mod session;
pub mod static_routes;
pub mod upstream;
pub mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_core::grant::GatewaySigner;
use tokio::sync::{Semaphore, watch as channel};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use balancer::Balancer;
pub use directory::{Directory, Reach, RouteError, Target};
pub use metrics::Metrics;

/// Limits and timing of a gateway.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Largest client message, in bytes; larger ones close the session with 1009.
    pub max_message_bytes: usize,
    /// Most concurrent sessions; more are refused with 1013.
    pub max_sessions: usize,
    /// How long a client has to send its first message.
    pub start_timeout: Duration,
    /// How long opening a session on a runtime pod may take.
    pub connect_timeout: Duration,
    /// How long live sessions may go on after draining starts (with a shared session
    /// store, clients are moved at once instead: told to resume elsewhere).
    pub drain_timeout: Duration,
    /// How long the listener stays open after draining starts, answering new connections
    /// with 1013, while the Service's endpoints and every node's proxy drop this replica.
    /// A listener closed before that refuses connections the proxy still sends here (a
    /// failed handshake, not a close code a client can act on). Runs beside the drain; 0
    /// closes the listener as soon as the sessions are done (local mode, tests).
    pub shutdown_delay: Duration,
    /// How long a session whose client went away waits for it to resume.
    pub resume_window: Duration,
    /// How long a runtime may go on answering the turn under way after the client went
    /// away (its messages are kept for the client's return).
    pub park_grace: Duration,
    /// Messages kept per session for replay on resume.
    pub replay_messages: usize,
    /// Bytes of messages kept per session for replay on resume.
    pub replay_bytes: usize,
    /// Most messages a second one client session may send (bursts of twice that); more
    /// close it with 1008. Voice sends 50 audio frames a second.
    pub session_rate: u32,
    /// A session with no message either way for this long is closed with 4408.
    pub idle_timeout: Duration,
    /// How often the gateway pings each client and each runtime connection.
    pub ping_interval: Duration,
    /// The caller's audio (binary frames) is gathered into frames of this much audio before
    /// it goes to the runtime, and a frame waits at most this long: fewer, larger frames
    /// cost both processes fewer wake-ups and system calls. The runtime, told so in the
    /// session's grant, then sends each to the voice model as it comes instead of gathering
    /// it again (`--voice-audio-chunk-ms`), so set both alike. Zero: each frame as it comes.
    pub audio_batch: Duration,
    /// A client that answers nothing (not even a ping) for this long counts as gone and
    /// its session parks for resume; a runtime, as lost, and the session moves to another
    /// pod.
    pub ping_timeout: Duration,
    /// Bytes all sessions together may hold before new ones are refused with 1013
    /// ([`budget`]); none: no budget.
    pub memory_budget: Option<usize>,
    /// The listener's header read (and keep-alive idle) timeout and its connection cap
    /// (WebSockets included; more are answered 503 and closed). Default: 10 s, and
    /// `max_sessions` plus [`CONNECTION_HEADROOM`].
    pub http: switchboard_serve::Limits,
    /// The model quota shared across gateways and tenants ([`capacity`]).
    pub capacity: capacity::CapacityConfig,
    /// The bounds on outbound calls ([`calls`]).
    pub calls: calls::CallsConfig,
    /// How outbound calls' status callbacks are signed and sent ([`calls::webhook`]);
    /// `None`: a call naming one is refused.
    pub call_webhooks: Option<calls::webhook::CallWebhookConfig>,
}

/// Connections a gateway takes beyond its session limit by default: clients told why they
/// are refused, health checks, scrapes, record queries.
pub const CONNECTION_HEADROOM: usize = 1024;

impl GatewayConfig {
    /// The most one session holds: its replay buffer, what is kept of it, and its
    /// connections' overhead.
    pub fn session_bound(&self) -> usize {
        self.replay_bytes + session::kept::MAX_KEPT_BYTES + budget::SESSION_OVERHEAD
    }
}

impl Default for GatewayConfig {
    fn default() -> Self {
        let max_sessions = 10_000;
        Self {
            max_message_bytes: 64 * 1024,
            max_sessions,
            start_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(30),
            shutdown_delay: Duration::ZERO,
            resume_window: Duration::from_secs(30),
            park_grace: Duration::from_secs(10),
            replay_messages: 2048,
            replay_bytes: 1024 * 1024,
            session_rate: 200,
            idle_timeout: Duration::from_secs(600),
            ping_interval: Duration::from_secs(5),
            audio_batch: Duration::ZERO,
            ping_timeout: Duration::from_secs(15),
            memory_budget: None,
            http: switchboard_serve::Limits {
                max_connections: max_sessions + CONNECTION_HEADROOM,
                ..switchboard_serve::Limits::default()
            },
            capacity: capacity::CapacityConfig::default(),
            calls: calls::CallsConfig::default(),
            call_webhooks: None,
        }
    }
}

/// A gateway could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A metric could not be registered.
    #[error("gateway metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The capacity settings are unusable (the Redis URL).
    #[error(transparent)]
    Capacity(#[from] capacity::CapacityError),
}

/// Everything the sessions of one gateway share.
#[derive(Debug)]
pub struct Gateway {
    /// Limits.
    pub config: GatewayConfig,
    /// The latest routing view.
    pub directory: channel::Receiver<Directory>,
    /// Live sessions per pod.
    pub balancer: Balancer,
    /// The private key the session context is signed with.
    pub key: GatewaySigner,
    /// Client checks: API keys, origins.
    pub auth: auth::Auth,
    /// Where sessions wait for their clients to resume.
    pub store: resume::Store,
    /// Sessions attached to a client here, by their resume key: a resume that finds its
    /// session still attached (the old socket not yet seen dead) detaches it.
    pub attached: Mutex<HashMap<String, CancellationToken>>,
    /// Metrics.
    pub metrics: Metrics,
    /// Session slots.
    pub sessions: Arc<Semaphore>,
    /// Cancelled when draining starts.
    pub draining: CancellationToken,
    /// Cancelled when live sessions must end.
    pub shutdown: CancellationToken,
    /// Tracks session tasks.
    pub tracker: TaskTracker,
    /// What the sessions hold, against the memory budget.
    pub budget: budget::MemoryBudget,
    /// The conversation record, when kept.
    pub record: Option<Arc<record::Recorder>>,
    /// Slots of the model quota ([`capacity`]).
    pub capacity: Arc<capacity::Capacity>,
    /// Outbound calls placed through SIP edges ([`calls`]).
    pub calls: calls::Calls,
    /// Outage mode: each Agent's breaker ([`outage`]).
    pub outages: Arc<outage::Outages>,
}

impl Gateway {
    /// A gateway routing by `directory`, signing with `key`, admitting clients by `auth`,
    /// parking sessions for resume in `store`.
    pub fn new(
        config: GatewayConfig,
        directory: channel::Receiver<Directory>,
        key: GatewaySigner,
        auth: auth::Auth,
        store: resume::Store,
    ) -> Result<Arc<Self>, GatewayError> {
        Ok(Arc::new(Self::build(config, directory, key, auth, store, None)?))
    }

    /// [`Gateway::new`], keeping the conversation record with `record`.
    pub fn recording(
        config: GatewayConfig,
        directory: channel::Receiver<Directory>,
        key: GatewaySigner,
        auth: auth::Auth,
        store: resume::Store,
        record: Arc<record::Recorder>,
    ) -> Result<Arc<Self>, GatewayError> {
        Ok(Arc::new(Self::build(config, directory, key, auth, store, Some(record))?))
    }

    fn build(
        config: GatewayConfig,
        directory: channel::Receiver<Directory>,
        key: GatewaySigner,
        auth: auth::Auth,
        store: resume::Store,
        record: Option<Arc<record::Recorder>>,
    ) -> Result<Self, GatewayError> {
        let budget = budget::MemoryBudget::new(config.memory_budget, config.session_bound());
        // What waits for the record's store is the sessions' too.
        let budget = match &record {
            Some(record) => {
                // Sessions are analysed by the settings of the Agents this gateway routes.
                record::analyse_by_routes(record, directory.clone());
                budget.counting(record.pending())
            }
            None => budget,
        };
        let capacity = capacity::Capacity::new(config.capacity.clone())?;
        let metrics = Metrics::new()?;
        let calls =
            calls::Calls::new(config.calls, metrics.outbound_calls.clone(), metrics.outbound_answered_by.clone())
                .with_webhooks(config.call_webhooks.clone(), metrics.call_webhook_deliveries.clone());
        Ok(Self {
            calls,
            outages: Arc::new(outage::Outages::new()?),
            capacity,
            budget,
            sessions: Arc::new(Semaphore::new(config.max_sessions)),
            config,
            directory,
            balancer: Balancer::default(),
            key,
            auth,
            store,
            attached: Mutex::default(),
            metrics,
            draining: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
            record,
        })
    }
}
