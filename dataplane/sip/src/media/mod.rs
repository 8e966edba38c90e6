//! Media without I/O: RTP packets ([`rtp`]), RTCP reports and statistics ([`rtcp`]),
//! RFC 4733 telephone events ([`telephone`]) and the keys the edge presses with them
//! ([`digits`]), G.711 μ-law and A-law ([`g711`]), G.722
//! ([`g722`]), the audio a session hands its owner ([`mod@format`]), a jitter
//! buffer with loss concealment ([`jitter`]), and one call's media both ways put
//! together ([`session`]), two calls' media joined ([`bridge`]), answering-machine
//! detection on outbound calls ([`amd`]), the hold chime of a warm transfer ([`hold`]), and SRTP
//! ([`srtp`]).
//! The edge's socket task hands datagrams in and sends what comes out; a tick every
//! [`FRAME_MS`] drives playout and pacing.

pub mod amd;
pub mod bridge;
pub mod digits;
pub mod format;
pub mod g711;
pub mod g722;
pub mod hold;
pub mod jitter;
pub mod rtcp;
pub mod rtp;
pub mod session;
pub mod srtp;
pub mod telephone;

/// The length of one audio frame, in milliseconds.
pub const FRAME_MS: u32 = 20;
/// The RTP clock of G.711, G.722 (RFC 3551 §4.5.2) and telephone events.
pub const CLOCK_RATE: u32 = 8000;
/// 8 kHz samples (and G.711 or G.722 bytes) in one frame.
pub const FRAME_SAMPLES: usize = (CLOCK_RATE * FRAME_MS / 1000) as usize;
