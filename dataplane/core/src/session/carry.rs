//! Conversation as it travels between agents: reduced to text turns for a handoff (tool
//! blocks dropped, same-role neighbours joined), and rebuilt as model messages by the
//! receiving session. Pure functions; the handoff request itself is built by the shared
//! state (`common`), which knows the reason, the memory and the workflow.

use crate::handoff::HistoryTurn;
use crate::model::{ContentBlock, Message, Role};
use crate::protocol::TranscriptRole;

/// `messages` reduced to text turns: tool blocks dropped, same-role neighbours joined.
pub(crate) fn turns_of(messages: &[Message]) -> Vec<HistoryTurn> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_travel_as_text_and_come_back_as_messages() {
        let messages = vec![
            Message::user_text("hi"),
            Message { role: Role::Assistant, content: vec![ContentBlock::Text("hello".into())] },
            Message { role: Role::Assistant, content: vec![ContentBlock::Text("how can I help?".into())] },
        ];
        let turns = turns_of(&messages);
        assert_eq!(turns.len(), 2, "same-role neighbours join");
        assert_eq!(turns[1].text, "hello\nhow can I help?");
        let back = messages_from_history(&turns);
        assert_eq!(back.len(), 2);
        let greeting_first = [HistoryTurn { role: TranscriptRole::Assistant, text: "Welcome".into() }];
        assert!(messages_from_history(&greeting_first).is_empty(), "a conversation starts with the user");
    }
}
