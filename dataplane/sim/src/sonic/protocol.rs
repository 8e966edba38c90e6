//! Validation of the input event sequence, the way Nova Sonic checks it: `sessionStart`,
//! `promptStart`, the SYSTEM text content, optional history replay (non-interactive
//! USER/ASSISTANT text, USER first, strictly alternating, at most 1 KB per message and
//! 40 KB in all), then interactive contents (one long-lived USER AUDIO content, USER text,
//! TOOL results of the model's tool calls), `promptEnd` and `sessionEnd`.
//!
//! [`Protocol::accept`] turns each valid event into an [`Input`] for the session; the
//! first invalid one is a [`ProtocolError`], which the session reports as an in-stream
//! `ValidationException`.
//!
//! # Leniency, and where it comes from
//!
//! The simulator must refuse what the service refuses, and accept what clients built
//! against the service send. Where the documentation (the Nova 2 Sonic "input events"
//! and "output events" pages of the Amazon Nova 2 user guide) and shipped clients disagree
//! or are silent, the simulator follows the clients that work against the service:
//!
//! - **`sessionStart` without `inferenceConfiguration`** is accepted; the service's
//!   defaults apply. Source: Strands Agents 1.62 (`strands/bidi/models/bedrock.py`,
//!   `_get_connection_start_event`) sends `{"sessionStart": {}}` unless the user passes
//!   `params`. Values that *are* given are still checked (maxTokens >= 1, topP and
//!   temperature in 0..=1).
//! - **`endpointingSensitivity` flat in `sessionStart`** (not under
//!   `turnDetectionConfiguration`) is read as well. Source: LiveKit's AWS plugin 1.8.9
//!   (`experimental/realtime/events.py`) sends it flat to Nova Sonic v1 models and nested
//!   to Nova 2. Values other than HIGH, MEDIUM and LOW are refused either way.
//! - **`promptEnd` while contents are open** closes them: an open audio content ends as
//!   if `contentEnd` had come, an unfinished text or tool-result content is dropped.
//!   Source: Pipecat 1.14 (`services/aws/nova_sonic/llm.py`, `_send_session_end_events`)
//!   sends `promptEnd` and `sessionEnd` without ending its audio content; the
//!   documentation's teardown order (end the audio content, then `promptEnd`, then
//!   `sessionEnd`) is what well-behaved clients do, not what the service enforces.
//! - **`connectionEnd`** is read as `sessionEnd` (after `promptEnd`, or before any
//!   prompt). Source: Strands 1.62 (`_get_connection_end_event`) ends every connection with
//!   `promptEnd` then `{"connectionEnd": {}}` and never sends `sessionEnd`.
//! - **Audio after `promptEnd` or `sessionEnd`** is ignored, not refused: a client's microphone task
//!   races its teardown (Pipecat sends frames while it disconnects). Any other event after
//!   `promptEnd` but `sessionEnd`/`connectionEnd` is still an error.
//! - **Non-interactive USER text after interactive input started** is context the model
//!   takes in without answering (the documentation only describes history before the
//!   audio). Source: Pipecat 1.14 (`llm.py`, `_handle_messages_append` and intermediate
//!   async-tool results) sends such text mid-session "for it to take in", and so does
//!   Switchboard's runtime to tell a live stream that the session's state changed. Non-interactive
//!   ASSISTANT text is still refused once the conversation started, and so is a second
//!   SYSTEM content: the documentation has one SYSTEM prompt, first, per prompt.
//! - **`toolResultInputConfiguration.type` / `textInputConfiguration`** and
//!   **`interactive: false` on TOOL contents** are accepted as Pipecat and Strands send
//!   them; a TOOL content is interactive input whatever the flag says.
//!
//! The output side of the same decisions (one completion per prompt, USER transcripts
//! ending `PARTIAL_TURN`) is written down in the `session` module.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::Value;

/// Largest history message, in bytes of UTF-8 text.
pub const MAX_HISTORY_MESSAGE_BYTES: usize = 1024;
/// Largest history in all, in bytes.
pub const MAX_HISTORY_BYTES: usize = 40 * 1024;

/// An invalid input event.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ProtocolError(pub String);

fn invalid<T>(message: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(message.into()))
}

/// What a valid input event means for the session.
#[derive(Debug, PartialEq)]
pub enum Input {
    /// The session started; `sensitivity` is `HIGH`, `MEDIUM` or `LOW` when given.
    SessionStart { sensitivity: Option<String> },
    /// The prompt started with these tools and voice.
    PromptStart { tools: BTreeSet<String>, voice_id: Option<String> },
    /// The system prompt is complete.
    System(String),
    /// A history message was replayed (never answered by itself).
    History { role: String, text: String },
    /// A frame of user audio (PCM16 LE, 16 kHz).
    Audio(Vec<u8>),
    /// The audio content ended.
    AudioEnd,
    /// Interactive user text (cross-modal input) is complete: the model answers it.
    UserText(String),
    /// Non-interactive USER text after the conversation started: taken in, not answered.
    Context(String),
    /// A tool result is complete.
    ToolResult { tool_use_id: String, content: String },
    /// `promptEnd`.
    PromptEnd,
    /// `sessionEnd`.
    SessionEnd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    New,
    Session,
    Prompt,
    PromptEnded,
    Ended,
}

#[derive(Debug)]
struct Content {
    kind: String,
    role: String,
    interactive: bool,
    text: String,
    tool_use_id: Option<String>,
}

/// The validator's state for one stream.
#[derive(Debug)]
pub struct Protocol {
    phase: Phase,
    prompt_name: String,
    open: HashMap<String, Content>,
    used_names: HashSet<String>,
    system_done: bool,
    interactive_started: bool,
    history_last_role: Option<String>,
    history_bytes: usize,
    pending_tool_uses: HashSet<String>,
}

impl Default for Protocol {
    fn default() -> Self {
        Self {
            phase: Phase::New,
            prompt_name: String::new(),
            open: HashMap::new(),
            used_names: HashSet::new(),
            system_done: false,
            interactive_started: false,
            history_last_role: None,
            history_bytes: 0,
            pending_tool_uses: HashSet::new(),
        }
    }
}

impl Protocol {
    /// Allows a `toolResult` for `tool_use_id` (the model called the tool).
    pub fn expect_tool_result(&mut self, tool_use_id: &str) {
        self.pending_tool_uses.insert(tool_use_id.to_owned());
    }

    /// The prompt's name (empty before `promptStart`).
    pub fn prompt_name(&self) -> &str {
        &self.prompt_name
    }

    /// Validates one event (`{"event": {"<name>": {...}}}`).
    pub fn accept(&mut self, event: &Value) -> Result<Option<Input>, ProtocolError> {
        let Some((name, body)) =
            event.get("event").and_then(Value::as_object).filter(|o| o.len() == 1).and_then(|o| o.iter().next())
        else {
            return invalid(
                "Each input event must be a JSON object {\"event\": {\"<eventName>\": {...}}} with exactly one event.",
            );
        };
        match (name.as_str(), self.phase) {
            ("sessionStart", Phase::New) => self.session_start(body).map(Some),
            ("sessionStart", _) => invalid("sessionStart was sent twice; send it once, first."),
            (_, Phase::New) => {
                invalid(format!("{name} arrived before sessionStart; start the session with sessionStart."))
            }
            ("promptStart", Phase::Session) => self.prompt_start(body).map(Some),
            ("sessionEnd" | "connectionEnd", Phase::Session | Phase::PromptEnded) => {
                self.phase = Phase::Ended;
                Ok(Some(Input::SessionEnd))
            }
            // A microphone racing the client's teardown (see the module docs).
            ("audioInput", Phase::PromptEnded | Phase::Ended) => Ok(None),
            (_, Phase::Session) => invalid(format!("{name} arrived before promptStart.")),
            (_, Phase::Ended) => invalid(format!("{name} arrived after sessionEnd.")),
            (_, Phase::PromptEnded) => invalid(format!("{name} arrived after promptEnd; only sessionEnd may follow.")),
            (_, Phase::Prompt) => self.in_prompt(name, body),
        }
    }

    fn session_start(&mut self, body: &Value) -> Result<Input, ProtocolError> {
        // Optional: the service's defaults apply (see the module docs).
        let none = Value::Null;
        let inference = body.get("inferenceConfiguration").unwrap_or(&none);
        if !inference.is_null() && !inference.is_object() {
            return invalid(format!("inferenceConfiguration must be an object, not {inference}."));
        }
        if let Some(max) = inference.get("maxTokens")
            && max.as_u64().is_none_or(|m| m < 1)
        {
            return invalid(format!("inferenceConfiguration.maxTokens must be an integer of at least 1, not {max}."));
        }
        for field in ["topP", "temperature"] {
            if let Some(value) = inference.get(field)
                && !value.as_f64().is_some_and(|v| (0.0..=1.0).contains(&v))
            {
                return invalid(format!("inferenceConfiguration.{field} must be between 0 and 1, not {value}."));
            }
        }
        let sensitivity = match body
            .pointer("/turnDetectionConfiguration/endpointingSensitivity")
            .or_else(|| body.get("endpointingSensitivity"))
        {
            None => None,
            Some(Value::String(s)) if ["HIGH", "MEDIUM", "LOW"].contains(&s.as_str()) => Some(s.clone()),
            Some(other) => return invalid(format!("endpointingSensitivity must be HIGH, MEDIUM or LOW, not {other}.")),
        };
        self.phase = Phase::Session;
        Ok(Input::SessionStart { sensitivity })
    }

    fn prompt_start(&mut self, body: &Value) -> Result<Input, ProtocolError> {
        let name = required_str(body, "promptName", "promptStart")?;
        if let Some(audio) = body.get("audioOutputConfiguration") {
            check_audio_config(audio, "audioOutputConfiguration", &[8000, 16000, 24000])?;
        }
        let voice_id = body.pointer("/audioOutputConfiguration/voiceId").and_then(Value::as_str).map(str::to_owned);
        let mut tools = BTreeSet::new();
        if let Some(list) = body.pointer("/toolConfiguration/tools") {
            let Some(list) = list.as_array() else {
                return invalid("toolConfiguration.tools must be a list.");
            };
            for (i, tool) in list.iter().enumerate() {
                let name = tool.pointer("/toolSpec/name").and_then(Value::as_str).unwrap_or_default();
                if name.is_empty()
                    || name.len() > 64
                    || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    return invalid(format!(
                        "toolConfiguration.tools.{i}.toolSpec.name {name:?} is not valid: use 1 to 64 letters, digits, '_' or '-'."
                    ));
                }
                let schema = tool.pointer("/toolSpec/inputSchema/json").and_then(Value::as_str);
                if !schema.is_some_and(|s| serde_json::from_str::<Value>(s).is_ok_and(|v| v.is_object())) {
                    return invalid(format!(
                        "The tool {name:?} needs inputSchema.json: a JSON schema object, serialized as a string."
                    ));
                }
                if !tools.insert(name.to_owned()) {
                    return invalid(format!("The tool name {name:?} is used twice; tool names must be unique."));
                }
            }
        }
        self.prompt_name = name.to_owned();
        self.phase = Phase::Prompt;
        Ok(Input::PromptStart { tools, voice_id })
    }

    fn in_prompt(&mut self, name: &str, body: &Value) -> Result<Option<Input>, ProtocolError> {
        let prompt = required_str(body, "promptName", name)?;
        if prompt != self.prompt_name {
            return invalid(format!("{name} names prompt {prompt:?}, but the open prompt is {:?}.", self.prompt_name));
        }
        if name == "promptEnd" {
            // Open contents end with the prompt (see the module docs).
            for (content_name, content) in self.open.drain() {
                tracing::debug!(content = %content_name, kind = %content.kind, "promptEnd closes a content left open");
            }
            self.phase = Phase::PromptEnded;
            return Ok(Some(Input::PromptEnd));
        }
        if name == "contentStart" {
            return self.content_start(body).map(|()| None);
        }
        let content_name = required_str(body, "contentName", name)?;
        let Some(content) = self.open.get_mut(content_name) else {
            return invalid(format!(
                "{name} names content {content_name:?}, which is not open; send contentStart first."
            ));
        };
        let expected = match name {
            "textInput" => "TEXT",
            "audioInput" => "AUDIO",
            "toolResult" => "TOOL",
            "contentEnd" => {
                let content = self.open.remove(content_name).ok_or_else(|| ProtocolError("content vanished".into()))?;
                return self.content_end(content);
            }
            other => return invalid(format!("Unknown input event {other:?}.")),
        };
        if content.kind != expected {
            return invalid(format!(
                "{name} was sent in content {content_name:?} of type {}; it needs a {expected} content.",
                content.kind
            ));
        }
        let text = required_str(body, "content", name)?;
        if name == "audioInput" {
            let audio = aws_smithy_types::base64::decode(text)
                .map_err(|e| ProtocolError(format!("audioInput.content is not valid base64: {e}")))?;
            return Ok(Some(Input::Audio(audio)));
        }
        content.text.push_str(text);
        Ok(None)
    }

    fn content_start(&mut self, body: &Value) -> Result<(), ProtocolError> {
        let name = required_str(body, "contentName", "contentStart")?.to_owned();
        let kind = required_str(body, "type", "contentStart")?.to_owned();
        let role = required_str(body, "role", "contentStart")?.to_owned();
        let interactive = body.get("interactive").and_then(Value::as_bool).unwrap_or(false);
        if !self.used_names.insert(name.clone()) {
            return invalid(format!("contentName {name:?} was used before; every content needs a new name."));
        }
        if !["TEXT", "AUDIO", "TOOL"].contains(&kind.as_str()) {
            return invalid(format!("Content type {kind:?} is not valid: use TEXT, AUDIO or TOOL."));
        }
        if !self.system_done && (role != "SYSTEM" || kind != "TEXT") {
            return invalid(
                "The first content of a prompt must be the SYSTEM prompt, a TEXT content with role SYSTEM.",
            );
        }
        let mut tool_use_id = None;
        match (kind.as_str(), role.as_str()) {
            ("TEXT", "SYSTEM") if self.system_done => return invalid("Only one SYSTEM content is allowed per prompt."),
            ("TEXT", "SYSTEM") => {}
            // Context the model takes in without answering (see the module docs).
            ("TEXT", "USER") if !interactive && self.interactive_started => {}
            ("TEXT", "ASSISTANT") if !interactive && self.interactive_started => {
                return invalid(
                    "History (non-interactive ASSISTANT text) must come before the first interactive content.",
                );
            }
            ("TEXT", "USER" | "ASSISTANT") if interactive && role == "ASSISTANT" => {
                return invalid("Interactive text must have role USER.");
            }
            ("TEXT", "USER" | "ASSISTANT") => {}
            ("AUDIO", "USER") => {
                if !interactive {
                    return invalid("Audio input must be an interactive content (interactive: true).");
                }
                if self.open.values().any(|c| c.kind == "AUDIO") {
                    return invalid("An audio content is already open; keep one audio content open for the session.");
                }
                let config = body
                    .get("audioInputConfiguration")
                    .ok_or_else(|| ProtocolError("An AUDIO contentStart needs audioInputConfiguration.".into()))?;
                check_audio_config(config, "audioInputConfiguration", &[16000])?;
            }
            ("TOOL", "TOOL") => {
                let id =
                    body.pointer("/toolResultInputConfiguration/toolUseId").and_then(Value::as_str).unwrap_or_default();
                if !self.pending_tool_uses.remove(id) {
                    return invalid(format!("toolUseId {id:?} matches no tool use awaiting a result."));
                }
                tool_use_id = Some(id.to_owned());
            }
            _ => return invalid(format!("A {kind} content cannot have role {role}.")),
        }
        self.interactive_started |= interactive || kind == "TOOL";
        self.open.insert(name, Content { kind, role, interactive, text: String::new(), tool_use_id });
        Ok(())
    }

    fn content_end(&mut self, content: Content) -> Result<Option<Input>, ProtocolError> {
        match (content.kind.as_str(), content.role.as_str()) {
            ("TEXT", "SYSTEM") => {
                self.system_done = true;
                Ok(Some(Input::System(content.text)))
            }
            ("TEXT", _) if content.interactive => Ok(Some(Input::UserText(content.text))),
            ("TEXT", _) if self.interactive_started => Ok(Some(Input::Context(content.text))),
            ("TEXT", role) => {
                if self.history_last_role.is_none() && role != "USER" {
                    return invalid("History must start with a USER message.");
                }
                if self.history_last_role.as_deref() == Some(role) {
                    return invalid("History must alternate between USER and ASSISTANT messages.");
                }
                if content.text.len() > MAX_HISTORY_MESSAGE_BYTES {
                    return invalid(format!(
                        "A history message has {} bytes; the limit is {MAX_HISTORY_MESSAGE_BYTES}.",
                        content.text.len()
                    ));
                }
                self.history_bytes += content.text.len();
                if self.history_bytes > MAX_HISTORY_BYTES {
                    return invalid(format!("The history exceeds {MAX_HISTORY_BYTES} bytes; replay less of it."));
                }
                self.history_last_role = Some(role.to_owned());
                Ok(Some(Input::History { role: role.to_owned(), text: content.text }))
            }
            ("AUDIO", _) => Ok(Some(Input::AudioEnd)),
            _ => Ok(Some(Input::ToolResult {
                tool_use_id: content.tool_use_id.unwrap_or_default(),
                content: content.text,
            })),
        }
    }
}

fn required_str<'v>(body: &'v Value, field: &str, event: &str) -> Result<&'v str, ProtocolError> {
    match body.get(field).and_then(Value::as_str) {
        Some(value) if !value.is_empty() => Ok(value),
        _ => invalid(format!("{event} needs a non-empty string field {field:?}.")),
    }
}

fn check_audio_config(config: &Value, what: &str, rates: &[u64]) -> Result<(), ProtocolError> {
    let media = config.get("mediaType").and_then(Value::as_str);
    let rate = config.get("sampleRateHertz").and_then(Value::as_u64);
    let bits = config.get("sampleSizeBits").and_then(Value::as_u64);
    let channels = config.get("channelCount").and_then(Value::as_u64);
    if media != Some("audio/lpcm")
        || !rate.is_some_and(|r| rates.contains(&r))
        || bits != Some(16)
        || channels != Some(1)
    {
        return invalid(format!(
            "{what} must be mediaType audio/lpcm, 16-bit, 1 channel, at a sample rate of {rates:?} Hz; got {config}."
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
