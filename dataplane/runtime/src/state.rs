//! What every request of a runtime server shares: its limits and timing
//! ([`ServerConfig`]), the agents it serves ([`Directory`]), and [`AppState`], which holds
//! them with the session slots, the drain's tokens and task tracker, the voice clients and
//! the grant check. The HTTP side ([`super::server`]) and each connection
//! ([`super::connection`]) read it; neither is imported here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::agent::{AgentRuntime, Shared};
use super::reader::ReadLimits;

/// Limits and timing of a runtime server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Largest client message, in bytes; larger ones close the session with 1009.
    pub max_message_bytes: usize,
    /// Client messages per second a session may send on average...
    pub rate_per_second: u32,
    /// ...and in a burst; beyond it the session is closed with 1008.
    pub rate_burst: u32,
    /// Most concurrent sessions; more are refused with 1013.
    pub max_sessions: usize,
    /// Connections that have not yet sent a `session_start` that passed the grant check
    /// (sessions opening, clients being told why they are refused); past it, requests are
    /// refused with HTTP 503 before the WebSocket upgrade. Default 64.
    pub max_opening_connections: usize,
    /// How long a new connection has to send a `session_start` that passes the grant check;
    /// pings and other frames do not extend it. Past it the connection is closed with 4408.
    /// Default 10 s.
    pub start_timeout: Duration,
    /// The listener's header read (and keep-alive idle) timeout and its connection cap
    /// (WebSockets included; past it, HTTP 503 and the connection closed). Default: 10 s,
    /// and `max_sessions` + `max_opening_connections` + [`CONNECTION_HEADROOM`].
    pub http: switchboard_serve::Limits,
    /// How long live sessions may keep going after draining starts.
    pub drain_timeout: Duration,
    /// Sessions with no client message for this long are closed.
    pub idle_timeout: Duration,
    /// How long a write to the client may wait (the client does not read) before the
    /// connection is closed with 4409, freeing its session.
    pub slow_client_timeout: Duration,
    /// Browser origins whose pages may open sessions besides the server's own (a page
    /// served from the same host and port); `*` allows any. A request with another
    /// `Origin` is refused with 4405, so a page on some other site cannot drive a local
    /// agent (and its tools) from the user's browser. Clients that are not browsers send no
    /// `Origin`.
    pub allowed_origins: Vec<String>,
    /// Age at which a voice session's Nova Sonic stream is replaced (at the next turn
    /// boundary, history replayed), ahead of the service's 8-minute stream limit.
    pub voice_rotate_after: Duration,
    /// The caller's audio per event to the voice model (Nova Sonic `audioInput`): frames are
    /// gathered and sent together once this much has come or the first has waited this
    /// long (fewer events and wake-ups per call; each frame reaches the model at most this
    /// much later). Zero: each frame is its own event.
    pub voice_audio_chunk: Duration,
    /// The gateway's public keys (one, or the old and the new during a rotation): session
    /// context (memory, history, handoff) is accepted only when the gateway signed it with
    /// one of them. `None`: no context is accepted from anyone.
    pub gateway_key: Option<switchboard_core::gateway_keys::GatewayKeys>,
    /// This pod's IP (`SWITCHBOARD_POD_IP`): a grant the gateway made for another pod is
    /// refused. `None` (local mode, a runtime on a VM): not checked.
    pub pod_ip: Option<std::net::IpAddr>,
}

/// [`ServerConfig::voice_audio_chunk`] by default: three 20 ms frames per event, about the
/// 1,024 samples (64 ms) of AWS's Nova Sonic examples; a fifth less CPU per call than an
/// event per frame (BENCHMARKS.md), and a frame waits at most 40 ms more when frames come in
/// real time.
pub const DEFAULT_VOICE_AUDIO_CHUNK: Duration = Duration::from_millis(60);

/// Connections a runtime takes beyond its sessions and the connections opening, by default:
/// health probes, metrics scrapes, and clients answered 503.
pub const CONNECTION_HEADROOM: usize = 64;

impl ServerConfig {
    /// The default connection cap for these session limits.
    pub fn default_max_connections(&self) -> usize {
        self.max_sessions.saturating_add(self.max_opening_connections).saturating_add(CONNECTION_HEADROOM)
    }

    /// What a connection's reader holds its client to.
    pub(super) fn read_limits(&self) -> ReadLimits {
        ReadLimits {
            max_message_bytes: self.max_message_bytes,
            rate_per_second: self.rate_per_second,
            rate_burst: self.rate_burst,
            idle_timeout: self.idle_timeout,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let (max_sessions, max_opening_connections) = (200, 64);
        Self {
            max_message_bytes: 64 * 1024,
            rate_per_second: 20,
            rate_burst: 40,
            max_sessions,
            max_opening_connections,
            start_timeout: Duration::from_secs(10),
            http: switchboard_serve::Limits {
                max_connections: max_sessions + max_opening_connections + CONNECTION_HEADROOM,
                ..switchboard_serve::Limits::default()
            },
            drain_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(600),
            slow_client_timeout: Duration::from_secs(10),
            allowed_origins: Vec::new(),
            voice_rotate_after: Duration::from_secs(6 * 60),
            voice_audio_chunk: DEFAULT_VOICE_AUDIO_CHUNK,
            gateway_key: None,
            pod_ip: None,
        }
    }
}

/// The agents a server serves.
#[derive(Debug, Clone)]
pub struct Directory {
    /// By name.
    pub agents: BTreeMap<String, Arc<AgentRuntime>>,
    /// The agent for sessions that name none.
    pub default_agent: Option<String>,
    /// Whether sessions may start with agents whose `gateway.expose` is false (a runtime
    /// pod serves its one agent whatever it says: the gateway decides exposure).
    pub allow_unexposed: bool,
}

impl Directory {
    /// The agent a new session gets, or why none.
    pub fn pick(&self, requested: Option<&str>) -> Result<Arc<AgentRuntime>, String> {
        let name = match requested.or(self.default_agent.as_deref()) {
            Some(name) => name,
            None => {
                return Err("name an agent: ?agent=<name> or session_start.agent (there is no default agent)".into());
            }
        };
        let Some(agent) = self.agents.get(name) else {
            let known: Vec<&str> = self.agents.keys().map(String::as_str).collect();
            return Err(format!("unknown agent {name:?}; agents here: {}", known.join(", ")));
        };
        if !self.allow_unexposed && !agent.core.spec().gateway.expose && requested.is_some() {
            return Err(format!(
                "agent {name:?} is not exposed to clients (gateway.expose: false); it is reached by handoff"
            ));
        }
        Ok(agent.clone())
    }
}

/// State shared by every request of a server.
#[derive(Debug)]
pub struct AppState {
    /// The agents.
    pub directory: Directory,
    /// Limits.
    pub config: ServerConfig,
    /// Metrics, transcripts, retries.
    pub shared: Shared,
    /// Session slots, taken once a connection's `session_start` passed the grant check.
    pub sessions: Arc<Semaphore>,
    /// Places of connections still opening, taken before the upgrade and given back when
    /// the connection takes a session slot (or closes).
    pub opening: Arc<Semaphore>,
    /// Cancelled when draining starts.
    pub draining: CancellationToken,
    /// Cancelled when live sessions must end.
    pub shutdown: CancellationToken,
    /// Tracks session tasks.
    pub tracker: TaskTracker,
    /// Nova Sonic clients of the voice and hybrid agents, by agent name; sessions of an
    /// agent without one are served as text.
    pub voice: BTreeMap<String, Arc<super::voice::VoiceModel>>,
    /// The Nova Sonic clients of each voice and hybrid agent in its fallback region
    /// (`model.voiceFallback.region`), by agent name: a session the gateway placed there
    /// (its grant names the region) opens its streams with them.
    pub voice_regions: BTreeMap<String, RegionalVoice>,
    /// Checks the session context the gateway signed.
    pub grants: super::grants::Grants,
}

impl AppState {
    /// State for `directory` with `config`.
    pub fn new(directory: Directory, config: ServerConfig, shared: Shared) -> Arc<Self> {
        Self::with_voice(directory, config, shared, BTreeMap::new())
    }

    /// State for `directory` with `config`, whose voice and hybrid agents speak through
    /// the Nova Sonic clients in `voice` (by agent name).
    pub fn with_voice(
        directory: Directory,
        config: ServerConfig,
        shared: Shared,
        voice: BTreeMap<String, Arc<super::voice::VoiceModel>>,
    ) -> Arc<Self> {
        Self::with_regions(directory, config, shared, voice, BTreeMap::new())
    }

    /// [`Self::with_voice`], with the agents' Nova Sonic clients in their fallback regions.
    pub fn with_regions(
        directory: Directory,
        config: ServerConfig,
        shared: Shared,
        voice: BTreeMap<String, Arc<super::voice::VoiceModel>>,
        voice_regions: BTreeMap<String, RegionalVoice>,
    ) -> Arc<Self> {
        Arc::new(Self {
            voice,
            voice_regions,
            grants: super::grants::Grants::new(config.gateway_key.clone(), config.pod_ip),
            sessions: Arc::new(Semaphore::new(config.max_sessions)),
            opening: Arc::new(Semaphore::new(config.max_opening_connections)),
            directory,
            config,
            shared,
            draining: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
        })
    }
}

/// An agent's Nova Sonic clients in its fallback region, and the model it runs there.
#[derive(Debug)]
pub struct RegionalVoice {
    /// The region (`model.voiceFallback.region`).
    pub region: String,
    /// The Nova Sonic model there (`model.voiceFallback.modelId`, default the agent's).
    pub model_id: String,
    /// The clients, at that region's endpoint (or the Bedrock endpoint override).
    pub model: Arc<super::voice::VoiceModel>,
}
