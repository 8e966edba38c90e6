//! The inbound call (RFC 3261 UAS): the INVITE server transaction and the dialogue it
//! opens, as one machine. See the [parent module](super) for how it is driven.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::dialog::Dialog;
use super::retransmit::{Due, Retransmit};
use super::{ALLOW, Admission, CallConfig, CallEvent, Effect, EndReason, Incoming, Transmit, Transport};
use crate::sdp::{Limits, Negotiated, SdpError, SessionDescription};
use crate::sip::{HeaderError, Message, Method, NameAddr, Request, Response};

/// Responses to non-INVITE requests kept to answer their retransmissions.
const KEPT_RESPONSES: usize = 8;

/// Why an INVITE could not start a call; the owner answers it statelessly (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The request is not an INVITE.
    #[error("a call starts with an INVITE, not {0}")]
    NotInvite(String),
    /// A header the dialogue needs does not read.
    #[error("the INVITE cannot open a dialogue: {0}")]
    Header(#[from] HeaderError),
}

/// Where a call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// The INVITE is waiting for the owner's [`Admission`].
    Proceeding,
    /// Refused or cancelled; the final answer is resent until the ACK.
    Refused,
    /// Answered; the 200 OK is resent until the ACK.
    Answered,
    /// The ACK came: media flows.
    Confirmed,
    /// The edge sent BYE and waits for its answer.
    Ending,
    /// Over; absorbing retransmissions until its timer runs out.
    Lingering,
    /// Over: drop it.
    Terminated,
}

#[derive(Debug)]
enum Inner {
    Proceeding,
    Refused(Retransmit),
    Answered(Retransmit),
    Confirmed,
    Ending(Retransmit),
    Lingering(Instant),
    Terminated,
}

/// One inbound call (see the [parent module](super)).
#[derive(Debug)]
pub struct InboundCall {
    config: CallConfig,
    dialog: Dialog,
    /// The INVITE's head, to answer it.
    invite: Request,
    invite_branch: String,
    inner: Inner,
    negotiated: Option<Negotiated>,
    answer: Option<String>,
    /// The latest answer to the INVITE, resent when the INVITE is.
    invite_response: Option<Transmit>,
    /// A re-INVITE's 200 OK waiting for its ACK: its CSeq and schedule.
    reinvite: Option<(u32, Retransmit)>,
    kept: VecDeque<(String, Method, Transmit)>,
    hang_up_after_ack: bool,
    ended: bool,
    /// A transfer (REFER) under way.
    transfer: Option<transfer::Transfer>,
    /// While the call is held unanswered ([`InboundCall::queued`]): when its provisional
    /// answer is sent again.
    provisional_due: Option<Instant>,
    effects: VecDeque<Effect>,
}

/// Why an INVITE is refused before its offer is read.
struct Precheck {
    status: u16,
    reason: String,
    unsupported: Option<String>,
}

/// RFC 3261 §8.2.2.3 and §16.3: an extension the edge does not take in Require (420
/// with Unsupported: the edge takes none, not even 100rel), or Max-Forwards at 0 (483).
fn precheck(invite: &Request) -> Option<Precheck> {
    let required: Vec<&str> =
        invite.headers.all("Require").flat_map(|v| v.split(',')).map(str::trim).filter(|t| !t.is_empty()).collect();
    if !required.is_empty() {
        let tags = required.join(", ");
        let reason = format!("Bad Extension: {tags} not supported");
        return Some(Precheck { status: 420, reason, unsupported: Some(tags) });
    }
    match invite.headers.get("Max-Forwards").map(|v| v.trim().parse::<u32>()) {
        Some(Ok(0)) => Some(Precheck { status: 483, reason: "Too Many Hops".into(), unsupported: None }),
        Some(Err(_)) => Some(Precheck { status: 400, reason: "Invalid Max-Forwards".into(), unsupported: None }),
        _ => None,
    }
}

/// A reason phrase without line breaks or control characters, at most 200 characters.
pub(crate) fn phrase(reason: &str) -> String {
    reason.chars().map(|c| if c.is_control() { ' ' } else { c }).take(200).collect()
}

impl InboundCall {
    /// A call for an INVITE that came from `source` on `transport`. `trusted`: the
    /// source is an authenticated trunk, whose P-Asserted-Identity and From are believed.
    /// The 100 Trying is queued at once; then [`CallEvent::Incoming`] (ask the owner), or,
    /// when the offer has nothing the edge takes, the 488 (or 400) with its reason.
    pub fn new(
        now: Instant,
        config: CallConfig,
        invite: &Request,
        source: SocketAddr,
        transport: Transport,
        trusted: bool,
    ) -> Result<Self, CallError> {
        if invite.method != Method::Invite {
            return Err(CallError::NotInvite(invite.method.to_string()));
        }
        let dialog = Dialog::from_invite(invite, config.local, &config.local_tag, source, transport)?;
        let head = Request { body: Vec::new(), ..invite.clone() };
        let mut call = Self {
            invite_branch: invite.branch()?.to_owned(),
            config,
            dialog,
            invite: head,
            inner: Inner::Proceeding,
            negotiated: None,
            answer: None,
            invite_response: None,
            reinvite: None,
            kept: VecDeque::new(),
            hang_up_after_ack: false,
            ended: false,
            transfer: None,
            provisional_due: None,
            effects: VecDeque::new(),
        };
        let trying = call.respond(source, &call.invite.clone(), invite.response(100, None));
        call.invite_response = Some(trying);
        if let Some(refusal) = precheck(invite) {
            let mut response =
                invite.response(refusal.status, Some(&call.dialog.local_tag)).with_reason(&refusal.reason);
            if let Some(tags) = refusal.unsupported {
                response.headers.push("Unsupported", tags);
            }
            call.send_final(now, response, EndReason::Refused(refusal.status));
            return Ok(call);
        }
        if let (true, crate::sdp::LocalSrtp::Refused(reason)) = (invite.body.is_empty(), &call.config.media.srtp) {
            let reason = reason.clone();
            call.refuse(now, 488, &reason, None);
            return Ok(call);
        }
        if invite.body.is_empty() {
            // A delayed offer (RFC 3264 §4, common from carriers' gateways): the edge
            // offers in its 200 and reads the answer in the ACK.
            let incoming = call.incoming(invite, source, trusted, None);
            call.answer = Some(call.config.media.offer());
            call.effects.push_back(Effect::Event(CallEvent::Incoming(incoming)));
            return Ok(call);
        }
        match call.offer(invite) {
            Ok((negotiated, answer)) => {
                let incoming = call.incoming(invite, source, trusted, Some(negotiated.clone()));
                call.negotiated = Some(negotiated);
                call.answer = Some(answer);
                call.effects.push_back(Effect::Event(CallEvent::Incoming(incoming)));
            }
            Err(error) => call.refuse(now, error.status(), &error.to_string(), None),
        }
        Ok(call)
    }

    fn offer(&self, request: &Request) -> Result<(Negotiated, String), SdpError> {
        match request.headers.get("Content-Type") {
            Some(t) if t.trim().eq_ignore_ascii_case("application/sdp") => {}
            other => {
                return Err(SdpError::NoAudio(format!(
                    "the body is {}, not application/sdp",
                    other.unwrap_or("untyped")
                )));
            }
        }
        let offer = SessionDescription::parse(&request.body, &Limits::default())?;
        self.config.media.answer(&offer)
    }

    fn incoming(&self, invite: &Request, source: SocketAddr, trusted: bool, media: Option<Negotiated>) -> Incoming {
        let from = invite.from().ok();
        let asserted = invite
            .headers
            .all("P-Asserted-Identity")
            .filter_map(|v| NameAddr::parse(v).ok().and_then(|a| a.user()))
            .next()
            .filter(|_| trusted);
        let dialled = crate::sip::header::uri_user(&invite.uri).or_else(|| invite.to().ok().and_then(|t| t.user()));
        Incoming {
            call_id: self.dialog.call_id.clone(),
            dialled: dialled.map(str::to_owned),
            caller: asserted.or_else(|| from.as_ref().and_then(NameAddr::user)).map(str::to_owned),
            caller_asserted: trusted,
            caller_private: invite
                .headers
                .all("Privacy")
                .flat_map(|v| v.split(';'))
                .any(|p| matches!(p.trim().to_ascii_lowercase().as_str(), "id" | "user" | "header")),
            display_name: from.and_then(|f| f.display).map(str::to_owned),
            source,
            media,
        }
    }

    /// Where the call is.
    pub fn state(&self) -> State {
        match self.inner {
            Inner::Proceeding => State::Proceeding,
            Inner::Refused(_) => State::Refused,
            Inner::Answered(_) => State::Answered,
            Inner::Confirmed => State::Confirmed,
            Inner::Ending(_) => State::Ending,
            Inner::Lingering(_) => State::Lingering,
            Inner::Terminated => State::Terminated,
        }
    }

    /// Whether the call is over and may be dropped.
    pub fn is_terminated(&self) -> bool {
        matches!(self.inner, Inner::Terminated)
    }

    /// The Call-ID.
    pub fn call_id(&self) -> &str {
        &self.dialog.call_id
    }

    /// What offer/answer settled, once it has.
    pub fn media(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// The next effect to perform.
    pub fn poll(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When [`InboundCall::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let state = match &self.inner {
            Inner::Refused(r) | Inner::Answered(r) | Inner::Ending(r) => Some(r.deadline()),
            Inner::Lingering(until) => Some(*until),
            _ => None,
        };
        let reinvite = self.reinvite.as_ref().map(|(_, r)| r.deadline());
        let transfer = self.transfer.as_ref().map(transfer::Transfer::deadline);
        let provisional = self.provisional_due.filter(|_| matches!(self.inner, Inner::Proceeding));
        state.into_iter().chain(reinvite).chain(transfer).chain(provisional).min()
    }

    /// The owner holds the call unanswered while its session waits for room (a capacity
    /// queue): `182 Queued` (RFC 3261 §21.1.5) with `reason` as its phrase — what the caller
    /// is told, e.g. their place and the wait — now, and again every
    /// [`Timers::provisional`](super::Timers) until the call is answered, refused or
    /// cancelled; a retransmitted INVITE gets the latest. Called again (a new place in the
    /// queue), it sends the new phrase at once. Ignored unless the call waits for its
    /// [`Admission`].
    pub fn queued(&mut self, now: Instant, reason: &str) {
        self.hold(now, 182, reason, None);
    }

    /// [`InboundCall::queued`] with early media (RFC 3960's gateway model): `183 Session
    /// Progress` carrying the SDP answer, so the phone plays the RTP the owner sends before
    /// the call is answered (a hold announcement); the 200 OK later carries the same answer.
    /// A call whose INVITE had no offer (a delayed offer) cannot take early media without
    /// reliable provisional answers, which the edge does not do: it gets `182 Queued` and
    /// this returns `false`.
    pub fn early_media(&mut self, now: Instant, reason: &str) -> bool {
        match self.answer.clone().filter(|_| self.negotiated.is_some()) {
            Some(answer) => self.hold(now, 183, reason, Some(answer)),
            None => self.hold(now, 182, reason, None),
        }
        self.negotiated.is_some()
    }

    /// A provisional answer held until the call is admitted (see [`InboundCall::queued`]).
    fn hold(&mut self, now: Instant, status: u16, reason: &str, sdp: Option<String>) {
        if !matches!(self.inner, Inner::Proceeding) {
            return;
        }
        let reason = phrase(reason);
        let fallback = if status == 183 { "Session Progress" } else { "Queued" };
        let reason = if reason.trim().is_empty() { fallback.to_owned() } else { reason };
        let mut response = self.invite.response(status, Some(&self.dialog.local_tag)).with_reason(&reason);
        response.headers.push("Contact", self.dialog.contact());
        if let Some(sdp) = sdp {
            response = response.with_body("application/sdp", sdp.into_bytes());
        }
        let transmit = self.respond(self.dialog.peer, &self.invite.clone(), response);
        self.invite_response = Some(transmit);
        self.provisional_due = Some(now + self.config.timers.provisional);
    }

    /// The owner's answer to [`CallEvent::Incoming`]. Ignored unless the call is waiting
    /// for one.
    pub fn admit(&mut self, now: Instant, admission: Admission) {
        if !matches!(self.inner, Inner::Proceeding) {
            return;
        }
        let Some((status, reason)) = admission.refusal() else {
            let answer = self.answer.clone().unwrap_or_default();
            let ok = self.ok(&self.invite.clone(), answer);
            let transmit = self.respond(self.dialog.peer, &self.invite.clone(), ok);
            self.invite_response = Some(transmit.clone());
            self.inner = Inner::Answered(Retransmit::new(now, transmit, &self.config.timers));
            return;
        };
        let mut response = self.invite.response(status, Some(&self.dialog.local_tag)).with_reason(&phrase(reason));
        if let Some(seconds) = admission.retry_after() {
            response.headers.push("Retry-After", seconds.to_string());
        }
        self.send_final(now, response, EndReason::Refused(status));
    }

    /// The edge ends the call: a BYE once answered (after the ACK if it has not come
    /// yet), a 480 before.
    pub fn hang_up(&mut self, now: Instant) {
        match self.inner {
            Inner::Proceeding => self.refuse(now, 480, "The agent ended the call", Some(EndReason::LocalHangUp)),
            Inner::Answered(_) => self.hang_up_after_ack = true,
            Inner::Confirmed => self.send_bye(now),
            _ => {}
        }
    }

    /// Answers the INVITE with a final non-2xx; the call ends for `end` (default: refused
    /// with that status).
    fn refuse(&mut self, now: Instant, status: u16, reason: &str, end: Option<EndReason>) {
        let response = self.invite.response(status, Some(&self.dialog.local_tag)).with_reason(&phrase(reason));
        self.send_final(now, response, end.unwrap_or(EndReason::Refused(status)));
    }

    /// Sends a final non-2xx answer to the INVITE, resent until its ACK.
    fn send_final(&mut self, now: Instant, response: Response, end: EndReason) {
        let transmit = self.respond(self.dialog.peer, &self.invite.clone(), response);
        self.invite_response = Some(transmit.clone());
        self.inner = Inner::Refused(Retransmit::new(now, transmit, &self.config.timers));
        self.end(end);
    }

    fn end(&mut self, reason: EndReason) {
        if !self.ended {
            self.ended = true;
            self.effects.push_back(Effect::Event(CallEvent::Ended(reason)));
        }
    }

    /// Lingers for `d` to absorb retransmissions (none over a reliable transport).
    fn linger(&mut self, now: Instant, d: Duration) {
        self.inner = if self.dialog.transport.is_reliable() { Inner::Terminated } else { Inner::Lingering(now + d) };
    }

    fn send_bye(&mut self, now: Instant) {
        let bye = self.dialog.request(Method::Bye);
        let transmit = self.transmit(self.dialog.peer, Message::Request(bye).to_bytes());
        self.inner = Inner::Ending(Retransmit::new(now, transmit, &self.config.timers));
    }

    fn transmit(&mut self, to: SocketAddr, bytes: Vec<u8>) -> Transmit {
        let transmit = Transmit { to, transport: self.dialog.transport, bytes };
        self.effects.push_back(Effect::Transmit(transmit.clone()));
        transmit
    }

    /// Sends a response to `request`; responses to requests other than the first INVITE
    /// (whose latest answer is kept apart) are kept for their retransmissions.
    fn respond(&mut self, to: SocketAddr, request: &Request, response: Response) -> Transmit {
        let transmit = self.transmit(to, Message::Response(response).to_bytes());
        if let Ok(branch) = request.branch()
            && !(request.method == Method::Invite && branch == self.invite_branch)
        {
            if self.kept.len() == KEPT_RESPONSES {
                self.kept.pop_front();
            }
            self.kept.push_back((branch.to_owned(), request.method.clone(), transmit.clone()));
        }
        transmit
    }

    /// A 200 OK with the edge's Contact and, if given, an SDP body.
    fn ok(&self, request: &Request, sdp: String) -> Response {
        let mut ok = request.response(200, Some(&self.dialog.local_tag));
        ok.headers.push("Contact", self.dialog.contact());
        ok.headers.push("Allow", ALLOW);
        if sdp.is_empty() { ok } else { ok.with_body("application/sdp", sdp.into_bytes()) }
    }

    /// Handles a request of this call from `source` at `now`.
    pub fn handle_request(&mut self, now: Instant, source: SocketAddr, request: &Request) {
        if matches!(self.inner, Inner::Terminated) {
            return;
        }
        let branch = request.branch().unwrap_or_default();
        if request.method == Method::Invite && branch == self.invite_branch {
            if let Some(last) = self.invite_response.clone() {
                self.effects.push_back(Effect::Transmit(last));
            }
            return;
        }
        if let Some((_, _, kept)) = self.kept.iter().find(|(b, m, _)| b == branch && *m == request.method) {
            self.effects.push_back(Effect::Transmit(kept.clone()));
            return;
        }
        match request.method {
            Method::Ack => self.on_ack(now, request),
            Method::Cancel => self.on_cancel(now, source, request, branch),
            _ if !self.dialog.matches(request) => {
                let response = request.response(481, Some(&self.dialog.local_tag));
                self.respond(source, request, response);
            }
            _ => self.in_dialog(now, source, request),
        }
    }

    fn on_ack(&mut self, now: Instant, request: &Request) {
        let seq = request.cseq().map(|c| c.seq).ok();
        if let Some((cseq, _)) = &self.reinvite
            && seq == Some(*cseq)
        {
            self.reinvite = None;
            return;
        }
        if seq != self.invite.cseq().ok().map(|c| c.seq) {
            return;
        }
        match self.inner {
            Inner::Refused(_) => self.linger(now, self.config.timers.t4),
            Inner::Answered(_) => {
                self.inner = Inner::Confirmed;
                if self.negotiated.is_none() {
                    // The edge offered in its 200: the answer is in this ACK.
                    let answer = SessionDescription::parse(&request.body, &Limits::default())
                        .and_then(|answer| self.config.media.accept_answer(&answer));
                    match answer {
                        Ok(media) => self.negotiated = Some(media),
                        Err(error) => {
                            self.end(EndReason::MediaRefused(format!("the ACK carries no usable answer: {error}")));
                            return self.send_bye(now);
                        }
                    }
                }
                if let Some(media) = self.negotiated.clone() {
                    self.effects.push_back(Effect::Event(CallEvent::Established(media)));
                }
                if self.hang_up_after_ack {
                    self.send_bye(now);
                }
            }
            _ => {}
        }
    }

    fn on_cancel(&mut self, now: Instant, source: SocketAddr, cancel: &Request, branch: &str) {
        if branch != self.invite_branch {
            let response = cancel.response(481, Some(&self.dialog.local_tag));
            self.respond(source, cancel, response);
            return;
        }
        let ok = cancel.response(200, Some(&self.dialog.local_tag));
        self.respond(source, cancel, ok);
        if matches!(self.inner, Inner::Proceeding) {
            self.refuse(now, 487, "Request Terminated", Some(EndReason::Cancelled));
        }
    }
}

mod in_dialog;
mod transfer;
pub use in_dialog::digit_of_info;
pub use transfer::TransferError;
