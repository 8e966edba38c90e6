//! A cold transfer of an inbound call (RFC 3515): the edge sends REFER inside the
//! dialogue (Refer-To the target, Referred-By the edge), resent over UDP until answered
//! (RFC 3261 Timer E); a 2xx means the caller's side (the transferee) calls the target,
//! and its NOTIFYs report how that goes ([`super::super::refer`]); a final answer ends
//! the transfer, as does a refusal of the REFER, the subscription ending without one, or
//! the timeout. The owner hears [`CallEvent::Transfer`] and, on success, hangs up.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Due, InboundCall, Inner, Retransmit};
use crate::call::refer::{TransferEnd, TransferProgress, read_notify};
use crate::call::{CallEvent, Effect};
use crate::sip::{Message, Method, Request, Response};

/// Why a transfer cannot start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// The call is not answered and confirmed (or already over).
    #[error("the call is not established, so it cannot be transferred")]
    NotEstablished,
    /// Another transfer of this call is under way.
    #[error("a transfer of this call is already under way")]
    Busy,
    /// The target is not a SIP URI the edge may write into Refer-To.
    #[error("the transfer target {0:?} is not a sip: or sips: URI")]
    BadTarget(String),
}

/// A transfer under way.
#[derive(Debug)]
pub(super) struct Transfer {
    /// The REFER's CSeq number.
    cseq: u32,
    /// The REFER, resent until its answer.
    refer: Option<Retransmit>,
    /// When it counts as unanswered.
    deadline: Instant,
}

impl Transfer {
    pub(super) fn deadline(&self) -> Instant {
        self.refer.as_ref().map_or(self.deadline, |r| r.deadline().min(self.deadline))
    }
}

impl InboundCall {
    /// Transfers the caller to `target` (a `sip:`/`sips:` URI) by REFER; the outcome
    /// comes as [`CallEvent::Transfer`] events, the last one
    /// [`TransferProgress::Ended`], within `timeout`.
    pub fn transfer(&mut self, now: Instant, target: &str, timeout: Duration) -> Result<(), TransferError> {
        if !matches!(self.inner, Inner::Confirmed) {
            return Err(TransferError::NotEstablished);
        }
        if self.transfer.is_some() {
            return Err(TransferError::Busy);
        }
        let is_uri = (target.starts_with("sip:") || target.starts_with("sips:"))
            && target.len() <= 256
            && !target.chars().any(|c| c.is_whitespace() || c.is_control() || "<>\"".contains(c));
        if !is_uri {
            return Err(TransferError::BadTarget(target.chars().take(80).collect()));
        }
        let mut refer = self.dialog.request(Method::Refer);
        refer.headers.push("Refer-To", format!("<{target}>"));
        refer.headers.push("Referred-By", self.dialog.contact());
        refer.headers.push("Contact", self.dialog.contact());
        let cseq = self.dialog.local_cseq;
        let transmit = self.transmit(self.dialog.peer, Message::Request(refer).to_bytes());
        let refer = Retransmit::new(now, transmit, &self.config.timers);
        self.transfer = Some(Transfer { cseq, refer: Some(refer), deadline: now + timeout });
        Ok(())
    }

    /// Whether a transfer is under way.
    pub fn transferring(&self) -> bool {
        self.transfer.is_some()
    }

    /// A response to the REFER; `false` when it is not one.
    pub(super) fn transfer_response(&mut self, response: &Response) -> bool {
        let Some(transfer) = &mut self.transfer else { return false };
        let ours = response.cseq().is_ok_and(|c| c.method == Method::Refer && c.seq == transfer.cseq);
        if !ours {
            return false;
        }
        if response.status < 200 {
            return true;
        }
        if transfer.refer.take().is_none() {
            return true; // a retransmitted final answer
        }
        if response.status < 300 {
            self.transfer_event(TransferProgress::Accepted);
        } else {
            let end = TransferEnd::Refused { status: response.status, reason: super::phrase(&response.reason) };
            self.end_transfer(end);
        }
        true
    }

    /// A NOTIFY inside the dialogue: the refer subscription's progress.
    pub(super) fn on_notify(&mut self, source: SocketAddr, request: &Request) {
        let tag = self.dialog.local_tag.clone();
        if self.transfer.is_none() {
            let response = request.response(481, Some(&tag)).with_reason("Subscription does not exist");
            self.respond(source, request, response);
            return;
        }
        let notified = match read_notify(request) {
            Ok(notified) => notified,
            Err(error) => {
                let response =
                    request.response(error.status(), Some(&tag)).with_reason(&super::phrase(&error.to_string()));
                self.respond(source, request, response);
                return;
            }
        };
        let ok = request.response(200, Some(&tag));
        self.respond(source, request, ok);
        // A NOTIFY can come before the REFER's 202 (RFC 3515 §2.4.4 allows the race):
        // it answers the REFER too.
        if let Some(transfer) = &mut self.transfer
            && transfer.refer.take().is_some()
        {
            self.transfer_event(TransferProgress::Accepted);
        }
        match notified.status {
            Some((status, reason)) if status >= 200 => self.end_transfer(TransferEnd::Target { status, reason }),
            Some((status, _)) if !notified.terminated => self.transfer_event(TransferProgress::Trying(status)),
            _ if notified.terminated => {
                self.end_transfer(TransferEnd::Abandoned("the subscription ended without a final answer".into()));
            }
            _ => {}
        }
    }

    /// The transfer's timers: the REFER's retransmissions and the timeout.
    pub(super) fn transfer_timeout(&mut self, now: Instant) {
        let Some(transfer) = &mut self.transfer else { return };
        let due = transfer.refer.as_mut().map_or(Due::Nothing, |r| r.on_timeout(now));
        let expired = now >= transfer.deadline;
        match due {
            Due::Resend(t) => self.effects.push_back(Effect::Transmit(t)),
            Due::GiveUp => return self.end_transfer(TransferEnd::TimedOut),
            Due::Nothing => {}
        }
        if expired {
            self.end_transfer(TransferEnd::TimedOut);
        }
    }

    fn end_transfer(&mut self, end: TransferEnd) {
        self.transfer = None;
        self.transfer_event(TransferProgress::Ended(end));
    }

    fn transfer_event(&mut self, progress: TransferProgress) {
        self.effects.push_back(Effect::Event(CallEvent::Transfer(progress)));
    }
}
