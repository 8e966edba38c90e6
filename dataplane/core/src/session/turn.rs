//! The turn: the one place the session's phase moves (the shape of quinn-proto's
//! `connection/state.rs`). [`Turn`] owns the phase, the turn's number and its model rounds,
//! and the typed inputs waiting for it; the phase is private, so every transition is one of
//! the methods here, each asserting (in debug builds) the phases it may come from.
//!
//! A text turn goes `Idle -> Model (-> Tools -> Model)* -> Idle`; a voice turn has no model
//! calls of its own (the stream is the model) and goes `Idle (-> Tools -> Idle)*`. A turn
//! whose tool calls hand the session over ends in `HandedOff`; `Ended` is final, and so is
//! `HandedOff` but for the end itself.

use std::collections::VecDeque;

/// Most model calls with tool use in one user turn; then the turn ends with an error.
pub const MAX_TOOL_ROUNDS: u32 = 8;
/// Most user inputs waiting while a turn is in progress; more are refused.
pub const MAX_QUEUED_INPUTS: usize = 16;

/// Where the session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Between turns (voice: also while the stream answers by itself).
    Idle,
    /// A model call is in flight (text).
    Model,
    /// Tool calls of the turn are under way.
    Tools,
    /// The session moved to another agent.
    HandedOff,
    /// The session is over.
    Ended,
}

/// The turn in progress, its phase and the inputs queued behind it.
#[derive(Debug)]
pub(crate) struct Turn {
    phase: Phase,
    /// The number of the latest turn (`bidi_response_start.turn`); 0 before the first.
    number: u64,
    /// Model calls with tool use in this turn.
    rounds: u32,
    /// Typed inputs waiting for the turn in progress: text and id.
    queue: VecDeque<(String, Option<String>)>,
}

/// How [`Turn::end`] found the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It was live: it ends here (and says so).
    Live,
    /// It had moved to another agent: it ends quietly.
    HandedOff,
    /// It had ended already.
    Over,
}

impl Default for Turn {
    fn default() -> Self {
        Self { phase: Phase::Idle, number: 0, rounds: 0, queue: VecDeque::new() }
    }
}

impl Turn {
    /// The latest turn's number.
    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    /// Model calls with tool use in this turn.
    pub(crate) fn rounds(&self) -> u32 {
        self.rounds
    }

    /// Whether the session waits for nothing (between turns, or voice while the stream works).
    pub(crate) fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// Whether a model call is in flight.
    pub(crate) fn in_model(&self) -> bool {
        self.phase == Phase::Model
    }

    /// Whether the turn's tool calls are under way.
    pub(crate) fn in_tools(&self) -> bool {
        self.phase == Phase::Tools
    }

    /// Whether a text turn is in progress (a model call or tool calls).
    pub(crate) fn is_busy(&self) -> bool {
        matches!(self.phase, Phase::Model | Phase::Tools)
    }

    /// Whether the session moved to another agent.
    pub(crate) fn is_handed_off(&self) -> bool {
        self.phase == Phase::HandedOff
    }

    /// Whether the session ended.
    pub(crate) fn is_ended(&self) -> bool {
        self.phase == Phase::Ended
    }

    /// Whether the session is over (ended or handed off).
    pub(crate) fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Ended | Phase::HandedOff)
    }

    /// A new turn opens: its number, no rounds yet. The phase is the caller's next move.
    pub(crate) fn open(&mut self) -> u64 {
        debug_assert!(!self.is_over(), "a turn opens in a live session, not {:?}", self.phase);
        self.number += 1;
        self.rounds = 0;
        self.number
    }

    /// A model call goes out: for a new turn (`Idle`), after tool results (`Tools`), or
    /// again after a refusal as too long (`Model`).
    pub(crate) fn enter_model(&mut self) {
        debug_assert!(
            matches!(self.phase, Phase::Idle | Phase::Model | Phase::Tools),
            "model call from {:?}",
            self.phase
        );
        self.phase = Phase::Model;
    }

    /// A model reply asked for tools: one more round.
    pub(crate) fn enter_tools_after_reply(&mut self) {
        debug_assert_eq!(self.phase, Phase::Model, "a reply's tool calls follow a model call");
        self.rounds += 1;
        self.phase = Phase::Tools;
    }

    /// A voice model called a tool inside its stream.
    pub(crate) fn enter_tools(&mut self) {
        debug_assert!(matches!(self.phase, Phase::Idle | Phase::Tools), "a voice call from {:?}", self.phase);
        self.phase = Phase::Tools;
    }

    /// The turn's work is done, or — voice — its tool results went into the stream.
    pub(crate) fn enter_idle(&mut self) {
        debug_assert!(!self.is_over(), "back to idle from {:?}", self.phase);
        self.phase = Phase::Idle;
    }

    /// The turn's tool calls handed the session over.
    pub(crate) fn hand_off(&mut self) {
        debug_assert_eq!(self.phase, Phase::Tools, "a handoff comes from a tool call");
        self.phase = Phase::HandedOff;
    }

    /// The session ends, whatever it was doing; the queue goes with it.
    pub(crate) fn end(&mut self) -> Ending {
        let ending = match self.phase {
            Phase::Ended => return Ending::Over,
            Phase::HandedOff => Ending::HandedOff,
            _ => Ending::Live,
        };
        self.phase = Phase::Ended;
        self.queue.clear();
        ending
    }

    /// The model call of now: the turn's number and its round.
    pub(crate) fn call(&self) -> (u64, u32) {
        (self.number, self.rounds)
    }

    /// Queues typed input for after the turn in progress; `false` when the queue is full.
    pub(crate) fn queue(&mut self, text: String, id: Option<String>) -> bool {
        if self.queue.len() >= MAX_QUEUED_INPUTS {
            return false;
        }
        self.queue.push_back((text, id));
        true
    }

    /// The next queued input, if any.
    pub(crate) fn next_queued(&mut self) -> Option<(String, Option<String>)> {
        self.queue.pop_front()
    }

    /// How many inputs wait.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_turn_moves_through_its_phases() {
        let mut turn = Turn::default();
        assert!(turn.is_idle() && !turn.is_busy());
        assert_eq!(turn.open(), 1);
        turn.enter_model();
        assert!(turn.in_model() && turn.is_busy());
        turn.enter_tools_after_reply();
        assert!(turn.in_tools());
        assert_eq!(turn.call(), (1, 1));
        turn.enter_model();
        turn.enter_idle();
        assert!(turn.is_idle());
        assert_eq!(turn.open(), 2);
        assert_eq!(turn.rounds(), 0, "a new turn starts without rounds");
    }

    #[test]
    fn a_handoff_ends_quietly_and_an_end_is_final() {
        let mut turn = Turn::default();
        turn.open();
        turn.enter_tools();
        turn.hand_off();
        assert!(turn.is_handed_off() && turn.is_over());
        assert_eq!(turn.end(), Ending::HandedOff);
        assert!(turn.is_ended());
        assert_eq!(turn.end(), Ending::Over);
    }

    #[test]
    fn the_queue_is_bounded_and_cleared_at_the_end() {
        let mut turn = Turn::default();
        for i in 0..MAX_QUEUED_INPUTS {
            assert!(turn.queue(format!("{i}"), None));
        }
        assert!(!turn.queue("one more".into(), None), "full");
        assert_eq!(turn.next_queued(), Some(("0".into(), None)));
        assert_eq!(turn.queued(), MAX_QUEUED_INPUTS - 1);
        assert_eq!(turn.end(), Ending::Live);
        assert_eq!(turn.queued(), 0);
    }

    #[test]
    #[should_panic(expected = "a handoff comes from a tool call")]
    #[cfg(debug_assertions)]
    fn a_handoff_from_idle_is_refused() {
        Turn::default().hand_off();
    }
}
