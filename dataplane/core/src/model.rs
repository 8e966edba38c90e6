//! The provider-neutral request and event types of a streaming text model: what the
//! agent core sends ([`ModelRequest`]) and what it gets back ([`ModelEvent`]).
//!
//! The shapes follow the Bedrock Converse API (messages made of content blocks, tool
//! results correlated to tool calls by id) because it is the richest of the supported
//! providers; other providers map onto it.

use serde::{Deserialize, Serialize};

/// One call to a text model: the conversation so far plus how to sample the reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The provider's model id (a Bedrock model or inference profile id, or the model
    /// name an OpenAI-compatible server knows).
    pub model_id: String,
    /// The system prompt. Empty means none is sent.
    pub system: String,
    /// The conversation, oldest first. It must start with a user message and alternate
    /// between user and assistant.
    pub messages: Vec<Message>,
    /// Tools the model may call. Empty means tool use is off.
    pub tools: Vec<ToolDefinition>,
    /// Most tokens in the reply.
    pub max_tokens: u32,
    /// Sampling temperature, 0 to 1.
    pub temperature: f32,
    /// Nucleus sampling, 0 to 1.
    pub top_p: f32,
    /// Extended thinking, for the models that take it (the Agent's `model.reasoning`); a
    /// provider sends it only to a model that takes it (a fallback may not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<switchboard_crds::agent::ReasoningEffort>,
}

impl ModelRequest {
    /// A request for `model_id` with the conversation `messages` and the sampling settings
    /// of [`switchboard_crds::agent::ModelSettings`]'s defaults; adjust the fields as needed.
    pub fn new(model_id: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model_id: model_id.into(),
            system: String::new(),
            messages,
            tools: Vec::new(),
            max_tokens: 1024,
            temperature: 0.7,
            top_p: 0.9,
            reasoning: None,
        }
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person (and tool results, which are sent on the user's turn).
    User,
    /// The model.
    Assistant,
}

/// One turn of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it holds, in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self { role: Role::User, content: vec![ContentBlock::Text(text.into())] }
    }

    /// An assistant message holding one text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: vec![ContentBlock::Text(text.into())] }
    }
}

/// A piece of a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text(String),
    /// A tool call the model made (in an assistant message).
    ToolUse(ToolUse),
    /// The result of a tool call (in a user message).
    ToolResult(ToolResult),
}

/// A tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    /// The provider's id of this call; the matching [`ToolResult`] carries it back.
    pub id: String,
    /// The tool's name, as given in [`ToolDefinition::name`].
    pub name: String,
    /// The call's input, parsed JSON (an object for well-behaved models).
    pub input: serde_json::Value,
}

/// The outcome of a tool call, handed back to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolUse::id`] this answers.
    pub tool_use_id: String,
    /// The result: any JSON value (a JSON string is sent as text).
    pub content: serde_json::Value,
    /// Whether the tool succeeded or failed; a failure's `content` explains why.
    pub status: ToolResultStatus,
}

/// Whether a tool call succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolResultStatus {
    /// The tool ran and `content` is its result.
    Success,
    /// The tool failed (or was refused) and `content` says why.
    Error,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON Schema of its input (an object schema).
    pub input_schema: serde_json::Value,
}

/// The definition the model sees: the tool's schema without its bound inputs
/// ([`crate::authority::model_schema`]), which the session fills in from memory.
impl From<&switchboard_crds::agent::ToolSpec> for ToolDefinition {
    fn from(spec: &switchboard_crds::agent::ToolSpec) -> Self {
        Self {
            name: spec.name.clone(),
            description: spec.description.clone(),
            input_schema: crate::authority::model_schema(spec),
        }
    }
}

/// What a model stream yields, in order: any number of [`ModelEvent::TextDelta`] and
/// [`ModelEvent::ToolUse`] events, then [`ModelEvent::Stop`] and [`ModelEvent::Usage`]
/// (in either order; usage may be missing if the provider does not report it). The stream
/// ends after both, or with an error item.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelEvent {
    /// The next piece of the reply's text.
    TextDelta(String),
    /// A complete tool call: emitted once its whole input has arrived and parsed.
    ToolUse(ToolUse),
    /// Tokens counted for the call.
    Usage(Usage),
    /// Why the model stopped.
    Stop(StopReason),
    /// The call moved on to a fallback model, before any output, because the one before
    /// it was throttled or unavailable (see `switchboard_models::fallback`).
    FellBack(Fallback),
}

/// A model call that moved on to the next model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The model (and region, as `model@region` when it is not the agent's) that failed.
    pub from: String,
    /// The model it moved on to, written the same way.
    pub to: String,
    /// Why, as a bounded label (`throttled`, `service_unavailable`, `timeout`, `connection`).
    pub reason: &'static str,
    /// The failure, for the log line.
    pub message: String,
}

impl ModelEvent {
    /// Whether this event carries reply content (text or a tool call). Once one has been
    /// seen, a failed call can no longer be retried transparently.
    pub fn is_output(&self) -> bool {
        matches!(self, Self::TextDelta(_) | Self::ToolUse(_))
    }
}

/// Token counts of one model call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read: system prompt, conversation, tool definitions.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
}

/// Why the model stopped generating.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants one or more tools run; send their results in the next request.
    ToolUse,
    /// The reply hit the `max_tokens` limit.
    MaxTokens,
    /// Any other reason the provider gave (stop sequence, content filter, ...), verbatim.
    Other(String),
}

impl StopReason {
    /// The label used in logs and metrics.
    pub fn as_str(&self) -> &str {
        match self {
            Self::EndTurn => "end_turn",
            Self::ToolUse => "tool_use",
            Self::MaxTokens => "max_tokens",
            Self::Other(other) => other,
        }
    }
}

impl From<&StopReason> for crate::protocol::StopReason {
    fn from(reason: &StopReason) -> Self {
        match reason {
            StopReason::EndTurn => Self::EndTurn,
            StopReason::ToolUse => Self::ToolUse,
            StopReason::MaxTokens => Self::MaxTokens,
            // The provider's reason verbatim (stop sequence, content filter, ...).
            StopReason::Other(other) => Self::from(other.as_str()),
        }
    }
}

#[cfg(test)]
mod stop_reason_tests {
    use super::StopReason;

    #[test]
    fn a_provider_stop_reason_goes_on_the_wire_as_itself() {
        use crate::protocol::StopReason as Wire;
        assert_eq!(Wire::from(&StopReason::Other("stop_sequence".into())), Wire::Other("stop_sequence".into()));
        assert_eq!(Wire::from(&StopReason::MaxTokens), Wire::MaxTokens);
        assert_eq!(Wire::from(&StopReason::EndTurn), Wire::EndTurn);
    }
}
