//! The edge's SIP endpoint without I/O: every message to the edge's SIP address comes
//! here, with its source and the time, and leaves as transmits and call events. It
//! guards against floods ([`rate`]: messages past a source's rate are dropped
//! unanswered), answers what belongs to no call by itself (OPTIONS 200, a request of
//! an unknown dialogue 481, a malformed request whose head reads 400/413/505 with the
//! reason, a new INVITE past capacity 503), starts an [`InboundCall`] for each new INVITE,
//! places [`OutboundCall`]s for its owner ([`Endpoint::place`]), and routes everything
//! else to its call by Call-ID. Calls that end are dropped.
//!
//! Driven like the calls: [`Endpoint::handle_datagram`] / [`Endpoint::handle_message`],
//! [`Endpoint::admit`], [`Endpoint::hang_up`], [`Endpoint::handle_timeout`] in;
//! [`Endpoint::poll`] and [`Endpoint::poll_timeout`] out.

mod call;
pub mod rate;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

pub use call::Call;

use crate::call::{
    ALLOW, Admission, CallConfig, CallEvent, Callee, Effect, InboundCall, OutboundCall, Transmit, Transport,
};
use crate::sip::parse::parse_datagram;
use crate::sip::{Limits, Message, Method, ParseError, Request};
use crate::trunk::{Trunks, Verdict};
use rate::{RateConfig, RateLimiter};

/// How the endpoint behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EndpointConfig {
    /// Limits on each SIP message.
    pub limits: Limits,
    /// Messages a source may send.
    pub rate: RateConfig,
    /// Calls at once; a new INVITE past it gets 503.
    pub max_calls: usize,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self { limits: Limits::default(), rate: RateConfig::default(), max_calls: 500 }
    }
}

/// Why a call could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    /// The endpoint holds as many calls as it may.
    #[error("the edge is at capacity ({0} calls)")]
    AtCapacity(usize),
    /// Another call has this Call-ID.
    #[error("the Call-ID {0} is in use")]
    CallIdInUse(String),
}

/// Where a message came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    /// The address.
    pub address: SocketAddr,
    /// The transport.
    pub transport: Transport,
    /// Whether it is an authenticated trunk, whose caller identity is believed.
    pub trusted: bool,
}

/// Why a message got no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Its source sent past its rate.
    RateLimited,
    /// A keep-alive (CRLF), not a message.
    KeepAlive,
    /// It does not read far enough to answer (no Via, From, To, Call-ID or CSeq).
    Unreadable(ParseError),
    /// An ACK or response that belongs to no call.
    Stray,
}

/// What the endpoint's owner does.
// As [`crate::call::Effect`]: an event carries the negotiated media (some 300 bytes), and
// outputs are moved once, from the endpoint to its owner, never stored in bulk.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send this.
    Transmit(Transmit),
    /// Something happened in a call: answer [`CallEvent::Incoming`] with
    /// [`Endpoint::admit`].
    Event {
        /// The call's Call-ID.
        call_id: String,
        /// What happened.
        event: CallEvent,
    },
    /// A message was dropped unanswered (for logs and metrics).
    Dropped {
        /// Where it came from.
        source: SocketAddr,
        /// Why.
        reason: Dropped,
    },
    /// A new INVITE was refused by the endpoint itself, before it became a call (its
    /// response is a [`Output::Transmit`] beside this; for logs and metrics). A call's own
    /// refusals (its offer, the owner's [`Admission`]) end as [`CallEvent::Ended`] instead.
    Refused {
        /// Where it came from.
        source: SocketAddr,
        /// Why.
        refusal: Refusal,
    },
}

/// Why the endpoint refused a new INVITE itself ([`Output::Refused`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 403: no trunk takes it (its source, or its credentials).
    Forbidden,
    /// 503: the edge holds as many calls as it may, or has no media port left.
    AtCapacity,
    /// 400: it does not make a call (a dialogue that cannot be set up from it).
    Malformed,
}

/// The SIP endpoint (see the module docs).
#[derive(Debug)]
pub struct Endpoint {
    config: EndpointConfig,
    limiter: RateLimiter,
    calls: HashMap<String, Call>,
    out: VecDeque<Output>,
    /// Who may call (none configured: anyone, untrusted).
    trunks: Option<Trunks>,
}

/// A To-tag for stateless answers, the same for the same Call-ID (FNV-1a).
fn stateless_tag(request: &Request) -> String {
    let id = request.call_id().unwrap_or_default();
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("sb{hash:016x}")
}

impl Endpoint {
    /// An endpoint with no calls.
    pub fn new(config: EndpointConfig) -> Self {
        Self {
            limiter: RateLimiter::new(config.rate),
            config,
            calls: HashMap::new(),
            out: VecDeque::new(),
            trunks: None,
        }
    }

    /// Takes new INVITEs only from `trunks` ([`Trunks::admit`]): a stranger's is answered
    /// 403, one that must prove a trunk's credentials 401 with the challenges; a call
    /// through a trunk is trusted (its caller's number may be vouched for).
    pub fn with_trunks(mut self, trunks: Trunks) -> Self {
        self.trunks = (!trunks.is_empty()).then_some(trunks);
        self
    }

    /// The flood guard, to give a trunk its own rate.
    pub fn rate_limiter(&mut self) -> &mut RateLimiter {
        &mut self.limiter
    }

    /// Calls in progress.
    pub fn calls(&self) -> usize {
        self.calls.len()
    }

    /// A call in progress.
    pub fn call(&self, call_id: &str) -> Option<&Call> {
        self.calls.get(call_id)
    }

    /// Places a call: the INVITE goes out at once (see [`OutboundCall`]); what follows
    /// comes out of [`Endpoint::poll`] under `callee.call_id`.
    pub fn place(&mut self, now: Instant, config: CallConfig, callee: Callee) -> Result<(), PlaceError> {
        if self.calls.len() >= self.config.max_calls {
            return Err(PlaceError::AtCapacity(self.config.max_calls));
        }
        if self.calls.contains_key(&callee.call_id) {
            return Err(PlaceError::CallIdInUse(callee.call_id));
        }
        let id = callee.call_id.clone();
        self.calls.insert(id.clone(), Call::Outbound(OutboundCall::new(now, config, callee)));
        self.with_call(&id, |_| {});
        Ok(())
    }

    /// The next thing to do.
    pub fn poll(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When [`Endpoint::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.calls.values().filter_map(Call::poll_timeout).min()
    }

    /// Runs every call's timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<String> = self
            .calls
            .iter()
            .filter(|(_, c)| c.poll_timeout().is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            self.with_call(&id, |call| call.handle_timeout(now));
        }
    }

    /// The owner's answer to a call's [`CallEvent::Incoming`].
    pub fn admit(&mut self, now: Instant, call_id: &str, admission: Admission) {
        self.with_call(call_id, |call| {
            if let Call::Inbound(call) = call {
                call.admit(now, admission);
            }
        });
    }

    /// Holds an inbound call unanswered while its session waits for room: `182 Queued`
    /// with `reason`, repeated until it is admitted (see [`InboundCall::queued`]).
    pub fn queued(&mut self, now: Instant, call_id: &str, reason: &str) {
        self.with_call(call_id, |call| {
            if let Call::Inbound(call) = call {
                call.queued(now, reason);
            }
        });
    }

    /// Holds an inbound call unanswered with early media: `183 Session Progress` with the
    /// SDP answer, repeated until it is admitted (see [`InboundCall::early_media`]; a call
    /// without an offer gets `182 Queued`). Whether the phone takes early media.
    pub fn early_media(&mut self, now: Instant, call_id: &str, reason: &str) -> bool {
        let mut early = false;
        self.with_call(call_id, |call| {
            if let Call::Inbound(call) = call {
                early = call.early_media(now, reason);
            }
        });
        early
    }

    /// Transfers an inbound call to `target` by REFER (see [`InboundCall::transfer`]);
    /// its progress comes as the call's [`CallEvent::Transfer`] events.
    pub fn transfer(
        &mut self,
        now: Instant,
        call_id: &str,
        target: &str,
        timeout: std::time::Duration,
    ) -> Result<(), crate::call::TransferError> {
        let mut outcome = Err(crate::call::TransferError::NotEstablished);
        self.with_call(call_id, |call| {
            if let Call::Inbound(call) = call {
                outcome = call.transfer(now, target, timeout);
            }
        });
        outcome
    }

    /// The edge ends a call.
    pub fn hang_up(&mut self, now: Instant, call_id: &str) {
        self.with_call(call_id, |call| call.hang_up(now));
    }

    /// A datagram (UDP). `new_call` gives the configuration of a call an INVITE would
    /// start (its tag and media port), or `None` when the edge has none left (503).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        source: Source,
        bytes: &[u8],
        new_call: impl FnOnce() -> Option<CallConfig>,
    ) {
        if !self.limiter.allow(now, source.address.ip()) {
            self.drop_message(source, Dropped::RateLimited);
            return;
        }
        let parsed = parse_datagram(bytes, &self.config.limits);
        self.handle_message(now, source, parsed, new_call);
    }

    /// A message already cut from a stream (TCP, TLS) by a
    /// [`StreamDecoder`](crate::sip::StreamDecoder), or its error. The rate is checked
    /// here too.
    pub fn handle_message(
        &mut self,
        now: Instant,
        source: Source,
        parsed: Result<Message, ParseError>,
        new_call: impl FnOnce() -> Option<CallConfig>,
    ) {
        if source.transport.is_reliable() && !self.limiter.allow(now, source.address.ip()) {
            self.drop_message(source, Dropped::RateLimited);
            return;
        }
        match parsed {
            Ok(Message::Request(request)) => self.request(now, source, &request, new_call),
            Ok(Message::Response(response)) => {
                let id = response.headers.get("Call-ID").unwrap_or_default().to_owned();
                if self.calls.contains_key(&id) {
                    self.with_call(&id, |call| call.handle_response(now, &response));
                } else {
                    self.drop_message(source, Dropped::Stray);
                }
            }
            Err(ParseError::Empty) => self.drop_message(source, Dropped::KeepAlive),
            Err(error) => match error.head() {
                Some(head) if head.method != Method::Ack => {
                    let reason = crate::call::phrase(&error.to_string());
                    let response = head.response(error.status(), Some(&stateless_tag(head))).with_reason(&reason);
                    self.send(source, Message::Response(response));
                }
                _ => self.drop_message(source, Dropped::Unreadable(error)),
            },
        }
    }

    fn request(
        &mut self,
        now: Instant,
        source: Source,
        request: &Request,
        new_call: impl FnOnce() -> Option<CallConfig>,
    ) {
        let id = request.call_id().unwrap_or_default().to_owned();
        if self.calls.contains_key(&id) {
            self.with_call(&id, |call| call.handle_request(now, source.address, request));
            return;
        }
        let has_to_tag = request.to().ok().and_then(|to| to.tag()).is_some();
        let tag = stateless_tag(request);
        let (status, allow) = match &request.method {
            Method::Ack => return self.drop_message(source, Dropped::Stray),
            Method::Invite if !has_to_tag => return self.new_call(now, source, request, &id, new_call),
            Method::Options if !has_to_tag => (200, true),
            Method::Other(_) if !has_to_tag => (501, true),
            Method::Register | Method::Refer | Method::Notify if !has_to_tag => (405, true),
            _ => (481, false),
        };
        let mut response = request.response(status, Some(&tag));
        if allow {
            response.headers.push("Allow", ALLOW);
        }
        if status == 200 {
            response.headers.push("Accept", "application/sdp");
        }
        self.send(source, Message::Response(response));
    }

    fn new_call(
        &mut self,
        now: Instant,
        source: Source,
        invite: &Request,
        id: &str,
        new_call: impl FnOnce() -> Option<CallConfig>,
    ) {
        let mut source = source;
        if let Some(trunks) = &mut self.trunks {
            match trunks.admit(now, source.address.ip(), invite) {
                Verdict::Open => {}
                Verdict::Trunk(_) => source.trusted = true,
                Verdict::Challenge(challenges) => {
                    let mut response = invite.response(401, Some(&stateless_tag(invite)));
                    for challenge in challenges {
                        response.headers.push("WWW-Authenticate", challenge);
                    }
                    return self.send(source, Message::Response(response));
                }
                Verdict::Forbidden(reason) => {
                    let response = invite.response(403, Some(&stateless_tag(invite)));
                    self.refused(source, Refusal::Forbidden);
                    return self.send(source, Message::Response(response.with_reason(&format!("Forbidden: {reason}"))));
                }
            }
        }
        let config = if self.calls.len() < self.config.max_calls { new_call() } else { None };
        let Some(config) = config else {
            let mut response =
                invite.response(503, Some(&stateless_tag(invite))).with_reason("The edge is at capacity");
            response.headers.push("Retry-After", "5");
            self.refused(source, Refusal::AtCapacity);
            return self.send(source, Message::Response(response));
        };
        match InboundCall::new(now, config, invite, source.address, source.transport, source.trusted) {
            Ok(call) => {
                self.calls.insert(id.to_owned(), Call::Inbound(call));
                self.with_call(id, |_| {});
            }
            Err(error) => {
                let response = invite.response(400, Some(&stateless_tag(invite)));
                self.refused(source, Refusal::Malformed);
                self.send(source, Message::Response(response.with_reason(&crate::call::phrase(&error.to_string()))));
            }
        }
    }

    /// Runs `f` on a call, moves its effects out, and drops it once it is over.
    fn with_call(&mut self, call_id: &str, f: impl FnOnce(&mut Call)) {
        let Some(call) = self.calls.get_mut(call_id) else { return };
        f(call);
        while let Some(effect) = call.poll() {
            self.out.push_back(match effect {
                Effect::Transmit(t) => Output::Transmit(t),
                Effect::Event(event) => Output::Event { call_id: call_id.to_owned(), event },
            });
        }
        if call.is_terminated() {
            self.calls.remove(call_id);
        }
    }

    fn send(&mut self, source: Source, message: Message) {
        let transmit = Transmit { to: source.address, transport: source.transport, bytes: message.to_bytes() };
        self.out.push_back(Output::Transmit(transmit));
    }

    fn refused(&mut self, source: Source, refusal: Refusal) {
        self.out.push_back(Output::Refused { source: source.address, refusal });
    }

    fn drop_message(&mut self, source: Source, reason: Dropped) {
        self.out.push_back(Output::Dropped { source: source.address, reason });
    }
}

#[cfg(test)]
mod tests;
