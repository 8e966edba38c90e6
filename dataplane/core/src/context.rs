//! The context-window guard: estimates the tokens of a conversation and, when it nears
//! the model's budget (`model.contextTokens`), cuts the oldest turns off, keeping the
//! recent turns verbatim. What was cut is summarised into the system prompt: at once by
//! [`summarize`] (extractive — each compacted message shortened to its start, deterministic,
//! no model call), then by the session's text model when its summary arrives (see
//! `compaction` and [`crate::summary`]).

use crate::model::{ContentBlock, Message, Role};

/// Compaction starts when the estimate passes this share of the budget...
pub const HIGH_WATER: f64 = 0.75;
/// ...and keeps recent messages worth at most this share.
pub const KEEP_SHARE: f64 = 0.4;
/// The summary is kept under this share of the budget.
pub const SUMMARY_SHARE: f64 = 0.15;
/// Longest excerpt of one message in the summary, in characters.
const EXCERPT_CHARS: usize = 160;

/// A rough token estimate: four bytes of text per token.
pub fn estimate_tokens(text_len: usize) -> usize {
    text_len.div_ceil(4)
}

/// Bytes of text in a message.
pub fn message_len(message: &Message) -> usize {
    message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.len(),
            ContentBlock::ToolUse(tool_use) => tool_use.name.len() + tool_use.input.to_string().len(),
            ContentBlock::ToolResult(result) => result.content.to_string().len(),
        })
        .sum()
}

/// Whether `message` opens a user turn (user text, not tool results).
pub fn is_turn_start(message: &Message) -> bool {
    message.role == Role::User && message.content.iter().all(|b| matches!(b, ContentBlock::Text(_)))
}

/// Compacts `messages` when `fixed_len` (system prompt bytes) plus the messages pass the
/// high-water mark of `budget_tokens`. Returns the messages cut off (to be summarised), or
/// `None` when nothing was compacted. The kept messages start with a user turn.
pub fn compact(messages: &mut Vec<Message>, fixed_len: usize, budget_tokens: usize) -> Option<Vec<Message>> {
    let total: usize = fixed_len + messages.iter().map(message_len).sum::<usize>();
    if (estimate_tokens(total) as f64) < budget_tokens as f64 * HIGH_WATER {
        return None;
    }
    cut_to(messages, (budget_tokens as f64 * KEEP_SHARE) as usize)
}

/// Compacts `messages` whatever their size, keeping at most half of what [`compact`] keeps
/// and at most half of what is there: for a provider that refused the context as too long
/// (its window is smaller than the budget said, or the estimate was low). `None` when only
/// the turn in progress is left.
pub fn compact_hard(messages: &mut Vec<Message>, budget_tokens: usize) -> Option<Vec<Message>> {
    let now = estimate_tokens(messages.iter().map(message_len).sum::<usize>());
    cut_to(messages, ((budget_tokens as f64 * KEEP_SHARE / 2.0) as usize).min(now / 2))
}

/// Cuts the oldest messages off so the rest — from a user turn's start — fits
/// `keep_budget` tokens; the turn in progress is always kept.
fn cut_to(messages: &mut Vec<Message>, keep_budget: usize) -> Option<Vec<Message>> {
    // Find the earliest turn start from which the tail fits the keep budget; never cut the
    // last turn start (the turn in progress).
    let mut cut = None;
    let mut tail = 0usize;
    for i in (0..messages.len()).rev() {
        tail += estimate_tokens(message_len(&messages[i]));
        if is_turn_start(&messages[i]) {
            if tail <= keep_budget || cut.is_none() {
                cut = Some(i);
            } else {
                break;
            }
        }
    }
    let cut = cut.filter(|&c| c > 0)?;
    Some(messages.drain(..cut).collect())
}

/// The most bytes of summary kept in the system prompt for `budget_tokens`.
pub fn summary_bytes(budget_tokens: usize) -> usize {
    (budget_tokens as f64 * SUMMARY_SHARE) as usize * 4
}

/// The newest part of `text` that fits `max_bytes`, cut at a character boundary.
pub fn newest(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut cut = text.len() - max_bytes;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    &text[cut..]
}

/// An extractive summary of `messages`, at most `max_bytes` long.
pub fn summarize(messages: &[Message], max_bytes: usize) -> String {
    let mut lines = Vec::new();
    for message in messages {
        for block in &message.content {
            let line = match (message.role, block) {
                (Role::User, ContentBlock::Text(text)) => format!("user: {}", excerpt(text)),
                (Role::Assistant, ContentBlock::Text(text)) => format!("agent: {}", excerpt(text)),
                (_, ContentBlock::ToolUse(call)) => format!("agent called {}", call.name),
                (_, ContentBlock::ToolResult(result)) => {
                    format!("tool result: {}", excerpt(&result.content.to_string()))
                }
            };
            lines.push(line);
        }
    }
    let mut out = String::new();
    for line in lines.iter().rev() {
        if out.len() + line.len() + 1 > max_bytes {
            break;
        }
        out = if out.is_empty() { line.clone() } else { format!("{line}\n{out}") };
    }
    out
}

fn excerpt(text: &str) -> String {
    let trimmed = text.trim();
    match trimmed.char_indices().nth(EXCERPT_CHARS) {
        Some((i, _)) => format!("{}...", &trimmed[..i]),
        None => trimmed.to_owned(),
    }
}
