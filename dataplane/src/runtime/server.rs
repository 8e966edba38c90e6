//! The HTTP side of a runtime: `/v1/session` (WebSocket, the session protocol),
//! `/healthz` (200 while the process serves, with a JSON body: `status`,
//! `active_sessions`, `max_sessions`, `draining`), `/readyz` (false as soon as draining
//! starts) and `/metrics`; session limits; and the drain on shutdown. The server's own
//! graceful shutdown does not wait for upgraded WebSockets, so every session runs on a
//! [`TaskTracker`] and two [`CancellationToken`]s mark the phases: `draining` (no new
//! sessions, not ready) and `shutdown` (live sessions are closed with 1001). The listener
//! itself (timeouts, connection cap) is `switchboard_serve::server`.
//!
//! A connection is admitted in two steps: before the upgrade it takes a place among the
//! connections still opening (`max_opening_connections`; past it, HTTP 503); a session slot
//! (`max_sessions`) is taken only once its `session_start` has passed the grant check, and
//! the opening place is then given back. A connection with no valid `session_start`
//! within `start_timeout` is closed with 4408, so sockets without a grant hold no session
//! slot and only a bounded, short-lived share of the opening places.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};
use switchboard_crds::contract;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::driver::{AgentRuntime, Shared};

pub use switchboard_serve::ServeError;
use switchboard_serve::ws::WS_READ_BUFFER;

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
    /// The gateway's public keys (one, or the old and the new during a rotation): session
    /// context (memory, history, handoff) is accepted only when the gateway signed it with
    /// one of them. `None`: no context is accepted from anyone.
    pub gateway_key: Option<switchboard_core::gateway_keys::GatewayKeys>,
    /// This pod's IP (`SWITCHBOARD_POD_IP`): a grant the gateway made for another pod is
    /// refused. `None` (local mode, a runtime on a VM): not checked.
    pub pod_ip: Option<std::net::IpAddr>,
}

/// Connections a runtime takes beyond its sessions and the connections opening, by default:
/// health probes, metrics scrapes, and clients answered 503.
pub const CONNECTION_HEADROOM: usize = 64;

impl ServerConfig {
    /// The default connection cap for these session limits.
    pub fn default_max_connections(&self) -> usize {
        self.max_sessions.saturating_add(self.max_opening_connections).saturating_add(CONNECTION_HEADROOM)
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

/// State shared by every request.
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
        Arc::new(Self {
            voice,
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

/// The router of a runtime server.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(contract::SESSION_PATH, get(session))
        .route(contract::HEALTH_PATH, get(healthz))
        .route(contract::READY_PATH, get(readyz))
        .route(contract::METRICS_PATH, get(metrics))
        .with_state(state)
}

#[derive(Debug, Deserialize)]
struct SessionQuery {
    agent: Option<String>,
}

async fn session(
    State(state): State<Arc<AppState>>,
    Query(query): Query<SessionQuery>,
    headers: axum::http::HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    // The socket's limit lets the first message be a signed session_start as large as a
    // gateway may send; the reader holds every later message to the configured limit.
    let limit = state.config.max_message_bytes.max(switchboard_core::grant::MAX_START_BYTES);
    let tracker = state.tracker.clone();
    // Connections still opening are capped before the upgrade: past the cap a flood costs
    // an HTTP answer, not a WebSocket each.
    let Ok(opening) = state.opening.clone().try_acquire_owned() else {
        state.shared.metrics.errors.with_label_values(&["", "connections"]).inc();
        let message = format!(
            "too many connections opening sessions at once (the limit is {}); try again later",
            state.config.max_opening_connections
        );
        return (StatusCode::SERVICE_UNAVAILABLE, [(axum::http::header::RETRY_AFTER, "1")], message).into_response();
    };
    if let Some(origin) = foreign_origin(&headers, &state.config.allowed_origins) {
        state.shared.metrics.errors.with_label_values(&["", "origin"]).inc();
        return upgrade.on_upgrade(move |mut socket| async move {
            let _opening = opening;
            let message = format!(
                "pages from {origin} may not open sessions here; start the server with --allowed-origin {origin} to allow it"
            );
            let error = ServerMessage::error(ErrorCode::Origin, message, false);
            let _ = socket.send(Message::text(error.to_json())).await;
            let close = CloseFrame { code: close_code::ORIGIN_NOT_ALLOWED, reason: "origin not allowed".into() };
            let _ = socket.send(Message::Close(Some(close))).await;
        });
    }
    // The session slot is taken only after the grant check (`connection`).
    upgrade.max_message_size(limit).max_frame_size(limit).read_buffer_size(WS_READ_BUFFER).on_upgrade(
        move |socket| async move {
            tracker.track_future(super::connection::serve(socket, state, query.agent, opening)).await;
        },
    )
}

/// The request's `Origin`, when it is a browser page's from another site: not the server's
/// own (`http(s)://` + the `Host` header) and not in `allowed` (`*` allows any).
fn foreign_origin(headers: &axum::http::HeaderMap, allowed: &[String]) -> Option<String> {
    let origin = headers.get("origin")?.to_str().unwrap_or("(not text)");
    let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("");
    let own = !host.is_empty() && (origin == format!("http://{host}") || origin == format!("https://{host}"));
    let listed = allowed.iter().any(|a| a == "*" || a == origin);
    (!own && !listed).then(|| origin.to_owned())
}

/// Liveness, and what the server holds: its live sessions (connections that took a session
/// slot) against its limit, and whether it is draining.
async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let max = state.config.max_sessions;
    let active = max.saturating_sub(state.sessions.available_permits());
    let body = serde_json::json!({
        "status": "ok",
        "active_sessions": active,
        "max_sessions": max,
        "draining": state.draining.is_cancelled(),
    });
    ([("content-type", "application/json")], body.to_string()).into_response()
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.draining.is_cancelled() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining").into_response()
    } else {
        "ready".into_response()
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    ([("content-type", "text/plain; version=0.0.4")], state.shared.metrics.render()).into_response()
}

/// A bound server, ready to run.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: Arc<AppState>,
    extra: Option<Router>,
}

impl Server {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr, state: Arc<AppState>) -> Result<Self, ServeError> {
        let listener = switchboard_serve::drain::bind(addr).await?;
        Ok(Self { listener, state, extra: None })
    }

    /// Also serves `routes` (local mode's web page).
    pub fn with_routes(mut self, routes: Router) -> Self {
        self.extra = Some(routes);
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        self.listener.local_addr().map_err(|e| ServeError::Serve(e.to_string()))
    }

    /// The shared state (tests and local mode read metrics and tokens from it).
    pub fn state(&self) -> Arc<AppState> {
        self.state.clone()
    }

    /// Serves until `stop` resolves, then drains: readiness goes false and new sessions
    /// are refused at once; live sessions may finish within the drain timeout; then the
    /// rest are closed with 1001 and the server stops.
    pub async fn run(self, stop: impl std::future::Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let state = self.state.clone();
        let app = match self.extra {
            Some(extra) => router(state.clone()).merge(extra),
            None => router(state.clone()),
        };
        let drain = switchboard_serve::Drain {
            draining: state.draining.clone(),
            shutdown: state.shutdown.clone(),
            tracker: state.tracker.clone(),
            timeout: state.config.drain_timeout,
            // The gateway stops sending sessions here at once: nothing arrives late.
            linger: Duration::ZERO,
            limits: state.config.http,
            on_refused: {
                let refused = state.shared.metrics.errors.with_label_values(&["", "max_connections"]);
                switchboard_serve::OnRefused::new(move || refused.inc())
            },
        };
        drain.serve(self.listener, app, stop).await
    }
}
