//! Switchboard's WebRTC edge, without I/O (issue 47): a browser calls an agent with one Opus
//! audio track each way and the session protocol's JSON on a data channel — one protocol,
//! two transports. The gateway's HTTP handlers (`POST /v1/webrtc` with an SDP offer, `PATCH`
//! with trickle ICE, `DELETE`) and its UDP socket task are thin adapters around this crate:
//!
//! - [`offer`]: an SDP offer checked — malformed, no audio, no Opus, no data channel — each
//!   refusal an HTTP 400 naming what is wrong;
//! - [`trickle`]: `application/trickle-ice-sdpfrag` bodies, ICE restarts among them;
//! - [`call`]: one call as a machine over str0m — datagrams, time, agent audio and
//!   data-channel text in; datagrams, timeouts, caller audio, messages and events out;
//! - [`audio`]: Opus both ways with loss concealment and FEC, resampled to and from the
//!   runtime's PCM rates, reply audio paced in real time and flushed on barge-in;
//! - [`channel`]: the data channel's message rules, the WebSocket's limits and errors.
//!
//! Why str0m: it is sans-I/O like the rest of the data plane (no threads, no async runtime:
//! the caller owns sockets and time, so one task can serve many calls on one UDP port and
//! tests run two peers in one process on a simulated clock), and maintained; its aws-lc-rs
//! crypto backend reuses the AWS-LC the gateway's TLS already builds.

pub mod audio;
pub mod call;
pub mod channel;
pub mod offer;
pub mod trickle;

pub use call::{Call, CallConfig, CallError, CallEvent, CloseReason, Datagram, Path, generate_dtls_cert};
pub use offer::{Offer, OfferError, OfferRules};
/// str0m's transport protocol of a datagram (UDP, or ICE-TCP).
pub use str0m::net::Protocol;
pub use trickle::{Fragment, FragmentError};
