//! A transfer the edge carries out itself where REFER is not taken: "dial and bridge". The
//! edge dials the person as a new outbound leg ([`super::OutboundCall`]); when the person
//! answers, the agent is told `transferred` and its session ends, and the edge stays in the
//! middle, relaying media between the caller's leg and the person's
//! ([`crate::media::bridge`]) until either hangs up (BYE to the other).
//!
//! [`Transfer`] is the state machine of one such transfer, without I/O: events in (the
//! REFER's progress, the person's leg's [`CallEvent`]s, the agent's session ending, the
//! caller hanging up), [`Step`]s out for the owner to perform. With [`Method::Refer`] it
//! starts with a REFER and dials only when the caller's side refuses the REFER (405, 501,
//! 403, 420, 488, 489: [`refer_refused`]); with [`Method::Dial`] it dials at once. A person
//! who does not answer (busy, declined, no answer within the ring timeout, unreachable)
//! ends the transfer with the same [`TransferEnd`] a REFER's NOTIFY would give.
//!
//! The phases, in order: `Referring` → `Dialling` → `Ringing` → `Answered` (the agent told
//! `transferred`, its session ending) → `Bridged` → `Over`; any of them may go straight to
//! `Over`. Exactly one [`Step::Report`] is given per transfer.

use super::refer::{TransferEnd, TransferProgress};
use super::{CallEvent, EndReason};
use crate::sdp::Negotiated;

/// How the edge puts a caller through to a person.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    /// REFER (the caller's side calls the person); dial and bridge when it is refused.
    #[default]
    Refer,
    /// Dial and bridge without trying REFER (a trunk known not to take it).
    Dial,
}

impl std::str::FromStr for Method {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim() {
            "refer" => Ok(Self::Refer),
            "dial" => Ok(Self::Dial),
            other => Err(format!(
                "{other:?} is not a transfer method: `refer` (REFER, dialling the person where it is refused) or `dial` (always dial and bridge)"
            )),
        }
    }
}

/// One of the two legs a bridge joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Leg {
    /// The call the agent had: the caller's.
    Caller,
    /// The call the edge placed to the person.
    Person,
}

impl Leg {
    /// The other leg.
    pub fn other(self) -> Self {
        match self {
            Self::Caller => Self::Person,
            Self::Person => Self::Caller,
        }
    }
}

/// Where a transfer is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The REFER is out.
    Referring,
    /// The person's leg is placed, no ringing yet.
    Dialling,
    /// The person's phone rings (180/183).
    Ringing,
    /// The person answered (with this media); the agent was told `transferred` and its
    /// session is ending.
    Answered(Negotiated),
    /// The agent's session is over: the edge relays media between the legs.
    Bridged,
    /// Over (reported, and any leg that was to go hung up).
    Over,
}

/// What the owner does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send the REFER to the caller's side.
    Refer,
    /// Dial the person: a new outbound leg (its events come back through
    /// [`Transfer::person`]; a leg that cannot be placed through [`Transfer::dial_failed`]).
    Dial,
    /// The transfer's end, for the agent (its `transfer_result`).
    Report(TransferEnd),
    /// The agent's session is over: start relaying media between the legs, with the
    /// person's media.
    Bridge(Negotiated),
    /// Hang this leg up (BYE, or CANCEL while it rings).
    HangUp(Leg),
}

/// Whether a REFER refused with `status` means the caller's side takes no REFER (so the
/// edge dials instead): 403, 405, 420 (the `norefersub` or `replaces` extension), 488, 489
/// (the refer event package), 501.
pub fn refer_refused(status: u16) -> bool {
    matches!(status, 403 | 405 | 420 | 488 | 489 | 501)
}

/// The end a person's leg that ended before it was answered gives the transfer.
pub fn end_of(reason: &EndReason) -> TransferEnd {
    match reason {
        EndReason::Rejected { status, reason } => TransferEnd::Target { status: *status, reason: reason.clone() },
        EndReason::NoAnswer => TransferEnd::TimedOut,
        EndReason::MediaRefused(why) => {
            TransferEnd::Abandoned(format!("the person's phone answered with media the edge cannot take: {why}"))
        }
        other => TransferEnd::Abandoned(format!("the person's leg ended before it was answered: {other:?}")),
    }
}

/// One transfer (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    phase: Phase,
}

impl Transfer {
    /// Starts a transfer: the REFER, or the person's leg at once.
    pub fn start(method: Method) -> (Self, Vec<Step>) {
        match method {
            Method::Refer => (Self { phase: Phase::Referring }, vec![Step::Refer]),
            Method::Dial => (Self { phase: Phase::Dialling }, vec![Step::Dial]),
        }
    }

    /// Where the transfer is.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// Whether the transfer is over (a new one may start).
    pub fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    /// Whether a person's leg is placed and not yet over (its events are awaited).
    pub fn has_person(&self) -> bool {
        matches!(self.phase, Phase::Dialling | Phase::Ringing | Phase::Answered(_) | Phase::Bridged)
    }

    fn over(&mut self, steps: Vec<Step>) -> Vec<Step> {
        self.phase = Phase::Over;
        steps
    }

    /// How the REFER goes: a refusal that says the caller's side takes no REFER dials the
    /// person; any other end is the transfer's end.
    pub fn refer(&mut self, progress: TransferProgress) -> Vec<Step> {
        if self.phase != Phase::Referring {
            return Vec::new();
        }
        match progress {
            TransferProgress::Ended(TransferEnd::Refused { status, .. }) if refer_refused(status) => {
                self.phase = Phase::Dialling;
                vec![Step::Dial]
            }
            TransferProgress::Ended(end) => self.over(vec![Step::Report(end)]),
            TransferProgress::Accepted | TransferProgress::Trying(_) => Vec::new(),
        }
    }

    /// The person's leg could not be placed (no port, a host that does not resolve): the
    /// transfer ends with `end`.
    pub fn dial_failed(&mut self, end: TransferEnd) -> Vec<Step> {
        if !matches!(self.phase, Phase::Dialling | Phase::Ringing) {
            return Vec::new();
        }
        self.over(vec![Step::Report(end)])
    }

    /// What happened on the person's leg.
    pub fn person(&mut self, event: &CallEvent) -> Vec<Step> {
        match (&self.phase, event) {
            (Phase::Dialling | Phase::Ringing, CallEvent::Progress(180 | 183)) => {
                self.phase = Phase::Ringing;
                Vec::new()
            }
            (Phase::Dialling | Phase::Ringing, CallEvent::Established(media)) => {
                self.phase = Phase::Answered(media.clone());
                vec![Step::Report(TransferEnd::Target { status: 200, reason: "OK".to_owned() })]
            }
            (Phase::Dialling | Phase::Ringing, CallEvent::Ended(reason)) => {
                self.over(vec![Step::Report(end_of(reason))])
            }
            (Phase::Answered(_), CallEvent::MediaChanged(media)) => {
                self.phase = Phase::Answered(media.clone());
                Vec::new()
            }
            // The person hung up once answered: the agent was already told `transferred`, so
            // the caller's leg goes too.
            (Phase::Answered(_) | Phase::Bridged, CallEvent::Ended(_)) => self.over(vec![Step::HangUp(Leg::Caller)]),
            _ => Vec::new(),
        }
    }

    /// The agent's session ended: once the person answered, the legs are bridged; while the
    /// person's phone still rings, its leg is cancelled (the caller's leg ends with the
    /// session as any call does).
    pub fn session_ended(&mut self) -> Vec<Step> {
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Answered(media) => {
                self.phase = Phase::Bridged;
                vec![Step::Bridge(media)]
            }
            Phase::Dialling | Phase::Ringing => vec![Step::HangUp(Leg::Person)],
            Phase::Bridged => {
                self.phase = Phase::Bridged;
                Vec::new()
            }
            Phase::Referring | Phase::Over => Vec::new(),
        }
    }

    /// The caller hung up: a person's leg placed for them goes too. While dialling the agent
    /// is told the transfer did not happen.
    pub fn caller_ended(&mut self) -> Vec<Step> {
        match self.phase {
            Phase::Dialling | Phase::Ringing => self.over(vec![
                Step::HangUp(Leg::Person),
                Step::Report(TransferEnd::Abandoned("the caller hung up while the person's phone rang".to_owned())),
            ]),
            Phase::Answered(_) | Phase::Bridged => self.over(vec![Step::HangUp(Leg::Person)]),
            Phase::Referring | Phase::Over => self.over(Vec::new()),
        }
    }
}

#[cfg(test)]
#[path = "bridge_tests.rs"]
mod tests;
