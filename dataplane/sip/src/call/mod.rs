//! Calls as state machines without I/O. An [`InboundCall`] is one dialogue the edge
//! answers (RFC 3261 UAS): the INVITE server transaction, the admission question put to
//! its owner, the 2xx retransmitted until the ACK, CANCEL, BYE either way, and what
//! comes inside the dialogue. It is driven like `quinn-proto`'s connection:
//!
//! - events in: [`InboundCall::handle_request`], [`InboundCall::handle_response`] (with
//!   the time), the owner's [`InboundCall::admit`] and [`InboundCall::hang_up`];
//! - effects out, polled after each event: [`InboundCall::poll`] gives datagrams to send
//!   ([`Effect::Transmit`]) and what happened ([`Effect::Event`]);
//!   [`InboundCall::poll_timeout`] the next time [`InboundCall::handle_timeout`] is due.
//!
//! Retransmission follows RFC 3261's timers ([`Timers`]: T1, T2, T4) over unreliable
//! transports; nothing is retransmitted over TCP or TLS. Which calls to take is not the
//! machine's: it asks with [`CallEvent::Incoming`] and its owner answers with an
//! [`Admission`].
//!
//! An inbound call can be transferred (REFER, RFC 3515: [`InboundCall::transfer`]); what
//! the edge reads of the NOTIFYs that report it is in [`refer`].
//!
//! An [`OutboundCall`] is a call the edge places (RFC 3261 UAC): the INVITE client
//! transaction with its offer, provisional answers, the ACK, CANCEL, and BYE either way.
//!
//! Where the caller's side takes no REFER, the edge dials the person itself and bridges the
//! two legs: the transfer's rules are in [`bridge`].

pub mod bridge;
mod dialog;
pub mod refer;
mod retransmit;
mod uac;
mod uas;

use std::net::SocketAddr;
use std::time::Duration;

pub use uac::{Callee, ClientAuth, OutboundCall, OutboundState};
pub(crate) use uas::phrase;
pub use uas::{CallError, InboundCall, State, TransferError, digit_of_info};

use crate::media::telephone::Event;
use crate::sdp::{LocalMedia, Negotiated};

/// The transport a message came on or goes out on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// UDP: unreliable, so requests and 2xx answers are retransmitted.
    Udp,
    /// TCP.
    Tcp,
    /// TLS over TCP.
    Tls,
}

impl Transport {
    /// Whether the transport delivers reliably (no retransmissions).
    pub fn is_reliable(self) -> bool {
        !matches!(self, Self::Udp)
    }

    /// The Via transport token.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Udp => "UDP",
            Self::Tcp => "TCP",
            Self::Tls => "TLS",
        }
    }
}

/// RFC 3261's timer values (§17.1.1.1, Table 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// The round-trip estimate: the first retransmission interval (500 ms).
    pub t1: Duration,
    /// The longest retransmission interval (4 s).
    pub t2: Duration,
    /// How long a message may stay in the network (5 s).
    pub t4: Duration,
    /// How often a call held unanswered ([`InboundCall::queued`]) sends its provisional
    /// answer again (30 s): RFC 3261 §13.3.1.1 asks for one at least every minute, lest a
    /// proxy cancel the INVITE after three minutes of silence; twice a minute also keeps a
    /// NAT's UDP binding towards the phone open (many expire after 30 to 60 s).
    pub provisional: Duration,
}

impl Default for Timers {
    fn default() -> Self {
        Self {
            t1: Duration::from_millis(500),
            t2: Duration::from_secs(4),
            t4: Duration::from_secs(5),
            provisional: Duration::from_secs(30),
        }
    }
}

/// How the edge presents itself in one call.
#[derive(Clone, Debug)]
pub struct CallConfig {
    /// The edge's SIP address (Contact, and Via of its requests).
    pub local: SocketAddr,
    /// The edge's media: RTP address and port, codecs.
    pub media: LocalMedia,
    /// The edge's dialogue tag (random, drawn by the owner: this crate draws nothing).
    pub local_tag: String,
    /// The timer values.
    pub timers: Timers,
}

/// A datagram (or stream write) to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where to.
    pub to: SocketAddr,
    /// On which transport.
    pub transport: Transport,
    /// The message.
    pub bytes: Vec<u8>,
}

/// Who calls and what number, as the INVITE says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// The Call-ID.
    pub call_id: String,
    /// The dialled number: the Request-URI's user part, else To's.
    pub dialled: Option<String>,
    /// The caller's number: P-Asserted-Identity's user part from a trusted source, else
    /// From's.
    pub caller: Option<String>,
    /// Whether the caller's number comes from a trusted source (an authenticated trunk):
    /// only then may the owner vouch for it to the gateway.
    pub caller_asserted: bool,
    /// The caller asked that its identity be withheld (RFC 3323 `Privacy: id`, `user` or
    /// `header`): the number may be used inside the platform (routing, a verified caller)
    /// but must not be shown or passed on to anyone outside it.
    pub caller_private: bool,
    /// The caller's display name, as From says (never vouched for).
    pub display_name: Option<String>,
    /// Where the INVITE came from.
    pub source: SocketAddr,
    /// What offer/answer settled; `None` for an INVITE without an offer (a delayed
    /// offer): the edge offers in its 200 and the media is settled by the ACK's answer
    /// ([`CallEvent::Established`]).
    pub media: Option<Negotiated>,
}

/// Why a call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The caller cancelled before it was answered.
    Cancelled,
    /// The caller hung up (BYE).
    RemoteHangUp,
    /// The edge hung up (its BYE was answered, or not in time).
    LocalHangUp,
    /// Refused with this status before it was answered.
    Refused(u16),
    /// Answered, but no ACK came in 64*T1: the call is dropped (RFC 3261 §13.3.1.4).
    NoAck,
    /// A call the edge placed was refused by the callee or on the way.
    Rejected {
        /// The final status.
        status: u16,
        /// Its reason phrase.
        reason: String,
    },
    /// A call the edge placed got no final answer in time (Timer B, or the ring timeout).
    NoAnswer,
    /// The other side's answer carried no SDP the edge can take (a callee's 200, or the
    /// ACK to the edge's offer after a delayed offer); the call was hung up.
    MediaRefused(String),
}

/// What happened in a call, for its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallEvent {
    /// An INVITE whose offer the edge can take: answer with [`InboundCall::admit`].
    Incoming(Incoming),
    /// A call the edge placed is ringing or in progress (180, 183, ...).
    Progress(u16),
    /// The ACK came: media flows both ways.
    Established(Negotiated),
    /// A re-INVITE or UPDATE moved the media (hold, a new address).
    MediaChanged(Negotiated),
    /// A key pressed, sent as SIP INFO (application/dtmf-relay) rather than RTP.
    Digit(Event),
    /// How a transfer the edge asked for ([`InboundCall::transfer`]) goes.
    Transfer(refer::TransferProgress),
    /// The call is over; the owner may drop it once [`InboundCall::is_terminated`].
    Ended(EndReason),
}

/// An effect for the owner to perform.
// An event carries the negotiated media (SRTP keys included: some 300 bytes); effects are
// moved once, straight from the call to its owner, never stored in bulk, so boxing would
// only add an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Send this.
    Transmit(Transmit),
    /// Tell the owner.
    Event(CallEvent),
}

/// The owner's answer to [`CallEvent::Incoming`]: the policy lives outside the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Answer (200 OK with the SDP answer).
    Accept,
    /// 403 Forbidden: a call from a source that may not call (the reason is sent).
    Forbidden(String),
    /// 404 Not Found: no agent answers this number.
    NotFound(String),
    /// 488 Not Acceptable Here: the agent cannot take a call (text-only, say).
    NotAcceptable(String),
    /// 486 Busy Here: no capacity now.
    Busy(String),
    /// 503 Service Unavailable: no room now (the gateway's capacity, an outage), with
    /// `Retry-After` (RFC 3261 §20.33) when there is a hint of when to try again.
    Unavailable {
        /// The reason phrase.
        reason: String,
        /// Seconds until a new call is likely to find room.
        retry_after: Option<u64>,
    },
    /// Any other final status, 300-699, with a reason.
    Refuse(u16, String),
}

impl Admission {
    /// The status and reason phrase of a refusal; `None` for [`Admission::Accept`].
    pub fn refusal(&self) -> Option<(u16, &str)> {
        match self {
            Self::Accept => None,
            Self::Forbidden(r) => Some((403, r)),
            Self::NotFound(r) => Some((404, r)),
            Self::NotAcceptable(r) => Some((488, r)),
            Self::Busy(r) => Some((486, r)),
            Self::Unavailable { reason, .. } => Some((503, reason)),
            Self::Refuse(status, r) => Some(((*status).clamp(300, 699), r)),
        }
    }

    /// The `Retry-After` seconds of a refusal, when it has a hint.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The methods the edge takes inside a dialogue (the Allow header).
pub const ALLOW: &str = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, UPDATE, NOTIFY";

#[cfg(test)]
mod queue_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transfer_tests;
