//! What a session carries to another agent: the conversation reduced to text turns, the
//! handoff request with its context (reason, intent, verified user, workflow state,
//! return target with tail-call semantics, status and summary for returns), and the
//! model messages a receiving session rebuilds from carried turns.

use super::context;
use super::handoff::{HandoffContext, HandoffKind, HandoffRequest, HistoryTurn};
use super::session::Session;
use crate::model::{ContentBlock, Message, Role};
use crate::protocol::TranscriptRole;

impl Session {
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
