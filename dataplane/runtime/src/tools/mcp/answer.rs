//! What an MCP server answers, decoded without the network: one event of a response
//! stream, a JSON-RPC result or error, a `tools/call` result as the model sees it, and
//! progress notifications as lines.

use serde_json::Value;

use super::bad;
use switchboard_core::{FailureKind, ToolFailure};
use switchboard_models::net::SseParser;

use super::MAX_ANSWER_BYTES;

/// What one event of a response stream holds.
pub(super) enum StreamItem {
    /// No data (a keep-alive or a priming event).
    Empty,
    /// The response to the request being read.
    Answer(Value),
    /// A notification, a server-to-client request, or another response.
    Other(Value),
}

/// Reads one event's data of a response stream to the request with id `id`.
pub(super) fn stream_item(url: &str, data: &str, id: u64) -> Result<StreamItem, ToolFailure> {
    if data.trim().is_empty() {
        return Ok(StreamItem::Empty);
    }
    let message: Value =
        serde_json::from_str(data).map_err(|e| bad(url, format_args!("sent an event that is not JSON: {e}")))?;
    if message.get("id").and_then(Value::as_u64) == Some(id) && message.get("method").is_none() {
        return Ok(StreamItem::Answer(message));
    }
    Ok(StreamItem::Other(message))
}

/// Decodes a whole answer to the `tools/call` request `id` as [`McpClient`] does, without
/// the network: `body` is the response body (an event stream when `is_stream`, fed to the
/// parser in pieces of `piece` bytes), progress notifications on the way are turned into
/// their text. For the fuzz targets (`fuzz/`); nothing else calls it.
#[doc(hidden)]
pub fn decode_tool_answer(body: &[u8], is_stream: bool, id: u64, piece: usize) -> Result<Value, ToolFailure> {
    let url = "fuzz";
    if !is_stream {
        let answer =
            serde_json::from_slice(body).map_err(|e| bad(url, format_args!("answered with invalid JSON: {e}")))?;
        return tool_result(url, "tool", answer);
    }
    let mut parser = SseParser::new(MAX_ANSWER_BYTES);
    for data in body.chunks(piece.max(1)) {
        for event in parser.feed(data).map_err(|e| bad(url, e))? {
            match stream_item(url, &event.data, id)? {
                StreamItem::Empty => {}
                StreamItem::Answer(message) => return tool_result(url, "tool", message),
                StreamItem::Other(message) => {
                    let params = message.get("params").cloned().unwrap_or(Value::Null);
                    std::hint::black_box(progress_text(&params));
                }
            }
        }
    }
    Err(bad(url, "closed its event stream before answering"))
}

/// The `result` of a JSON-RPC response, or its error as a failure.
pub(super) fn rpc_result(url: &str, answer: Value) -> Result<Value, ToolFailure> {
    if let Some(error) = answer.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
        let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
        let kind = if code == -32602 || code == -32601 { FailureKind::InvalidInput } else { FailureKind::BadResponse };
        // The server's own words are for its callers (the model, the client); where it is, not.
        let message: String = message.chars().take(300).collect();
        return Err(ToolFailure::new(kind, format!("the MCP server answered error {code}: {message}"))
            .with_detail(format!("the MCP server at {url} answered error {code}: {message}")));
    }
    answer.get("result").cloned().ok_or_else(|| bad(url, "answered without a result or an error"))
}

/// What the model sees of a `tools/call` result.
pub(super) fn tool_result(url: &str, name: &str, answer: Value) -> Result<Value, ToolFailure> {
    let result = rpc_result(url, answer)?;
    let text = content_text(result.get("content"));
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(ToolFailure::new(
            FailureKind::ToolReported,
            format!("MCP tool {name:?} reported an error: {text}"),
        ));
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        return Ok(structured.clone());
    }
    Ok(serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)))
}

/// The content blocks as text: text blocks as they are, others described.
fn content_text(content: Option<&Value>) -> String {
    let blocks = content.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let parts: Vec<String> = blocks
        .iter()
        .map(|block| match block.get("type").and_then(Value::as_str) {
            Some("text") => block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
            Some("resource_link") | Some("resource") => {
                let uri = block.get("uri").or_else(|| block.pointer("/resource/uri"));
                format!("[resource {}]", uri.and_then(Value::as_str).unwrap_or("?"))
            }
            Some(kind) => {
                let mime = block.get("mimeType").and_then(Value::as_str).unwrap_or("unknown type");
                format!("[{kind} content, {mime}]")
            }
            None => String::new(),
        })
        .collect();
    parts.join("\n")
}

/// A progress notification as one line: its message, and `progress/total` when known.
pub(super) fn progress_text(params: &Value) -> String {
    let number = |key: &str| params.get(key).and_then(Value::as_f64);
    let count = match (number("progress"), number("total")) {
        (Some(done), Some(total)) => format!("{done}/{total}"),
        (Some(done), None) => format!("{done}"),
        _ => String::new(),
    };
    match (params.get("message").and_then(Value::as_str), count.is_empty()) {
        (Some(message), true) => message.to_owned(),
        (Some(message), false) => format!("{message} ({count})"),
        (None, _) => format!("progress {count}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn results_prefer_structured_content_then_json_text_then_text() {
        let structured = json!({"result": {"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1}}});
        assert_eq!(tool_result("u", "t", structured).expect("ok"), json!({"a": 1}));
        let json_text = json!({"result": {"content": [{"type": "text", "text": "{\"b\": 2}"}]}});
        assert_eq!(tool_result("u", "t", json_text).expect("ok"), json!({"b": 2}));
        let text = json!({"result": {"content": [{"type": "text", "text": "hi"}, {"type": "image", "mimeType": "image/png", "data": ""}]}});
        assert_eq!(tool_result("u", "t", text).expect("ok"), json!("hi\n[image content, image/png]"));
    }

    #[test]
    fn errors_are_classified() {
        let reported = json!({"result": {"content": [{"type": "text", "text": "no such account"}], "isError": true}});
        let failure = tool_result("u", "lookup", reported).expect_err("fails");
        assert_eq!(failure.kind, FailureKind::ToolReported);
        assert!(failure.message.contains("no such account"), "{}", failure.message);
        let invalid = json!({"error": {"code": -32602, "message": "Unknown tool: x"}});
        assert_eq!(tool_result("u", "x", invalid).expect_err("fails").kind, FailureKind::InvalidInput);
        assert_eq!(tool_result("u", "x", json!({"id": 1})).expect_err("fails").kind, FailureKind::BadResponse);
    }

    #[test]
    fn progress_lines() {
        assert_eq!(progress_text(&json!({"progress": 1, "total": 3, "message": "step 1"})), "step 1 (1/3)");
        assert_eq!(progress_text(&json!({"progress": 2})), "progress 2");
        assert_eq!(progress_text(&json!({"message": "working"})), "working");
    }
}
