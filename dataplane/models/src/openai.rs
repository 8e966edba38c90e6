//! An OpenAI-compatible chat-completions client (vLLM, Ollama, llama.cpp server, ...):
//! `POST {endpoint}/chat/completions` with `stream: true`, read as server-sent events.
//! Text deltas, tool calls (assembled from their streamed pieces), usage and finish
//! reasons map onto [`ModelEvent`]; HTTP statuses onto classified [`ModelError`]s.
//! `http://` (in-cluster model servers) and `https://` endpoints, trusting the system's
//! roots plus the runtime's `--ca-file`.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::net::{HttpClient, SseParser, Trust};

use super::{
    ContentBlock, ModelError, ModelEvent, ModelRequest, ModelStream, Role, StopReason, TextModel, ToolUse, Usage,
};

/// Where the bearer token sent to the server comes from.
#[derive(Clone)]
pub enum ApiKey {
    /// A value given at start (e.g. the `OPENAI_API_KEY` variable).
    Value(String),
    /// A file read at each call: a mounted Secret, so a rotated key is used without a
    /// restart. Errors name the file, never its contents.
    File(PathBuf),
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Value(_) => f.write_str("ApiKey::Value(** redacted **)"),
            Self::File(path) => f.debug_tuple("ApiKey::File").field(path).finish(),
        }
    }
}

impl From<String> for ApiKey {
    fn from(value: String) -> Self {
        Self::Value(value)
    }
}

impl ApiKey {
    /// The key now (a file is read again).
    fn value(&self) -> Result<String, ModelError> {
        match self {
            Self::Value(value) => Ok(value.clone()),
            Self::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| ModelError::Config {
                    message: format!("cannot read the API key file {}: {e}", path.display()),
                })?;
                Ok(text.trim().to_owned())
            }
        }
    }
}

/// A chat-completions server.
#[derive(Clone, Debug)]
pub struct OpenAiTextModel {
    client: HttpClient,
    endpoint: String,
    api_key: Option<ApiKey>,
}

impl OpenAiTextModel {
    /// A client for `endpoint` (e.g. `http://vllm.models:8000/v1`), sending `api_key` as a
    /// bearer token when given, trusting the system's root certificates.
    pub fn new(endpoint: &str, api_key: Option<ApiKey>) -> Result<Self, ModelError> {
        let client = Trust::system().client().map_err(|e| ModelError::Config { message: e.to_string() })?;
        Self::with_client(endpoint, api_key, client)
    }

    /// A client for `endpoint` sending requests through `client`.
    pub fn with_client(endpoint: &str, api_key: Option<ApiKey>, client: HttpClient) -> Result<Self, ModelError> {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ModelError::Config {
                message: format!("OpenAI-compatible endpoint {endpoint:?} must be an http:// or https:// URL"),
            });
        }
        Ok(Self { client, endpoint: endpoint.trim_end_matches('/').to_owned(), api_key })
    }
}

impl TextModel for OpenAiTextModel {
    fn stream(&self, request: &ModelRequest) -> ModelStream {
        let this = self.clone();
        let body = request_body(request);
        let model_id = request.model_id.clone();
        Box::pin(futures_util::stream::once(async move { this.send(body, model_id).await }).flat_map(
            |start| match start {
                Ok(body) => events(body),
                Err(error) => Box::pin(futures_util::stream::iter([Err(error)])),
            },
        ))
    }

    fn provider(&self) -> &'static str {
        "openai"
    }
}

impl OpenAiTextModel {
    async fn send(&self, body: Value, model_id: String) -> Result<Incoming, ModelError> {
        let url = format!("{}/chat/completions", self.endpoint);
        let mut builder = http::Request::post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "text/event-stream");
        if let Some(key) = &self.api_key {
            let mut value = http::HeaderValue::try_from(format!("Bearer {}", key.value()?))
                .map_err(|_| ModelError::Config { message: "the API key is not a valid header value".into() })?;
            value.set_sensitive(true);
            builder = builder.header(http::header::AUTHORIZATION, value);
        }
        let request = builder
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| ModelError::Config { message: format!("cannot build a request for {url}: {e}") })?;
        let response =
            self.client.request(request).await.map_err(|e| ModelError::Connection { message: e.to_string() })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response.into_body());
        }
        let text = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let message: String = String::from_utf8_lossy(&text).chars().take(500).collect();
        Err(match status.as_u16() {
            429 => ModelError::Throttled { message },
            401 => ModelError::Credentials { message },
            403 => ModelError::AccessDenied { message },
            404 => ModelError::ModelNotFound { model_id, message },
            400 | 413 | 422 => ModelError::Validation { message },
            code if code >= 500 => ModelError::ServiceUnavailable { code: format!("HTTP {code}"), message },
            code => ModelError::Protocol { message: format!("unexpected HTTP {code}: {message}") },
        })
    }
}

/// The chat-completions body for `request`.
pub fn request_body(request: &ModelRequest) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({ "role": "system", "content": request.system }));
    }
    for message in &request.messages {
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in &message.content {
            match block {
                ContentBlock::Text(t) => text.push_str(t),
                ContentBlock::ToolUse(u) => calls.push(json!({
                    "id": u.id, "type": "function",
                    "function": { "name": u.name, "arguments": u.input.to_string() }
                })),
                ContentBlock::ToolResult(r) => {
                    let content = match &r.content {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    messages.push(json!({ "role": "tool", "tool_call_id": r.tool_use_id, "content": content }));
                }
            }
        }
        match message.role {
            Role::User if !text.is_empty() => messages.push(json!({ "role": "user", "content": text })),
            Role::User => {}
            Role::Assistant => {
                let mut m = json!({ "role": "assistant", "content": text });
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                }
                messages.push(m);
            }
        }
    }
    let mut body = json!({
        "model": request.model_id,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
    });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.input_schema } }))
            .collect();
        body["tools"] = Value::Array(tools);
    }
    body
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Decodes a server-sent-event stream of chat-completion chunks.
#[derive(Debug)]
pub struct SseDecoder {
    parser: SseParser,
    calls: BTreeMap<u64, PartialCall>,
    stop: Option<StopReason>,
    /// Set once `data: [DONE]` arrived.
    pub done: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self { parser: SseParser::new(MAX_LINE_BYTES), calls: BTreeMap::new(), stop: None, done: false }
    }
}

/// Longest event-stream line accepted from a model server.
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

impl SseDecoder {
    /// Feeds bytes; returns the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Result<ModelEvent, ModelError>> {
        let events = match self.parser.feed(bytes) {
            Ok(events) => events,
            Err(e) => return vec![Err(ModelError::Protocol { message: e.to_string() })],
        };
        let mut out = Vec::new();
        for event in events {
            let data = event.data.trim();
            if data == "[DONE]" {
                out.extend(self.finish());
                self.done = true;
                continue;
            }
            match serde_json::from_str::<Value>(data) {
                Ok(chunk) => out.extend(self.chunk(&chunk)),
                Err(e) => out.push(Err(ModelError::Protocol { message: format!("a stream chunk is not JSON: {e}") })),
            }
        }
        out
    }

    fn chunk(&mut self, chunk: &Value) -> Vec<Result<ModelEvent, ModelError>> {
        let mut out = Vec::new();
        if let Some(error) = chunk.get("error") {
            out.push(Err(ModelError::StreamInterrupted { message: error.to_string() }));
            return out;
        }
        if let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) {
            let delta = &choice["delta"];
            if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                out.push(Ok(ModelEvent::TextDelta(text.to_owned())));
            }
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let partial = self.calls.entry(index).or_default();
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    partial.id = id.to_owned();
                }
                if let Some(name) = call["function"].get("name").and_then(Value::as_str) {
                    partial.name.push_str(name);
                }
                if let Some(arguments) = call["function"].get("arguments").and_then(Value::as_str) {
                    partial.arguments.push_str(arguments);
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.stop = Some(match reason {
                    "stop" => StopReason::EndTurn,
                    "tool_calls" => StopReason::ToolUse,
                    "length" => StopReason::MaxTokens,
                    other => StopReason::Other(other.to_owned()),
                });
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            out.push(Ok(ModelEvent::Usage(Usage {
                input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            })));
        }
        out
    }

    fn finish(&mut self) -> Vec<Result<ModelEvent, ModelError>> {
        let mut out = Vec::new();
        for (_, call) in std::mem::take(&mut self.calls) {
            let arguments = if call.arguments.trim().is_empty() { "{}" } else { call.arguments.as_str() };
            match serde_json::from_str(arguments) {
                Ok(input) => out.push(Ok(ModelEvent::ToolUse(ToolUse { id: call.id, name: call.name, input }))),
                Err(e) => out.push(Err(ModelError::InvalidToolInput { tool: call.name, message: e.to_string() })),
            }
        }
        out.push(Ok(ModelEvent::Stop(self.stop.take().unwrap_or(StopReason::EndTurn))));
        out
    }
}

fn events(body: Incoming) -> ModelStream {
    struct State {
        body: Incoming,
        decoder: SseDecoder,
        queue: VecDeque<Result<ModelEvent, ModelError>>,
        ended: bool,
    }
    let state = State { body, decoder: SseDecoder::default(), queue: VecDeque::new(), ended: false };
    Box::pin(futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.queue.pop_front() {
                if item.is_err() {
                    state.ended = true;
                    state.queue.clear();
                }
                return Some((item, state));
            }
            if state.ended || state.decoder.done {
                return None;
            }
            match state.body.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        let events = state.decoder.feed(data);
                        state.queue.extend(events);
                    }
                }
                Some(Err(e)) => {
                    state.queue.push_back(Err(ModelError::StreamInterrupted { message: e.to_string() }));
                }
                None => {
                    state.ended = true;
                    state.queue.push_back(Err(ModelError::StreamInterrupted {
                        message: "the stream ended before [DONE]".into(),
                    }));
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::ApiKey;

    #[test]
    fn a_key_file_is_read_at_each_call_and_no_key_is_printed() {
        let path = std::env::temp_dir().join(format!("switchboard-openai-key-{}", std::process::id()));
        std::fs::write(&path, "sk-first\n").expect("writes");
        let key = ApiKey::File(path.clone());
        assert_eq!(key.value().expect("read"), "sk-first");
        std::fs::write(&path, "sk-rotated").expect("rotates");
        assert_eq!(key.value().expect("read"), "sk-rotated", "a rotation is seen without a restart");
        std::fs::remove_file(&path).expect("removes");
        let error = key.value().expect_err("gone").to_string();
        assert!(error.contains("API key file") && !error.contains("sk-"), "{error}");
        let value = ApiKey::from(String::from("sk-secret"));
        assert!(!format!("{value:?}").contains("sk-secret"));
    }
}
