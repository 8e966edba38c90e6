//! CORS for the signalling routes, so that a page of another origin (an app's site, the
//! gateway on its own host name) can call: browsers ask first (`OPTIONS`, the preflight)
//! before a `POST` with `Content-Type: application/sdp` or an `Authorization` header, and
//! before any `PATCH` or `DELETE`, and read a response of another origin only when it says
//! they may.
//!
//! Which origins may is the gateway's one rule for browser pages, the one `/v1/session` and
//! the offer's own admission apply ([`switchboard_gateway::auth::Auth::allows_origin`]:
//! `--allowed-origin`, and local mode's own page), so no second list exists:
//!
//! - a preflight from an allowed origin is answered `204` with
//!   `Access-Control-Allow-Origin` (that origin exactly), the methods of the path (`POST`
//!   on `/v1/webrtc`; `PATCH`, `DELETE` on a call's resource), the request headers a
//!   client sends ([`ALLOWED_HEADERS`]: its credential, the content type, WHIP's
//!   `If-Match`) and how long a browser may keep the answer ([`MAX_AGE_SECONDS`]);
//! - every response to a request from an allowed origin carries
//!   `Access-Control-Allow-Origin` and exposes the headers a client reads
//!   ([`EXPOSED_HEADERS`]: the call's `Location`, the TURN servers' `Link`s, `ETag`,
//!   `WWW-Authenticate`);
//! - a preflight from any other origin is answered `403` (`{"code": "origin"}`) with no
//!   CORS headers, so the browser sends nothing more; that origin's offer, were it sent
//!   anyway (a request no preflight guards), is refused by its admission (`403`) as before;
//! - every response says `Vary: Origin` (its CORS headers depend on it: caches must not
//!   hand one page's answer to another).
//!
//! No `Access-Control-Allow-Credentials`: the credential travels in `Authorization` (or
//! `?access_token=`), never in cookies.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use switchboard_gateway::Gateway;

/// The methods of `/v1/webrtc`.
pub const OFFER_METHODS: &str = "POST, OPTIONS";
/// The methods of a call's resource, `/v1/webrtc/<id>`.
pub const RESOURCE_METHODS: &str = "PATCH, DELETE, OPTIONS";
/// The request headers a page may send: its credential (`Authorization`, or `X-Api-Key` as
/// the gateway also takes), the offer's or fragment's `Content-Type`, and WHIP's `If-Match`.
pub const ALLOWED_HEADERS: &str = "authorization, content-type, if-match, x-api-key";
/// The response headers a page may read besides the safelisted ones: the call's resource,
/// the TURN servers, the ICE session's entity tag, and what a 401 asks for.
pub const EXPOSED_HEADERS: &str = "location, link, etag, www-authenticate";
/// How long a browser may keep a preflight's answer (Chromium caps it at two hours).
pub const MAX_AGE_SECONDS: u32 = 3600;

/// The request's `Origin`, when it has one that may call.
fn allowed(gateway: &Gateway, headers: &HeaderMap) -> Option<HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    let text = origin.to_str().ok()?;
    gateway.auth.allows_origin(text, headers).then(|| origin.clone())
}

/// Middleware over the signalling routes: the CORS headers of every response (see the
/// module's docs).
pub async fn headers(State(gateway): State<Arc<Gateway>>, request: Request, next: Next) -> Response {
    let origin = allowed(&gateway, request.headers());
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.append(header::VARY, HeaderValue::from_static("origin"));
    if let Some(origin) = origin {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED_HEADERS));
    }
    response
}

/// Answers a preflight (`OPTIONS`) on a path whose methods are `methods`: `204` with what
/// an allowed origin may do, `403` for another origin, and `204` with `Allow` for a
/// request that is no preflight (no `Origin`).
pub fn preflight(gateway: &Gateway, headers: &HeaderMap, methods: &'static str) -> Response {
    let allow = [(header::ALLOW, methods)];
    let Some(origin) = headers.get(header::ORIGIN) else {
        return (StatusCode::NO_CONTENT, allow).into_response();
    };
    if allowed(gateway, headers).is_none() {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        let message =
            format!("pages from {origin} may not call here; the gateway's operator can allow it with --allowed-origin");
        return crate::http::error(StatusCode::FORBIDDEN, "origin", &message);
    }
    let mut response = (StatusCode::NO_CONTENT, allow).into_response();
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(methods));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOWED_HEADERS));
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(MAX_AGE_SECONDS));
    response
}
