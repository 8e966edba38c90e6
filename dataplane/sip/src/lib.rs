//! Switchboard's SIP edge without I/O: the part of a phone-call edge that needs no
//! socket, clock or runtime. The edge's tasks read datagrams and stream bytes, hand them
//! here with their addresses and the time, and perform what comes back: datagrams to
//! send, timers to set, call events for the session they open at the gateway.
//!
//! - [`sip`]: SIP messages (RFC 3261), parsed within [`sip::Limits`], and the responses
//!   built from requests.
//! - [`call`]: the inbound (RFC 3261 UAS) and outbound (UAC) call as state machines:
//!   requests, responses, the owner's admission and the time in; transmits, timers and
//!   call events out.
//! - [`endpoint`]: the edge's SIP address: flood guard, stateless answers, a call per
//!   INVITE, calls it places, and routing by Call-ID.
//! - [`media`]: RTP (via `rtp-types`) and RTCP, RFC 4733 telephone events, G.711 by
//!   table, G.722, a jitter buffer with loss concealment, and one call's media both ways.
//! - [`sdp`]: SDP (RFC 4566) and offer/answer (RFC 3264) for one G.722 or G.711 audio stream with
//!   RFC 4733 telephone events; no common codec is a 488 with the reason.
//!
//! This crate depends on no async runtime and does no I/O; every input from outside is
//! bounded and every bad input is a typed error. It draws no random numbers either: tags,
//! Call-IDs, SSRCs and ports come from the owner.
//!
//! How the edge drives it: one [`endpoint::Endpoint`] per SIP address takes each
//! datagram ([`endpoint::Endpoint::handle_datagram`]) or each message a
//! [`sip::StreamDecoder`] cut from a TCP/TLS connection, with the time; after each call it
//! drains [`endpoint::Endpoint::poll`] (transmits to send, call events, drops to count)
//! and sleeps until [`endpoint::Endpoint::poll_timeout`]. On
//! [`call::CallEvent::Incoming`] it decides who answers (the gateway's routing) and calls
//! [`endpoint::Endpoint::admit`]; on [`call::CallEvent::Established`] it opens the
//! session at the gateway in the call's audio format and starts a
//! [`media::session::MediaSession`], ticking it every 20 ms.
//!
//! That edge is the crate `switchboard-sip-edge` (dataplane/sip-edge), run as
//! `switchboard sip`: one tokio task owns the UDP SIP socket, the TCP listener on the same
//! port (a task per connection cuts its stream with [`sip::StreamDecoder`]) and the
//! endpoint, one task per
//! call owns its RTP/RTCP socket pair (from a configured port range) and its WebSocket
//! session at the gateway (`session_start` with `mulaw`/`alaw` at 8000 both ways, binary
//! frames: no transcoding). A call to `sip:<agent>@host` is answered with what the
//! gateway says (200; 404 unknown agent, 403 not exposed, 488 text-only, 503 busy or
//! unreachable). The edge latches a call's media to where the phone's RTP really comes
//! from when that is the SDP's address or the phone's SIP address on another port (NAT,
//! or a phone that writes another of its interfaces in its SDP), so this crate's check
//! that RTP comes from the dialogue's address holds for everything else.

pub mod call;
pub mod endpoint;
pub mod media;
pub mod sdp;
pub mod sip;
pub mod trunk;
