//! What an inbound call does inside its dialogue: BYE from the caller, re-INVITE and
//! UPDATE (hold, a new address, session refresh), INFO digits, OPTIONS, methods it does
//! not take; the answer to its own BYE; and its timers.

use std::net::SocketAddr;
use std::time::Instant;

use super::{Due, InboundCall, Inner, Retransmit};
use crate::call::{ALLOW, CallEvent, Effect, EndReason};
use crate::media::telephone::Event;
use crate::sdp::{Limits, SessionDescription};
use crate::sip::{Method, Request, Response};

/// The key of a SIP INFO digit: `application/dtmf-relay` (`Signal=5`) or
/// `application/dtmf` (`5`); `None` for any other body.
pub fn digit_of_info(request: &Request) -> Option<Event> {
    let content_type = request.headers.get("Content-Type")?.trim().to_ascii_lowercase();
    let body = std::str::from_utf8(&request.body).ok()?;
    let key = match content_type.as_str() {
        "application/dtmf-relay" => body.lines().find_map(|line| {
            let (name, value) = line.split_once('=')?;
            name.trim().eq_ignore_ascii_case("signal").then(|| value.trim())
        })?,
        "application/dtmf" => body.trim(),
        _ => return None,
    };
    let mut chars = key.chars();
    let (Some(key), None) = (chars.next(), chars.next()) else { return None };
    let key = key.to_ascii_uppercase();
    Event::code_of(key).map(|_| Event::Digit(key))
}

impl InboundCall {
    pub(super) fn in_dialog(&mut self, now: Instant, source: SocketAddr, request: &Request) {
        let Ok(cseq) = request.cseq() else { return };
        if cseq.seq <= self.dialog.remote_cseq {
            let response = request.response(500, Some(&self.dialog.local_tag)).with_reason("CSeq out of order");
            self.respond(source, request, response);
            return;
        }
        self.dialog.remote_cseq = cseq.seq;
        match request.method {
            Method::Bye => {
                let ok = request.response(200, Some(&self.dialog.local_tag));
                self.respond(source, request, ok);
                self.end(EndReason::RemoteHangUp);
                self.linger(now, self.config.timers.t1 * 64);
            }
            Method::Invite | Method::Update => self.renegotiate(now, source, request, cseq.seq),
            Method::Info => {
                if let Some(event) = digit_of_info(request) {
                    self.effects.push_back(Effect::Event(CallEvent::Digit(event)));
                }
                let ok = request.response(200, Some(&self.dialog.local_tag));
                self.respond(source, request, ok);
            }
            Method::Notify => self.on_notify(source, request),
            Method::Options => {
                let mut ok = request.response(200, Some(&self.dialog.local_tag));
                ok.headers.push("Allow", ALLOW);
                ok.headers.push("Accept", "application/sdp");
                self.respond(source, request, ok);
            }
            Method::Prack => {
                let response = request.response(481, Some(&self.dialog.local_tag));
                self.respond(source, request, response.with_reason("No reliable provisional response to acknowledge"));
            }
            Method::Other(_) => {
                let mut response = request.response(501, Some(&self.dialog.local_tag));
                response.headers.push("Allow", ALLOW);
                self.respond(source, request, response);
            }
            _ => {
                let mut response = request.response(405, Some(&self.dialog.local_tag));
                response.headers.push("Allow", ALLOW);
                self.respond(source, request, response);
            }
        }
    }

    /// A re-INVITE or UPDATE: with an offer, answered (the media may move: hold, a new
    /// address); without one, answered with the current description. 491 while another
    /// re-INVITE waits for its ACK or before the call is confirmed.
    fn renegotiate(&mut self, now: Instant, source: SocketAddr, request: &Request, seq: u32) {
        let tag = self.dialog.local_tag.clone();
        let confirmed = matches!(self.inner, Inner::Confirmed);
        if request.method == Method::Invite && (!confirmed || self.reinvite.is_some()) {
            let response = request.response(491, Some(&tag));
            self.respond(source, request, response);
            return;
        }
        let sdp = if request.body.is_empty() {
            Ok(None)
        } else {
            SessionDescription::parse(&request.body, &Limits::default())
                .and_then(|offer| self.config.media.answer(&offer))
                .map(Some)
        };
        let response = match sdp {
            Err(error) => request.response(error.status(), Some(&tag)).with_reason(&super::phrase(&error.to_string())),
            Ok(answer) => {
                self.config.media.version += 1;
                let body = match answer {
                    Some((negotiated, body)) => {
                        self.negotiated = Some(negotiated.clone());
                        self.answer = Some(body.clone());
                        self.effects.push_back(Effect::Event(CallEvent::MediaChanged(negotiated)));
                        body
                    }
                    None => self.answer.clone().unwrap_or_default(),
                };
                self.ok(request, body)
            }
        };
        let is_ok = response.status == 200;
        let transmit = self.respond(source, request, response);
        if request.method == Method::Invite && is_ok {
            self.reinvite = Some((seq, Retransmit::new(now, transmit, &self.config.timers)));
        }
    }

    /// Handles a response to the edge's own BYE or REFER.
    pub fn handle_response(&mut self, _now: Instant, response: &Response) {
        if self.transfer_response(response) {
            return;
        }
        let Inner::Ending(_) = self.inner else { return };
        let ours = response.cseq().is_ok_and(|c| c.method == Method::Bye && c.seq == self.dialog.local_cseq);
        if ours && response.status >= 200 {
            self.inner = Inner::Terminated;
            self.end(EndReason::LocalHangUp);
        }
    }

    /// Runs the timers due at `now`: retransmissions, giving up, the end of lingering.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.transfer_timeout(now);
        if matches!(self.inner, Inner::Proceeding)
            && let Some(due) = self.provisional_due
            && now >= due
        {
            if let Some(last) = self.invite_response.clone() {
                self.effects.push_back(Effect::Transmit(last));
            }
            self.provisional_due = Some(now + self.config.timers.provisional);
        }
        if let Some((_, r)) = &mut self.reinvite {
            match r.on_timeout(now) {
                Due::Resend(t) => self.effects.push_back(Effect::Transmit(t)),
                Due::GiveUp => self.reinvite = None,
                Due::Nothing => {}
            }
        }
        let due = match &mut self.inner {
            Inner::Refused(r) | Inner::Answered(r) | Inner::Ending(r) => r.on_timeout(now),
            Inner::Lingering(until) if now >= *until => Due::GiveUp,
            _ => Due::Nothing,
        };
        match due {
            Due::Resend(t) => self.effects.push_back(Effect::Transmit(t)),
            Due::Nothing => {}
            Due::GiveUp => match self.inner {
                Inner::Answered(_) => {
                    self.end(EndReason::NoAck);
                    self.send_bye(now);
                }
                Inner::Ending(_) => {
                    self.inner = Inner::Terminated;
                    self.end(EndReason::LocalHangUp);
                }
                _ => self.inner = Inner::Terminated,
            },
        }
    }
}
