//! Client-side tools (issue 42) through the real gateway and a real runtime process: the
//! Example Bank's triage gets a tool the client runs (`pick_account`, its result checked
//! against an output schema); the simulated model calls it when asked which account; the
//! client — a real WebSocket client of the gateway — gets the `client_tool_call`, answers
//! (or does not), and the model goes on from the result or from a typed error. The runtime
//! counts the calls by outcome. In a voice call the caller asks aloud, the app answers
//! the call while the microphone streams, and the agent says the answer.

use std::time::{Duration, Instant};

use switchboard_core::protocol::{ClientMessage, ServerMessage};
use switchboard_crds::RuntimeSpec;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::{Script, banking_script};

use crate::client::{Client, get, metric_sum, replies};
use crate::fleet::Fleet;
use crate::voice_common::{self, Call, Encoding, audio_bytes, is_final_reply};

/// The rules that call `pick_account` and answer its outcome, before the bank's own.
const RULES: &str = r#"
rules:
  - name: pick-account
    when: { userText: "(?i)which account" }
    reply: { toolUse: { name: pick_account, input: { question: "Which account do you mean?" } } }
  - name: picked-account
    when: { toolResult: { name: pick_account, status: success } }
    reply: { text: "You chose account {account}." }
  - name: pick-account-failed
    when: { toolResult: { name: pick_account, status: error } }
    reply: { text: "The app could not tell me: {result}" }
"#;

fn script() -> Script {
    let mut script = banking_script().expect("the bank's script");
    let mut ours = Script::parse(RULES).expect("the client tool rules").rules;
    ours.append(&mut script.rules);
    script.rules = ours;
    script
}

/// The phrase a caller asks which account with, in a voice call.
const WHICH_ACCOUNT: u32 = 7;

/// The voice script (Nova Sonic phrases, a person's pace) with the client tool's rules
/// first.
fn voice_script() -> Script {
    let yaml = voice_common::script("", "").replacen(
        "    6: \"What are your opening hours?\"\n",
        &format!("    6: \"What are your opening hours?\"\n    {WHICH_ACCOUNT}: \"Which account is this about?\"\n"),
        1,
    );
    let mut script = Script::parse(&yaml).expect("the voice script");
    let mut ours = Script::parse(RULES).expect("the client tool rules").rules;
    ours.append(&mut script.rules);
    script.rules = ours;
    script
}

/// A fleet whose triage has the client tool `pick_account`, awaited `timeout_seconds`.
async fn fleet(timeout_seconds: u32) -> Fleet {
    fleet_with(timeout_seconds, script()).await
}

/// [`fleet`] with the simulator running `script`.
async fn fleet_with(timeout_seconds: u32, script: Script) -> Fleet {
    let edit = move |spec: &mut RuntimeSpec| {
        if spec.agent.name != "triage" {
            return;
        }
        let tool = serde_json::json!({
            "name": "pick_account",
            "description": "Ask the customer's app which of their accounts they mean.",
            "inputSchema": { "type": "object", "properties": { "question": { "type": "string" } } },
            "client": {
                "timeoutSeconds": timeout_seconds,
                "outputSchema": {
                    "type": "object",
                    "properties": { "account": { "type": "string", "pattern": "^[0-9]{8}$" } },
                    "required": ["account"]
                }
            }
        });
        spec.tools.push(serde_json::from_value(tool).expect("a client tool"));
        for node in &mut spec.workflow.spec.nodes {
            node.tools.push("pick_account".into());
        }
    };
    Fleet::edited(&[], Auth::default(), GatewayConfig::default(), Store::default(), script, None, edit).await
}

/// A text session with triage that asked which account: the `client_tool_call`'s id.
async fn asked(fleet: &Fleet) -> (Client, String, Vec<ServerMessage>) {
    let mut client = Client::start(&fleet.url, Some("triage")).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("Which account is this about?").await;
    let seen = client.until(|m| matches!(m, ServerMessage::ClientToolCall { .. })).await;
    let Some(ServerMessage::ClientToolCall { tool_use_id, name, input, timeout_ms }) = seen.last().cloned() else {
        unreachable!("until returns the match last")
    };
    assert_eq!(name, "pick_account");
    assert_eq!(input["question"], "Which account do you mean?");
    assert!(timeout_ms >= 1000, "{timeout_ms}");
    (client, tool_use_id, seen)
}

async fn triage_metrics(fleet: &Fleet) -> String {
    let pod = fleet.pods.iter().find(|p| p.agent == "triage").expect("triage's pod");
    get(pod.addr, "/metrics").await.1
}

fn client_calls(metrics: &str, outcome: &str) -> f64 {
    let labels = [("agent", "triage"), ("tool", "pick_account"), ("outcome", outcome)];
    metric_sum(metrics, "switchboard_client_tool_calls_total", &labels)
}

fn tool_error_kind(messages: &[ServerMessage]) -> Option<String> {
    messages.iter().find_map(|m| match m {
        ServerMessage::ToolError { name, kind, .. } if name == "pick_account" => Some(kind.clone()),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_round_trips_through_the_gateway_and_the_model_goes_on() {
    let fleet = fleet(20).await;
    let (mut client, id, seen) = asked(&fleet).await;
    assert!(
        seen.iter().any(|m| matches!(m, ServerMessage::ToolStart { name, .. } if name == "pick_account")),
        "tool_start came first: {seen:?}"
    );
    let answer = ClientMessage::ClientToolResult {
        tool_use_id: id.clone(),
        result: Some(serde_json::json!({ "account": "12345678" })),
        error: None,
    };
    client.send(&answer).await;
    let turn = client.turn().await;
    assert!(
        turn.iter().any(|m| matches!(m, ServerMessage::ToolComplete { tool_use_id, result, .. }
            if *tool_use_id == id && result["account"] == "12345678")),
        "{turn:?}"
    );
    assert!(replies(&turn).iter().any(|r| r == "You chose account 12345678."), "{:?}", replies(&turn));
    // Answered once: a second answer is refused and changes nothing.
    client.send(&answer).await;
    let refused = client.until(|m| matches!(m, ServerMessage::BidiError { .. })).await;
    assert!(matches!(refused.last(), Some(ServerMessage::BidiError { code, recoverable: true, .. })
        if code == "no_client_tool_pending"));
    assert_eq!(client_calls(&triage_metrics(&fleet).await, "success"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_voice_call_the_app_answers_a_client_tool_and_the_agent_says_the_answer() {
    let fleet = fleet_with(20, voice_script()).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(WHICH_ACCOUNT, 700);
    let seen = call.until(|m| matches!(m, ServerMessage::ClientToolCall { .. })).await;
    let Some(ServerMessage::ClientToolCall { tool_use_id: id, name, input, .. }) = seen.last().cloned() else {
        unreachable!("until returns the match last")
    };
    assert_eq!((name.as_str(), &input["question"]), ("pick_account", &serde_json::json!("Which account do you mean?")));
    assert!(
        seen.iter().any(|m| matches!(m, ServerMessage::ToolStart { tool_use_id, .. } if *tool_use_id == id)),
        "tool_start came first: {:#?}",
        voice_common::summary(&seen)
    );
    // The app answers while the microphone keeps streaming.
    let answer = serde_json::json!({ "account": "12345678" });
    call.send(&ClientMessage::ClientToolResult { tool_use_id: id.clone(), result: Some(answer), error: None });
    let said = call.until(|m| is_final_reply(m, "You chose account 12345678.")).await;
    assert!(
        said.iter().any(|m| matches!(m, ServerMessage::ToolComplete { tool_use_id, result, .. }
            if *tool_use_id == id && result["account"] == "12345678")),
        "{:#?}",
        voice_common::summary(&said)
    );
    assert!(audio_bytes(&said) > 0, "the agent said the answer aloud");
    // A second answer is refused and changes nothing; the call goes on.
    call.send(&ClientMessage::ClientToolResult { tool_use_id: id, result: Some(serde_json::json!({})), error: None });
    let refused = call.until(|m| matches!(m, ServerMessage::BidiError { .. })).await;
    assert!(
        matches!(refused.last(), Some(ServerMessage::BidiError { code, recoverable: true, .. }) if code == "no_client_tool_pending"),
        "{:#?}",
        voice_common::summary(&refused)
    );
    call.say(voice_common::HOURS, 700);
    call.until(|m| is_final_reply(m, "We are open from nine to five.")).await;
    call.hang_up().await;
    assert_eq!(client_calls(&triage_metrics(&fleet).await, "success"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_a_handler_times_out_cleanly_and_the_session_goes_on() {
    let fleet = fleet(1).await;
    let asked_at = Instant::now();
    let (mut client, _, _) = asked(&fleet).await;
    // The client never answers.
    let turn = client.turn().await;
    let waited = asked_at.elapsed();
    assert_eq!(tool_error_kind(&turn).as_deref(), Some("client_timeout"), "{turn:?}");
    assert!(waited >= Duration::from_millis(900), "not before the tool's timeout: {waited:?}");
    let said = replies(&turn);
    assert!(
        said.iter().any(|r| r.starts_with("The app could not tell me") && r.contains("client_timeout")),
        "{said:?}"
    );
    // The session goes on.
    client.say("hello").await;
    let next = client.turn().await;
    assert!(!replies(&next).is_empty(), "{next:?}");
    assert_eq!(client_calls(&triage_metrics(&fleet).await, "client_timeout"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_client_answers_get_their_specific_errors() {
    let fleet = fleet(20).await;
    let (mut client, id, _) = asked(&fleet).await;
    // Neither result nor error: refused, the call still waits.
    client.send_raw(&format!(r#"{{"type":"client_tool_result","tool_use_id":"{id}"}}"#)).await;
    let refused = client.until(|m| matches!(m, ServerMessage::BidiError { .. })).await;
    assert!(matches!(refused.last(), Some(ServerMessage::BidiError { code, .. }) if code == "malformed_message"));
    // A result for a call nobody made.
    let stray = ClientMessage::ClientToolResult {
        tool_use_id: "made-up".into(),
        result: Some(serde_json::json!({ "account": "12345678" })),
        error: None,
    };
    client.send(&stray).await;
    let refused = client.until(|m| matches!(m, ServerMessage::BidiError { .. })).await;
    assert!(matches!(refused.last(), Some(ServerMessage::BidiError { code, .. }) if code == "no_client_tool_pending"));
    // Not JSON of the message's shape: the frame is refused as malformed.
    client.send_raw(r#"{"type":"client_tool_result","tool_use_id":7}"#).await;
    let refused = client.until(|m| matches!(m, ServerMessage::BidiError { .. })).await;
    assert!(matches!(refused.last(), Some(ServerMessage::BidiError { code, .. }) if code == "malformed_message"));
    // A result off the tool's output schema reaches the model as a typed error.
    let bad = ClientMessage::ClientToolResult {
        tool_use_id: id,
        result: Some(serde_json::json!({ "account": "not a number" })),
        error: None,
    };
    client.send(&bad).await;
    let turn = client.turn().await;
    assert_eq!(tool_error_kind(&turn).as_deref(), Some("client_bad_result"), "{turn:?}");
    assert!(replies(&turn).iter().any(|r| r.contains("client_bad_result")), "{:?}", replies(&turn));
    assert_eq!(client_calls(&triage_metrics(&fleet).await, "client_bad_result"), 1.0);
}
