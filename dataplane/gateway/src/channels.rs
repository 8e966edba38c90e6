//! Channels: ways a client reaches a session other than `/v1/session`'s WebSocket, served by
//! the same gateway ([`crate::server::Server::with_channel`]). The WebRTC edge
//! (`switchboard-webrtc-edge`) is one. A channel is a *client* of the gateway's session
//! machine, not a second one; the gateway knows no channel, and its crate depends on none
//! (the binary and local mode wire them in).
//!
//! What a channel uses of the gateway, and nothing else:
//! - [`crate::server::admit`]: a session slot, then the client's credential and Origin —
//!   the checks `/v1/session` runs before its upgrade, so the rules are one;
//! - [`crate::session::serve`] over a [`crate::session::ClientIo::Edge`]: one session, the
//!   channel's end of an in-process pipe carrying the session protocol's WebSocket frames,
//!   so routing, handoffs, resume, scopes, the record, traces and metrics are the
//!   WebSocket's;
//! - the [`Gateway`]'s `tracker` (its tasks are drained with the sessions), `shutdown`,
//!   `config` (limits) and `metrics.refused` (refusals counted beside the WebSocket's).

use std::sync::Arc;

use axum::Router;
use futures_util::future::BoxFuture;

use crate::Gateway;

/// A client channel served beside the WebSocket.
pub trait Channel: Send + Sync + std::fmt::Debug + 'static {
    /// Its HTTP routes, merged into the gateway's router.
    fn routes(self: Arc<Self>, gateway: Arc<Gateway>) -> Router;

    /// What it runs beside the HTTP server (its own sockets), started by
    /// [`crate::server::Server::run`]; it ends by the gateway's `shutdown` token.
    fn run(self: Arc<Self>, gateway: Arc<Gateway>) -> BoxFuture<'static, ()>;

    /// Its metrics in the Prometheus text format, served after the gateway's own.
    fn render_metrics(&self) -> String;
}
