//! The conversation: the messages as sent to the model, where the turn in progress starts
//! in them, the summary of what compaction cut off, and the compaction's own bookkeeping.
//! [`Conversation`] owns them; it knows nothing of the session around it, and what it does
//! it reports back as values (a [`Compacted`]) for the session to turn into effects.
//!
//! Compaction, the rules:
//!
//! - A text session compacts before a model call once the conversation nears its budget
//!   (`context`); a voice session at the end of each turn, to the smaller of its budget and
//!   what a Nova Sonic stream replays ([`VOICE_REPLAY_TOKENS`]), so a replacement stream
//!   starts with the summary (in its system prompt) and the recent turns.
//! - What is cut off is summarised at once, extractively, and the session asks for a model
//!   summary ([`Effect::Summarize`](crate::Effect::Summarize)) beside the conversation:
//!   nothing waits for it. When it arrives it replaces the summary (it covers the summary so
//!   far too); a late answer to an older compaction, a failure or an empty answer leaves the
//!   summary as it is.
//! - A model call refused as too long ([`Input::ContextTooLong`](crate::Input)) is answered
//!   by compacting harder and calling again, once per model call of a turn; a second
//!   refusal, or nothing left to cut, fails the turn as any model failure does.

use crate::context;
use crate::handoff::HistoryTurn;
use crate::model::{ContentBlock, Message, ModelRequest, Role};
use crate::summary;

use super::carry::{messages_from_history, turns_of};

/// The most tokens of history a voice session keeps verbatim: what a Nova Sonic stream
/// replays (40 KB of text, about four bytes a token).
pub const VOICE_REPLAY_TOKENS: usize = 40 * 1024 / 4;

/// The conversation of a session.
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    messages: Vec<Message>,
    /// Where the turn in progress starts in `messages` (what a failed turn is cut back to).
    turn_start: usize,
    /// The summary of compacted turns (empty when none were compacted).
    summary: String,
    /// The latest compaction (its summary request's id); 0 before the first.
    latest: u64,
    /// The model call (turn, round) whose too-long refusal was answered by a retry.
    retried: Option<(u64, u32)>,
}

/// What one compaction did.
#[derive(Debug)]
pub(crate) struct Compacted {
    /// Messages cut off.
    count: usize,
    /// Its summary request's id.
    id: u64,
    /// The model summary to ask for.
    request: ModelRequest,
    /// Bytes of what was said (user and assistant text) in what was cut off.
    spoken_bytes: usize,
}

impl Compacted {
    /// How many messages were cut off.
    pub(crate) fn messages_cut(&self) -> usize {
        self.count
    }

    /// Bytes of what was said (user and assistant text) in what was cut off: what a voice
    /// stream forgets.
    pub(crate) fn spoken_bytes(&self) -> usize {
        self.spoken_bytes
    }

    /// The model summary to ask for, with the id its answer comes back under.
    pub(crate) fn into_summary_request(self) -> (u64, ModelRequest) {
        (self.id, self.request)
    }
}

impl Conversation {
    /// A conversation carried over as text turns, after `summary` of what came before.
    pub(crate) fn from_history(turns: &[HistoryTurn], summary: String) -> Self {
        Self { messages: messages_from_history(turns), summary, ..Self::default() }
    }

    /// The messages.
    pub(crate) fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The summary of compacted turns.
    pub(crate) fn summary(&self) -> &str {
        &self.summary
    }

    /// The conversation reduced to text turns.
    pub(crate) fn turns(&self) -> Vec<HistoryTurn> {
        turns_of(&self.messages)
    }

    /// The first `len` messages reduced to text turns.
    pub(crate) fn turns_before(&self, len: usize) -> Vec<HistoryTurn> {
        turns_of(&self.messages[..len.min(self.messages.len())])
    }

    /// After a handoff: keeps the conversation up to the carried request (the last user
    /// turn), which the turn in progress answers; returns its index. Without one, the
    /// conversation starts empty.
    pub(crate) fn keep_request(&mut self) -> Option<usize> {
        match self.messages.iter().rposition(context::is_turn_start) {
            Some(last_user) => {
                self.messages.truncate(last_user + 1);
                self.turn_start = last_user;
                Some(last_user)
            }
            None => {
                self.messages.clear();
                None
            }
        }
    }

    /// The text of message `index`, its blocks joined by lines.
    pub(crate) fn text_of(&self, index: usize) -> String {
        let text: Vec<&str> = self.messages[index]
            .content
            .iter()
            .filter_map(|b| if let ContentBlock::Text(t) = b { Some(t.as_str()) } else { None })
            .collect();
        text.join("\n")
    }

    /// The first text of the user's last turn.
    pub(crate) fn last_user_text(&self) -> Option<String> {
        self.messages.iter().rev().find(|m| context::is_turn_start(m)).and_then(|m| {
            m.content.iter().find_map(|b| if let ContentBlock::Text(t) = b { Some(t.clone()) } else { None })
        })
    }

    /// The names of the tools the conversation has called, sorted, once each.
    pub(crate) fn tools_used(&self) -> Vec<&str> {
        let mut used: Vec<&str> = self
            .messages
            .iter()
            .flat_map(|m| m.content.iter())
            .filter_map(|b| if let ContentBlock::ToolUse(u) = b { Some(u.name.as_str()) } else { None })
            .collect();
        used.sort_unstable();
        used.dedup();
        used
    }

    /// A text turn opens with the user's `text`; it joins a user message left last (tool
    /// results of a turn that ended at the round limit).
    pub(crate) fn open_text_turn(&mut self, text: String) {
        self.turn_start = self.messages.len();
        match self.messages.last_mut() {
            Some(last) if last.role == Role::User => last.content.push(ContentBlock::Text(text)),
            _ => self.messages.push(Message::user_text(text)),
        }
    }

    /// The user said (or typed) `text` in a voice session: it joins the user's words last
    /// said. With `opens`, a turn starts at that message.
    pub(crate) fn add_user_words(&mut self, text: String, opens: bool) {
        match self.messages.last_mut() {
            Some(last) if context::is_turn_start(last) => last.content.push(ContentBlock::Text(text)),
            _ => self.messages.push(Message::user_text(text)),
        }
        if opens {
            self.turn_start = self.messages.len() - 1;
        }
    }

    /// The assistant's reply of a text model call.
    pub(crate) fn push_reply(&mut self, content: Vec<ContentBlock>) {
        self.messages.push(Message { role: Role::Assistant, content });
    }

    /// Something the assistant said or did (voice): it joins the assistant message last.
    pub(crate) fn add_assistant(&mut self, block: ContentBlock) {
        match self.messages.last_mut() {
            Some(last) if last.role == Role::Assistant => last.content.push(block),
            _ => self.messages.push(Message { role: Role::Assistant, content: vec![block] }),
        }
    }

    /// Tool results, as the user's message.
    pub(crate) fn push_results(&mut self, results: Vec<crate::model::ToolResult>) {
        self.messages
            .push(Message { role: Role::User, content: results.into_iter().map(ContentBlock::ToolResult).collect() });
    }

    /// The turn in progress failed: what it added is dropped.
    pub(crate) fn drop_turn(&mut self) {
        self.messages.truncate(self.turn_start);
    }

    /// Compacts when the conversation and `fixed_len` bytes of system prompt near `budget`
    /// tokens (or, `hard`, whatever its size, to half of what is normally kept). The summary
    /// takes in what was cut at once, extractively; the model summary is asked for.
    pub(crate) fn compact(&mut self, hard: bool, budget: usize, fixed_len: usize, model_id: &str) -> Option<Compacted> {
        let dropped = if hard {
            context::compact_hard(&mut self.messages, budget)
        } else {
            context::compact(&mut self.messages, fixed_len, budget)
        }?;
        let count = dropped.len();
        self.turn_start = self.turn_start.saturating_sub(count);
        let keep = context::summary_bytes(budget);
        let request = summary::request(model_id, &self.summary, &dropped, keep);
        // The turns just cut get the room the summary so far leaves, and at least half.
        let extractive = context::summarize(&dropped, keep.saturating_sub(self.summary.len() + 1).max(keep / 2));
        let earlier = context::newest(&self.summary, keep.saturating_sub(extractive.len() + 1));
        self.summary = if earlier.is_empty() { extractive } else { format!("{earlier}\n{extractive}") };
        self.latest += 1;
        Some(Compacted { count, id: self.latest, request, spoken_bytes: spoken_bytes(&dropped) })
    }

    /// The model summary of compaction `id` arrived (or did not): it replaces the summary
    /// when it answers the latest compaction and says something within `budget`'s share.
    /// Returns whether it was taken.
    pub(crate) fn summary_arrived(&mut self, id: u64, outcome: Result<String, String>, budget: usize) -> bool {
        if id != self.latest {
            // A later compaction asked again, with this one's turns in its summary so far.
            return false;
        }
        match outcome.ok().and_then(|text| summary::bounded(&text, context::summary_bytes(budget))) {
            Some(text) => {
                self.summary = text;
                true
            }
            None => false,
        }
    }

    /// Whether the model call `call` (turn, round), refused as too long, may be retried:
    /// once each.
    pub(crate) fn may_retry(&mut self, call: (u64, u32)) -> bool {
        if self.retried == Some(call) {
            return false;
        }
        self.retried = Some(call);
        true
    }
}

/// Bytes of what was said (user and assistant text) in `messages`.
fn spoken_bytes(messages: &[Message]) -> usize {
    messages
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant))
        .flat_map(|m| m.content.iter())
        .map(|b| if let ContentBlock::Text(text) = b { text.len() } else { 0 })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TranscriptRole;

    fn turn(role: TranscriptRole, text: &str) -> HistoryTurn {
        HistoryTurn { role, text: text.into() }
    }

    #[test]
    fn a_failed_turn_is_dropped_and_words_join() {
        let mut conversation = Conversation::from_history(&[turn(TranscriptRole::User, "hi")], String::new());
        conversation.push_reply(vec![ContentBlock::Text("hello".into())]);
        conversation.open_text_turn("balance?".into());
        assert_eq!(conversation.messages().len(), 3);
        conversation.drop_turn();
        assert_eq!(conversation.messages().len(), 2);
        conversation.add_user_words("one".into(), true);
        conversation.add_user_words("two".into(), false);
        assert_eq!(conversation.text_of(2), "one\ntwo");
        conversation.add_assistant(ContentBlock::Text("a".into()));
        conversation.add_assistant(ContentBlock::Text("b".into()));
        assert_eq!(conversation.messages().len(), 4);
        assert_eq!(conversation.last_user_text().as_deref(), Some("one"));
    }

    #[test]
    fn an_arrival_keeps_the_request_or_nothing() {
        let turns =
            [turn(TranscriptRole::User, "a"), turn(TranscriptRole::Assistant, "b"), turn(TranscriptRole::User, "c")];
        let mut conversation = Conversation::from_history(&turns, String::new());
        assert_eq!(conversation.keep_request(), Some(2));
        assert_eq!(conversation.turns_before(2).len(), 2);
        let mut empty = Conversation::from_history(&[turn(TranscriptRole::Assistant, "hello")], String::new());
        assert_eq!(empty.keep_request(), None);
        assert!(empty.messages().is_empty());
    }

    #[test]
    fn compaction_summarises_and_only_the_latest_summary_counts() {
        let mut conversation = Conversation::default();
        for i in 0..20 {
            conversation.open_text_turn(format!("turn {i} {}", "w".repeat(400)));
            conversation.push_reply(vec![ContentBlock::Text("r".repeat(400))]);
        }
        let first = conversation.compact(false, 1024, 0, "m").expect("over the budget");
        assert!(first.count > 0 && first.spoken_bytes > 0);
        assert!(!conversation.summary().is_empty(), "the extractive summary at once");
        assert!(context::is_turn_start(&conversation.messages()[0]));
        let second = conversation.compact(true, 1024, 0, "m").expect("hard");
        assert!(!conversation.summary_arrived(first.id, Ok("old".into()), 1024), "stale");
        assert!(!conversation.summary_arrived(second.id, Err("failed".into()), 1024));
        assert!(conversation.summary_arrived(second.id, Ok("the model's".into()), 1024));
        assert_eq!(conversation.summary(), "the model's");
    }

    #[test]
    fn a_refused_call_is_retried_once() {
        let mut conversation = Conversation::default();
        assert!(conversation.may_retry((1, 0)));
        assert!(!conversation.may_retry((1, 0)));
        assert!(conversation.may_retry((1, 1)), "the next call of the turn may be");
    }
}
