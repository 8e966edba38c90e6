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
//! `Over`. Exactly one [`Step::Report`] is given per cold transfer.
//!
//! A warm transfer ([`Transfer::warm`]) always dials (a REFER cannot wait for the agent to
//! brief the person): the caller is put on hold ([`Step::Hold`]: the edge's hold chime,
//! [`crate::media::hold`]) while the person's phone rings. When the person answers, their
//! leg takes the caller's place on the agent's session ([`Step::Brief`]: the agent's voice
//! goes to the person, the person's to the agent; the caller stays on hold) and the agent is
//! told `transferred`, so that it tells the person who is calling and why; its session ends
//! when the brief is over, and the legs are bridged as after a cold dial. Phases: `Dialling`
//! → `Ringing` → `Briefing` → `Bridged` → `Over`. A person who does not answer takes the
//! caller off hold ([`Step::Unhold`]) with the one report; a person who hangs up during the
//! brief does too, with a second report (`failed`: the person left), so that the agent,
//! which still has the caller, tells them.

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
    /// A warm transfer's person answered (with this media) and is on the agent's session,
    /// being briefed; the caller is on hold.
    Briefing(Negotiated),
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
    /// A warm transfer: the caller hears the hold chime instead of the agent, and the agent
    /// no longer hears the caller.
    Hold,
    /// A warm transfer: the person (with this media) takes the caller's place on the
    /// agent's session, to be briefed.
    Brief(Negotiated),
    /// A warm transfer that did not happen: the caller is back with the agent (the hold
    /// chime stops; the person's leg, if any, is off the session).
    Unhold,
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
    /// The agent briefs the person before the caller is put through.
    warm: bool,
}

impl Transfer {
    /// Starts a transfer: the REFER, or the person's leg at once.
    pub fn start(method: Method) -> (Self, Vec<Step>) {
        match method {
            Method::Refer => (Self { phase: Phase::Referring, warm: false }, vec![Step::Refer]),
            Method::Dial => (Self { phase: Phase::Dialling, warm: false }, vec![Step::Dial]),
        }
    }

    /// Starts a warm transfer: the caller on hold, and the person's leg at once.
    pub fn warm() -> (Self, Vec<Step>) {
        (Self { phase: Phase::Dialling, warm: true }, vec![Step::Hold, Step::Dial])
    }

    /// Whether the agent briefs the person first.
    pub fn is_warm(&self) -> bool {
        self.warm
    }

    /// Whether a warm transfer's person is on the agent's session now.
    pub fn is_briefing(&self) -> bool {
        matches!(self.phase, Phase::Briefing(_))
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
        matches!(
            self.phase,
            Phase::Dialling | Phase::Ringing | Phase::Answered(_) | Phase::Briefing(_) | Phase::Bridged
        )
    }

    fn over(&mut self, steps: Vec<Step>) -> Vec<Step> {
        self.phase = Phase::Over;
        steps
    }

    /// A transfer that did not happen: a warm one takes the caller off hold first.
    fn failed(&mut self, end: TransferEnd) -> Vec<Step> {
        let steps = if self.warm { vec![Step::Unhold, Step::Report(end)] } else { vec![Step::Report(end)] };
        self.over(steps)
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
        self.failed(end)
    }

    /// What happened on the person's leg.
    pub fn person(&mut self, event: &CallEvent) -> Vec<Step> {
        match (&self.phase, event) {
            (Phase::Dialling | Phase::Ringing, CallEvent::Progress(180 | 183)) => {
                self.phase = Phase::Ringing;
                Vec::new()
            }
            (Phase::Dialling | Phase::Ringing, CallEvent::Established(media)) => {
                let answered = Step::Report(TransferEnd::Target { status: 200, reason: "OK".to_owned() });
                if self.warm {
                    self.phase = Phase::Briefing(media.clone());
                    return vec![Step::Brief(media.clone()), answered];
                }
                self.phase = Phase::Answered(media.clone());
                vec![answered]
            }
            (Phase::Dialling | Phase::Ringing, CallEvent::Ended(reason)) => self.failed(end_of(reason)),
            (Phase::Answered(_), CallEvent::MediaChanged(media)) => {
                self.phase = Phase::Answered(media.clone());
                Vec::new()
            }
            (Phase::Briefing(_), CallEvent::MediaChanged(media)) => {
                self.phase = Phase::Briefing(media.clone());
                Vec::new()
            }
            // The person left during the brief: the caller is back with the agent, which
            // was told `transferred` and now hears that the person left.
            (Phase::Briefing(_), CallEvent::Ended(_)) => {
                self.failed(TransferEnd::Abandoned("the person hung up while the agent briefed them".to_owned()))
            }
            // The person hung up once answered: the agent was already told `transferred`, so
            // the caller's leg goes too.
            (Phase::Answered(_) | Phase::Bridged, CallEvent::Ended(_)) => self.over(vec![Step::HangUp(Leg::Caller)]),
            _ => Vec::new(),
        }
    }

    /// The agent's session ended: once the person answered (a warm transfer's brief is
    /// over), the legs are bridged; while the person's phone still rings, its leg is
    /// cancelled (the caller's leg ends with the session as any call does).
    pub fn session_ended(&mut self) -> Vec<Step> {
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Answered(media) | Phase::Briefing(media) => {
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
            Phase::Answered(_) | Phase::Briefing(_) | Phase::Bridged => self.over(vec![Step::HangUp(Leg::Person)]),
            Phase::Referring | Phase::Over => self.over(Vec::new()),
        }
    }
}

#[cfg(test)]
#[path = "bridge_tests.rs"]
mod tests;
