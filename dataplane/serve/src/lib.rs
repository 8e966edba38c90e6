//! The server pieces Switchboard's runtime and gateway share, so each rule lives once:
//!
//! - [`drain`]: serving until told to stop, then draining — readiness false and new
//!   sessions refused, live ones given the drain timeout, the rest closed.
//! - [`server`]: the HTTP/1 server under it, with a header read (and keep-alive idle)
//!   timeout, a connection cap whose permit a WebSocket keeps, `TCP_NODELAY`, and a
//!   graceful shutdown.
//! - [`ws`]: WebSocket limits (the read buffer, telling an oversized message from other
//!   read failures) and sends with a deadline, for peers that stop reading.
//! - [`frames`]: a WebSocket connection at the frame level, with both handshakes, for
//!   the gateway's relay.
//! - [`bucket`]: the token bucket behind every message rate limit, judging a socket's reader
//!   by when its frames could have arrived ([`Arrival`]), not by when it got to them.

pub mod bucket;
pub mod drain;
pub mod frames;
pub mod server;
pub mod ws;

pub use bucket::{Arrival, TokenBucket};
pub use drain::{Drain, ServeError};
pub use server::{Limits, OnRefused};
