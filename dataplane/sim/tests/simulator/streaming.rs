//! Streamed replies: pacing, deltas, usage, tool-use round trips, concurrency.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use switchboard_models::{
    ContentBlock, Message, ModelEvent, Role, StopReason, ToolResult, ToolResultStatus, collect_reply,
};
use switchboard_sim::Operation;
use switchboard_sim::tokens::split_tokens;

use crate::common::{model, request, script, start};

const STORY: &str = "Once upon a time, a small bank answered every customer within a second, and nobody waited.";

#[tokio::test]
async fn text_streams_in_paced_deltas_with_usage() {
    let sim = start(script(&format!(
        r#"
timing: {{ timeToFirstTokenMs: 150, tokensPerSecond: 100, tokensPerDelta: 1 }}
rules:
  - name: story
    when: {{ userText: "story" }}
    reply: {{ text: "{STORY}" }}
"#
    )))
    .await;
    let model = model(&sim).await;
    let started = Instant::now();
    let mut stream = model.stream(&request("tell me a story", &[]));
    let mut deltas = Vec::new();
    let mut first_delta_at = None;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.expect("no error");
        if let ModelEvent::TextDelta(text) = &event {
            first_delta_at.get_or_insert_with(|| started.elapsed());
            deltas.push(text.clone());
        }
        events.push(event);
    }
    let elapsed = started.elapsed();
    let tokens = split_tokens(STORY);
    assert_eq!(deltas.concat(), STORY);
    assert_eq!(deltas.len(), tokens.len(), "one delta per token: {deltas:?}");
    assert!(deltas.len() > 10);
    // Loose lower bounds only: time to first token, then ~10 ms per further token.
    let first = first_delta_at.expect("a delta arrived");
    assert!(first >= Duration::from_millis(140), "first token after {first:?}");
    let pacing = Duration::from_millis(10 * (tokens.len() as u64 - 1) / 2);
    assert!(elapsed >= Duration::from_millis(140) + pacing, "whole reply took {elapsed:?}");
    // Stop and usage come after every delta.
    let last_delta = events.iter().rposition(|e| matches!(e, ModelEvent::TextDelta(_))).expect("deltas");
    let stop = events.iter().position(|e| *e == ModelEvent::Stop(StopReason::EndTurn)).expect("a stop");
    let usage = events.iter().position(|e| matches!(e, ModelEvent::Usage(_))).expect("usage");
    assert!(stop > last_delta && usage > last_delta, "{events:?}");
    let ModelEvent::Usage(usage) = &events[usage] else { unreachable!() };
    assert_eq!(usage.output_tokens, tokens.len() as u64);
    assert!(usage.input_tokens >= 4, "{usage:?}");
    assert_eq!(sim.stats().requests(Operation::ConverseStream), 1);
    assert_eq!(sim.stats().http2_requests, 1, "TLS with ALPN must negotiate HTTP/2");
    sim.shutdown().await;
}

#[tokio::test]
async fn tool_use_round_trip_interpolates_the_result() {
    let sim = start(script(
        r#"
timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }
rules:
  - name: balance
    when: { userText: "(?i)balance of (?P<account>\\d{8})" }
    reply:
      text: "Checking."
      toolUse: { name: check_balance, input: { accountNumber: "{account}", detailed: true } }
      fallbackText: "I cannot check balances here."
  - name: balance-result
    when: { toolResult: { name: check_balance, status: success } }
    reply: { text: "Your balance is {balance} {currency}." }
"#,
    ))
    .await;
    let model = model(&sim).await;
    let first = request("What is the balance of 12345678?", &["check_balance"]);
    let reply = collect_reply(model.stream(&first)).await.expect("first turn");
    assert_eq!(reply.text, "Checking.");
    assert_eq!(reply.stop_reason, Some(StopReason::ToolUse));
    let [call] = reply.tool_uses.as_slice() else { panic!("one tool call: {reply:?}") };
    assert_eq!(call.name, "check_balance");
    assert_eq!(call.input, json!({ "accountNumber": "12345678", "detailed": true }));
    assert!(!call.id.is_empty());

    let mut second = first.clone();
    second.messages.push(Message {
        role: Role::Assistant,
        content: vec![ContentBlock::Text(reply.text.clone()), ContentBlock::ToolUse(call.clone())],
    });
    second.messages.push(Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResult {
            tool_use_id: call.id.clone(),
            content: json!({ "balance": 1234.56, "currency": "GBP" }),
            status: ToolResultStatus::Success,
        })],
    });
    let reply = collect_reply(model.stream(&second)).await.expect("second turn");
    assert_eq!(reply.text, "Your balance is 1234.56 GBP.");
    assert_eq!(reply.stop_reason, Some(StopReason::EndTurn));
    assert!(reply.tool_uses.is_empty());
    let usage = reply.usage.expect("usage");
    assert!(usage.input_tokens > 20, "the history counts as input: {usage:?}");

    // Without the tool in the request the model answers in text.
    let reply = collect_reply(model.stream(&request("What is the balance of 12345678?", &[]))).await.expect("ok");
    assert_eq!(reply.text, "I cannot check balances here.");
    assert!(reply.tool_uses.is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn max_tokens_truncates_the_reply() {
    let sim = start(script(&format!(
        "timing: {{ timeToFirstTokenMs: 0, tokensPerSecond: 0 }}\ndefault: {{ text: \"{STORY}\" }}"
    )))
    .await;
    let model = model(&sim).await;
    let mut short = request("go", &[]);
    short.max_tokens = 5;
    let reply = collect_reply(model.stream(&short)).await.expect("ok");
    assert_eq!(reply.stop_reason, Some(StopReason::MaxTokens));
    assert_eq!(reply.text, split_tokens(STORY)[..5].concat());
    assert_eq!(reply.usage.map(|u| u.output_tokens), Some(5));
    sim.shutdown().await;
}

#[tokio::test]
async fn fifty_concurrent_streams_succeed() {
    let sim = start(script("timing: { timeToFirstTokenMs: 50, tokensPerSecond: 200 }")).await;
    let model = model(&sim).await;
    let calls = (0..50).map(|i| {
        let model = model.clone();
        tokio::spawn(async move {
            let reply = collect_reply(model.stream(&request(&format!("hello number {i}"), &[]))).await;
            (i, reply)
        })
    });
    for call in futures_util::future::join_all(calls).await {
        let (i, reply) = call.expect("task ran");
        let reply = reply.unwrap_or_else(|e| panic!("stream {i} failed: {e}"));
        assert_eq!(reply.text, format!("You said: hello number {i}"));
        assert_eq!(reply.stop_reason, Some(StopReason::EndTurn));
    }
    assert_eq!(sim.stats().requests(Operation::ConverseStream), 50);
    sim.shutdown().await;
}
