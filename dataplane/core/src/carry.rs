//! What a session carries to another agent: the conversation reduced to text turns, the
//! handoff request with its context (reason, intent, verified user, workflow state,
//! return target with tail-call semantics, status and summary for returns), the model
//! messages a receiving session rebuilds from carried turns, and the greeting a session
//! opens with — also after a transfer, when the receiving agent's Persona speaks first.

use super::context;
use super::handoff::{HandoffContext, HandoffKind, HandoffRequest, HistoryTurn};
use super::session::{Effect, Session, final_text};
use crate::model::{ContentBlock, Message, Role};
use crate::protocol::TranscriptRole;

impl Session {
    /// The greeting line a session opens with, and its record entry (empty when it does not
    /// greet): a new session's is the Persona's `greeting`; one that arrived by transfer
    /// greets only when the receiving Persona has `speakFirst` too — it speaks first, in its
    /// own voice, before it answers the carried request. A return is not greeted: the caller
    /// has met that agent already. The greeting is not part of the conversation sent to the
    /// model (the model answers the caller, not its own greeting).
    pub(super) fn greeting(&self) -> Vec<Effect> {
        let persona = &self.core.spec().persona.spec;
        let greets = match self.arrival.as_ref().map(|context| context.kind) {
            None => true,
            Some(HandoffKind::Transfer) => persona.speak_first,
            Some(HandoffKind::Return) => false,
        };
        match persona.greeting.as_deref().filter(|g| greets && !g.trim().is_empty()) {
            Some(greeting) => vec![
                Effect::Send(final_text(TranscriptRole::Assistant, greeting, None)),
                self.transcript("assistant", serde_json::json!({ "text": greeting })),
            ],
            None => Vec::new(),
        }
    }

    /// The conversation reduced to text turns, for a handoff.
    pub(super) fn history_turns(&self) -> Vec<HistoryTurn> {
        turns_of(&self.messages)
    }

    /// The handoff request for a transfer to `target` or a return, built from this session.
    pub(super) fn handoff_request(&self, target: &str, kind: HandoffKind, input: &serde_json::Value) -> HandoffRequest {
        let text = |key: &str| input.get(key).and_then(serde_json::Value::as_str).map(str::to_owned);
        let reason = text("reason").or_else(|| text("summary")).unwrap_or_default();
        let last_user_message = self.messages.iter().rev().find(|m| context::is_turn_start(m)).and_then(|m| {
            m.content.iter().find_map(|b| if let ContentBlock::Text(t) = b { Some(t.clone()) } else { None })
        });
        let (return_to, status, summary) = match kind {
            HandoffKind::Transfer => (self.return_to.clone().or_else(|| Some(self.core.name().to_owned())), None, None),
            HandoffKind::Return => {
                let status = input.get("status").and_then(|s| serde_json::from_value(s.clone()).ok());
                (None, Some(status.unwrap_or(super::ReturnStatus::Completed)), text("summary"))
            }
        };
        HandoffRequest {
            target: target.to_owned(),
            context: HandoffContext {
                from_agent: self.core.name().to_owned(),
                kind,
                intent: text("intent").or_else(|| self.memory.text_of("intent")).or_else(|| Some(reason.clone())),
                reason,
                last_user_message,
                verified_user: self.memory.get("verifiedUser").cloned(),
                workflow_state: super::WorkflowSnapshot {
                    agent: self.core.name().to_owned(),
                    node: self.workflow.node().to_owned(),
                    visited: self.workflow.visited().to_vec(),
                    skills: self.workflow.skills().to_vec(),
                },
                return_to,
                status,
                summary,
                memory: self.memory.as_map().clone(),
                history: self.history_turns(),
            },
        }
    }
}

/// `messages` reduced to text turns: tool blocks dropped, same-role neighbours joined.
pub(super) fn turns_of(messages: &[Message]) -> Vec<HistoryTurn> {
    let mut turns: Vec<HistoryTurn> = Vec::new();
    for message in messages {
        let text: Vec<&str> = message
            .content
            .iter()
            .filter_map(|b| if let ContentBlock::Text(t) = b { Some(t.as_str()) } else { None })
            .collect();
        if text.is_empty() {
            continue;
        }
        let role = if message.role == Role::User { TranscriptRole::User } else { TranscriptRole::Assistant };
        match turns.last_mut() {
            Some(last) if last.role == role => {
                last.text.push('\n');
                last.text.push_str(&text.join("\n"));
            }
            _ => turns.push(HistoryTurn { role, text: text.join("\n") }),
        }
    }
    turns
}

/// Model messages from carried text turns: leading assistant turns dropped (a
/// conversation starts with the user), consecutive turns of one role merged.
pub fn messages_from_history(turns: &[HistoryTurn]) -> Vec<Message> {
    let mut messages: Vec<Message> = Vec::new();
    for turn in turns.iter().skip_while(|t| t.role == TranscriptRole::Assistant) {
        if turn.text.trim().is_empty() {
            continue;
        }
        let role = if turn.role == TranscriptRole::User { Role::User } else { Role::Assistant };
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.push(ContentBlock::Text(turn.text.clone())),
            _ => messages.push(Message { role, content: vec![ContentBlock::Text(turn.text.clone())] }),
        }
    }
    messages
}
