//! Signalling over HTTP, as WHIP (RFC 9725) has it: `POST /v1/webrtc` with an SDP offer
//! (`application/sdp`; `?agent=` and `?access_token=` as on `/v1/session`) is answered
//! `201 Created` with the SDP answer and the call's resource in `Location`; `PATCH` on it
//! with `application/trickle-ice-sdpfrag` adds candidates (`204`) or restarts ICE (`200`
//! with the edge's new credentials as a fragment); `DELETE` ends the call and its session.
//!
//! The JSON form, for clients that prefer it: the same `POST` with `application/json`
//! `{"type": "offer", "sdp": "..."}` is answered `201` with `{"type": "answer", "sdp",
//! "location", "ice_servers"}` (`ice_servers` as the browser's `RTCIceServer`s). Either
//! form's `201` carries the TURN servers configured for callers ([`crate::turn`]), each with
//! a credential of this call's, as `Link: <turn:...>; rel="ice-server"; username=...;
//! credential=...` headers (RFC 9725, 4.6).
//!
//! An offer is admitted before it is read: the gateway's session slots, then credentials
//! and Origin by [`switchboard_gateway::server::admit`] — the code `/v1/session` runs, so the rules are
//! one — each refusal an HTTP status with a JSON body `{"code", "message"}` (`401` for a
//! missing or wrong credential, `403` an Origin, `429` a credential's limits, `503` the
//! gateway's). Then the offer is checked ([`switchboard_webrtc::Offer::parse`]): `400`
//! naming what is wrong. The Agent and the credential's scope are checked when the data
//! channel's `session_start` opens the session, as on a WebSocket (refusals arrive there).
//! The resource's id is a random 128-bit name: holding it is what `PATCH` and `DELETE`
//! ask, as WHIP's resource URLs. A `PATCH` whose fragment names an ICE session by
//! `a=ice-ufrag` alone (trickled candidates, RFC 8840) that is not the call's is answered
//! `412` (`other_ice_session`), as is one whose `If-Match` is not the call's ICE session's
//! entity-tag: the `ETag` of the `201` and of each ICE restart's `200` (RFC 9725, 4.3.1;
//! `If-Match: *` always holds).
//!
//! Pages of other origins: `OPTIONS` answers browsers' preflights on both paths, and every
//! response carries the CORS headers, for the origins the gateway allows ([`crate::cors`]).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use serde::Deserialize;
use switchboard_core::protocol::ErrorCode;
use switchboard_webrtc::offer::MAX_OFFER_BYTES;
use switchboard_webrtc::trickle::MAX_FRAGMENT_BYTES;
use switchboard_webrtc::{Call, CallError, Fragment, FragmentError, Offer};
use tokio::sync::{mpsc, oneshot};

use super::call::{self, Setup};
use super::demux::ufrag_of;
use super::{Command, Edge, WEBRTC_PATH};
use crate::cors;
use crate::turn::IceServer;
use switchboard_gateway::Gateway;
use switchboard_gateway::auth::Refusal;

/// Commands queued per call: a few PATCHes and a DELETE.
const COMMANDS: usize = 8;
/// Datagrams queued per call before the socket task drops them (about a second of audio
/// and data both ways at 50 packets a second).
const DATAGRAMS: usize = 256;

#[derive(Clone, Debug)]
struct EdgeState {
    gateway: Arc<Gateway>,
    edge: Arc<Edge>,
}

/// The edge's routes, with CORS for pages of the origins the gateway allows ([`cors`]).
pub fn routes(gateway: Arc<Gateway>, edge: Arc<Edge>) -> Router {
    let resource = format!("{WEBRTC_PATH}/{{id}}");
    let offers = post(offer).options(offer_preflight).layer(DefaultBodyLimit::max(MAX_OFFER_BYTES));
    let calls = patch(trickle).delete(end).options(resource_preflight);
    Router::new()
        .route(WEBRTC_PATH, offers)
        .route(&resource, calls.layer(DefaultBodyLimit::max(MAX_FRAGMENT_BYTES)))
        .layer(middleware::from_fn_with_state(gateway.clone(), cors::headers))
        .with_state(EdgeState { gateway, edge })
}

/// The routes without an edge: each answers 404 saying how to turn it on (with CORS as the
/// edge's, so a page of another origin reads why and falls back to the WebSocket).
pub fn off(gateway: Arc<Gateway>) -> Router {
    let resource = format!("{WEBRTC_PATH}/{{id}}");
    let off = || async {
        error(StatusCode::NOT_FOUND, "webrtc_off", "WebRTC is off on this gateway: start it with --webrtc-udp")
    };
    let preflight = |methods: &'static str| {
        move |State(gateway): State<Arc<Gateway>>, headers: HeaderMap| async move {
            cors::preflight(&gateway, &headers, methods)
        }
    };
    Router::new()
        .route(WEBRTC_PATH, post(off).options(preflight(cors::OFFER_METHODS)))
        .route(&resource, patch(off).delete(off).options(preflight(cors::RESOURCE_METHODS)))
        .layer(middleware::from_fn_with_state(gateway.clone(), cors::headers))
        .with_state(gateway)
}

async fn offer_preflight(State(EdgeState { gateway, .. }): State<EdgeState>, headers: HeaderMap) -> Response {
    cors::preflight(&gateway, &headers, cors::OFFER_METHODS)
}

async fn resource_preflight(State(EdgeState { gateway, .. }): State<EdgeState>, headers: HeaderMap) -> Response {
    cors::preflight(&gateway, &headers, cors::RESOURCE_METHODS)
}

#[derive(Debug, Deserialize)]
struct OfferQuery {
    agent: Option<String>,
    access_token: Option<String>,
}

async fn offer(
    State(EdgeState { gateway, edge }): State<EdgeState>,
    Query(query): Query<OfferQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Who may call, before anything of the offer is read.
    let (permit, admitted) = switchboard_gateway::server::admit(&gateway, &headers, query.access_token.as_deref());
    let (permit, admission) = match (permit, admitted) {
        (Some(permit), Ok(admission)) => (permit, admission),
        (_, Err(refusal)) => return refused(&gateway, refusal),
        (None, Ok(_)) => {
            return error(StatusCode::SERVICE_UNAVAILABLE, "at_capacity", "no session slot; try again later");
        }
    };
    let json = content_type_is(&headers, "application/json");
    if !json && !content_type_is(&headers, "application/sdp") {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "not_sdp",
            "POST an SDP offer with Content-Type: application/sdp (or {\"type\":\"offer\",\"sdp\":...} as application/json)",
        );
    }
    let body = if json {
        match serde_json::from_slice::<JsonOffer>(&body) {
            Ok(JsonOffer { kind, sdp }) if kind == "offer" => Bytes::from(sdp),
            Ok(JsonOffer { kind, .. }) => {
                let message = format!("the JSON form's type is {kind:?}: POST an \"offer\"");
                return error(StatusCode::BAD_REQUEST, "not_an_offer", &message);
            }
            Err(e) => {
                let message = format!("the JSON form is {{\"type\":\"offer\",\"sdp\":\"...\"}}: {e}");
                return error(StatusCode::BAD_REQUEST, "malformed_json", &message);
            }
        }
    } else {
        body
    };
    let Ok(slot) = edge.slots.clone().try_acquire_owned() else {
        gateway.metrics.refused.with_label_values(&["webrtc_calls"]).inc();
        let message = format!("the gateway is at its limit of {} WebRTC calls; try again later", edge.max_calls);
        return error(StatusCode::SERVICE_UNAVAILABLE, "at_capacity", &message);
    };
    let offer = match Offer::parse(&body, edge.call_config.rules) {
        Ok(offer) => offer,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.code(), &e.to_string()),
    };
    let (call, answer) = match Call::accept(offer, edge.call_config.clone(), Instant::now()) {
        Ok(accepted) => accepted,
        Err(CallError::Offer(e)) => return error(StatusCode::BAD_REQUEST, e.code(), &e.to_string()),
        Err(e) => {
            tracing::warn!(error = %e, "a WebRTC call could not be set up");
            return error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &format!("the call could not be set up: {e}"));
        }
    };
    let Some(ufrag) = ufrag_of(&answer) else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the answer has no ICE credentials");
    };
    let etag = call.ice_session_tag();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let ice_servers = edge.turn.servers(&id, SystemTime::now());
    let number = edge.next_call.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (datagrams_tx, datagrams) = mpsc::channel(DATAGRAMS);
    let (commands_tx, commands) = mpsc::channel(COMMANDS);
    edge.demux.add(number, ufrag, datagrams_tx);
    edge.register(id.clone(), commands_tx);
    let setup = Setup {
        gateway: gateway.clone(),
        edge,
        id: id.clone(),
        number,
        call,
        agent: query.agent,
        admission,
        permit,
        slot,
        datagrams,
        commands,
    };
    gateway.tracker.spawn(call::run(setup));
    let location = format!("{WEBRTC_PATH}/{id}");
    let mut response = if json {
        let body = serde_json::json!({
            "type": "answer",
            "sdp": answer,
            "location": location,
            "ice_servers": ice_servers,
        });
        (StatusCode::CREATED, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
    } else {
        let mut response = (StatusCode::CREATED, answer).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/sdp"));
        response
    };
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(&location) {
        headers.insert(header::LOCATION, location);
    }
    // The ICE session's entity-tag (a ufrag is ice-chars: always a header value).
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, etag);
    }
    // Validated at start: every link is a header value.
    for link in ice_servers.iter().flat_map(IceServer::links) {
        if let Ok(link) = HeaderValue::from_str(&link) {
            headers.append(header::LINK, link);
        }
    }
    response
}

/// The JSON form of an offer.
#[derive(Debug, Deserialize)]
struct JsonOffer {
    #[serde(rename = "type")]
    kind: String,
    sdp: String,
}

async fn trickle(
    State(EdgeState { edge, .. }): State<EdgeState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(commands) = edge.commands(&id) else { return unknown() };
    if !content_type_is(&headers, "application/trickle-ice-sdpfrag") {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "not_sdpfrag",
            "PATCH ICE candidates or an ICE restart with Content-Type: application/trickle-ice-sdpfrag",
        );
    }
    let fragment = match Fragment::parse(&body) {
        Ok(fragment) => fragment,
        Err(e) => return error(StatusCode::BAD_REQUEST, "malformed_sdpfrag", &e.to_string()),
    };
    // WHIP's precondition: the ICE session the client last heard of (or `*`).
    let if_match = headers.get(header::IF_MATCH).map(|v| v.to_str().unwrap_or("(not text)").to_owned());
    let (reply, answer) = oneshot::channel();
    if commands.send(Command::Patch(fragment, if_match, reply)).await.is_err() {
        return unknown();
    }
    match tokio::time::timeout(Duration::from_secs(5), answer).await {
        Ok(Ok(Ok(None))) => StatusCode::NO_CONTENT.into_response(),
        Ok(Ok(Ok(Some(fragment)))) => {
            let etag = ufrag_of(&fragment).map(|ufrag| switchboard_webrtc::trickle::ice_session_tag(&ufrag));
            let mut response = (StatusCode::OK, fragment).into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/trickle-ice-sdpfrag"));
            // The restarted ICE session's entity-tag.
            if let Some(etag) = etag.and_then(|etag| HeaderValue::from_str(&etag).ok()) {
                headers.insert(header::ETAG, etag);
            }
            response
        }
        // The ICE session the request is for is not the call's: its `If-Match` names an
        // earlier one (WHIP: 412), or its candidates' ufrag does (RFC 8840).
        Ok(Ok(Err(
            why @ (CallError::StaleIceSession { .. } | CallError::Fragment(FragmentError::OtherIceSession { .. })),
        ))) => error(StatusCode::PRECONDITION_FAILED, "other_ice_session", &why.to_string()),
        Ok(Ok(Err(why))) => error(StatusCode::BAD_REQUEST, "patch_refused", &why.to_string()),
        Ok(Err(_)) => unknown(),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "busy", "the call did not answer in time; try again"),
    }
}

async fn end(State(EdgeState { edge, .. }): State<EdgeState>, Path(id): Path<String>) -> Response {
    let Some(commands) = edge.take_commands(&id) else { return unknown() };
    if commands.send(Command::End).await.is_err() {
        return unknown();
    }
    StatusCode::OK.into_response()
}

fn unknown() -> Response {
    error(StatusCode::NOT_FOUND, "unknown_call", "no such WebRTC call: it ended, or never was")
}

/// A refused admission as HTTP: the status for its reason, counted as the WebSocket's are.
fn refused(gateway: &Gateway, refusal: Refusal) -> Response {
    gateway.metrics.refused.with_label_values(&[refusal.reason.metric_label()]).inc();
    let status = match refusal.reason {
        ErrorCode::MissingKey | ErrorCode::UnknownKey | ErrorCode::InvalidToken => StatusCode::UNAUTHORIZED,
        ErrorCode::KeySessions | ErrorCode::KeyRate => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::AtCapacity | ErrorCode::MemoryBudget => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::FORBIDDEN,
    };
    let mut response = error(status, refusal.reason.as_str(), &refusal.message);
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

pub(crate) fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "code": code, "message": message });
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn content_type_is(headers: &HeaderMap, wanted: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(wanted))
}
