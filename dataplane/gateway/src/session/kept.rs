//! What the gateway keeps of a session from the runtime's messages — pure, so each rule is
//! unit-tested: the memory (`memory_update`), the conversation (final transcript lines),
//! the handoff a runtime announced, the agent the session may return to, and the typed
//! inputs a runtime has not taken up yet.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use switchboard_core::handoff::{HandoffContext, HandoffKind, HistoryTurn, WorkflowSnapshot};
use switchboard_core::protocol::{ClientMessage, ServerKind, ServerMessage, TranscriptRole, decode_client};

/// History lines kept per session (oldest dropped first).
pub const MAX_HISTORY: usize = 200;
/// Memory keys kept per session.
pub const MAX_MEMORY_KEYS: usize = 256;
/// Typed inputs tracked per session (oldest dropped first).
pub const MAX_IN_FLIGHT: usize = 64;
/// Workflow nodes remembered as visited (oldest dropped first).
pub const MAX_VISITED: usize = 64;
/// Bytes of history text kept per session (oldest lines dropped first). A grant carries at
/// most [`switchboard_core::grant::MAX_PAYLOAD_BYTES`] anyway, compacted to fit.
pub const MAX_HISTORY_BYTES: usize = 128 * 1024;
/// Bytes of memory values (as JSON) kept per session; an update past it is not kept.
pub const MAX_MEMORY_BYTES: usize = 64 * 1024;
/// Bytes of typed inputs tracked per session (oldest dropped first).
pub const MAX_IN_FLIGHT_BYTES: usize = 128 * 1024;
/// The most a [`Kept`] holds in the bytes above: part of a session's memory budget.
pub const MAX_KEPT_BYTES: usize = MAX_HISTORY_BYTES + MAX_MEMORY_BYTES + MAX_IN_FLIGHT_BYTES;

/// A session's state as the gateway holds it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    /// The agent serving the session (names its workflow position).
    pub agent: String,
    /// Session memory.
    pub memory: BTreeMap<String, serde_json::Value>,
    /// The conversation, oldest first.
    pub history: Vec<HistoryTurn>,
    /// The agent the current one may return to (from the transfer that brought it).
    pub return_to: Option<String>,
    /// The target and context of a handoff the runtime announced, until it closes.
    #[serde(skip)]
    pub pending_handoff: Option<(String, HandoffContext)>,
    /// The runtime is answering a turn: from the user's input taken up (its final
    /// transcript line) or `bidi_response_start`, to `bidi_response_complete`.
    #[serde(skip)]
    pub turn_open: bool,
    /// The runtime ended its turn for a handoff (`stop_reason` `handoff`): the handoff
    /// message and its close follow.
    #[serde(skip)]
    pub handoff_expected: bool,
    /// The session's turn: user inputs taken up so far, across agents and pods. A handoff
    /// happens inside a turn, so its source and target log the same turn.
    pub turn: u64,
    /// Where the session is in the current agent's workflow (from its transitions).
    pub workflow: Option<WorkflowSnapshot>,
    /// Typed inputs sent to the runtime that it has not taken up yet (it echoes each as a
    /// final user transcript line when its turn begins; a busy agent queues them). A runtime
    /// that hands off or is lost takes its queue with it: these go to the next.
    pub in_flight: VecDeque<String>,
}

impl Kept {
    /// Notes what a runtime's message (its JSON text) tells about the session.
    pub fn observe(&mut self, text: &str) {
        // Reply audio and streamed pieces are most of the traffic and carry no state: not
        // parsed (the runtime writes `type` first).
        if !carries_state(text) {
            return;
        }
        let Ok(message) = serde_json::from_str::<ServerMessage>(text) else { return };
        match message {
            ServerMessage::MemoryUpdate { key, value } => {
                if value.is_null() {
                    self.memory.remove(&key);
                } else if self.memory.len() < MAX_MEMORY_KEYS || self.memory.contains_key(&key) {
                    let others =
                        self.memory.iter().filter(|(k, _)| **k != key).map(|(k, v)| entry_bytes(k, v)).sum::<usize>();
                    if others + entry_bytes(&key, &value) <= MAX_MEMORY_BYTES {
                        self.memory.insert(key, value);
                    } else {
                        tracing::warn!(%key, "a memory update past the session's {MAX_MEMORY_BYTES} bytes of memory is not kept");
                    }
                }
            }
            ServerMessage::BidiTranscriptStream { role, text, delta: false, is_final: true } => {
                if role == TranscriptRole::User {
                    // The user's input was taken up: its answer is under way.
                    self.turn_open = true;
                    self.turn += 1;
                    if let Some(at) = self.in_flight.iter().position(|t| *t == text) {
                        self.in_flight.remove(at);
                    }
                }
                self.remember(HistoryTurn { role, text });
            }
            ServerMessage::Handoff { to, context, .. } => self.pending_handoff = Some((to, *context)),
            ServerMessage::WorkflowTransition { from, to, .. } => {
                let position = self.workflow.get_or_insert_with(|| WorkflowSnapshot {
                    agent: self.agent.clone(),
                    node: from.clone(),
                    visited: vec![from],
                });
                if position.visited.len() == MAX_VISITED {
                    position.visited.remove(0);
                }
                position.visited.push(to.clone());
                position.node = to;
            }
            ServerMessage::BidiResponseStart { .. } => self.turn_open = true,
            ServerMessage::BidiResponseComplete { stop_reason, .. } => {
                self.turn_open = false;
                self.handoff_expected = stop_reason == "handoff";
            }
            // The agent refused the newest input (too many waiting): it is not in flight.
            ServerMessage::BidiError { code, .. } if code == "busy" => {
                self.in_flight.pop_back();
            }
            _ => {}
        }
    }

    /// Notes a client frame sent to the runtime; true when it was a typed input that is not
    /// blank (tracked here until the runtime takes it up).
    pub fn track(&mut self, frame: &str) -> bool {
        if !frame.contains("bidi_text_input") {
            return false;
        }
        let Ok(ClientMessage::BidiTextInput { text }) = decode_client(frame) else { return false };
        // A blank input is refused by the agent (`empty_text`), never taken up: nothing to
        // wait for or to send again.
        if text.trim().is_empty() {
            return false;
        }
        self.in_flight.push_back(text);
        while self.in_flight.len() > MAX_IN_FLIGHT
            || (self.in_flight.len() > 1 && self.in_flight.iter().map(String::len).sum::<usize>() > MAX_IN_FLIGHT_BYTES)
        {
            self.in_flight.pop_front();
        }
        true
    }

    /// Adds a line to the history, dropping the oldest past [`MAX_HISTORY`] lines or
    /// [`MAX_HISTORY_BYTES`] (the newest line always stays).
    fn remember(&mut self, line: HistoryTurn) {
        self.history.push(line);
        let mut bytes: usize = self.history.iter().map(|t| t.text.len()).sum();
        let mut drop = 0;
        while self.history.len() - drop > MAX_HISTORY || (self.history.len() - drop > 1 && bytes > MAX_HISTORY_BYTES) {
            bytes -= self.history[drop].text.len();
            drop += 1;
        }
        self.history.drain(..drop);
    }

    /// About how many bytes this holds (text of history, memory and typed inputs):
    /// at most [`MAX_KEPT_BYTES`] plus one line of each.
    pub fn bytes(&self) -> usize {
        self.history.iter().map(|t| t.text.len()).sum::<usize>()
            + self.memory.iter().map(|(k, v)| entry_bytes(k, v)).sum::<usize>()
            + self.in_flight.iter().map(String::len).sum::<usize>()
    }

    /// The session moves on with `context`: its memory and history are the handing-over
    /// runtime's; a transfer's return target is kept only once the move succeeds, so it
    /// is returned.
    pub fn hand_over(&mut self, context: &HandoffContext) -> Option<String> {
        self.memory = context.memory.clone();
        self.history = context.history.clone();
        context.return_to.clone().filter(|_| context.kind == HandoffKind::Transfer)
    }

    /// A handoff to `to` did not happen (`why`): the agent that asked for it stays with the
    /// caller and is told, as the last line of the conversation it is reopened with, so its
    /// next answer does not go on as if the caller had been transferred.
    pub fn handoff_failed(&mut self, to: &str, why: &str) {
        let text = format!(
            "[The transfer to {to} did not happen: {why}. The caller is still with me; I tell them and go on helping.]"
        );
        self.remember(HistoryTurn { role: TranscriptRole::Assistant, text });
    }

    /// The tracked inputs, as the frames to send the next runtime.
    pub fn replay(&self) -> impl Iterator<Item = String> + '_ {
        self.in_flight
            .iter()
            .filter_map(|text| serde_json::to_string(&ClientMessage::BidiTextInput { text: text.clone() }).ok())
    }
}

/// A memory entry's size: its key and its value as JSON.
fn entry_bytes(key: &str, value: &serde_json::Value) -> usize {
    key.len() + value.to_string().len()
}

/// Whether a runtime message may change what is kept, judged by its kind (and, for
/// transcripts, finality) without parsing it. Texts with no kind are parsed, to be safe.
fn carries_state(text: &str) -> bool {
    match ServerKind::peek(text) {
        Some(ServerKind::TranscriptStream) => text.contains(r#""is_final":true"#),
        Some(kind) => kind.carries_state(),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn say(role: &str, text: &str) -> String {
        json!({"type": "bidi_transcript_stream", "role": role, "text": text, "delta": false, "is_final": true})
            .to_string()
    }

    #[test]
    fn memory_and_history_follow_the_runtime_within_bounds() {
        let mut kept = Kept::default();
        kept.observe(&json!({"type": "memory_update", "key": "verifiedUser", "value": {"name": "Ada"}}).to_string());
        assert_eq!(kept.memory["verifiedUser"]["name"], "Ada");
        kept.observe(&json!({"type": "memory_update", "key": "verifiedUser", "value": null}).to_string());
        assert!(kept.memory.is_empty(), "null removes");
        for i in 0..=MAX_HISTORY {
            kept.observe(&say("assistant", &format!("line {i}")));
        }
        assert_eq!(kept.history.len(), MAX_HISTORY);
        assert_eq!(kept.history[0].text, "line 1", "the oldest went first");
        // Streamed pieces and reply audio are not history.
        let piece = json!({"type": "bidi_transcript_stream", "role": "assistant", "text": "x", "delta": true, "is_final": false});
        kept.observe(&piece.to_string());
        kept.observe(r#"{"type":"bidi_audio_stream","audio":"AAAA"}"#);
        assert_eq!(kept.history.len(), MAX_HISTORY);
        // A turn is open from its start to its completion.
        kept.observe(&json!({"type": "bidi_response_start", "turn": 1}).to_string());
        assert!(kept.turn_open);
        kept.observe(&json!({"type": "bidi_response_complete", "turn": 1, "stop_reason": "end_turn"}).to_string());
        assert!(!kept.turn_open);
    }

    #[test]
    fn the_workflow_position_follows_the_transitions_of_the_agent_serving() {
        let mut kept = Kept { agent: "idv".into(), ..Kept::default() };
        let step = |from: &str, to: &str| {
            json!({"type": "workflow_transition", "from": from, "to": to, "by": "model"}).to_string()
        };
        kept.observe(&step("collect", "verify"));
        kept.observe(&step("verify", "choose"));
        let position = kept.workflow.clone().expect("a position");
        assert_eq!((position.agent.as_str(), position.node.as_str()), ("idv", "choose"));
        assert_eq!(position.visited, ["collect", "verify", "choose"]);
        for i in 0..2 * MAX_VISITED {
            kept.observe(&step("a", &format!("n{i}")));
        }
        assert_eq!(kept.workflow.as_ref().map(|w| w.visited.len()), Some(MAX_VISITED), "bounded");
    }

    #[test]
    fn a_failed_handoff_is_the_last_line_the_source_agent_reads() {
        let mut kept = Kept::default();
        kept.observe(&say("assistant", "I'll transfer you to identity verification."));
        kept.handoff_failed("idv", "agent idv has no ready pod");
        let last = kept.history.last().expect("a line");
        assert_eq!(last.role, TranscriptRole::Assistant);
        assert!(
            last.text.contains("transfer to idv did not happen") && last.text.contains("no ready pod"),
            "{}",
            last.text
        );
    }

    #[test]
    fn typed_inputs_stay_in_flight_until_echoed_or_refused() {
        let mut kept = Kept::default();
        let typed = |text: &str| json!({"type": "bidi_text_input", "text": text}).to_string();
        assert!(kept.track(&typed("one")));
        assert!(kept.track(&typed("two")));
        assert!(kept.track(&typed("three")));
        assert!(!kept.track(r#"{"type":"close"}"#), "only typed inputs are tracked");
        kept.observe(&say("user", "one"));
        kept.observe(&say("assistant", "two"));
        assert_eq!(kept.turn, 1, "one user input taken up: turn 1");
        assert_eq!(kept.in_flight, ["two", "three"], "only the user's echo takes an input up");
        kept.observe(&json!({"type": "bidi_error", "code": "busy", "message": "m", "recoverable": true}).to_string());
        assert_eq!(kept.in_flight, ["two"], "the refused newest input is not in flight");
        let frames: Vec<ClientMessage> = kept.replay().map(|f| decode_client(&f).expect("a client frame")).collect();
        assert_eq!(frames, [ClientMessage::BidiTextInput { text: "two".into() }]);
    }

    #[test]
    fn history_memory_and_typed_inputs_are_bounded_in_bytes() {
        let mut kept = Kept::default();
        let long = "x".repeat(40 * 1024);
        for i in 0..10 {
            kept.observe(&say("assistant", &format!("{i}{long}")));
        }
        assert_eq!(kept.history.len(), 3, "128 KiB of 40 KiB lines: the newest three");
        assert!(kept.history[2].text.starts_with('9'));
        let huge = "y".repeat(MAX_HISTORY_BYTES + 1);
        kept.observe(&say("user", &huge));
        assert_eq!(kept.history.len(), 1, "one line past the budget stays alone: the newest is never dropped");

        let update = |key: &str, size: usize| {
            json!({"type": "memory_update", "key": key, "value": "z".repeat(size)}).to_string()
        };
        kept.observe(&update("a", 40 * 1024));
        kept.observe(&update("b", 40 * 1024));
        assert!(kept.memory.contains_key("a") && !kept.memory.contains_key("b"), "past 64 KiB, not kept");
        kept.observe(&update("a", 10));
        kept.observe(&update("b", 40 * 1024));
        assert!(kept.memory.contains_key("b"), "a smaller value made room");

        let typed = |text: &str| json!({"type": "bidi_text_input", "text": text}).to_string();
        for i in 0..8 {
            assert!(kept.track(&typed(&format!("{i}{}", "t".repeat(30 * 1024)))));
        }
        assert_eq!(kept.in_flight.len(), 4, "128 KiB of 30 KiB inputs");
        assert!(kept.in_flight[0].starts_with('4'), "the oldest went first");
        assert!(kept.bytes() <= MAX_KEPT_BYTES + huge.len(), "{}", kept.bytes());
    }
}
