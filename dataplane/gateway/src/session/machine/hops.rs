//! Handoff tracking: how many handoffs the current user turn has made (agents that pass a
//! caller back and forth are stopped, [`super::handoff`]), and when the last one began, so
//! its gap — from the source's close to the target's first frame — is measured once.
//! [`Hops`] owns both.

use std::time::Instant;

use crate::session::events::Note;

/// The handoffs of a session, as far as the rules count them.
#[derive(Debug, Default)]
pub(super) struct Hops {
    /// Handoffs in the current user turn: `(turn, count)`.
    per_turn: (u64, u32),
    /// When the last handoff began (the source's close), until the target's first frame:
    /// `(at, from, to)`.
    started: Option<(Instant, String, String)>,
}

impl Hops {
    /// Another handoff in user turn `turn`: how many that turn has made, this one included.
    pub(super) fn hop(&mut self, turn: u64) -> u32 {
        let (counted, count) = self.per_turn;
        self.per_turn = (turn, if counted == turn { count + 1 } else { 1 });
        self.per_turn.1
    }

    /// The handoff from `from` to `to` is made: its gap runs from `at`.
    pub(super) fn began(&mut self, at: Instant, from: String, to: String) {
        self.started = Some((at, from, to));
    }

    /// A frame of the runtime at `now`: the gap of the handoff that brought it, the first
    /// time.
    pub(super) fn first_frame(&mut self, now: Instant) -> Option<Note> {
        let (started, from, to) = self.started.take()?;
        let seconds = now.saturating_duration_since(started).as_secs_f64();
        Some(Note::HandoffGap { from, to, seconds })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn handoffs_are_counted_per_user_turn() {
        let mut hops = Hops::default();
        assert_eq!(hops.hop(0), 1, "the first turn is turn 0");
        assert_eq!(hops.hop(0), 2);
        assert_eq!(hops.hop(0), 3);
        assert_eq!(hops.hop(1), 1, "a new turn counts again");
        assert_eq!(hops.hop(1), 2);
        assert_eq!(hops.hop(3), 1);
    }

    #[test]
    fn the_gap_is_measured_once_from_the_handoff_to_the_first_frame() {
        let at = Instant::now();
        let mut hops = Hops::default();
        assert_eq!(hops.first_frame(at), None, "no handoff");
        hops.began(at, "bank/triage".into(), "bank/idv".into());
        let gap = hops.first_frame(at + Duration::from_millis(250));
        assert_eq!(gap, Some(Note::HandoffGap { from: "bank/triage".into(), to: "bank/idv".into(), seconds: 0.25 }));
        assert_eq!(hops.first_frame(at + Duration::from_secs(1)), None, "once");
    }
}
