//! The simulated model's output: the Nova Sonic output events as JSON, and the plan of a
//! reply — USER transcript, SPECULATIVE text, paced 24 kHz audio, usage, FINAL text, an
//! optional tool call — as events due at given instants.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::audio::{OUTPUT_RATE, speech_ms};
use crate::script::sonic::Speech;

/// Where a request to speak first names its greeting: after this marker, in double quotes
/// that end the text.
const SPEAK_FIRST_MARKER: &str = "Speak first:";
/// Where a request to say a line now (the runtime's filler while a tool runs long) names it.
const SAY_NOW_MARKER: &str = "Say now, briefly:";

/// The greeting an interactive USER text asks the model to open the conversation with:
/// the text contains `Speak first:` and ends with the greeting in double quotes (the
/// runtime's `speak_first_prompt`, e.g. `... Speak first: greet them now by saying exactly
/// the following, then wait for their reply: "Hello, ..."`). Nova Sonic follows such an
/// instruction by saying the greeting as its reply; the simulator says the quoted words.
/// `None` for any other text (answered by the script's rules, as before).
pub fn speak_first_greeting(text: &str) -> Option<&str> {
    quoted_after(text, SPEAK_FIRST_MARKER)
}

/// A line an interactive USER text asks the model to say at once, and the rule name the
/// simulator records for it: a greeting ([`speak_first_greeting`], `speak-first`) or a
/// filler while a tool runs (`Say now, briefly:` and the line in double quotes, the
/// runtime's `filler_prompt`; `say-now`). `None` for any other text.
pub fn instructed_line(text: &str) -> Option<(&'static str, &str)> {
    match speak_first_greeting(text) {
        Some(greeting) => Some(("speak-first", greeting)),
        None => quoted_after(text, SAY_NOW_MARKER).map(|line| ("say-now", line)),
    }
}

fn quoted_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let after = &text[text.find(marker)? + marker.len()..];
    let quoted = after[after.find('"')? + 1..].trim_end().strip_suffix('"')?;
    Some(quoted.trim()).filter(|g| !g.is_empty())
}

/// Identifiers every output event carries.
#[derive(Clone, Debug)]
pub struct Ids {
    /// The stream's session id.
    pub session_id: String,
    /// The client's prompt name.
    pub prompt_name: String,
    /// The current completion.
    pub completion_id: String,
    /// The voice replies are spoken in (the prompt's `voiceId`).
    pub voice: super::voice::Voice,
}

impl Ids {
    fn base(&self) -> serde_json::Map<String, Value> {
        let mut map = serde_json::Map::new();
        map.insert("sessionId".into(), json!(self.session_id));
        map.insert("promptName".into(), json!(self.prompt_name));
        map.insert("completionId".into(), json!(self.completion_id));
        map
    }

    fn event(&self, name: &str, fields: Value) -> Value {
        let mut body = self.base();
        if let Value::Object(extra) = fields {
            body.extend(extra);
        }
        json!({ "event": { name: body } })
    }

    /// `completionStart`.
    pub fn completion_start(&self) -> Value {
        self.event("completionStart", json!({}))
    }

    /// `completionEnd`.
    pub fn completion_end(&self, stop_reason: &str) -> Value {
        self.event("completionEnd", json!({ "stopReason": stop_reason }))
    }

    /// `contentStart` of `kind` (`TEXT`, `AUDIO`, `TOOL`); `stage` is the generation stage
    /// of text (`SPECULATIVE` / `FINAL`).
    pub fn content_start(&self, content_id: &str, kind: &str, role: &str, stage: Option<&str>) -> Value {
        let mut fields = json!({ "contentId": content_id, "type": kind, "role": role });
        match kind {
            "AUDIO" => {
                fields["audioOutputConfiguration"] = json!({
                    "mediaType": "audio/lpcm", "sampleRateHertz": OUTPUT_RATE, "sampleSizeBits": 16,
                    "channelCount": 1, "encoding": "base64", "audioType": "SPEECH"
                });
            }
            "TOOL" => fields["toolUseOutputConfiguration"] = json!({ "mediaType": "application/json" }),
            _ => fields["textOutputConfiguration"] = json!({ "mediaType": "text/plain" }),
        }
        if let Some(stage) = stage {
            fields["additionalModelFields"] = json!(json!({ "generationStage": stage }).to_string());
        }
        self.event("contentStart", fields)
    }

    /// `textOutput`.
    pub fn text_output(&self, content_id: &str, role: &str, text: &str) -> Value {
        self.event("textOutput", json!({ "contentId": content_id, "role": role, "content": text }))
    }

    /// `audioOutput` with PCM16 bytes.
    pub fn audio_output(&self, content_id: &str, pcm: &[u8]) -> Value {
        self.event("audioOutput", json!({ "contentId": content_id, "content": aws_smithy_types::base64::encode(pcm) }))
    }

    /// [`Ids::audio_output`] as JSON text, written directly: the simulator sends 50 of
    /// these a second per speaking stream, and a `Value` tree per chunk (base64 text
    /// copied in, then scanned for escapes) cost it more than the rest of a reply.
    pub fn audio_output_text(&self, content_id: &str, pcm: &[u8]) -> String {
        let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
        format!(
            r#"{{"event":{{"audioOutput":{{"sessionId":{},"promptName":{},"completionId":{},"contentId":{},"content":"{}"}}}}}}"#,
            quoted(&self.session_id),
            quoted(&self.prompt_name),
            quoted(&self.completion_id),
            quoted(content_id),
            aws_smithy_types::base64::encode(pcm)
        )
    }

    /// `toolUse`.
    pub fn tool_use(&self, content_id: &str, tool_use_id: &str, name: &str, input: &Value) -> Value {
        self.event(
            "toolUse",
            json!({ "contentId": content_id, "toolUseId": tool_use_id, "toolName": name, "content": input.to_string() }),
        )
    }

    /// `contentEnd`.
    pub fn content_end(&self, content_id: &str, kind: &str, stop_reason: &str) -> Value {
        self.event("contentEnd", json!({ "contentId": content_id, "type": kind, "stopReason": stop_reason }))
    }

    /// `usageEvent` with the service's `details` breakdown.
    pub fn usage(&self, delta: &Usage, total: &Usage) -> Value {
        let part = |u: &Usage| {
            json!({
                "input": { "speechTokens": u.input_speech, "textTokens": u.input_text },
                "output": { "speechTokens": u.output_speech, "textTokens": u.output_text },
            })
        };
        self.event(
            "usageEvent",
            json!({
                "details": { "delta": part(delta), "total": part(total) },
                "totalInputTokens": total.input_speech + total.input_text,
                "totalOutputTokens": total.output_speech + total.output_text,
                "totalTokens": total.input_speech + total.input_text + total.output_speech + total.output_text,
            }),
        )
    }
}

/// Token counts by direction and modality.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Speech tokens in.
    pub input_speech: u64,
    /// Text tokens in.
    pub input_text: u64,
    /// Speech tokens out.
    pub output_speech: u64,
    /// Text tokens out.
    pub output_text: u64,
}

impl Usage {
    /// Adds `other`.
    pub fn add(&mut self, other: &Usage) {
        self.input_speech += other.input_speech;
        self.input_text += other.input_text;
        self.output_speech += other.output_speech;
        self.output_text += other.output_text;
    }
}

/// Speech tokens for `ms` of audio (about 25 per second).
pub fn speech_tokens(ms: u64) -> u64 {
    ms.div_ceil(40)
}

/// Input tokens for a text content of `role` (history, context, typed text).
pub fn input_tokens(role: &str, text: &str) -> u64 {
    crate::tokens::estimate_tokens(role) + crate::tokens::estimate_tokens(text)
}

/// What emitting an event changes in the session.
#[derive(Clone, Debug, PartialEq)]
pub enum Marker {
    /// Nothing.
    None,
    /// The assistant starts speaking (audio content `contentId`).
    AudioStart(String),
    /// The assistant stops speaking.
    AudioEnd,
    /// The model waits for the result of this tool call (id, name).
    ToolPending(String, String),
    /// The reply is complete.
    Done,
}

/// An output event due at an instant.
#[derive(Clone, Debug)]
pub struct Planned {
    /// When to send it.
    pub at: Instant,
    /// The event.
    pub event: Event,
    /// Its effect.
    pub marker: Marker,
}

/// A planned output event.
#[derive(Clone, Debug)]
pub enum Event {
    /// Built when planned.
    Json(Value),
    /// An `audioOutput` chunk, synthesised only when it is due: a reply's seconds of audio
    /// are not computed (and encoded) before its first event goes out.
    Audio {
        /// The identifiers when it was planned.
        ids: Arc<Ids>,
        /// The audio content.
        content_id: Arc<str>,
        /// Where in the reply's audio the chunk starts, in samples.
        offset_samples: u64,
        /// Its length.
        ms: u64,
    },
}

impl Event {
    /// The event's JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Json(value) => value.clone(),
            Self::Audio { ids, content_id, offset_samples, ms } => {
                ids.audio_output(content_id, &ids.voice.tone(*offset_samples, *ms))
            }
        }
    }

    /// The event as an output message for the response body.
    pub fn encode(self) -> Result<bytes::Bytes, super::envelope::EnvelopeError> {
        match self {
            Self::Json(value) => super::envelope::encode_event(&value),
            Self::Audio { ids, content_id, offset_samples, ms } => {
                let pcm = ids.voice.tone(offset_samples, ms);
                super::envelope::encode_event_text(&ids.audio_output_text(&content_id, &pcm))
            }
        }
    }
}

/// Builds replies into a queue of planned events.
#[derive(Debug)]
pub struct Planner<'a> {
    /// The identifiers.
    pub ids: &'a Ids,
    /// The pacing.
    pub speech: &'a Speech,
    /// Source of content ids.
    pub next_id: &'a mut u64,
    /// The queue to append to.
    pub queue: &'a mut VecDeque<Planned>,
}

impl Planner<'_> {
    fn id(&mut self, prefix: &str) -> String {
        *self.next_id += 1;
        format!("{prefix}-{:08}", self.next_id)
    }

    fn push(&mut self, at: Instant, event: Value, marker: Marker) {
        self.queue.push_back(Planned { at, event: Event::Json(event), marker });
    }

    fn scaled(&self, ms: u64) -> Duration {
        if self.speech.pace <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(ms as f64 / 1000.0 / self.speech.pace)
        }
    }

    /// The user's transcript (a FINAL USER text content, ending `PARTIAL_TURN` as the
    /// service's do — see the `session` module) at `at`.
    pub fn transcript(&mut self, at: Instant, text: &str) {
        let id = self.id("user");
        let ids = self.ids;
        self.push(at, ids.content_start(&id, "TEXT", "USER", Some("FINAL")), Marker::None);
        self.push(at, ids.text_output(&id, "USER", text), Marker::None);
        self.push(at, ids.content_end(&id, "TEXT", "PARTIAL_TURN"), Marker::None);
    }

    /// The assistant's reply from `at`: text (SPECULATIVE, audio, FINAL), then a tool call,
    /// then usage. The completion stays open (one per prompt). Returns the output usage.
    pub fn reply(
        &mut self,
        at: Instant,
        text: Option<&str>,
        tool: Option<(&str, &str, &Value)>,
        input: &Usage,
        total: &mut Usage,
    ) -> Usage {
        let ids = self.ids;
        let text = text.filter(|t| !t.is_empty());
        let total_ms = text.map_or(0, |t| speech_ms(t, self.speech.ms_per_char));
        let mut delta = input.clone();
        if let Some(text) = text {
            delta.output_text += crate::tokens::estimate_tokens(text);
            delta.output_speech += speech_tokens(total_ms);
        }
        if let Some((_, _, input)) = tool {
            delta.output_text += crate::tokens::estimate_json_tokens(input);
        }
        total.add(&delta);
        let end = at + self.scaled(total_ms);
        let stop = if tool.is_some() { "PARTIAL_TURN" } else { "END_TURN" };
        let mut final_text = None;
        if let Some(text) = text {
            let speculative = self.id("text");
            self.push(at, ids.content_start(&speculative, "TEXT", "ASSISTANT", Some("SPECULATIVE")), Marker::None);
            self.push(at, ids.text_output(&speculative, "ASSISTANT", text), Marker::None);
            self.push(at, ids.content_end(&speculative, "TEXT", "PARTIAL_TURN"), Marker::None);
            let audio = self.id("audio");
            self.push(at, ids.content_start(&audio, "AUDIO", "ASSISTANT", None), Marker::AudioStart(audio.clone()));
            let chunk = self.speech.chunk_ms;
            let mut offset_ms = 0;
            let (shared_ids, content_id) = (Arc::new(ids.clone()), Arc::<str>::from(audio.as_str()));
            while offset_ms < total_ms {
                let ms = chunk.min(total_ms - offset_ms);
                let offset_samples = offset_ms * u64::from(OUTPUT_RATE) / 1000;
                let event =
                    Event::Audio { ids: shared_ids.clone(), content_id: content_id.clone(), offset_samples, ms };
                self.queue.push_back(Planned { at: at + self.scaled(offset_ms), event, marker: Marker::None });
                offset_ms += ms;
            }
            self.push(end, ids.content_end(&audio, "AUDIO", stop), Marker::AudioEnd);
            final_text = Some(text);
        }
        // Usage before the FINAL text: a client that takes the FINAL text's end as the end
        // of the reply has the reply's usage by then.
        let done = if tool.is_some() { Marker::None } else { Marker::Done };
        let usage_marker = if final_text.is_none() { done.clone() } else { Marker::None };
        self.push(end, ids.usage(&delta, total), usage_marker);
        if let Some(text) = final_text {
            let final_id = self.id("text");
            self.push(end, ids.content_start(&final_id, "TEXT", "ASSISTANT", Some("FINAL")), Marker::None);
            self.push(end, ids.text_output(&final_id, "ASSISTANT", text), Marker::None);
            self.push(end, ids.content_end(&final_id, "TEXT", stop), done);
        }
        if let Some((tool_use_id, name, input)) = tool {
            let id = self.id("tool");
            self.push(end, ids.content_start(&id, "TOOL", "TOOL", None), Marker::None);
            self.push(end, ids.tool_use(&id, tool_use_id, name, input), Marker::None);
            self.push(
                end,
                ids.content_end(&id, "TOOL", "TOOL_USE"),
                Marker::ToolPending(tool_use_id.to_owned(), name.to_owned()),
            );
        }
        delta
    }
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
