//! What the gateway keeps of a session from the runtime's messages — pure, so each rule is
//! unit-tested: the memory (`memory_update`), the conversation (final transcript lines),
//! the handoff a runtime announced, the agent the session may return to, and the typed
//! inputs a runtime has not taken up yet.

use std::collections::{BTreeMap, VecDeque};

use switchboard_core::handoff::{HandoffContext, HandoffKind, HistoryTurn};
use switchboard_core::protocol::{ClientMessage, ServerMessage, TranscriptRole, decode_client};

/// History lines kept per session (oldest dropped first).
pub const MAX_HISTORY: usize = 200;
/// Memory keys kept per session.
pub const MAX_MEMORY_KEYS: usize = 256;
/// Typed inputs tracked per session (oldest dropped first).
pub const MAX_IN_FLIGHT: usize = 64;

/// A session's state as the gateway holds it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kept {
    /// Session memory.
    pub memory: BTreeMap<String, serde_json::Value>,
    /// The conversation, oldest first.
    pub history: Vec<HistoryTurn>,
    /// The agent the current one may return to (from the transfer that brought it).
    pub return_to: Option<String>,
    /// The target and context of a handoff the runtime announced, until it closes.
    pub pending_handoff: Option<(String, HandoffContext)>,
    /// Typed inputs sent to the runtime that it has not taken up yet (it echoes each as a
    /// final user transcript line when its turn begins; a busy agent queues them). A runtime
    /// that hands off or is lost takes its queue with it: these go to the next.
    pub in_flight: VecDeque<String>,
}

impl Kept {
    /// Notes what a runtime's message (its JSON text) tells about the session.
    pub fn observe(&mut self, text: &str) {
        // Reply audio is most of the traffic and carries no state: not parsed.
        if text.starts_with(r#"{"type":"bidi_audio_stream""#) {
            return;
        }
        let Ok(message) = serde_json::from_str::<ServerMessage>(text) else { return };
        match message {
            ServerMessage::MemoryUpdate { key, value } => {
                if value.is_null() {
                    self.memory.remove(&key);
                } else if self.memory.len() < MAX_MEMORY_KEYS || self.memory.contains_key(&key) {
                    self.memory.insert(key, value);
                }
            }
            ServerMessage::BidiTranscriptStream { role, text, delta: false, is_final: true } => {
                if role == TranscriptRole::User
                    && let Some(at) = self.in_flight.iter().position(|t| *t == text)
                {
                    self.in_flight.remove(at);
                }
                if self.history.len() == MAX_HISTORY {
                    self.history.remove(0);
                }
                self.history.push(HistoryTurn { role, text });
            }
            ServerMessage::Handoff { to, context, .. } => self.pending_handoff = Some((to, *context)),
            // The agent refused the newest input (too many waiting): it is not in flight.
            ServerMessage::BidiError { code, .. } if code == "busy" => {
                self.in_flight.pop_back();
            }
            _ => {}
        }
    }

    /// Notes a client frame sent to the runtime; true when it was a typed input (tracked
    /// here until the runtime takes it up).
    pub fn track(&mut self, frame: &str) -> bool {
        if !frame.contains("bidi_text_input") {
            return false;
        }
        let Ok(ClientMessage::BidiTextInput { text }) = decode_client(frame) else { return false };
        if self.in_flight.len() == MAX_IN_FLIGHT {
            self.in_flight.pop_front();
        }
        self.in_flight.push_back(text);
        true
    }

    /// The session moves on with `context`: its memory and history are the handing-over
    /// runtime's; a transfer's return target is kept only once the move succeeds, so it
    /// is returned.
    pub fn hand_over(&mut self, context: &HandoffContext) -> Option<String> {
        self.memory = context.memory.clone();
        self.history = context.history.clone();
        context.return_to.clone().filter(|_| context.kind == HandoffKind::Transfer)
    }

    /// The tracked inputs, as the frames to send the next runtime.
    pub fn replay(&self) -> impl Iterator<Item = String> + '_ {
        self.in_flight
            .iter()
            .filter_map(|text| serde_json::to_string(&ClientMessage::BidiTextInput { text: text.clone() }).ok())
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
        assert_eq!(kept.in_flight, ["two", "three"], "only the user's echo takes an input up");
        kept.observe(&json!({"type": "bidi_error", "code": "busy", "message": "m", "recoverable": true}).to_string());
        assert_eq!(kept.in_flight, ["two"], "the refused newest input is not in flight");
        let frames: Vec<ClientMessage> = kept.replay().map(|f| decode_client(&f).expect("a client frame")).collect();
        assert_eq!(frames, [ClientMessage::BidiTextInput { text: "two".into() }]);
    }
}
