//! The machine's phase and every move between phases, in one place. [`State`] holds each
//! phase's own data — why a runtime session is being opened ([`Purpose`], with
//! [`State::Opening`]), the attempt a pause waits to make (with [`State::Backoff`]), whether
//! the serving pod drains ([`Drain`], with [`State::Live`]) — so none of it outlives its
//! phase: a session that leaves the relay forgets its pod's drain, one that is done forgets
//! why it was opening. Each transition says where it may come from and asserts it (in debug
//! builds); the rest of the machine reads the state through [`State::phase`], the view the
//! relay task waits on.

use std::time::{Duration, Instant};

use crate::directory::Target;
use crate::resume::Missed;
use crate::session::events::{Ending, OpenRequest, Phase};

/// Where a session is, with what belongs to that phase alone.
#[derive(Debug)]
pub(in crate::session) enum State {
    /// A runtime session is being opened, for `purpose`.
    Opening { request: Box<OpenRequest>, purpose: Purpose },
    /// An attempt to open one failed: the next, after `pause`.
    Backoff { pause: Duration, retry: Retry },
    /// Relaying between the client and the runtime.
    Live { drain: Drain },
    /// The client is gone: the runtime may finish its turn until the deadline.
    Settling(Instant),
    /// Over for this task.
    Done(Ending),
}

/// Why the machine is opening a runtime session; what it does with the result.
#[derive(Debug)]
pub(in crate::session) enum Purpose {
    /// A new session.
    Start {
        /// A client message that came instead of `session_start`, for the runtime.
        pending: Option<String>,
    },
    /// To the target of a handoff.
    Handoff {
        /// `<namespace>/<name>` of the source.
        from: String,
        /// The name asked for.
        to: String,
        /// The source's target, restored when the handoff fails.
        previous: Box<Target>,
        /// The transfer's return target, kept once the move succeeds.
        return_to: Option<String>,
        /// Set when this is a resumed session's pending handoff.
        resumed: Option<Missed>,
    },
    /// Again on a pod of the same Agent (the attempts left after this one).
    Reopen(Retry),
    /// A resumed session, on its Agent: one attempt.
    Resume {
        /// What the client missed.
        missed: Missed,
    },
}

/// An attempt to open a session again on its Agent: what a [`State::Backoff`] waits to
/// make, and the purpose of the opening it makes ([`Purpose::Reopen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::session) struct Retry {
    /// Told to the client (`bidi_connection_restart.reason`).
    pub reason: String,
    /// Attempts left after the next one.
    pub attempts_left: u32,
}

/// Whether the pod serving a live session drains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::session) enum Drain {
    /// It serves.
    #[default]
    Serving,
    /// It drains: the session moves to another pod at its next turn boundary.
    Draining,
    /// It drains and no other pod is ready yet: the session stays on it (noted once).
    WaitingForPod,
}

impl Default for State {
    fn default() -> Self {
        Self::Live { drain: Drain::Serving }
    }
}

impl State {
    /// What the relay task waits on.
    pub(in crate::session) fn phase(&self) -> Phase<'_> {
        match self {
            Self::Opening { request, .. } => Phase::Opening(request),
            Self::Backoff { pause, .. } => Phase::Backoff(*pause),
            Self::Live { .. } => Phase::Live,
            Self::Settling(deadline) => Phase::Settling(*deadline),
            Self::Done(ending) => Phase::Done(ending),
        }
    }

    pub(in crate::session) fn is_live(&self) -> bool {
        matches!(self, Self::Live { .. })
    }

    pub(in crate::session) fn is_settling(&self) -> bool {
        matches!(self, Self::Settling(_))
    }

    pub(in crate::session) fn is_done(&self) -> bool {
        matches!(self, Self::Done(_))
    }

    /// Whether the serving pod drains (the session moves when another is ready).
    pub(in crate::session) fn draining(&self) -> bool {
        matches!(self, Self::Live { drain: Drain::Draining | Drain::WaitingForPod })
    }

    /// The serving pod's drain, while live.
    pub(in crate::session) fn drain(&self) -> Option<Drain> {
        match self {
            Self::Live { drain } => Some(*drain),
            _ => None,
        }
    }

    /// The serving pod's drain changed (only a live session has a pod to drain).
    pub(in crate::session) fn set_drain(&mut self, to: Drain) {
        match self {
            Self::Live { drain } => *drain = to,
            other => debug_assert!(false, "a drain noted while {other:?}"),
        }
    }

    /// Opens a runtime session for `purpose`: from the relay (a handoff, a move), a pause
    /// (the next attempt), or a session's start; never once it is done or settling.
    pub(in crate::session) fn open(&mut self, request: OpenRequest, purpose: Purpose) {
        debug_assert!(matches!(self, Self::Live { .. } | Self::Backoff { .. }), "opening from {self:?}");
        *self = Self::Opening { request: Box::new(request), purpose };
    }

    /// The runtime session being opened for `agent` (`namespace/name`), if one is: its
    /// streams open in `region` (the session was placed on the Agent's fallback region
    /// after the machine asked for it).
    pub(in crate::session) fn open_in(&mut self, agent: &str, region: &str) {
        if let Self::Opening { request, .. } = self
            && request.target.key() == agent
        {
            request.region = Some(region.to_owned());
        }
    }

    /// The runtime session asked for was opened (or not): what it was for, and the session
    /// relays again. `None` when none was being opened (the result is not for this phase).
    pub(in crate::session) fn opened(&mut self) -> Option<(Box<OpenRequest>, Purpose)> {
        match std::mem::take(self) {
            Self::Opening { request, purpose } => Some((request, purpose)),
            other => {
                *self = other;
                None
            }
        }
    }

    /// An attempt failed: `retry` after `pause`. From the relay, where a failed opening
    /// left the session.
    pub(in crate::session) fn back_off(&mut self, pause: Duration, retry: Retry) {
        debug_assert!(self.is_live(), "backing off from {self:?}");
        *self = Self::Backoff { pause, retry };
    }

    /// The pause is over: the attempt to make now (the session relays until it opens).
    /// `None` when not pausing.
    pub(in crate::session) fn retry_due(&mut self) -> Option<Retry> {
        match std::mem::take(self) {
            Self::Backoff { retry, .. } => Some(retry),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The client is gone while the runtime answers: it may finish until `deadline`. From
    /// the relay only.
    pub(in crate::session) fn settle(&mut self, deadline: Instant) {
        debug_assert!(self.is_live(), "settling from {self:?}");
        *self = Self::Settling(deadline);
    }

    /// The session is over for this task, as `ending` says; from any phase but done.
    pub(in crate::session) fn finish(&mut self, ending: Ending) {
        debug_assert!(!self.is_done(), "{self:?} ending again as {ending:?}");
        *self = Self::Done(ending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::Directory;

    fn request() -> OpenRequest {
        let directory = crate::session::tests::directory();
        let target = Directory::for_client(&directory, None, crate::directory::Reach::Live).expect("triage");
        OpenRequest { target, avoid: None, carried: Default::default(), variant: None, region: None }
    }

    #[test]
    fn an_opening_carries_its_purpose_and_gives_it_back_once() {
        let mut state = State::default();
        assert!(state.opened().is_none(), "nothing was being opened");
        state.open(request(), Purpose::Start { pending: Some("hi".into()) });
        assert!(matches!(state.phase(), Phase::Opening(r) if r.target.key() == "bank/triage"));
        let (_, purpose) = state.opened().expect("it was opening");
        assert!(matches!(purpose, Purpose::Start { pending: Some(ref p) } if p == "hi"));
        assert!(state.is_live() && state.opened().is_none(), "given back once; relaying again");
    }

    #[test]
    fn a_pause_holds_the_attempt_it_waits_to_make() {
        let mut state = State::default();
        let retry = Retry { reason: "runtime_lost".into(), attempts_left: 1 };
        state.back_off(Duration::from_millis(200), retry.clone());
        assert!(matches!(state.phase(), Phase::Backoff(pause) if pause == Duration::from_millis(200)));
        assert_eq!(state.retry_due(), Some(retry));
        assert!(state.is_live() && state.retry_due().is_none());
    }

    #[test]
    fn a_drain_belongs_to_the_live_relay_and_ends_with_it() {
        let mut state = State::default();
        assert_eq!(state.drain(), Some(Drain::Serving));
        state.set_drain(Drain::Draining);
        assert_eq!(state.drain(), Some(Drain::Draining));
        state.open(request(), Purpose::Reopen(Retry { reason: "runtime_draining".into(), attempts_left: 2 }));
        assert_eq!(state.drain(), None, "opening: no pod to drain");
        state.opened();
        assert_eq!(state.drain(), Some(Drain::Serving), "a new pod serves");
        state.settle(Instant::now());
        assert!(state.is_settling() && state.drain().is_none());
        state.finish(Ending::Park);
        assert!(state.is_done() && matches!(state.phase(), Phase::Done(Ending::Park)));
    }

    #[test]
    #[should_panic(expected = "ending again")]
    #[cfg(debug_assertions)]
    fn a_finished_session_does_not_end_twice() {
        let mut state = State::default();
        state.finish(Ending::Park);
        state.finish(Ending::Detach);
    }
}
