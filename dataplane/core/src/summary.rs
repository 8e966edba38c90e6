//! The model-written summary of compacted turns: the request that asks the session's text
//! model for it, and the bounds its answer is held to.
//!
//! The model reads the summary so far (model-written or extractive) and the turns just cut
//! off — who said what, which tools were called and what they returned — and writes one
//! summary of all of it that replaces the summary so far. Its answer is not trusted: it is
//! trimmed and cut to the summary's share of the context budget, and an empty one is not
//! used.

use crate::model::{ContentBlock, Message, ModelRequest, Role};

/// What the model is told.
pub const INSTRUCTIONS: &str = "You summarise the earlier part of a conversation between a caller and an \
agent, so that the agent can go on with the conversation without it. In a few plain sentences say what the \
caller wants, what has been established (names, checks passed, figures, decisions), what the agent did \
(tools called and what they returned) and what is still open. State only what the transcript shows; do not \
guess. Keep every [redacted:...] marker as it is. Write the summary only, with no heading.";

/// The most transcript sent, in bytes (the newest part is kept).
pub const MAX_INPUT_BYTES: usize = 24 * 1024;
/// The longest line of the transcript sent, in characters.
const MAX_LINE_CHARS: usize = 1000;
/// The most tokens the model may write.
const MAX_OUTPUT_TOKENS: u32 = 1024;
/// The fewest tokens asked for, however small the budget.
const MIN_OUTPUT_TOKENS: u32 = 64;

/// The request for a summary of `previous` (the summary so far, may be empty) and the
/// messages `dropped`, from `model_id`, to fit `max_bytes`.
pub fn request(model_id: &str, previous: &str, dropped: &[Message], max_bytes: usize) -> ModelRequest {
    let mut request = ModelRequest::new(model_id.to_owned(), vec![Message::user_text(transcript(previous, dropped))]);
    request.system = INSTRUCTIONS.to_owned();
    // About four bytes a token; the answer is cut to `max_bytes` anyway.
    request.max_tokens = u32::try_from(max_bytes / 4).unwrap_or(u32::MAX).clamp(MIN_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS);
    request.temperature = 0.2;
    request
}

/// What the model reads: the summary so far, then one line per message part, the newest
/// [`MAX_INPUT_BYTES`] of it.
pub fn transcript(previous: &str, dropped: &[Message]) -> String {
    let mut lines = Vec::new();
    for message in dropped {
        for block in &message.content {
            lines.push(match (message.role, block) {
                (Role::User, ContentBlock::Text(text)) => format!("Caller: {}", line(text)),
                (Role::Assistant, ContentBlock::Text(text)) => format!("Agent: {}", line(text)),
                (_, ContentBlock::ToolUse(call)) => {
                    format!("[the agent called {} with {}]", call.name, line(&call.input.to_string()))
                }
                (_, ContentBlock::ToolResult(result)) => {
                    format!("[the tool returned {}]", line(&result.content.to_string()))
                }
            });
        }
    }
    let conversation = lines.join("\n");
    let text = if previous.trim().is_empty() {
        format!("The conversation:\n{conversation}")
    } else {
        format!("Summary of what came before:\n{}\n\nThe conversation after it:\n{conversation}", previous.trim())
    };
    super::context::newest(&text, MAX_INPUT_BYTES).to_owned()
}

/// The model's answer as kept: trimmed, at most `max_bytes` (cut at a character boundary,
/// keeping its start); `None` when nothing is left.
pub fn bounded(text: &str, max_bytes: usize) -> Option<String> {
    let text = text.trim();
    if text.is_empty() || max_bytes == 0 {
        return None;
    }
    let mut end = text.len().min(max_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(text[..end].trim_end().to_owned()).filter(|t| !t.is_empty())
}

fn line(text: &str) -> String {
    let text = text.trim().replace('\n', " ");
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ToolResult, ToolUse};

    fn conversation() -> Vec<Message> {
        vec![
            Message::user_text("What's my balance?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Text("Let me look.".into()),
                    ContentBlock::ToolUse(ToolUse {
                        id: "t1".into(),
                        name: "check_balance".into(),
                        input: serde_json::json!({}),
                    }),
                ],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult {
                    tool_use_id: "t1".into(),
                    content: serde_json::json!({ "balance": 12 }),
                    status: crate::model::ToolResultStatus::Success,
                })],
            },
        ]
    }

    #[test]
    fn the_request_carries_the_summary_so_far_and_every_part_of_the_turns_cut() {
        let request = request("amazon.nova-lite-v1:0", "The caller is Ada.", &conversation(), 600);
        assert_eq!(request.system, INSTRUCTIONS);
        assert_eq!(request.model_id, "amazon.nova-lite-v1:0");
        assert_eq!(request.max_tokens, 150);
        assert!(request.tools.is_empty());
        let ContentBlock::Text(text) = &request.messages[0].content[0] else { panic!("text") };
        assert_eq!(
            text,
            "Summary of what came before:\nThe caller is Ada.\n\nThe conversation after it:\nCaller: What's my balance?\n\
             Agent: Let me look.\n[the agent called check_balance with {}]\n[the tool returned {\"balance\":12}]"
        );
    }

    #[test]
    fn a_long_transcript_keeps_its_newest_part_and_asks_for_a_bounded_answer() {
        let long: Vec<Message> = (0..100).map(|i| Message::user_text(format!("{i:03} {}", "x".repeat(2000)))).collect();
        let request = request("m", "", &long, 1_000_000);
        let ContentBlock::Text(text) = &request.messages[0].content[0] else { panic!("text") };
        assert!(text.len() <= MAX_INPUT_BYTES);
        assert!(text.contains("Caller: 099 "), "the newest line is kept");
        assert!(!text.contains("Caller: 000 "));
        assert_eq!(request.max_tokens, MAX_OUTPUT_TOKENS);
        assert_eq!(super::request("m", "", &long, 8).max_tokens, MIN_OUTPUT_TOKENS);
    }

    #[test]
    fn the_answer_is_trimmed_bounded_at_a_character_boundary_and_never_empty() {
        assert_eq!(bounded("  The caller is Ada.  ", 100).as_deref(), Some("The caller is Ada."));
        assert_eq!(bounded("ééé", 3).as_deref(), Some("é"));
        assert_eq!(bounded(" \n ", 100), None);
        assert_eq!(bounded("text", 0), None);
    }
}
