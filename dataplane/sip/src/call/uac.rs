//! The outbound call (RFC 3261 UAC): the edge's INVITE with its SDP offer, resent over
//! UDP until an answer (Timer A, giving up at Timer B), provisional answers told to the
//! owner, the ACK to the 2xx (resent for each retransmitted 2xx) or to a refusal, CANCEL
//! before the answer, BYE either way, and a ring timeout. A trunk that challenges the
//! INVITE (401 `WWW-Authenticate`, 407 `Proxy-Authenticate`) is answered once with the
//! callee's [`Callee::auth`] credentials: the challenge is acknowledged and the INVITE sent
//! again with the next CSeq and an `Authorization` / `Proxy-Authorization`; a second
//! challenge (the credentials are wrong) ends the call as rejected. Driven like [`InboundCall`](
//! super::InboundCall): `handle_*` in, [`OutboundCall::poll`] and
//! [`OutboundCall::poll_timeout`] out.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::dialog::Dialog;
use super::retransmit::{Due, Retransmit};
use super::{ALLOW, CallConfig, CallEvent, Effect, EndReason, Transmit, Transport};
use crate::sdp::{Limits, Negotiated, SessionDescription};
use crate::sip::{Message, Method, Request, Response};

/// Whom the edge calls, and as whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callee {
    /// The Call-ID (unique, drawn by the owner).
    pub call_id: String,
    /// The Request-URI (`sip:+4930123@trunk.example.com`).
    pub uri: String,
    /// The edge's From URI (the number it calls from).
    pub from: String,
    /// Where to send the INVITE (the trunk or phone, resolved by the owner).
    pub peer: SocketAddr,
    /// On which transport.
    pub transport: Transport,
    /// How long it may ring before the edge cancels.
    pub ring_timeout: Duration,
    /// Digest credentials for a trunk that challenges the INVITE; `None`: a challenge
    /// ends the call as rejected (401/407).
    pub auth: Option<ClientAuth>,
}

/// The edge's digest credentials for one outbound call.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientAuth {
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
    /// The client nonce of the answer (random, drawn by the owner).
    pub cnonce: String,
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth").field("username", &self.username).finish_non_exhaustive()
    }
}

/// Where an outbound call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboundState {
    /// INVITE sent, nothing back yet.
    Calling,
    /// A provisional answer came (ringing).
    Proceeding,
    /// Answered and acknowledged: media flows.
    Confirmed,
    /// The edge sent BYE and waits for its answer.
    Ending,
    /// Over; absorbing retransmissions.
    Lingering,
    /// Over: drop it.
    Terminated,
}

#[derive(Debug)]
enum Inner {
    Calling(Retransmit),
    Proceeding(Instant),
    Confirmed,
    Ending(Retransmit),
    Lingering(Instant),
    Terminated,
}

/// A call the edge places (see the module docs).
#[derive(Debug)]
pub struct OutboundCall {
    config: CallConfig,
    dialog: Dialog,
    invite: Request,
    invite_cseq: u32,
    inner: Inner,
    ring_deadline: Instant,
    cancel: Option<Retransmit>,
    cancel_wanted: bool,
    cancel_sent: bool,
    ack: Option<Transmit>,
    negotiated: Option<Negotiated>,
    ended: bool,
    effects: VecDeque<Effect>,
    /// The credentials, until a challenge used them.
    auth: Option<ClientAuth>,
}

impl OutboundCall {
    /// Places a call: the INVITE with the edge's offer is queued at once.
    pub fn new(now: Instant, config: CallConfig, callee: Callee) -> Self {
        let mut dialog = Dialog::outgoing(&config, &callee);
        let invite = Self::invite(&mut dialog, &config);
        let invite_cseq = dialog.local_cseq;
        let mut call = Self {
            auth: callee.auth.clone(),
            dialog,
            invite_cseq,
            inner: Inner::Terminated,
            ring_deadline: now + callee.ring_timeout,
            cancel: None,
            cancel_wanted: false,
            cancel_sent: false,
            ack: None,
            negotiated: None,
            ended: false,
            effects: VecDeque::new(),
            invite: invite.clone(),
            config,
        };
        let transmit = call.transmit(Message::Request(invite).to_bytes());
        call.inner = Inner::Calling(Retransmit::invite(now, transmit, &call.config.timers));
        call
    }

    /// A new INVITE of the dialogue (the next CSeq, a new branch) with the edge's offer.
    fn invite(dialog: &mut Dialog, config: &CallConfig) -> Request {
        let mut invite = dialog.request(Method::Invite);
        invite.headers.push("Contact", dialog.contact());
        invite.headers.push("Allow", ALLOW);
        invite.headers.push("Content-Type", "application/sdp");
        invite.body = config.media.offer().into_bytes();
        invite
    }

    /// Answers a 401/407 to the INVITE with the credentials (once): the challenge was
    /// acknowledged; the INVITE goes again with the next CSeq and the answer. Whether it
    /// did (`false`: no credentials left, or no challenge the edge can answer).
    fn authenticate(&mut self, now: Instant, response: &Response) -> bool {
        let (challenge_header, answer_header) = match response.status {
            401 => ("WWW-Authenticate", "Authorization"),
            407 => ("Proxy-Authenticate", "Proxy-Authorization"),
            _ => return false,
        };
        if self.cancel_wanted || self.ended {
            return false;
        }
        let Some(auth) = self.auth.take() else { return false };
        // The first challenge the edge can answer (a trunk may offer SHA-256 and MD5).
        let Some(challenge) =
            response.headers.all(challenge_header).find_map(|value| crate::trunk::digest::Challenge::parse(value).ok())
        else {
            return false;
        };
        let mut invite = Self::invite(&mut self.dialog, &self.config);
        let value = challenge.authorization("INVITE", &invite.uri, &auth.username, &auth.password, &auth.cnonce, 1);
        invite.headers.push(answer_header, value);
        self.invite_cseq = self.dialog.local_cseq;
        self.invite = invite.clone();
        let transmit = self.transmit(Message::Request(invite).to_bytes());
        self.inner = Inner::Calling(Retransmit::invite(now, transmit, &self.config.timers));
        true
    }

    /// Where the call is.
    pub fn state(&self) -> OutboundState {
        match self.inner {
            Inner::Calling(_) => OutboundState::Calling,
            Inner::Proceeding(_) => OutboundState::Proceeding,
            Inner::Confirmed => OutboundState::Confirmed,
            Inner::Ending(_) => OutboundState::Ending,
            Inner::Lingering(_) => OutboundState::Lingering,
            Inner::Terminated => OutboundState::Terminated,
        }
    }

    /// Whether the call is over and may be dropped.
    pub fn is_terminated(&self) -> bool {
        matches!(self.inner, Inner::Terminated)
    }

    /// What offer/answer settled, once answered.
    pub fn media(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// The next effect to perform.
    pub fn poll(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When [`OutboundCall::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let state = match &self.inner {
            Inner::Calling(r) => Some(r.deadline().min(self.ring_deadline)),
            Inner::Ending(r) => Some(r.deadline()),
            Inner::Proceeding(deadline) | Inner::Lingering(deadline) => Some(*deadline),
            _ => None,
        };
        state.into_iter().chain(self.cancel.as_ref().map(Retransmit::deadline)).min()
    }

    fn transmit(&mut self, bytes: Vec<u8>) -> Transmit {
        let transmit = Transmit { to: self.dialog.peer, transport: self.dialog.transport, bytes };
        self.effects.push_back(Effect::Transmit(transmit.clone()));
        transmit
    }

    fn end(&mut self, reason: EndReason) {
        if !self.ended {
            self.ended = true;
            self.effects.push_back(Effect::Event(CallEvent::Ended(reason)));
        }
    }

    fn linger(&mut self, now: Instant) {
        let d = self.config.timers.t1 * 64;
        self.inner = if self.dialog.transport.is_reliable() { Inner::Terminated } else { Inner::Lingering(now + d) };
    }

    /// The edge gives up on the call or ends it: CANCEL while it rings (once it rings:
    /// a CANCEL may not overtake the INVITE's first answer, §9.1), BYE once answered.
    pub fn hang_up(&mut self, now: Instant) {
        match self.inner {
            Inner::Calling(_) => {
                self.cancel_wanted = true;
                self.end(EndReason::Cancelled);
            }
            Inner::Proceeding(_) => self.send_cancel(now),
            Inner::Confirmed => self.send_bye(now),
            _ => {}
        }
    }

    fn send_cancel(&mut self, now: Instant) {
        if self.cancel_sent {
            return;
        }
        self.cancel_sent = true;
        // The INVITE's final answer (487) is due within 64*T1 of the CANCEL.
        self.inner = Inner::Proceeding(now + self.config.timers.t1 * 64);
        let mut cancel = Request { method: Method::Cancel, body: Vec::new(), ..self.invite.clone() };
        for name in ["Contact", "Allow", "Content-Type"] {
            cancel.headers.remove(name);
        }
        cancel.headers.set("CSeq", format!("{} CANCEL", self.invite_cseq));
        let transmit = self.transmit(Message::Request(cancel).to_bytes());
        self.cancel = Some(Retransmit::new(now, transmit, &self.config.timers));
        self.end(EndReason::Cancelled);
    }

    fn send_bye(&mut self, now: Instant) {
        let bye = self.dialog.request(Method::Bye);
        let transmit = self.transmit(Message::Request(bye).to_bytes());
        self.inner = Inner::Ending(Retransmit::new(now, transmit, &self.config.timers));
    }

    /// The ACK of a non-2xx answer: the INVITE's branch and Request-URI, the answer's To
    /// (§17.1.1.3).
    fn ack_refusal(&mut self, response: &Response) {
        let mut ack = Request { method: Method::Ack, body: Vec::new(), ..self.invite.clone() };
        for name in ["Contact", "Allow", "Content-Type"] {
            ack.headers.remove(name);
        }
        if let Some(to) = response.headers.get("To") {
            ack.headers.set("To", to);
        }
        ack.headers.set("CSeq", format!("{} ACK", self.invite_cseq));
        self.transmit(Message::Request(ack).to_bytes());
    }

    /// Handles a response from the far end.
    pub fn handle_response(&mut self, now: Instant, response: &Response) {
        let Ok(cseq) = response.cseq() else { return };
        if response.headers.get("Call-ID") != Some(self.dialog.call_id.as_str()) {
            return;
        }
        match cseq.method {
            Method::Invite if cseq.seq == self.invite_cseq => self.invite_response(now, response),
            Method::Cancel => self.cancel = None,
            Method::Bye if response.status >= 200 && matches!(self.inner, Inner::Ending(_)) => {
                self.inner = Inner::Terminated;
                self.end(EndReason::LocalHangUp);
            }
            _ => {}
        }
    }

    fn invite_response(&mut self, now: Instant, response: &Response) {
        match response.status {
            100..=199 => {
                if let Inner::Calling(_) = self.inner {
                    self.inner = Inner::Proceeding(self.ring_deadline);
                    if self.cancel_wanted {
                        self.send_cancel(now);
                    }
                }
                if response.status > 100 {
                    self.effects.push_back(Effect::Event(CallEvent::Progress(response.status)));
                }
            }
            200..=299 => self.answered(now, response),
            _ => {
                if matches!(self.inner, Inner::Calling(_) | Inner::Proceeding(_)) {
                    self.ack_refusal(response);
                    if self.authenticate(now, response) {
                        return;
                    }
                    self.cancel = None;
                    let reason = EndReason::Rejected { status: response.status, reason: response.reason.clone() };
                    self.end(reason);
                    self.linger(now);
                } else if matches!(self.inner, Inner::Lingering(_)) {
                    self.ack_refusal(response);
                }
            }
        }
    }

    fn answered(&mut self, now: Instant, response: &Response) {
        if !matches!(self.inner, Inner::Calling(_) | Inner::Proceeding(_)) {
            // A retransmitted 2xx: its ACK again.
            if let Some(ack) = self.ack.clone() {
                self.effects.push_back(Effect::Transmit(ack));
            }
            return;
        }
        self.dialog.confirm(response);
        let ack = self.dialog.ack(self.invite_cseq);
        let ack = self.transmit(Message::Request(ack).to_bytes());
        self.ack = Some(ack);
        self.cancel = None;
        self.inner = Inner::Confirmed;
        let media = SessionDescription::parse(&response.body, &Limits::default())
            .and_then(|answer| self.config.media.accept_answer(&answer));
        match media {
            Ok(media) if !self.cancel_wanted && !self.ended => {
                self.negotiated = Some(media.clone());
                self.effects.push_back(Effect::Event(CallEvent::Established(media)));
            }
            Ok(_) => self.send_bye(now),
            Err(error) => {
                self.end(EndReason::MediaRefused(error.to_string()));
                self.send_bye(now);
            }
        }
    }

    /// Handles a request from the far end: BYE (200, the call ends), OPTIONS and INFO
    /// (200; INFO digits told), re-INVITE/UPDATE (488: the edge does not move an outbound
    /// call's media yet), others 405/501; requests of another dialogue 481.
    pub fn handle_request(&mut self, now: Instant, source: SocketAddr, request: &Request) {
        if request.method == Method::Ack || matches!(self.inner, Inner::Terminated) {
            return;
        }
        let tag = self.config.local_tag.clone();
        if !self.dialog.matches(request) || self.dialog.remote_tag.is_none() {
            return self.respond(source, request.response(481, Some(&tag)));
        }
        let response = match request.method {
            Method::Bye => {
                self.end(EndReason::RemoteHangUp);
                self.linger(now);
                request.response(200, Some(&tag))
            }
            Method::Options => request.response(200, Some(&tag)),
            Method::Info => {
                if let Some(event) = super::digit_of_info(request) {
                    self.effects.push_back(Effect::Event(CallEvent::Digit(event)));
                }
                request.response(200, Some(&tag))
            }
            Method::Invite | Method::Update => {
                request.response(488, Some(&tag)).with_reason("Changing an outbound call's media is not supported")
            }
            Method::Other(_) => request.response(501, Some(&tag)),
            _ => request.response(405, Some(&tag)),
        };
        self.respond(source, response);
    }

    fn respond(&mut self, to: SocketAddr, mut response: Response) {
        if response.status >= 405 && response.status != 481 && response.status != 488 {
            response.headers.push("Allow", ALLOW);
        }
        let transmit = Transmit { to, transport: self.dialog.transport, bytes: Message::Response(response).to_bytes() };
        self.effects.push_back(Effect::Transmit(transmit));
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(cancel) = &mut self.cancel {
            match cancel.on_timeout(now) {
                Due::Resend(t) => self.effects.push_back(Effect::Transmit(t)),
                Due::GiveUp => {
                    self.cancel = None;
                    self.inner = Inner::Terminated;
                }
                Due::Nothing => {}
            }
        }
        match &mut self.inner {
            Inner::Calling(_) if now >= self.ring_deadline => {
                // Nothing came back at all: there is nobody to cancel.
                self.end(EndReason::NoAnswer);
                self.inner = Inner::Terminated;
            }
            Inner::Proceeding(deadline) if now >= *deadline => {
                if self.cancel_sent {
                    // No final answer 64*T1 after the CANCEL.
                    self.inner = Inner::Terminated;
                } else {
                    self.end(EndReason::NoAnswer);
                    self.send_cancel(now);
                }
            }
            Inner::Calling(r) | Inner::Ending(r) => match r.on_timeout(now) {
                Due::Resend(t) => self.effects.push_back(Effect::Transmit(t)),
                Due::GiveUp => {
                    let calling = matches!(self.inner, Inner::Calling(_));
                    self.end(if calling { EndReason::NoAnswer } else { EndReason::LocalHangUp });
                    self.inner = Inner::Terminated;
                }
                Due::Nothing => {}
            },
            Inner::Lingering(until) if now >= *until => self.inner = Inner::Terminated,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
