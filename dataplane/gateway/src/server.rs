//! The gateway's HTTP side: `/v1/session` (WebSocket, the session protocol), the routes of
//! other client channels ([`crate::channels`]: the WebRTC edge's `/v1/webrtc`), `/healthz`,
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
use switchboard_core::outbound;
use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};
use switchboard_crds::contract;
use switchboard_serve::frames::{self, Upgrade};
use tokio::net::TcpListener;
use tokio::sync::OwnedSemaphorePermit;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::Gateway;
use crate::auth::{Admission, Refusal};
use crate::channels::Channel;
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
        let in_effect = gateway.directory.borrow().table().outages_in_effect();
        gateway.outages.observe(in_effect.iter().map(|(agent, outage)| (agent, outage)));
        let mut text = gateway.metrics.render();
        text.push_str(&gateway.capacity.metrics.render());
        text.push_str(&gateway.outages.metrics.render());
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
        .route(outbound::CALLS_PATH, axum::routing::post(crate::calls::api::place))
        .route(outbound::EDGE_PATH, get(crate::calls::api::edge))
        .route(&format!("{}/{{id}}", outbound::CALLS_PATH), get(crate::calls::api::show))
        .route(RECORD_PATH, get(crate::record::api::list))
        .route(&format!("{RECORD_PATH}/{{id}}"), get(crate::record::api::show))
        .route(crate::record::VARIANTS_PATH, get(crate::record::api::compare))
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
    // An answered outbound call's session: its SIP edge presents the call's one-time ticket
    // (told to no one else), and the session starts with the call in its memory. A ticket
    // that opens nothing is refused like client-set context. With answering-machine
    // detection the edge says who answered beside the ticket (a value that names nobody is
    // refused as a bad ticket is; without a ticket the header is ignored).
    let call = match (&admitted, headers.get(outbound::TICKET_HEADER)) {
        (Ok(_), Some(ticket)) => match answered_by(&headers) {
            Ok(by) => match ticket.to_str().ok().and_then(|t| gateway.calls.redeem(t, by)) {
                Some(call) => Some(Ok(call)),
                None => Some(Err(format!(
                    "the {} header names no outbound call under way (its ticket is used once, by the SIP edge that placed the call)",
                    outbound::TICKET_HEADER
                ))),
            },
            Err(message) => Some(Err(message)),
        },
        _ => None,
    };
    let admitted = match (admitted, &call) {
        (Ok(_), Some(Err(message))) => {
            Err(Refusal { code: close_code::BAD_START, message: message.clone(), reason: ErrorCode::ContextRefused })
        }
        (admitted, _) => admitted,
    };
    let call = call.and_then(Result::ok);
    // An inbound call's session: its SIP edge vouches for the caller's number and the number
    // dialled (ignored from anyone else, see `crate::phone`).
    let phone = if admitted.is_ok() { crate::phone::vouched(&gateway.auth, &headers) } else { None };
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
        tracker.track_future(crate::session::serve_call(socket, gateway, query.agent, admission, call, phone)).await;
        drop(permit);
    })
}

/// Who answered an outbound call, as its edge's [`outbound::ANSWERED_BY_HEADER`] says
/// (absent: the Agent has no answering-machine detection); a value that names nobody is an
/// error saying what it should be.
fn answered_by(headers: &HeaderMap) -> Result<Option<outbound::AnsweredBy>, String> {
    let Some(value) = headers.get(outbound::ANSWERED_BY_HEADER) else { return Ok(None) };
    value.to_str().ok().and_then(outbound::AnsweredBy::parse).map(Some).ok_or_else(|| {
        format!("the {} header is not human, machine or unknown: {value:?}", outbound::ANSWERED_BY_HEADER)
    })
}

/// Admits a client: a session slot of the gateway (none while draining, at the session
/// limit or over the memory budget), then its credential and Origin ([`crate::auth`]). Every
/// channel takes its sessions through here: the WebSocket before its upgrade, the WebRTC
/// edge before it answers an offer ([`crate::channels`]). The permit, when there is one, is
/// the session's slot: held until its session ends.
pub fn admit(
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
    /// Client channels beside the WebSocket.
    channels: Vec<Arc<dyn Channel>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listener", &self.listener)
            .field("gateway", &self.gateway)
            .field("extra_routes", &self.extra.is_some())
            .field("more_metrics", &self.more_metrics.is_some())
            .field("channels", &self.channels)
            .finish()
    }
}

impl Server {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr, gateway: Arc<Gateway>) -> Result<Self, ServeError> {
        let listener = switchboard_serve::drain::bind(addr).await?;
        Ok(Self { listener, gateway, extra: None, more_metrics: None, channels: Vec::new() })
    }

    /// Also serves `routes` (local mode's web page); each call adds to the last.
    pub fn with_routes(mut self, routes: Router) -> Self {
        self.extra = Some(match self.extra.take() {
            Some(extra) => extra.merge(routes),
            None => routes,
        });
        self
    }

    /// Also serves `channel` (its routes, its task, its metrics).
    pub fn with_channel(mut self, channel: Arc<dyn Channel>) -> Self {
        self.channels.push(channel);
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
        let channels = self.channels;
        let more_metrics = match (self.more_metrics, channels.is_empty()) {
            (more, true) => more,
            (more, false) => {
                let channels = channels.clone();
                Some(Arc::new(move || {
                    let mut text: String = channels.iter().map(|c| c.render_metrics()).collect();
                    if let Some(more) = &more {
                        text.push_str(&more());
                    }
                    text
                }) as MoreMetrics)
            }
        };
        // Sessions under way hear of outage switches through this one follower.
        let follower = gateway.clone();
        tokio::spawn(async move {
            follower.outages.switches.follow(follower.directory.clone(), follower.shutdown.clone()).await;
        });
        let mut routes = app(gateway.clone(), more_metrics);
        for channel in channels {
            tokio::spawn(channel.clone().run(gateway.clone()));
            routes = routes.merge(channel.routes(gateway.clone()));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_answered_is_one_of_three_words_or_absent() {
        let mut headers = HeaderMap::new();
        assert_eq!(answered_by(&headers), Ok(None));
        headers.insert(outbound::ANSWERED_BY_HEADER, "machine".parse().expect("a value"));
        assert_eq!(answered_by(&headers), Ok(Some(outbound::AnsweredBy::Machine)));
        headers.insert(outbound::ANSWERED_BY_HEADER, "robot".parse().expect("a value"));
        let error = answered_by(&headers).expect_err("names nobody");
        assert!(error.contains("x-switchboard-answered-by header is not human, machine or unknown"), "{error}");
    }
}
