//! The kind of a server message, read off its JSON text without parsing it: the relay path
//! (gateway, local mode) decides what a runtime's frame means — a control frame it acts on,
//! state it keeps, or reply audio it only forwards — from the first bytes of the text.
//! Every message is written with `type` first ([`ServerMessage::to_json`]); a text that
//! does not start that way has no kind and is parsed in full by whoever needs it.

use super::ServerMessage;

/// The `type` of a [`ServerMessage`], one variant per message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// `bidi_connection_start`
    ConnectionStart,
    /// `bidi_transcript_stream`
    TranscriptStream,
    /// `bidi_response_start`
    ResponseStart,
    /// `bidi_response_complete`
    ResponseComplete,
    /// `bidi_usage`
    Usage,
    /// `bidi_audio_stream`
    AudioStream,
    /// `bidi_interruption`
    Interruption,
    /// `bidi_speech_started`
    SpeechStarted,
    /// `bidi_speech_stopped`
    SpeechStopped,
    /// `bidi_session_state`
    SessionState,
    /// `bidi_session_updated`
    SessionUpdated,
    /// `bidi_connection_restart`
    ConnectionRestart,
    /// `tool_start`
    ToolStart,
    /// `tool_progress`
    ToolProgress,
    /// `tool_complete`
    ToolComplete,
    /// `tool_error`
    ToolError,
    /// `consent_request`
    ConsentRequest,
    /// `client_tool_call`
    ClientToolCall,
    /// `display_card`
    DisplayCard,
    /// `transfer_request`
    TransferRequest,
    /// `digits_request`
    DigitsRequest,
    /// `handoff`
    Handoff,
    /// `memory_update`
    MemoryUpdate,
    /// `workflow_transition`
    WorkflowTransition,
    /// `workflow_line`
    WorkflowLine,
    /// `bidi_error`
    Error,
    /// `bidi_session_queued`
    SessionQueued,
    /// `bidi_session_fallback`
    SessionFallback,
    /// `bidi_session_outage`
    SessionOutage,
    /// `bidi_connection_draining`
    ConnectionDraining,
    /// `bidi_connection_close`
    ConnectionClose,
}

impl ServerKind {
    /// Every kind.
    pub const ALL: [Self; 31] = [
        Self::ConnectionStart,
        Self::TranscriptStream,
        Self::ResponseStart,
        Self::ResponseComplete,
        Self::Usage,
        Self::AudioStream,
        Self::Interruption,
        Self::SpeechStarted,
        Self::SpeechStopped,
        Self::SessionState,
        Self::SessionUpdated,
        Self::ConnectionRestart,
        Self::ToolStart,
        Self::ToolProgress,
        Self::ToolComplete,
        Self::ToolError,
        Self::ConsentRequest,
        Self::ClientToolCall,
        Self::DisplayCard,
        Self::TransferRequest,
        Self::DigitsRequest,
        Self::Handoff,
        Self::MemoryUpdate,
        Self::WorkflowTransition,
        Self::WorkflowLine,
        Self::Error,
        Self::SessionQueued,
        Self::SessionFallback,
        Self::SessionOutage,
        Self::ConnectionDraining,
        Self::ConnectionClose,
    ];

    /// The `type` string on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConnectionStart => "bidi_connection_start",
            Self::TranscriptStream => "bidi_transcript_stream",
            Self::ResponseStart => "bidi_response_start",
            Self::ResponseComplete => "bidi_response_complete",
            Self::Usage => "bidi_usage",
            Self::AudioStream => "bidi_audio_stream",
            Self::Interruption => "bidi_interruption",
            Self::SpeechStarted => "bidi_speech_started",
            Self::SpeechStopped => "bidi_speech_stopped",
            Self::SessionState => "bidi_session_state",
            Self::SessionUpdated => "bidi_session_updated",
            Self::ConnectionRestart => "bidi_connection_restart",
            Self::ToolStart => "tool_start",
            Self::ToolProgress => "tool_progress",
            Self::ToolComplete => "tool_complete",
            Self::ToolError => "tool_error",
            Self::ConsentRequest => "consent_request",
            Self::ClientToolCall => "client_tool_call",
            Self::DisplayCard => "display_card",
            Self::TransferRequest => "transfer_request",
            Self::DigitsRequest => "digits_request",
            Self::Handoff => "handoff",
            Self::MemoryUpdate => "memory_update",
            Self::WorkflowTransition => "workflow_transition",
            Self::WorkflowLine => "workflow_line",
            Self::Error => "bidi_error",
            Self::SessionQueued => "bidi_session_queued",
            Self::SessionFallback => "bidi_session_fallback",
            Self::SessionOutage => "bidi_session_outage",
            Self::ConnectionDraining => "bidi_connection_draining",
            Self::ConnectionClose => "bidi_connection_close",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        // A match, not a search of `ALL`: it runs for every frame a runtime sends through the
        // gateway, and the compiler turns it into a dispatch on length and a comparison or
        // two (the search was 2 % of a voice relay's CPU). A test holds it to `as_str`.
        Some(match name {
            "bidi_connection_start" => Self::ConnectionStart,
            "bidi_transcript_stream" => Self::TranscriptStream,
            "bidi_response_start" => Self::ResponseStart,
            "bidi_response_complete" => Self::ResponseComplete,
            "bidi_usage" => Self::Usage,
            "bidi_audio_stream" => Self::AudioStream,
            "bidi_interruption" => Self::Interruption,
            "bidi_speech_started" => Self::SpeechStarted,
            "bidi_speech_stopped" => Self::SpeechStopped,
            "bidi_session_state" => Self::SessionState,
            "bidi_session_updated" => Self::SessionUpdated,
            "bidi_connection_restart" => Self::ConnectionRestart,
            "tool_start" => Self::ToolStart,
            "tool_progress" => Self::ToolProgress,
            "tool_complete" => Self::ToolComplete,
            "tool_error" => Self::ToolError,
            "consent_request" => Self::ConsentRequest,
            "client_tool_call" => Self::ClientToolCall,
            "display_card" => Self::DisplayCard,
            "transfer_request" => Self::TransferRequest,
            "digits_request" => Self::DigitsRequest,
            "handoff" => Self::Handoff,
            "memory_update" => Self::MemoryUpdate,
            "workflow_transition" => Self::WorkflowTransition,
            "workflow_line" => Self::WorkflowLine,
            "bidi_error" => Self::Error,
            "bidi_session_queued" => Self::SessionQueued,
            "bidi_session_fallback" => Self::SessionFallback,
            "bidi_session_outage" => Self::SessionOutage,
            "bidi_connection_draining" => Self::ConnectionDraining,
            "bidi_connection_close" => Self::ConnectionClose,
            _ => return None,
        })
    }

    /// The kind of a message's JSON text, from its first bytes: `{"type":"<name>"`. None
    /// when the text does not start that way (hand-written JSON, another field first) or
    /// names no server message.
    pub fn peek(text: &str) -> Option<Self> {
        let rest = text.strip_prefix(r#"{"type":""#)?;
        let end = rest.find('"')?;
        Self::from_name(&rest[..end])
    }

    /// Whether a message's JSON text is of this kind, as [`ServerKind::peek`] reads it: a
    /// comparison of its first bytes, for a relay that asks of every frame whether it is
    /// reply audio.
    pub fn is(self, text: &str) -> bool {
        let name = self.as_str();
        text.len() >= name.len() + 10
            && text.starts_with(r#"{"type":""#)
            && text[9..].starts_with(name)
            && text.as_bytes()[9 + name.len()] == b'"'
    }

    /// Whether a message of this kind may change what a relay keeps of a session (memory,
    /// history, the turn under way, a handoff, the workflow position, a refused input):
    /// reply audio, streamed pieces' kinds aside, carry none.
    pub fn carries_state(self) -> bool {
        matches!(
            self,
            Self::TranscriptStream
                | Self::MemoryUpdate
                | Self::Handoff
                | Self::ResponseStart
                | Self::ResponseComplete
                | Self::WorkflowTransition
                | Self::Error
        )
    }
}

impl ServerMessage {
    /// This message's kind.
    pub fn kind(&self) -> ServerKind {
        match self {
            Self::BidiConnectionStart { .. } => ServerKind::ConnectionStart,
            Self::BidiTranscriptStream { .. } => ServerKind::TranscriptStream,
            Self::BidiResponseStart { .. } => ServerKind::ResponseStart,
            Self::BidiResponseComplete { .. } => ServerKind::ResponseComplete,
            Self::BidiUsage { .. } => ServerKind::Usage,
            Self::BidiAudioStream { .. } => ServerKind::AudioStream,
            Self::BidiInterruption {} => ServerKind::Interruption,
            Self::BidiSpeechStarted {} => ServerKind::SpeechStarted,
            Self::BidiSpeechStopped {} => ServerKind::SpeechStopped,
            Self::BidiSessionState { .. } => ServerKind::SessionState,
            Self::BidiSessionUpdated { .. } => ServerKind::SessionUpdated,
            Self::BidiConnectionRestart { .. } => ServerKind::ConnectionRestart,
            Self::ToolStart { .. } => ServerKind::ToolStart,
            Self::ToolProgress { .. } => ServerKind::ToolProgress,
            Self::ToolComplete { .. } => ServerKind::ToolComplete,
            Self::ToolError { .. } => ServerKind::ToolError,
            Self::ConsentRequest { .. } => ServerKind::ConsentRequest,
            Self::ClientToolCall { .. } => ServerKind::ClientToolCall,
            Self::DisplayCard { .. } => ServerKind::DisplayCard,
            Self::TransferRequest { .. } => ServerKind::TransferRequest,
            Self::DigitsRequest { .. } => ServerKind::DigitsRequest,
            Self::Handoff { .. } => ServerKind::Handoff,
            Self::MemoryUpdate { .. } => ServerKind::MemoryUpdate,
            Self::WorkflowTransition { .. } => ServerKind::WorkflowTransition,
            Self::WorkflowLine { .. } => ServerKind::WorkflowLine,
            Self::BidiError { .. } => ServerKind::Error,
            Self::BidiSessionQueued { .. } => ServerKind::SessionQueued,
            Self::BidiSessionFallback { .. } => ServerKind::SessionFallback,
            Self::BidiSessionOutage { .. } => ServerKind::SessionOutage,
            Self::BidiConnectionDraining { .. } => ServerKind::ConnectionDraining,
            Self::BidiConnectionClose { .. } => ServerKind::ConnectionClose,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::json;

    use super::*;
    use crate::handoff::{HandoffContext, HandoffKind, WorkflowSnapshot};
    use crate::{ErrorCode, StopReason, TranscriptRole};

    /// One message of every kind.
    fn every_message() -> Vec<ServerMessage> {
        let context = HandoffContext {
            from_agent: "triage".into(),
            kind: HandoffKind::Transfer,
            reason: "balance".into(),
            last_user_message: None,
            intent: None,
            verified_user: None,
            workflow_state: WorkflowSnapshot::default(),
            return_to: None,
            status: None,
            summary: None,
            memory: Default::default(),
            history: Vec::new(),
        };
        vec![
            ServerMessage::BidiConnectionStart {
                session_id: "s".into(),
                agent: "a".into(),
                mode: "text".into(),
                model: "m".into(),
                resume_token: Some("t".into()),
                seq: Some(1),
                candidate: true,
            },
            ServerMessage::BidiTranscriptStream {
                role: TranscriptRole::User,
                text: "hi".into(),
                delta: false,
                is_final: true,
                input_id: Some("7:c-1".into()),
            },
            ServerMessage::BidiResponseStart { turn: 1 },
            ServerMessage::BidiResponseComplete { turn: 1, stop_reason: StopReason::EndTurn },
            ServerMessage::BidiUsage {
                input_tokens: 1,
                output_tokens: 2,
                total_tokens: 3,
                modality: None,
                model: None,
            },
            ServerMessage::BidiAudioStream { audio: "AAAA".into(), format: None },
            ServerMessage::BidiInterruption {},
            ServerMessage::BidiSpeechStarted {},
            ServerMessage::BidiSpeechStopped {},
            ServerMessage::BidiSessionState { state: crate::SessionState::ExecutingTool },
            ServerMessage::BidiSessionUpdated { voice: Some("matthew".into()), modalities: None },
            ServerMessage::BidiConnectionRestart { reason: "rotation".into(), generation: 2 },
            ServerMessage::ToolStart {
                tool_use_id: "t".into(),
                name: "n".into(),
                input: json!({}),
                description: Some("d".into()),
            },
            ServerMessage::ToolProgress { tool_use_id: "t".into(), name: "n".into(), message: "m".into() },
            ServerMessage::ToolComplete {
                tool_use_id: "t".into(),
                name: "n".into(),
                result: json!({"a": "\"type\":\"x\""}),
                cached: false,
                duration_ms: 12,
            },
            ServerMessage::ToolError {
                tool_use_id: "t".into(),
                name: "n".into(),
                kind: "timeout".into(),
                message: "m".into(),
                recoverable: true,
                user_message: "u".into(),
                suggestion: "s".into(),
            },
            ServerMessage::ConsentRequest {
                tool_use_id: "t".into(),
                name: "n".into(),
                description: "d".into(),
                input: json!({}),
            },
            ServerMessage::ClientToolCall {
                tool_use_id: "t".into(),
                name: "n".into(),
                input: json!({}),
                timeout_ms: 15_000,
            },
            ServerMessage::DisplayCard {
                tool_use_id: "t".into(),
                card: crate::Card {
                    title: "Recent transactions".into(),
                    text: String::new(),
                    fields: vec![crate::CardField { label: "Corner Cafe".into(), value: "-3.4".into() }],
                    link: None,
                },
            },
            ServerMessage::TransferRequest {
                tool_use_id: "t".into(),
                person: "advisor".into(),
                address: "+442079460001".into(),
                reason: "r".into(),
                timeout_seconds: 30,
                warm: true,
            },
            ServerMessage::DigitsRequest { tool_use_id: "t".into(), digits: "1w2#".into() },
            ServerMessage::Handoff {
                from: "triage".into(),
                to: "idv".into(),
                kind: HandoffKind::Transfer,
                context: Box::new(context),
            },
            ServerMessage::MemoryUpdate { key: "k".into(), value: json!(null) },
            ServerMessage::WorkflowTransition { from: "a".into(), to: "b".into(), by: "model".into() },
            ServerMessage::WorkflowLine {
                node: "route".into(),
                text: "Calls are recorded.".into(),
                uninterruptible: true,
                played: crate::LinePlayed::Abandoned,
                reason: Some("not said within 10 s".into()),
            },
            ServerMessage::error(ErrorCode::Busy, "m", true),
            ServerMessage::BidiSessionQueued {
                position: 2,
                estimated_wait_seconds: 40,
                message: "All our advisers are busy; please stay on the line.".into(),
                agent: "bank/triage".into(),
            },
            ServerMessage::BidiSessionFallback {
                agent: "bank/triage".into(),
                cause: "breaker".into(),
                message: "Putting you through to an advisor.".into(),
                person: Some(crate::FallbackPerson { name: "advisor".into(), address: "+442079460001".into() }),
                retry_after_seconds: Some(30),
            },
            ServerMessage::BidiSessionOutage {
                agent: "bank/triage".into(),
                active: true,
                cause: "breaker".into(),
                message: "Putting you through to an advisor.".into(),
                person: Some(crate::FallbackPerson { name: "advisor".into(), address: "+442079460001".into() }),
                text_only: true,
            },
            ServerMessage::BidiConnectionDraining { seconds: 3 },
            ServerMessage::BidiConnectionClose { reason: "bye".into() },
        ]
    }

    #[test]
    fn the_peek_names_every_message_as_its_json_does() {
        let messages = every_message();
        let kinds: HashSet<ServerKind> = messages.iter().map(ServerMessage::kind).collect();
        assert_eq!(kinds.len(), ServerKind::ALL.len(), "one sample of every kind");
        for message in &messages {
            let text = message.to_json();
            let tag = serde_json::from_str::<serde_json::Value>(&text).expect("JSON")["type"].clone();
            assert_eq!(tag, json!(message.kind().as_str()), "the wire name of {message:?}");
            assert_eq!(ServerKind::peek(&text), Some(message.kind()), "peeked from {text}");
        }
    }

    #[test]
    fn errors_and_completions_peek_the_same_whatever_their_code() {
        let unknown = [ErrorCode::Other("newer".into())];
        for code in ErrorCode::ALL.iter().chain(&unknown) {
            let text = ServerMessage::error(code.clone(), "m", true).to_json();
            assert_eq!(ServerKind::peek(&text), Some(ServerKind::Error), "{text}");
        }
        let unknown = [StopReason::Other("newer".into())];
        for stop_reason in StopReason::ALL.iter().chain(&unknown).cloned() {
            let text = ServerMessage::BidiResponseComplete { turn: 1, stop_reason }.to_json();
            assert_eq!(ServerKind::peek(&text), Some(ServerKind::ResponseComplete), "{text}");
        }
    }

    #[test]
    fn texts_that_do_not_start_with_a_known_type_have_no_kind() {
        for text in [
            "",
            "{",
            r#"{"type":"#,
            r#"{"type":"bidi_error"#,
            r#"{"type":"bidi_err","code":"x"}"#,
            r#"{"code":"busy","type":"bidi_error"}"#,
            r#" {"type":"bidi_error"}"#,
            r#"{"type":"session_start"}"#,
        ] {
            assert_eq!(ServerKind::peek(text), None, "{text:?}");
        }
        assert_eq!(ServerKind::from_name("handoff"), Some(ServerKind::Handoff));
        for kind in ServerKind::ALL {
            assert_eq!(ServerKind::from_name(kind.as_str()), Some(kind), "{kind:?}");
            let text = format!(r#"{{"type":"{}","x":1}}"#, kind.as_str());
            for other in ServerKind::ALL {
                assert_eq!(other.is(&text), other == kind, "{other:?} of {text}");
            }
            assert!(!kind.is(&format!(r#"{{"type":"{}x"}}"#, kind.as_str())), "a longer name is another");
            assert!(!kind.is(&format!(r#"{{"type":"{}"#, kind.as_str())), "an unterminated name is none");
        }
    }
}
