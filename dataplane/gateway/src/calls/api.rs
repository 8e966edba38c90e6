//! The HTTP side of outbound calls: `POST /v1/calls` places one (201 with its status),
//! `GET /v1/calls/{id}` reads it (only its credential), and `GET /v1/calls/edge` is the SIP
//! edge's WebSocket: the calls to place go down it, their progress comes back up (and, for
//! a call that names a `statusCallback`, goes on to it: [`super::webhook`]). Errors
//! are `{"error": code, "message": ...}` with the HTTP status.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use switchboard_core::outbound::FromEdge;
use switchboard_serve::frames::{self, Upgrade};
use tokio_tungstenite::tungstenite::Message;

use super::{CallError, PlaceRequest};
use crate::auth::{CallAccess, ReadRefusal};
use crate::{Gateway, Reach, RouteError};

/// The largest message taken from an edge (a progress report is well under it).
const MAX_EDGE_MESSAGE: usize = 16 * 1024;

fn error(status: u16, code: &str, message: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, Json(serde_json::json!({ "error": code, "message": message }))).into_response()
}

impl IntoResponse for CallError {
    fn into_response(self) -> Response {
        error(self.status(), self.code(), self.to_string())
    }
}

/// `POST /v1/calls`.
pub async fn place(State(gateway): State<Arc<Gateway>>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let (owner, scope) = match gateway.auth.calls(&headers, CallAccess::Place) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let request: PlaceRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            let message = format!(
                "the body is not a call: {e} (send {{\"to\": ..., \"agent\": ..., \"variables\": {{...}}, \"trunk\": ..., \
                 \"statusCallback\": ...}})"
            );
            return CallError::Invalid(message).into_response();
        }
    };
    let routed = gateway.directory.borrow().for_client(Some(request.agent.as_str()), Reach::Live);
    let target = match routed {
        Ok(target) => target,
        Err(e @ (RouteError::NoDefault | RouteError::Unknown(_) | RouteError::UnknownNumber(_))) => {
            return error(404, "unknown_agent", e.to_string());
        }
        Err(e @ RouteError::NotExposed(_)) => return error(403, "not_exposed", e.to_string()),
        Err(e) => return error(503, e.metric_label(), e.to_string()),
    };
    let route = &target.route;
    if !scope.allows_agent(&route.namespace, &route.name) {
        let message = format!("this credential may not reach {}/{}; it may reach {scope}", route.namespace, route.name);
        return error(403, "agent_not_allowed", message);
    }
    match gateway.calls.place_with(
        &owner,
        (&route.namespace, &route.name),
        route.answering_machine.clone(),
        request,
        Instant::now(),
    ) {
        Ok(status) => (StatusCode::CREATED, Json(status)).into_response(),
        Err(refused) => {
            tracing::info!(code = refused.code(), "outbound call refused: {refused}");
            refused.into_response()
        }
    }
}

/// `GET /v1/calls/{id}`.
pub async fn show(State(gateway): State<Arc<Gateway>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let owner = match gateway.auth.calls(&headers, CallAccess::Place) {
        Ok((owner, _)) => owner,
        Err(refused) => return refused.into_response(),
    };
    match gateway.calls.status(&owner, &id) {
        Some(status) => Json(status).into_response(),
        None => {
            error(404, "unknown_call", format!("no call {id:?} of this credential (finished calls are kept an hour)"))
        }
    }
}

/// `GET /v1/calls/edge`: a SIP edge's dispatch connection.
pub async fn edge(State(gateway): State<Arc<Gateway>>, headers: HeaderMap, upgrade: Upgrade) -> Response {
    if let Err(ReadRefusal { status, code, message }) = gateway.auth.calls(&headers, CallAccess::Edge) {
        return error(status, code, message);
    }
    let limits = frames::Limits { max_message: MAX_EDGE_MESSAGE, max_frame: MAX_EDGE_MESSAGE };
    upgrade.on_upgrade(limits, move |mut socket| async move {
        let (id, mut to_edge) = gateway.calls.attach();
        tracing::info!(edge = id, "a SIP edge takes outbound calls");
        let draining = gateway.draining.clone();
        loop {
            tokio::select! {
                next = to_edge.recv() => {
                    let Some(place) = next else { break };
                    let Ok(text) = serde_json::to_string(&place) else { continue };
                    if socket.send(Message::text(text)).await.is_err() {
                        break;
                    }
                }
                frame = futures_util::StreamExt::next(&mut socket) => match frame {
                    Some(Ok(Message::Text(text))) => match serde_json::from_str::<FromEdge>(text.as_str()) {
                        Ok(report) => gateway.calls.report(id, report, Instant::now()),
                        Err(e) => tracing::warn!(edge = id, "a report from the SIP edge does not read: {e}"),
                    },
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                },
                () = draining.cancelled() => {
                    let _ = socket.close(None).await;
                    break;
                }
            }
        }
        gateway.calls.detach(id, Instant::now());
        tracing::info!(edge = id, "the SIP edge's dispatch connection ended");
    })
}
