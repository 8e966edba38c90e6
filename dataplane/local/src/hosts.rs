//! Local mode's own routes (the page, its assets, `/v1/agents`, the live view's) answer only
//! requests addressed to this machine — a `Host` that is an IP address or `localhost` — when
//! it serves on loopback without credentials. Bound to loopback is not enough: a page of
//! another site can make its own name resolve to 127.0.0.1 (DNS rebinding), and the browser
//! then sends it, as a same-origin `GET` with no `Origin`, whatever answers that name. The
//! rule is the gateway's own ([`switchboard_gateway::auth::Auth::open_data`]), which also
//! guards the record (`/v1/sessions`) and `/metrics`: one rule for everything served without
//! a credential.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use switchboard_gateway::Gateway;

/// `routes`, each refusing (403 `host_not_local`, saying which address to open instead) a
/// request `gateway`'s rule for open data refuses.
pub fn this_machine_only(routes: Router, gateway: Arc<Gateway>) -> Router {
    routes.layer(middleware::from_fn_with_state(gateway, check))
}

async fn check(State(gateway): State<Arc<Gateway>>, request: Request, next: Next) -> Response {
    match gateway.auth.open_data(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}
