//! HTTP plumbing shared by the simulator's operations: the response body type and
//! helpers to build bodies.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};

/// The error a streamed response body fails with; hyper then resets the stream (HTTP/2)
/// or closes the connection (HTTP/1.1).
#[derive(Debug, thiserror::Error)]
#[error("simulated stream failure: {0}")]
pub struct BodyError(pub String);

/// Every response body the simulator sends.
pub type Body = UnsyncBoxBody<Bytes, BodyError>;

/// A body holding `bytes`.
pub fn full_body(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|never| match never {}).boxed_unsync()
}
