//! What a client sees of a live session and what it may change: the session's state
//! (`bidi_session_state`, [`SessionState`]) and the settings of `session_update`
//! ([`SessionUpdate`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the session is doing, as a client shows it (`bidi_session_state`). Sent when it
/// changes, never twice in a row the same.
///
/// Text sessions go `ready` -> `processing` (the model answers) -> `executing_tool` (a tool
/// runs) -> ... -> `ready`. Sessions with audio add `listening` (the caller speaks) and
/// `speaking` (the agent's reply audio is being generated; a client's playback may run a
/// little longer). While a `consent_request` waits for the user's answer the session is
/// `ready`: it is the user's turn. `ended` comes once, before the session closes; a
/// session handed to another agent sends no `ended` (the next agent's state follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Waiting for the user.
    Ready,
    /// The caller is speaking (audio sessions).
    Listening,
    /// The agent is working out its answer.
    Processing,
    /// The agent is speaking (audio sessions).
    Speaking,
    /// A tool call runs.
    ExecutingTool,
    /// The gateway is moving the session to another connection or pod (sent by the
    /// gateway only; runtimes never send it).
    Reconnecting,
    /// The session is over.
    Ended,
}

impl SessionState {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Listening => "listening",
            Self::Processing => "processing",
            Self::Speaking => "speaking",
            Self::ExecutingTool => "executing_tool",
            Self::Reconnecting => "reconnecting",
            Self::Ended => "ended",
        }
    }
}

/// The settings `session_update` may change mid-session. Every field is optional; the
/// ones given are applied together, or — when one is unknown or cannot apply — none is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionUpdate {
    /// A voice of the agent's Nova Sonic model (sessions with audio): the next turn is
    /// spoken with it (`bidi_connection_restart`, reason `voice_change`). Lasts until the
    /// session moves to another agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    /// Fields this version does not know, as sent. A server refuses an update that has any
    /// (`bidi_error` `unknown_setting`).
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

impl SessionUpdate {
    /// The settings this version knows, for messages that list them.
    pub const KNOWN: &'static [&'static str] = &["voice"];

    /// Whether the update names no setting at all.
    pub fn is_empty(&self) -> bool {
        self.voice.is_none() && self.unknown.is_empty()
    }

    /// The names of the unknown fields, comma-separated (empty when there are none).
    pub fn unknown_names(&self) -> String {
        self.unknown.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ClientMessage, decode_client};

    #[test]
    fn an_update_keeps_what_it_does_not_know_apart() {
        let text = r#"{"type":"session_update","voice":"amy","speed":2,"mood":"calm"}"#;
        let Ok(ClientMessage::SessionUpdate(update)) = decode_client(text) else { panic!("decodes") };
        assert_eq!(update.voice.as_deref(), Some("amy"));
        assert_eq!(update.unknown_names(), "mood, speed", "the type tag is not a setting");
        let Ok(ClientMessage::SessionUpdate(plain)) = decode_client(r#"{"type":"session_update","voice":"amy"}"#)
        else {
            panic!("decodes")
        };
        assert!(plain.unknown.is_empty() && !plain.is_empty());
        let Ok(ClientMessage::SessionUpdate(empty)) = decode_client(r#"{"type":"session_update"}"#) else {
            panic!("decodes")
        };
        assert!(empty.is_empty());
        let written = serde_json::to_string(&ClientMessage::SessionUpdate(plain)).expect("writes");
        assert_eq!(written, r#"{"type":"session_update","voice":"amy"}"#);
    }

    #[test]
    fn states_are_snake_case_on_the_wire() {
        for state in [
            SessionState::Ready,
            SessionState::Listening,
            SessionState::Processing,
            SessionState::Speaking,
            SessionState::ExecutingTool,
            SessionState::Reconnecting,
            SessionState::Ended,
        ] {
            assert_eq!(serde_json::to_value(state).expect("writes"), serde_json::json!(state.as_str()));
        }
    }
}
