//! Where the conversation is, from the session's point of view: whether a reply is under
//! way, which tool calls wait for results, whether the user spoke without being heard
//! yet — which decides turn boundaries for a stream switch —, which texts enter the
//! history (user transcripts and typed text, and FINAL, not interrupted, assistant text),
//! and which of the user's words still wait for a reply ([`super::reask`]).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use super::events::{ContentKind, GenerationStage, Role, SonicEvent, StopReason};
use super::history::{History, HistoryEntry, Speaker};
use super::reask::{Reask, Unanswered};

/// The conversation state of one session (carried across streams where it matters).
#[derive(Debug, Default)]
pub struct TurnState {
    responding: bool,
    open: HashSet<String>,
    texts: HashMap<String, HistoryEntry>,
    tool_calls: HashSet<String>,
    last_voiced: Option<Instant>,
    /// The user spoke and the model has not yet shown it heard (no transcript yet).
    voice_pending: bool,
    /// Typed texts already in the history, in case the model echoes them as transcripts.
    typed: Vec<String>,
    /// The user's words since the last complete reply.
    unanswered: Unanswered,
}

impl TurnState {
    /// The user's audio had a voiced frame.
    pub fn voiced(&mut self) {
        self.last_voiced = Some(Instant::now());
        self.voice_pending = true;
    }

    /// The user typed `text` (it enters the history now).
    pub fn typed(&mut self, text: &str, history: &mut History) {
        self.unanswered.heard(text, history.mark(), Instant::now());
        history.push(HistoryEntry::user(text));
        self.typed.push(text.trim().to_owned());
    }

    /// Whether `tool_use_id` was called on the current stream and not yet answered
    /// (it is answered now).
    pub fn answer_tool_call(&mut self, tool_use_id: &str) -> bool {
        self.tool_calls.remove(tool_use_id)
    }

    /// A new stream took over: what was under way on the old one is gone; the user's
    /// speech state carries over.
    pub fn new_stream(&mut self) {
        *self = Self {
            last_voiced: self.last_voiced,
            voice_pending: self.voice_pending,
            typed: std::mem::take(&mut self.typed),
            unanswered: std::mem::take(&mut self.unanswered),
            ..Self::default()
        };
    }

    /// Whether the user's words wait for a reply.
    pub fn owes_reply(&self) -> bool {
        self.unanswered.is_pending()
    }

    /// The stream is lost: the words its replacement is to answer ([`Unanswered::take`]).
    pub fn take_reask(&mut self) -> Option<Reask> {
        self.unanswered.take(Instant::now())
    }

    /// No reply under way, no tool call open, and the user not mid-utterance: either
    /// everything they said was heard (a transcript came back), or they have been quiet
    /// for `quiet` (voiced noise the model never took for speech).
    pub fn at_boundary(&self, quiet: Duration) -> bool {
        let quiet = self.last_voiced.is_none_or(|at| at.elapsed() >= quiet);
        !self.responding && self.tool_calls.is_empty() && (!self.voice_pending || quiet)
    }

    /// Follows one output event; finished texts go to `history`.
    pub fn observe(&mut self, event: &SonicEvent, history: &mut History) {
        match event {
            SonicEvent::CompletionStart { .. } => self.responding = true,
            SonicEvent::CompletionEnd { .. } => {
                // The reply ended, whole or otherwise: what it answered is not owed any more.
                self.responding = false;
                self.unanswered.replied(history.mark());
            }
            SonicEvent::ContentStart { content_id, kind, role, stage } => {
                if matches!(role, Role::User | Role::Assistant) {
                    self.responding = true;
                }
                if matches!(role, Role::Assistant | Role::Tool) {
                    self.unanswered.progress(Instant::now());
                }
                if *role == Role::User {
                    self.voice_pending = false;
                }
                self.open.insert(content_id.clone());
                let speaker = match (role, kind, stage) {
                    (Role::User, ContentKind::Text, _) => Some(Speaker::User),
                    (Role::Assistant, ContentKind::Text, Some(GenerationStage::Final)) => Some(Speaker::Assistant),
                    _ => None,
                };
                if let Some(speaker) = speaker {
                    self.texts.insert(content_id.clone(), HistoryEntry { speaker, text: String::new() });
                }
            }
            SonicEvent::Text { content_id, text, .. } => {
                if let Some(entry) = self.texts.get_mut(content_id) {
                    entry.text.push_str(text);
                }
            }
            SonicEvent::Audio { .. } => self.unanswered.progress(Instant::now()),
            SonicEvent::ToolUse { tool_use_id, .. } => {
                // The reply went on to a tool call: asked again, the tool would run twice.
                self.unanswered.settled();
                self.tool_calls.insert(tool_use_id.clone());
            }
            SonicEvent::ContentEnd { content_id, stop_reason, .. } => {
                self.content_end(content_id, stop_reason, history)
            }
            SonicEvent::Interrupted => {
                // The interrupted reply will not be completed; the user's new words follow.
                self.texts.retain(|_, entry| entry.speaker == Speaker::User);
                self.unanswered.settled();
            }
            _ => {}
        }
    }

    fn content_end(&mut self, content_id: &str, stop_reason: &StopReason, history: &mut History) {
        self.open.remove(content_id);
        let Some(entry) = self.texts.remove(content_id) else {
            return;
        };
        // The FINAL assistant text closes a reply turn (its audio ended before it).
        let turn_over = matches!(stop_reason, StopReason::EndTurn | StopReason::Interrupted);
        if turn_over && entry.speaker == Speaker::Assistant && self.open.is_empty() {
            self.responding = false;
        }
        if *stop_reason == StopReason::Interrupted {
            return;
        }
        if entry.speaker == Speaker::User
            && let Some(index) = self.typed.iter().position(|t| *t == entry.text.trim())
        {
            // The model's echo of typed text: already in the history.
            self.typed.remove(index);
            return;
        }
        if entry.speaker == Speaker::User {
            self.unanswered.heard(&entry.text, history.mark(), Instant::now());
        }
        history.push(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(id: &str, kind: ContentKind, role: Role, stage: Option<GenerationStage>) -> SonicEvent {
        SonicEvent::ContentStart { content_id: id.into(), kind, role, stage }
    }

    fn text(id: &str, text: &str) -> SonicEvent {
        SonicEvent::Text { content_id: id.into(), role: Role::Assistant, stage: None, text: text.into() }
    }

    fn end(id: &str, kind: ContentKind, stop_reason: StopReason) -> SonicEvent {
        SonicEvent::ContentEnd { content_id: id.into(), kind, stop_reason }
    }

    fn reply(turn: &mut TurnState, history: &mut History, n: u32, interrupted: bool) {
        let (u, s, a, f) = (format!("u{n}"), format!("s{n}"), format!("a{n}"), format!("f{n}"));
        let stop = if interrupted { StopReason::Interrupted } else { StopReason::EndTurn };
        for event in [
            SonicEvent::CompletionStart { completion_id: n.to_string() },
            start(&u, ContentKind::Text, Role::User, Some(GenerationStage::Final)),
            text(&u, &format!("question {n}")),
            end(&u, ContentKind::Text, StopReason::EndTurn),
            start(&s, ContentKind::Text, Role::Assistant, Some(GenerationStage::Speculative)),
            text(&s, &format!("draft {n}")),
            end(&s, ContentKind::Text, StopReason::PartialTurn),
            start(&a, ContentKind::Audio, Role::Assistant, None),
            end(&a, ContentKind::Audio, stop.clone()),
            start(&f, ContentKind::Text, Role::Assistant, Some(GenerationStage::Final)),
            text(&f, &format!("answer {n}")),
            end(&f, ContentKind::Text, stop),
        ] {
            assert!(!turn.at_boundary(Duration::ZERO) || matches!(event, SonicEvent::CompletionStart { .. }));
            turn.observe(&event, history);
        }
        // The FINAL text's end closes the turn.
        assert!(turn.at_boundary(Duration::ZERO));
        turn.observe(
            &SonicEvent::CompletionEnd { completion_id: n.to_string(), stop_reason: StopReason::EndTurn },
            history,
        );
    }

    #[test]
    fn only_transcripts_and_final_uninterrupted_text_enter_history() {
        let (mut turn, mut history) = (TurnState::default(), History::default());
        reply(&mut turn, &mut history, 1, false);
        reply(&mut turn, &mut history, 2, true);
        assert_eq!(
            history.entries(),
            &[HistoryEntry::user("question 1"), HistoryEntry::assistant("answer 1"), HistoryEntry::user("question 2")]
        );
        assert!(turn.at_boundary(Duration::ZERO));
    }

    #[test]
    fn unheard_speech_and_open_tool_calls_are_not_boundaries() {
        let (mut turn, mut history) = (TurnState::default(), History::default());
        turn.voiced();
        assert!(!turn.at_boundary(Duration::from_secs(60)), "the model has not heard it yet");
        assert!(turn.at_boundary(Duration::ZERO), "quiet long enough: it was noise");
        turn.observe(&start("u", ContentKind::Text, Role::User, None), &mut history);
        turn.observe(&end("u", ContentKind::Text, StopReason::EndTurn), &mut history);
        turn.observe(
            &SonicEvent::ToolUse { tool_use_id: "t".into(), name: "x".into(), input: serde_json::json!({}) },
            &mut history,
        );
        turn.observe(
            &SonicEvent::CompletionEnd { completion_id: "c".into(), stop_reason: StopReason::ToolUse },
            &mut history,
        );
        assert!(!turn.at_boundary(Duration::from_secs(60)), "a tool call waits for its result");
        assert!(turn.answer_tool_call("t"));
        assert!(!turn.answer_tool_call("t"));
        assert!(turn.at_boundary(Duration::from_secs(60)));
    }

    #[test]
    fn words_a_lost_stream_owed_a_reply_for_are_asked_again_without_the_cut_reply() {
        let (mut turn, mut history) = (TurnState::default(), History::default());
        reply(&mut turn, &mut history, 1, false);
        assert!(!turn.owes_reply(), "answered whole");
        assert_eq!(turn.take_reask(), None, "a close after the reply asks nothing");
        for event in [
            start("u", ContentKind::Text, Role::User, Some(GenerationStage::Final)),
            text("u", "question 2"),
            end("u", ContentKind::Text, StopReason::PartialTurn),
            start("f", ContentKind::Text, Role::Assistant, Some(GenerationStage::Final)),
            text("f", "The first half."),
            end("f", ContentKind::Text, StopReason::PartialTurn),
            start("a", ContentKind::Audio, Role::Assistant, None),
        ] {
            turn.observe(&event, &mut history);
        }
        assert!(turn.owes_reply(), "cut mid-reply");
        let reask = turn.take_reask().expect("asked again");
        assert_eq!(reask.ask, "question 2");
        let mark = reask.mark.expect("the history before the words");
        assert!(history.rewind(&mark));
        history.push(HistoryEntry::user(reask.said));
        assert_eq!(
            history.replay_without(&reask.ask),
            vec![HistoryEntry::user("question 1"), HistoryEntry::assistant("answer 1")],
            "the cut reply's part is left out, the words go as input"
        );
        turn.new_stream();
        assert!(turn.owes_reply(), "until the replacement answers");
        assert_eq!(turn.take_reask(), None, "once per utterance");
        assert!(!turn.owes_reply());
    }

    #[test]
    fn a_tool_call_or_a_barge_in_settles_the_words() {
        let (mut turn, mut history) = (TurnState::default(), History::default());
        turn.typed("check it", &mut history);
        assert!(turn.owes_reply());
        turn.observe(
            &SonicEvent::ToolUse { tool_use_id: "t".into(), name: "x".into(), input: serde_json::json!({}) },
            &mut history,
        );
        assert!(!turn.owes_reply(), "a re-asked tool call would run twice");
        turn.typed("and again", &mut history);
        turn.observe(&SonicEvent::Interrupted, &mut history);
        assert!(!turn.owes_reply());
    }

    #[test]
    fn typed_text_enters_history_once_even_when_echoed() {
        let (mut turn, mut history) = (TurnState::default(), History::default());
        turn.typed("hello there", &mut history);
        turn.observe(&start("u", ContentKind::Text, Role::User, Some(GenerationStage::Final)), &mut history);
        turn.observe(&text("u", "hello there"), &mut history);
        turn.observe(&end("u", ContentKind::Text, StopReason::EndTurn), &mut history);
        assert_eq!(history.entries(), &[HistoryEntry::user("hello there")]);
    }
}
