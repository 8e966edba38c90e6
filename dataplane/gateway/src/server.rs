//! The gateway's HTTP side: `/v1/session` (WebSocket, the session protocol), `/v1/webrtc`
//! (the WebRTC edge's signalling, [`crate::webrtc`]), `/healthz`,
//! `/readyz` (a routing table is loaded and the gateway is not draining) and `/metrics`;
//! the session cap, taken before the upgrade; and the drain on shutdown — readiness false,
//! new sessions refused with 1013 (the listener stays open for the shutdown delay, so a
//! connection the Service still sends here gets a close code, not a failed handshake), live
//! ones given the drain timeout, then closed with 1001 and a reason that tells clients to
//! reconnect.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};
use switchboard_crds::contract;
use switchboard_serve::frames::{self, Upgrade};
use tokio::net::TcpListener;
use tokio::sync::OwnedSemaphorePermit;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::Gateway;
use crate::auth::{Admission, Refusal};
use crate::session::ClientIo;

pub use switchboard_serve::ServeError;

/// The conversation record's API ([`crate::record::api`]).
pub use crate::record::RECORD_PATH;

/// Metrics of another part of the process, rendered after the gateway's own on `/metrics`
/// (local mode adds its runtime's).
pub type MoreMetrics = Arc<dyn Fn() -> String + Send + Sync>;

/// The router of a gateway.
pub fn router(gateway: Arc<Gateway>) -> Router {
    app(gateway, None)
}

fn app(gateway: Arc<Gateway>, more_metrics: Option<MoreMetrics>) -> Router {
    let metrics = move |State(gateway): State<Arc<Gateway>>, headers: HeaderMap| async move {
        // Local mode's metrics only to this machine's own requests (not a rebound web page).
        if let Err(refused) = gateway.auth.open_data(&headers) {
            return refused.into_response();
        }
        let held = i64::try_from(gateway.budget.held()).unwrap_or(i64::MAX);
        gateway.metrics.memory_held.set(held);
        gateway.metrics.memory_budget.set(gateway.budget.limit().map_or(0, |b| i64::try_from(b).unwrap_or(i64::MAX)));
        // Agents gone from the table leave no stale series.
        gateway.metrics.agent_ready_pods.reset();
        for (agent, ready) in gateway.directory.borrow().ready_pods() {
            gateway.metrics.agent_ready_pods.with_label_values(&[&agent]).set(ready as f64);
        }
        gateway.capacity.observe().await;
        let mut text = gateway.metrics.render();
        text.push_str(&gateway.capacity.metrics.render());
        if let Some(record) = &gateway.record {
            text.push_str(&record.metrics.render());
        }
        if let Some(more) = &more_metrics {
            text.push_str(&more());
        }
        ([("content-type", "text/plain; version=0.0.4")], text).into_response()
    };
    Router::new()
        .route(contract::SESSION_PATH, get(session))
        .route(contract::HEALTH_PATH, get(|| async { "ok" }))
        .route(contract::READY_PATH, get(readyz))
        .route(contract::METRICS_PATH, get(metrics))
        .route(RECORD_PATH, get(crate::record::api::list))
        .route(&format!("{RECORD_PATH}/{{id}}"), get(crate::record::api::show))
        .with_state(gateway)
}

#[derive(Debug, Deserialize)]
struct SessionQuery {
    agent: Option<String>,
    /// A credential for browsers, which cannot set headers on a WebSocket request.
    access_token: Option<String>,
}

async fn session(
    State(gateway): State<Arc<Gateway>>,
    Query(query): Query<SessionQuery>,
    headers: HeaderMap,
    upgrade: Upgrade,
) -> Response {
    let limit = gateway.config.max_message_bytes;
    // Session slots and keys are checked before the upgrade; the refusal is told over the
    // socket, with its close code, so a client sees why.
    let (permit, admitted) = admit(&gateway, &headers, query.access_token.as_deref());
    let tracker = gateway.tracker.clone();
    let limits = frames::Limits { max_message: limit, max_frame: limit };
    upgrade.on_upgrade(limits, move |mut socket| async move {
        let admission = match admitted {
            Ok(admission) => admission,
            Err(refusal) => {
                gateway.metrics.refused.with_label_values(&[refusal.reason.metric_label()]).inc();
                let reason = Utf8Bytes::from(refusal.reason.as_str().replace('_', " "));
                let message = ServerMessage::error(refusal.reason, refusal.message, false);
                let _ = socket.send(Message::text(message.to_json())).await;
                let _ = socket.close(Some(CloseFrame { code: refusal.code.into(), reason })).await;
                // Read what the client already sent (its `session_start`) until its close:
                // dropped unread, the socket is reset and the reset can overtake the close
                // frame, so the client sees 1006 instead of why it was refused.
                socket.linger(crate::session::REFUSAL_LINGER).await;
                return;
            }
        };
        let socket = socket.map_io(ClientIo::Socket);
        tracker.track_future(crate::session::serve(socket, gateway, query.agent, admission)).await;
        drop(permit);
    })
}

/// Admits a client: a session slot of the gateway (none while draining, at the session
/// limit or over the memory budget), then its credential and Origin ([`crate::auth`]). Every
/// channel takes its sessions through here: the WebSocket before its upgrade, the WebRTC
/// edge before it answers an offer.
pub(crate) fn admit(
    gateway: &Gateway,
    headers: &HeaderMap,
    query_token: Option<&str>,
) -> (Option<OwnedSemaphorePermit>, Result<Admission, Refusal>) {
    let permit = gateway.sessions.clone().try_acquire_owned().ok();
    let admitted = if gateway.draining.is_cancelled() {
        Err(try_again("the gateway is draining; reconnect to another instance"))
    } else if permit.is_none() {
        Err(try_again(&format!("the gateway is at its limit of {} sessions", gateway.config.max_sessions)))
    } else if !gateway.budget.admits() {
        Err(Refusal {
            reason: ErrorCode::MemoryBudget,
            ..try_again(&format!(
                "the gateway's sessions hold {} MiB, at its memory budget of {} MiB",
                gateway.budget.held() >> 20,
                gateway.budget.limit().unwrap_or_default() >> 20
            ))
        })
    } else {
        gateway.auth.admit(headers, query_token)
    };
    (permit, admitted)
}

fn try_again(why: &str) -> Refusal {
    Refusal {
        code: close_code::TRY_AGAIN_LATER,
        message: format!("{why}; try again later"),
        reason: ErrorCode::AtCapacity,
    }
}

async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    if gateway.draining.is_cancelled() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining").into_response()
    } else if !gateway.directory.borrow().is_loaded() {
        (StatusCode::SERVICE_UNAVAILABLE, "no routing table yet").into_response()
    } else {
        "ready".into_response()
    }
}

/// A bound gateway server.
pub struct Server {
    listener: TcpListener,
    gateway: Arc<Gateway>,
    extra: Option<Router>,
    more_metrics: Option<MoreMetrics>,
    /// The WebRTC edge, when configured.
    edge: Option<Arc<crate::webrtc::Edge>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listener", &self.listener)
            .field("gateway", &self.gateway)
            .field("extra_routes", &self.extra.is_some())
            .field("more_metrics", &self.more_metrics.is_some())
            .field("webrtc", &self.edge.as_ref().map(|e| e.advertised()))
            .finish()
    }
}

impl Server {
    /// Binds `addr`, and the WebRTC edge's UDP socket when the gateway has one.
    pub async fn bind(addr: SocketAddr, gateway: Arc<Gateway>) -> Result<Self, ServeError> {
        let listener = switchboard_serve::drain::bind(addr).await?;
        let edge = match &gateway.config.webrtc {
            Some(config) => Some(
                crate::webrtc::Edge::bind(config, gateway.config.max_message_bytes)
                    .await
                    .map_err(|e| ServeError::Serve(e.to_string()))?,
            ),
            None => None,
        };
        Ok(Self { listener, gateway, extra: None, more_metrics: None, edge })
    }

    /// Where WebRTC clients reach the edge (the address in its answers), when on.
    pub fn webrtc_addr(&self) -> Option<SocketAddr> {
        self.edge.as_ref().map(|e| e.advertised())
    }

    /// Where the WebRTC edge's socket is bound, when on (not the advertised address behind
    /// a NAT).
    pub fn webrtc_bound(&self) -> Option<SocketAddr> {
        self.edge.as_ref().map(|e| e.bound())
    }

    /// Also serves `routes` (local mode's web page).
    pub fn with_routes(mut self, routes: Router) -> Self {
        self.extra = Some(routes);
        self
    }

    /// Also renders `more` on `/metrics`, after the gateway's own metrics.
    pub fn with_more_metrics(mut self, more: MoreMetrics) -> Self {
        self.more_metrics = Some(more);
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        self.listener.local_addr().map_err(|e| ServeError::Serve(e.to_string()))
    }

    /// Serves until `stop` resolves, then drains (see the module docs).
    pub async fn run(self, stop: impl std::future::Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let gateway = self.gateway;
        let mut routes = app(gateway.clone(), self.more_metrics);
        if let Some(edge) = &self.edge {
            tokio::spawn(edge.clone().receive(gateway.shutdown.clone()));
        }
        routes = routes.merge(crate::webrtc::http::routes(gateway.clone(), self.edge));
        if let Some(extra) = self.extra {
            routes = routes.merge(extra);
        }
        let drain = switchboard_serve::Drain {
            draining: gateway.draining.clone(),
            shutdown: gateway.shutdown.clone(),
            tracker: gateway.tracker.clone(),
            timeout: gateway.config.drain_timeout,
            // Until every proxy has dropped this replica, connections still arrive: they are
            // answered (1013, try again) rather than refused by a closed listener.
            linger: gateway.config.shutdown_delay,
            limits: gateway.config.http,
            on_refused: {
                let refused = gateway.metrics.refused.with_label_values(&["max_connections"]);
                switchboard_serve::OnRefused::new(move || refused.inc())
            },
        };
        drain.serve(self.listener, routes, stop).await
    }
}
