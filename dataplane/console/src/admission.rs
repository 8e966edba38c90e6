//! Who may use the console's data routes (`GET /v1/agents`, the live view's): the same
//! admission a session's WebSocket gets from the gateway, answered as HTTP. The page and its
//! assets need none (they hold no data).

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use switchboard_core::protocol::{ErrorCode, close_code};
use switchboard_gateway::Gateway;
use switchboard_gateway::auth::Scope;

/// The check a session's WebSocket gets (the slot it holds is let go at once): the
/// credential's scope, or the answer that refuses it.
pub(crate) fn admit(
    gateway: &Gateway,
    headers: &HeaderMap,
    token: Option<&str>,
) -> Result<Arc<Scope>, (StatusCode, Json<serde_json::Value>)> {
    match gateway.auth.admit(headers, token) {
        Ok(admission) => Ok(admission.scope.clone()),
        Err(refusal) => {
            let status = match refusal.reason {
                ErrorCode::Origin => StatusCode::FORBIDDEN,
                _ if refusal.code == close_code::TOO_MANY_SESSIONS => StatusCode::TOO_MANY_REQUESTS,
                _ => StatusCode::UNAUTHORIZED,
            };
            let body = serde_json::json!({ "code": refusal.reason.as_str(), "message": refusal.message });
            Err((status, Json(body)))
        }
    }
}
