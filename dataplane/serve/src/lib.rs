//! The server pieces Switchboard's runtime and gateway share, so each rule lives once:
//!
//! - [`drain`]: serving until told to stop, then draining — readiness false and new
//!   sessions refused, live ones given the drain timeout, the rest closed — with
//!   `TCP_NODELAY` on every connection.
//! - [`ws`]: WebSocket limits (the read buffer, telling an oversized message from other
//!   read failures) and sends with a deadline, for peers that stop reading.
//! - [`frames`]: a WebSocket connection at the frame level, with both handshakes, for
//!   the gateway's relay.
//! - [`bucket`]: the token bucket behind every message rate limit.

pub mod bucket;
pub mod drain;
pub mod frames;
pub mod ws;

pub use bucket::TokenBucket;
pub use drain::{Drain, ServeError};
