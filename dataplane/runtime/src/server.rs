//! The HTTP side of a runtime: `/v1/session` (WebSocket, the session protocol),
//! `/healthz` (200 while the process serves, with a JSON body: `status`,
//! `active_sessions`, `max_sessions`, `draining`), `/readyz` (false as soon as draining
//! starts) and `/metrics`; session limits; and the drain on shutdown. The server's own
//! graceful shutdown does not wait for upgraded WebSockets, so every session runs on a
//! [`TaskTracker`](tokio_util::task::TaskTracker) and two
//! [`CancellationToken`](tokio_util::sync::CancellationToken)s mark the phases: `draining` (no new
//! sessions, not ready) and `shutdown` (live sessions are closed with 1001). The listener
//! itself (timeouts, connection cap) is `switchboard_serve::server`.
//!
//! A connection is admitted in two steps: before the upgrade it takes a place among the
//! connections still opening (`max_opening_connections`; past it, HTTP 503); a session slot
//! (`max_sessions`) is taken only once its `session_start` has passed the grant check, and
//! the opening place is then given back. A connection with no valid `session_start`
//! within `start_timeout` is closed with 4408, so sockets without a grant hold no session
//! slot and only a bounded, short-lived share of the opening places.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};
use switchboard_crds::contract;
use tokio::net::TcpListener;

pub use super::state::{AppState, CONNECTION_HEADROOM, Directory, ServerConfig};

pub use switchboard_serve::ServeError;
use switchboard_serve::frames::{self, CloseFrame, Message, Upgrade, Utf8Bytes};

/// How long a refused client's socket is kept to send it why.
const REFUSAL_LINGER: Duration = Duration::from_secs(2);

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
    upgrade: Upgrade,
) -> Response {
    // The socket's limit lets the first message be a signed session_start as large as a
    // gateway may send; the reader holds every later message to the configured limit.
    let limit = state.config.max_message_bytes.max(switchboard_core::grant::MAX_START_BYTES);
    let limits = frames::Limits { max_message: limit, max_frame: limit };
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
        return upgrade.on_upgrade(limits, move |mut socket| async move {
            let _opening = opening;
            let message = format!(
                "pages from {origin} may not open sessions here; start the server with --allowed-origin {origin} to allow it"
            );
            let error = ServerMessage::error(ErrorCode::Origin, message, false);
            let _ = socket.feed(Message::text(error.to_json()));
            let reason = Utf8Bytes::from_static("origin not allowed");
            let close = CloseFrame { code: close_code::ORIGIN_NOT_ALLOWED.into(), reason };
            if let Ok(Ok(())) = tokio::time::timeout(REFUSAL_LINGER, socket.close(Some(close))).await {
                // Read what the client already sent until its close: dropped unread, the
                // socket is reset and the reset can overtake the close frame.
                socket.linger(REFUSAL_LINGER).await;
            }
        });
    }
    // The session slot is taken only after the grant check (`connection`).
    upgrade.on_upgrade(limits, move |socket| async move {
        tracker.track_future(super::connection::serve(socket, state, query.agent, opening)).await;
    })
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
