//! What a [`super::SonicSession`] reports: the model's output events, typed, plus the
//! session's own events (stream restarts with a reason, a fatal error).

use bytes::Bytes;

use crate::ModelError;

/// PCM audio in standard base64 (checked to be well-formed base64 text when parsed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedAudio(String);

impl EncodedAudio {
    /// `base64` if it is standard, padded base64 text.
    pub fn from_base64(base64: String) -> Option<Self> {
        is_base64(base64.as_bytes()).then_some(Self(base64))
    }

    /// Encodes `pcm`.
    pub fn from_pcm(pcm: &[u8]) -> Self {
        Self(aws_smithy_types::base64::encode(pcm))
    }

    /// Bytes of PCM it holds.
    pub fn len(&self) -> usize {
        let padding = self.0.bytes().rev().take_while(|&b| b == b'=').count();
        (self.0.len() / 4 * 3).saturating_sub(padding)
    }

    /// Whether it holds no audio.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The base64 text.
    pub fn as_base64(&self) -> &str {
        &self.0
    }

    /// The base64 text, owned.
    pub fn into_base64(self) -> String {
        self.0
    }

    /// The PCM bytes.
    pub fn decode(&self) -> Bytes {
        // Checked on construction, so this does not fail.
        Bytes::from(aws_smithy_types::base64::decode(&self.0).unwrap_or_default())
    }
}

/// Whether `text` is standard base64 with padding (length a multiple of 4, at most two
/// `=` at the end).
fn is_base64(text: &[u8]) -> bool {
    if !text.len().is_multiple_of(4) {
        return false;
    }
    let body = text.strip_suffix(b"==").or_else(|| text.strip_suffix(b"=")).unwrap_or(text);
    body.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// The type of a content block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentKind {
    /// Text.
    Text,
    /// Audio.
    Audio,
    /// A tool call.
    Tool,
    /// A type this client does not know.
    Other,
}

impl ContentKind {
    /// From the wire name.
    pub fn parse(name: &str) -> Self {
        match name {
            "TEXT" => Self::Text,
            "AUDIO" => Self::Audio,
            "TOOL" => Self::Tool,
            _ => Self::Other,
        }
    }
}

/// Who a content is from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// The user (transcripts of their speech).
    User,
    /// The model.
    Assistant,
    /// The system prompt.
    System,
    /// A tool.
    Tool,
    /// Another role, as sent.
    Other(String),
}

impl Role {
    /// From the wire name.
    pub fn parse(name: &str) -> Self {
        match name {
            "USER" => Self::User,
            "ASSISTANT" => Self::Assistant,
            "SYSTEM" => Self::System,
            "TOOL" => Self::Tool,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// Whether assistant text is a preview of what will be spoken or what was spoken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenerationStage {
    /// Planned text, sent before the audio; may differ from what is finally said.
    Speculative,
    /// The text of what was actually spoken. Only this enters history.
    Final,
    /// A stage this client does not know.
    Other,
}

impl GenerationStage {
    /// From the wire name.
    pub fn parse(name: &str) -> Self {
        match name {
            "SPECULATIVE" => Self::Speculative,
            "FINAL" => Self::Final,
            _ => Self::Other,
        }
    }
}

/// Why a content or completion ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The turn is complete.
    EndTurn,
    /// More content of the same turn follows.
    PartialTurn,
    /// The model waits for a tool result.
    ToolUse,
    /// The user spoke over the model (barge-in).
    Interrupted,
    /// Another reason, as sent (empty when absent).
    Other(String),
}

impl StopReason {
    /// From the wire name.
    pub fn parse(name: &str) -> Self {
        match name {
            "END_TURN" => Self::EndTurn,
            "PARTIAL_TURN" => Self::PartialTurn,
            "TOOL_USE" => Self::ToolUse,
            "INTERRUPTED" => Self::Interrupted,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// Tokens by direction and modality.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenCounts {
    /// Speech in.
    pub input_speech: u64,
    /// Text in.
    pub input_text: u64,
    /// Speech out.
    pub output_speech: u64,
    /// Text out.
    pub output_text: u64,
}

/// A `usageEvent`: the tokens since the previous report and the stream's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageReport {
    /// Since the previous usage event.
    pub delta: TokenCounts,
    /// Over the stream so far.
    pub total: TokenCounts,
    /// `totalInputTokens`.
    pub total_input_tokens: u64,
    /// `totalOutputTokens`.
    pub total_output_tokens: u64,
}

/// Why the session moved to a new stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestartReason {
    /// Proactive rotation before the service's connection time limit.
    Rotation,
    /// The voice changed (e.g. a handoff to an agent with another Persona voice).
    VoiceChange,
    /// The stream failed with a retryable error (its [`ModelError::metric_label`]).
    StreamError(&'static str),
    /// The service ended the stream (e.g. its time limit, or long silence).
    StreamEnded,
}

impl RestartReason {
    /// A short, bounded label for metrics (`bidi_connection_restart` reasons).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Rotation => "rotation",
            Self::VoiceChange => "voice_change",
            Self::StreamError(label) => label,
            Self::StreamEnded => "stream_ended",
        }
    }
}

/// One event of a Sonic session.
#[derive(Debug)]
pub enum SonicEvent {
    /// The service opened a completion. It may span one reply (older output) or the whole
    /// prompt (the service): replies are framed by [`SonicEvent::CompletionEnd`].
    CompletionStart {
        /// Its id.
        completion_id: String,
    },
    /// A content block starts.
    ContentStart {
        /// Its id.
        content_id: String,
        /// Its type.
        kind: ContentKind,
        /// Its role.
        role: Role,
        /// The generation stage of text (from `additionalModelFields`).
        stage: Option<GenerationStage>,
    },
    /// Text: a transcript of the user's speech (role user) or the model's text.
    Text {
        /// The content it belongs to.
        content_id: String,
        /// Whose text.
        role: Role,
        /// SPECULATIVE or FINAL, for assistant text.
        stage: Option<GenerationStage>,
        /// The text.
        text: String,
    },
    /// Reply audio: 24 kHz, 16-bit, mono PCM, little-endian.
    Audio {
        /// The content it belongs to.
        content_id: String,
        /// The samples, as the service sent them (base64): the runtime passes them on
        /// to its client without decoding and re-encoding them.
        pcm: EncodedAudio,
    },
    /// The model calls a tool; answer with [`super::SonicSession::send_tool_result`].
    ToolUse {
        /// The call's id.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// Its input.
        input: serde_json::Value,
    },
    /// A content block ended.
    ContentEnd {
        /// Its id.
        content_id: String,
        /// Its type.
        kind: ContentKind,
        /// Why.
        stop_reason: StopReason,
    },
    /// The user spoke over the model: flush playback now.
    Interrupted,
    /// Token usage.
    Usage(UsageReport),
    /// A reply ended: once per reply, whether the service closes a completion per reply or
    /// keeps one open for the whole prompt (see [`super::wire::OutputParser`]).
    CompletionEnd {
        /// The completion it belongs to.
        completion_id: String,
        /// Why.
        stop_reason: StopReason,
    },
    /// The stream was lost (ended or failed) while the user's words waited for a reply:
    /// what was said of the reply is cut off — stop playing it. `reasked`: the replacement
    /// stream is asked to answer those words (its reply follows the
    /// [`SonicEvent::Restarted`]); otherwise they go unanswered (they were asked again once
    /// already, or no reply had shown for a while) and the turn is over.
    ReplyCut {
        /// Whether the words are asked again.
        reasked: bool,
    },
    /// The session now runs on a new stream (history replayed, no audio lost).
    Restarted {
        /// Why.
        reason: RestartReason,
        /// The new stream's number (1 is the first stream).
        generation: u64,
    },
    /// The session failed for good (a fatal error, or retries exhausted); no events follow.
    Failed(ModelError),
}
