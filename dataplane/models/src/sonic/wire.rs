//! The Nova Sonic event protocol as JSON: builders of the input events the client sends
//! (`sessionStart`, `promptStart`, contents, `promptEnd`, `sessionEnd`) and the parser that
//! turns output events into typed [`SonicEvent`]s.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::SonicConfig;
use super::events::{
    ContentKind, EncodedAudio, GenerationStage, Role, SonicEvent, StopReason, TokenCounts, UsageReport,
};
use crate::ModelError;

/// Input audio format: 16 kHz, 16-bit, mono LPCM, base64 in the events.
pub fn audio_input_configuration() -> Value {
    json!({
        "mediaType": "audio/lpcm", "sampleRateHertz": 16000, "sampleSizeBits": 16,
        "channelCount": 1, "audioType": "SPEECH", "encoding": "base64"
    })
}

/// `sessionStart`.
pub fn session_start(config: &SonicConfig) -> Value {
    let mut body = json!({
        "inferenceConfiguration": {
            "maxTokens": config.max_tokens, "topP": config.top_p, "temperature": config.temperature
        }
    });
    if let Some(sensitivity) = config.endpointing_sensitivity {
        body["turnDetectionConfiguration"] = json!({ "endpointingSensitivity": sensitivity.as_str() });
    }
    json!({ "event": { "sessionStart": body } })
}

/// `promptStart` with text, audio (24 kHz, `voice_id`) and tool-use output and the tools.
pub fn prompt_start(prompt: &str, config: &SonicConfig, voice_id: &str) -> Value {
    let mut body = json!({
        "promptName": prompt,
        "textOutputConfiguration": { "mediaType": "text/plain" },
        "audioOutputConfiguration": {
            "mediaType": "audio/lpcm", "sampleRateHertz": 24000, "sampleSizeBits": 16, "channelCount": 1,
            "voiceId": voice_id, "encoding": "base64", "audioType": "SPEECH"
        },
        "toolUseOutputConfiguration": { "mediaType": "application/json" },
    });
    if !config.tools.is_empty() {
        let tools: Vec<Value> = config
            .tools
            .iter()
            .map(|tool| {
                json!({ "toolSpec": {
                    "name": tool.name, "description": tool.description,
                    "inputSchema": { "json": tool.input_schema.to_string() }
                }})
            })
            .collect();
        body["toolConfiguration"] = json!({ "tools": tools });
    }
    json!({ "event": { "promptStart": body } })
}

/// A whole text content (start, text, end).
pub fn text_content(prompt: &str, content: &str, role: &str, interactive: bool, text: &str) -> [Value; 3] {
    [
        json!({ "event": { "contentStart": {
            "promptName": prompt, "contentName": content, "type": "TEXT", "interactive": interactive,
            "role": role, "textInputConfiguration": { "mediaType": "text/plain" }
        }}}),
        json!({ "event": { "textInput": { "promptName": prompt, "contentName": content, "content": text } } }),
        content_end(prompt, content),
    ]
}

/// The start of the long-lived interactive USER audio content.
pub fn audio_content_start(prompt: &str, content: &str) -> Value {
    json!({ "event": { "contentStart": {
        "promptName": prompt, "contentName": content, "type": "AUDIO", "interactive": true,
        "role": "USER", "audioInputConfiguration": audio_input_configuration()
    }}})
}

/// One `audioInput` event with PCM16 bytes.
pub fn audio_input(prompt: &str, content: &str, pcm: &[u8]) -> Value {
    json!({ "event": { "audioInput": {
        "promptName": prompt, "contentName": content, "content": aws_smithy_types::base64::encode(pcm)
    }}})
}

/// Writes `audioInput` events as JSON text straight into one buffer per event (the
/// base64 encoded in place), without a [`Value`] tree: the JSON up to the content is
/// built once per stream. The same text as [`audio_input`] serialises to.
#[derive(Debug, Clone)]
pub struct AudioInputWriter {
    head: Vec<u8>,
}

const AUDIO_INPUT_TAIL: &[u8] = b"\"}}}";

impl AudioInputWriter {
    /// For the audio content `content` of prompt `prompt`.
    pub fn new(prompt: &str, content: &str) -> Self {
        let mut head = br#"{"event":{"audioInput":{"promptName":"#.to_vec();
        // Strings through serde_json, so any name is escaped correctly.
        serde_json::to_writer(&mut head, prompt).unwrap_or_default();
        head.extend_from_slice(br#","contentName":"#);
        serde_json::to_writer(&mut head, content).unwrap_or_default();
        head.extend_from_slice(br#","content":""#);
        Self { head }
    }

    /// The event for `pcm`, as JSON bytes.
    pub fn event(&self, pcm: &[u8]) -> Vec<u8> {
        use base64::Engine as _;
        let encoded = pcm.len().div_ceil(3) * 4;
        let mut out = Vec::with_capacity(self.head.len() + encoded + AUDIO_INPUT_TAIL.len());
        out.extend_from_slice(&self.head);
        let start = out.len();
        out.resize(start + encoded, 0);
        let written = base64::engine::general_purpose::STANDARD.encode_slice(pcm, &mut out[start..]).unwrap_or(0);
        out.truncate(start + written);
        out.extend_from_slice(AUDIO_INPUT_TAIL);
        out
    }
}

/// A whole tool result content.
pub fn tool_result(prompt: &str, content: &str, tool_use_id: &str, result: &Value) -> [Value; 3] {
    let text = match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    [
        json!({ "event": { "contentStart": {
            "promptName": prompt, "contentName": content, "interactive": false, "type": "TOOL", "role": "TOOL",
            "toolResultInputConfiguration": {
                "toolUseId": tool_use_id, "type": "TEXT", "textInputConfiguration": { "mediaType": "text/plain" }
            }
        }}}),
        json!({ "event": { "toolResult": { "promptName": prompt, "contentName": content, "content": text } } }),
        content_end(prompt, content),
    ]
}

/// `contentEnd`.
pub fn content_end(prompt: &str, content: &str) -> Value {
    json!({ "event": { "contentEnd": { "promptName": prompt, "contentName": content } } })
}

/// `promptEnd`.
pub fn prompt_end(prompt: &str) -> Value {
    json!({ "event": { "promptEnd": { "promptName": prompt } } })
}

/// `sessionEnd`.
pub fn session_end() -> Value {
    json!({ "event": { "sessionEnd": {} } })
}

#[derive(Clone, Debug)]
struct OpenContent {
    kind: ContentKind,
    role: Role,
    stage: Option<GenerationStage>,
}

/// Turns output events into [`SonicEvent`]s, remembering each content's type, role and
/// generation stage (text and content ends refer to them by content id).
///
/// It also frames replies. The service keeps one completion open for a whole prompt
/// (`completionStart` once, `completionEnd` after `promptEnd`), while older output — and
/// the documentation's examples — close a completion per reply. Either way the parser
/// reports one [`SonicEvent::CompletionEnd`] per reply: when the reply's FINAL assistant
/// text ends `END_TURN` or `INTERRUPTED` with no other assistant content open, or at the
/// service's `completionEnd` if that comes first. A `completionEnd` with no reply under
/// way (the one after `promptEnd`, or a per-reply one after the reply was already framed)
/// is not reported again.
#[derive(Debug, Default)]
pub struct OutputParser {
    contents: HashMap<String, OpenContent>,
    interrupted: bool,
    completion_id: String,
    reply_open: bool,
}

fn str_field(body: &Value, field: &str) -> String {
    body.get(field).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn protocol(message: String) -> ModelError {
    ModelError::Protocol { message }
}

impl OutputParser {
    /// The events one output message means (usually one; none for unknown events).
    pub fn parse(&mut self, bytes: &[u8]) -> Result<Vec<SonicEvent>, ModelError> {
        if let Some(audio) = audio_output(bytes) {
            return audio.map(|event| vec![event]);
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| protocol(format!("an output chunk is not JSON: {e}")))?;
        let Some((name, body)) = value.get("event").and_then(Value::as_object).and_then(|o| o.iter().next()) else {
            return Err(protocol(format!("an output chunk is not an event: {value}")));
        };
        let content_id = str_field(body, "contentId");
        let event = match name.as_str() {
            "completionStart" => {
                self.interrupted = false;
                self.completion_id = str_field(body, "completionId");
                SonicEvent::CompletionStart { completion_id: self.completion_id.clone() }
            }
            "contentStart" => {
                let stage = body
                    .get("additionalModelFields")
                    .and_then(Value::as_str)
                    .and_then(|fields| serde_json::from_str::<Value>(fields).ok())
                    .and_then(|fields| {
                        fields.get("generationStage").and_then(Value::as_str).map(GenerationStage::parse)
                    });
                let content = OpenContent {
                    kind: ContentKind::parse(&str_field(body, "type")),
                    role: Role::parse(&str_field(body, "role")),
                    stage,
                };
                if matches!(content.role, Role::Assistant | Role::Tool) && !self.reply_open {
                    // A new reply: its barge-in is reported again.
                    self.reply_open = true;
                    self.interrupted = false;
                }
                self.contents.insert(content_id.clone(), content.clone());
                SonicEvent::ContentStart { content_id, kind: content.kind, role: content.role, stage: content.stage }
            }
            "textOutput" => {
                let text = str_field(body, "content");
                if is_interruption_marker(&text) {
                    return Ok(self.interruption());
                }
                let open = self.contents.get(&content_id);
                let role = open.map_or_else(|| Role::parse(&str_field(body, "role")), |c| c.role.clone());
                SonicEvent::Text { content_id, role, stage: open.and_then(|c| c.stage), text }
            }
            "audioOutput" => {
                let pcm = EncodedAudio::from_base64(str_field(body, "content"))
                    .ok_or_else(|| protocol("audioOutput content is not base64".into()))?;
                SonicEvent::Audio { content_id, pcm }
            }
            "toolUse" => {
                let raw = str_field(body, "content");
                let input = if raw.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&raw).map_err(|e| ModelError::InvalidToolInput {
                        tool: str_field(body, "toolName"),
                        message: e.to_string(),
                    })?
                };
                SonicEvent::ToolUse {
                    tool_use_id: str_field(body, "toolUseId"),
                    name: str_field(body, "toolName"),
                    input,
                }
            }
            "contentEnd" => {
                let open = self.contents.remove(&content_id);
                let stop_reason = StopReason::parse(&str_field(body, "stopReason"));
                let kind = open.as_ref().map_or_else(|| ContentKind::parse(&str_field(body, "type")), |c| c.kind);
                let end = SonicEvent::ContentEnd { content_id, kind, stop_reason: stop_reason.clone() };
                if stop_reason == StopReason::Interrupted && kind == ContentKind::Audio {
                    let mut events = self.interruption();
                    events.insert(0, end);
                    return Ok(events);
                }
                let final_text = open.is_some_and(|c| {
                    c.role == Role::Assistant && c.kind == ContentKind::Text && c.stage == Some(GenerationStage::Final)
                });
                let reply_over = final_text
                    && matches!(stop_reason, StopReason::EndTurn | StopReason::Interrupted)
                    && !self.contents.values().any(|c| c.role == Role::Assistant);
                if reply_over && let Some(completion_end) = self.end_reply(stop_reason) {
                    return Ok(vec![end, completion_end]);
                }
                end
            }
            "usageEvent" => SonicEvent::Usage(usage(body)),
            "completionEnd" => {
                let stop_reason = StopReason::parse(&str_field(body, "stopReason"));
                return Ok(self.end_reply(stop_reason).into_iter().collect());
            }
            other => {
                tracing::debug!(event = other, "ignoring an unknown Nova Sonic output event");
                return Ok(Vec::new());
            }
        };
        Ok(vec![event])
    }

    /// The end of the reply under way, if one is.
    fn end_reply(&mut self, stop_reason: StopReason) -> Option<SonicEvent> {
        std::mem::take(&mut self.reply_open)
            .then(|| SonicEvent::CompletionEnd { completion_id: self.completion_id.clone(), stop_reason })
    }

    /// One `Interrupted` per reply, whichever signal comes first.
    fn interruption(&mut self) -> Vec<SonicEvent> {
        if std::mem::replace(&mut self.interrupted, true) { Vec::new() } else { vec![SonicEvent::Interrupted] }
    }
}

/// The envelope of an `audioOutput` event, borrowed from the message (the most frequent
/// event: parsed without a [`Value`] tree).
#[derive(serde::Deserialize)]
struct AudioEnvelope<'a> {
    #[serde(borrow)]
    event: AudioEventBody<'a>,
}

#[derive(serde::Deserialize)]
struct AudioEventBody<'a> {
    #[serde(rename = "audioOutput", borrow)]
    audio_output: AudioOutputBody<'a>,
}

#[derive(serde::Deserialize)]
struct AudioOutputBody<'a> {
    #[serde(rename = "contentId", borrow, default)]
    content_id: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    content: std::borrow::Cow<'a, str>,
}

/// An `audioOutput` event: `None` when `bytes` is not one (it starts differently), so the
/// general parser takes it.
fn audio_output(bytes: &[u8]) -> Option<Result<SonicEvent, ModelError>> {
    const PREFIX: &[u8] = br#"{"event":{"audioOutput":"#;
    if !bytes.starts_with(PREFIX) {
        return None;
    }
    let envelope: AudioEnvelope<'_> = serde_json::from_slice(bytes).ok()?;
    let body = envelope.event.audio_output;
    Some(
        EncodedAudio::from_base64(body.content.into_owned())
            .map(|pcm| SonicEvent::Audio { content_id: body.content_id.into_owned(), pcm })
            .ok_or_else(|| protocol("audioOutput content is not base64".into())),
    )
}

fn is_interruption_marker(text: &str) -> bool {
    text.trim_start().starts_with('{')
        && serde_json::from_str::<Value>(text).is_ok_and(|v| v.get("interrupted") == Some(&Value::Bool(true)))
}

fn usage(body: &Value) -> UsageReport {
    let counts = |path: &str| {
        let at = |leaf: &str| body.pointer(&format!("/details/{path}/{leaf}")).and_then(Value::as_u64).unwrap_or(0);
        TokenCounts {
            input_speech: at("input/speechTokens"),
            input_text: at("input/textTokens"),
            output_speech: at("output/speechTokens"),
            output_text: at("output/textTokens"),
        }
    };
    UsageReport {
        delta: counts("delta"),
        total: counts("total"),
        total_input_tokens: body.get("totalInputTokens").and_then(Value::as_u64).unwrap_or(0),
        total_output_tokens: body.get("totalOutputTokens").and_then(Value::as_u64).unwrap_or(0),
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
