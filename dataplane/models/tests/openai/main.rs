//! The OpenAI-compatible client against a real (small) chat-completions server on a
//! socket, speaking HTTP/1.1 and server-sent events.

use std::sync::{Arc, Mutex};

use switchboard_models::openai::OpenAiTextModel;
use switchboard_models::{
    ContentBlock, Message, ModelError, ModelRequest, Role, StopReason, TextModel, ToolDefinition, ToolResult,
    ToolResultStatus, ToolUse, collect_reply,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves each connection with `status` and `body` (then closes); records request bodies.
async fn server(status: &'static str, body: String) -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = socket.read(&mut buf).await.expect("reads");
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                l.to_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if rest.len() >= length {
                            record
                                .lock()
                                .expect("lock")
                                .push(serde_json::from_str(&rest[..length]).expect("JSON request"));
                            break;
                        }
                    }
                    if n == 0 {
                        return;
                    }
                }
                let head = format!("HTTP/1.1 {status}\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
                socket.write_all(head.as_bytes()).await.expect("writes");
                for piece in body.as_bytes().chunks(7) {
                    socket.write_all(piece).await.expect("writes");
                    socket.flush().await.expect("flushes");
                }
            });
        }
    });
    (format!("http://{addr}/v1"), seen)
}

fn sse(chunks: &[serde_json::Value], done: bool) -> String {
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        out.push_str("data: [DONE]\n\n");
    }
    out
}

fn request() -> ModelRequest {
    let mut request = ModelRequest::new(
        "llama-3",
        vec![
            Message::user_text("balance?"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse(ToolUse {
                    id: "c0".into(),
                    name: "lookup".into(),
                    input: serde_json::json!({"a": 1}),
                })],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult {
                    tool_use_id: "c0".into(),
                    content: serde_json::json!({"ok": true}),
                    status: ToolResultStatus::Success,
                })],
            },
        ],
    );
    request.system = "be brief".into();
    request.tools = vec![ToolDefinition {
        name: "check_balance".into(),
        description: "balance".into(),
        input_schema: serde_json::json!({"type": "object"}),
    }];
    request
}

#[tokio::test]
async fn streams_text_tool_calls_and_usage() {
    let chunks = [
        serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me "}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {"content": "check."}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "check_balance", "arguments": "{\"accountN"}}]}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "umber\": \"12345678\"}"}}]}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 7}}),
    ];
    let (endpoint, seen) = server("200 OK", sse(&chunks, true)).await;
    let model = OpenAiTextModel::new(&endpoint, Some(String::from("secret").into())).expect("client");
    let reply = collect_reply(model.stream(&request())).await.expect("reply");
    assert_eq!(reply.text, "Let me check.");
    assert_eq!(reply.text_deltas, 2);
    assert_eq!(reply.tool_uses.len(), 1);
    assert_eq!(reply.tool_uses[0].id, "call_1");
    assert_eq!(reply.tool_uses[0].input, serde_json::json!({"accountNumber": "12345678"}));
    assert_eq!(reply.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(reply.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((42, 7)));

    let body = seen.lock().expect("lock")[0].clone();
    assert_eq!(body["model"], "llama-3");
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][0], serde_json::json!({"role": "system", "content": "be brief"}));
    assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
    assert_eq!(body["messages"][3]["role"], "tool");
    assert_eq!(body["messages"][3]["tool_call_id"], "c0");
    assert_eq!(body["tools"][0]["function"]["name"], "check_balance");
}

#[tokio::test]
async fn http_errors_are_classified() {
    type Case = (&'static str, fn(&ModelError) -> bool, bool);
    let cases: [Case; 4] = [
        ("429 Too Many Requests", |e| matches!(e, ModelError::Throttled { .. }), true),
        ("503 Service Unavailable", |e| matches!(e, ModelError::ServiceUnavailable { .. }), true),
        ("404 Not Found", |e| matches!(e, ModelError::ModelNotFound { .. }), false),
        ("401 Unauthorized", |e| matches!(e, ModelError::Credentials { .. }), false),
    ];
    for (status, check, retryable) in cases {
        let (endpoint, _) = server(status, "{\"error\": \"nope\"}".into()).await;
        let model = OpenAiTextModel::new(&endpoint, None).expect("client");
        let error = collect_reply(model.stream(&request())).await.expect_err(status);
        assert!(check(&error), "{status}: {error}");
        assert_eq!(error.is_retryable(), retryable, "{status}");
    }
}

#[tokio::test]
async fn a_stream_cut_before_done_is_interrupted() {
    let chunks = [serde_json::json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})];
    let (endpoint, _) = server("200 OK", sse(&chunks, false)).await;
    let model = OpenAiTextModel::new(&endpoint, None).expect("client");
    let error = collect_reply(model.stream(&request())).await.expect_err("cut");
    assert!(matches!(error, ModelError::StreamInterrupted { .. }), "{error}");
    assert!(OpenAiTextModel::new("https://example.com/v1", None).is_ok(), "https endpoints are accepted");
    let error = OpenAiTextModel::new("ftp://example.com/v1", None).expect_err("other schemes are refused");
    assert!(error.to_string().contains("http:// or https://"), "{error}");
}
