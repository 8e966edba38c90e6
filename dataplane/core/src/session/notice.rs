//! What a live voice stream is told when the session's state changes under it.
//!
//! A Nova Sonic stream's SYSTEM prompt is fixed for the stream's life, so a memory value
//! set by a tool's result (a verified caller) or a step the workflow took would reach the
//! model only through the next tool result or the next stream. Instead, the moment one
//! input changes the state, the session asks for [`VoiceEffect::StateChanged`]: one text
//! that says what changed — the memory values set, the step the workflow is at now and its
//! instruction — which the adapter sends into the live stream as text the model takes in
//! without answering (Nova 2 Sonic's text input: a `TEXT` content, role `USER`,
//! `interactive: false`). Streams opened later need no notice: their prompt is rebuilt.
//!
//! The changes are read off the effects the input produced (`memory_update` and
//! `workflow_transition` messages for the client), so every way the state changes is told,
//! and the notice goes right after the last of them: before the tool result that follows,
//! which the model answers already knowing. It is bounded ([`MAX_NOTICE_BYTES`]); a value
//! too long to tell is cut (the next stream's prompt has it whole).

use crate::events::{Effect, VoiceEffect};
use crate::protocol::ServerMessage;
use switchboard_crds::workflow::WorkflowSpec;

/// How a notice begins: it is not the caller's words, and nothing to answer.
pub const NOTICE_PREFIX: &str =
    "(Session update from the system, not the caller's words: take it in and do not answer it.)";
/// The longest notice, in bytes (Nova Sonic takes at most 1 KB per history message; a
/// notice stays within what the service takes for one text).
pub const MAX_NOTICE_BYTES: usize = 1024;
/// The longest rendering of one memory value in a notice, in characters.
const MAX_VALUE_CHARS: usize = 200;

/// The notice for the state changes among `effects` (`None`: nothing changed) and where
/// it goes: right after the last change. `workflow` is the Agent's, `node` the step the
/// session is at now.
pub(crate) fn notice(effects: &[Effect], workflow: &WorkflowSpec, node: &str) -> Option<(usize, String)> {
    let mut memory: Vec<(String, String)> = Vec::new();
    let mut moved = false;
    let mut last = None;
    for (at, effect) in effects.iter().enumerate() {
        match effect {
            Effect::Send(ServerMessage::MemoryUpdate { key, value }) => {
                let value = render(value);
                match memory.iter_mut().find(|(k, _)| k == key) {
                    Some(entry) => entry.1 = value,
                    None => memory.push((key.clone(), value)),
                }
                last = Some(at);
            }
            Effect::Send(ServerMessage::WorkflowTransition { .. }) => {
                moved = true;
                last = Some(at);
            }
            _ => {}
        }
    }
    let at = last?;
    let mut text = String::from(NOTICE_PREFIX);
    if !memory.is_empty() {
        let values: Vec<String> = memory.iter().map(|(key, value)| format!("{key}: {value}")).collect();
        text.push_str(&format!(" The session now knows: {}.", values.join("; ")));
    }
    if moved {
        match workflow.nodes.iter().find(|n| n.id == node) {
            Some(step) => {
                text.push_str(&format!(" The workflow is now at step \"{}\": {}", step.id, step.instruction.trim()))
            }
            None => text.push_str(&format!(" The workflow is now at step \"{node}\".")),
        }
    }
    Some((at + 1, cut(text, MAX_NOTICE_BYTES)))
}

/// Adds the notice for the state changes among `effects` after the last of them.
pub(crate) fn tell(effects: &mut Vec<Effect>, workflow: &WorkflowSpec, node: &str) -> Option<String> {
    let (at, text) = notice(effects, workflow, node)?;
    effects.insert(at, Effect::Voice(VoiceEffect::StateChanged(text.clone())));
    Some(text)
}

/// A memory value as the notice says it: text as it is, anything else as JSON; cut.
fn render(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text;
    }
    let mut short: String = text.chars().take(MAX_VALUE_CHARS).collect();
    short.push('…');
    short
}

/// `text` cut to at most `max` bytes, at a character boundary, marked when cut.
fn cut(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mark = "…";
    let mut end = max - mark.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{mark}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workflow() -> WorkflowSpec {
        serde_json::from_value(json!({
            "entry": "idv",
            "nodes": [
                { "id": "idv", "instruction": "Verify the caller." },
                { "id": "banking", "instruction": "Help with the account." },
            ],
        }))
        .expect("a workflow")
    }

    fn memory(key: &str, value: serde_json::Value) -> Effect {
        Effect::Send(ServerMessage::MemoryUpdate { key: key.into(), value })
    }

    fn moved(to: &str) -> Effect {
        Effect::Send(ServerMessage::WorkflowTransition { from: "idv".into(), to: to.into(), by: "condition".into() })
    }

    #[test]
    fn nothing_changed_nothing_told() {
        let effects = vec![Effect::Send(ServerMessage::BidiSpeechStarted {})];
        assert_eq!(notice(&effects, &workflow(), "idv"), None);
    }

    #[test]
    fn memory_and_the_new_step_are_told_after_the_last_change_before_the_tool_result() {
        let result = Effect::Voice(VoiceEffect::SendText("after".into()));
        let mut effects = vec![
            memory("verifiedUser", json!({"name": "Ada"})),
            memory("intent", json!("balance")),
            moved("banking"),
            result.clone(),
        ];
        let text = tell(&mut effects, &workflow(), "banking").expect("told");
        assert!(text.starts_with(NOTICE_PREFIX), "{text}");
        assert!(text.contains(r#"verifiedUser: {"name":"Ada"}; intent: balance."#), "{text}");
        assert!(text.contains("step \"banking\": Help with the account."), "{text}");
        assert_eq!(effects[3], Effect::Voice(VoiceEffect::StateChanged(text)));
        assert_eq!(effects[4], result, "the tool result follows the notice");
    }

    #[test]
    fn a_key_set_twice_is_told_once_with_its_latest_value() {
        let effects = vec![memory("intent", json!("a")), memory("intent", json!("b"))];
        let (at, text) = notice(&effects, &workflow(), "idv").expect("told");
        assert_eq!(at, 2);
        assert!(text.ends_with("The session now knows: intent: b."), "{text}");
    }

    #[test]
    fn long_values_and_notices_are_bounded() {
        let effects: Vec<Effect> = (0..20).map(|i| memory(&format!("key{i}"), json!("é".repeat(500)))).collect();
        let (_, text) = notice(&effects, &workflow(), "idv").expect("told");
        assert!(text.len() <= MAX_NOTICE_BYTES, "{}", text.len());
        assert!(text.ends_with('…'));
        let unknown = notice(&[moved("gone")], &workflow(), "gone").expect("told").1;
        assert!(unknown.ends_with("step \"gone\"."), "{unknown}");
    }
}
