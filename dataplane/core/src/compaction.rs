//! Compaction of a session's conversation, the rules:
//!
//! - A text session compacts before a model call once the conversation nears its budget
//!   (`context`); a voice session at the end of each turn, to the smaller of its budget and
//!   what a Nova Sonic stream replays ([`VOICE_REPLAY_TOKENS`]), so a replacement stream
//!   starts with the summary (in its system prompt) and the recent turns.
//! - What is cut off is summarised at once, extractively, and the session asks for a model
//!   summary ([`Effect::Summarize`]) beside the conversation: nothing waits for it. When it
//!   arrives it replaces the summary (it covers the summary so far too); a late answer to
//!   an older compaction, a failure or an empty answer leaves the summary as it is.
//! - A model call refused as too long ([`Input::ContextTooLong`](crate::Input)) is answered
//!   by compacting harder and calling again, once per model call of a turn; a second
//!   refusal, or nothing left to cut, fails the turn as any model failure does.

use super::context;
use super::session::{Effect, Phase, Session};
use super::summary;
use crate::model::{ContentBlock, Message, Role};

/// The most tokens of history a voice session keeps verbatim: what a Nova Sonic stream
/// replays (40 KB of text, about four bytes a token).
pub const VOICE_REPLAY_TOKENS: usize = 40 * 1024 / 4;

/// A session's compaction state.
#[derive(Debug, Default)]
pub(super) struct Compaction {
    /// The latest compaction (its summary request's id); 0 before the first.
    latest: u64,
    /// The model call (turn, round) whose too-long refusal was answered by a retry.
    retried: Option<(u64, u32)>,
}

impl Session {
    /// The summary of compacted turns (empty when none were compacted).
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// The token budget of this session's conversation.
    fn budget(&self) -> usize {
        let budget = self.core.spec().model.context_tokens_for(&self.model_id) as usize;
        if self.voice { budget.min(VOICE_REPLAY_TOKENS) } else { budget }
    }

    /// Compacts when the conversation nears the budget (or, `hard`, whatever its size, to
    /// half of what is normally kept). The effects say so and ask for the model summary.
    pub(super) fn compact(&mut self, hard: bool) -> Vec<Effect> {
        let budget = self.budget();
        let fixed = self.system_prompt_ref().len();
        let dropped = if hard {
            context::compact_hard(&mut self.messages, budget)
        } else {
            context::compact(&mut self.messages, fixed, budget)
        };
        let Some(dropped) = dropped else { return Vec::new() };
        let count = dropped.len();
        self.turn_start = self.turn_start.saturating_sub(count);
        self.replay_len = self.replay_len.saturating_sub(count);
        let keep = context::summary_bytes(budget);
        let request = summary::request(&self.model_id, &self.summary, &dropped, keep);
        // The turns just cut get the room the summary so far leaves, and at least half.
        let extractive = context::summarize(&dropped, keep.saturating_sub(self.summary.len() + 1).max(keep / 2));
        let earlier = context::newest(&self.summary, keep.saturating_sub(extractive.len() + 1));
        self.summary = if earlier.is_empty() { extractive } else { format!("{earlier}\n{extractive}") };
        self.invalidate_prompt();
        self.compaction.latest += 1;
        let mut effects = vec![
            self.transcript("compaction", serde_json::json!({ "messages": count, "hard": hard })),
            Effect::Summarize { id: self.compaction.latest, request },
        ];
        if self.voice {
            effects.push(Effect::ForgetVoiceHistory { bytes: spoken_bytes(&dropped) });
        }
        effects
    }

    /// The model summary of compaction `id` arrived (or did not).
    pub(super) fn summary_arrived(&mut self, id: u64, outcome: Result<String, String>) -> Vec<Effect> {
        if id != self.compaction.latest {
            // A later compaction asked again, with this one's turns in its summary so far.
            return Vec::new();
        }
        let Some(text) = outcome.ok().and_then(|text| summary::bounded(&text, context::summary_bytes(self.budget())))
        else {
            return Vec::new();
        };
        self.summary = text;
        self.invalidate_prompt();
        vec![self.transcript("summary", serde_json::json!({ "chars": self.summary.chars().count() }))]
    }

    /// The model refused the call's context as too long: compact harder and call again, once.
    pub(super) fn context_too_long(&mut self, message: &str) -> Vec<Effect> {
        if self.phase != Phase::Model {
            return Vec::new();
        }
        let call = (self.turn, self.rounds);
        if self.compaction.retried != Some(call) {
            self.compaction.retried = Some(call);
            let mut effects = self.compact(true);
            if !effects.is_empty() {
                effects.extend(self.call_model());
                return effects;
            }
        }
        self.model_failed("context_too_long", &format!("the conversation is too long for the model: {message}"))
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
