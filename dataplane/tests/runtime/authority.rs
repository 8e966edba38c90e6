//! Authority at the tool, end to end through local mode: the Example Bank's account tools
//! act only on the verified caller's account, whatever the session's entry point or the
//! model asks for (issue 23). Real WebSocket client, the real Bedrock SDK against the
//! simulator, the demo tool server holding two customers: Ada Lovelace (12345678, 1234.56
//! GBP) and Alan Turing (87654321, 310.02 GBP).

use switchboard_core::protocol::ServerMessage;
use switchboard_runtime::ServerConfig;

use crate::common::{self, Client, replies};

/// Alan Turing's balance, which nobody in these tests may learn.
const OTHER_BALANCE: &str = "310.02";

/// Everything the client saw, as one text, to look for the other customer's balance.
fn all_text(messages: &[ServerMessage]) -> String {
    messages.iter().map(|m| serde_json::to_string(m).expect("serialises")).collect::<Vec<_>>().join("\n")
}

/// A session opened straight at banking, skipping identity verification: the gateway
/// refuses it (banking is `gateway.expose: false`, 4403). At the runtime with a grant that
/// carries no verified caller, it asks for another customer's balance: the account tools
/// are not offered to the model, nothing runs, and the balance never reaches the client.
/// Straight at the runtime without a grant, there is no session at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_skips_identity_verification_gets_no_balance() {
    let running = common::banking(ServerConfig::default()).await;
    let mut bypass = Client::start(&running.runtime_url("?agent=banking"), None).await;
    let (code, reason) = bypass.closed().await;
    assert_eq!(code, switchboard_core::protocol::close_code::BAD_START, "{reason}");
    assert!(
        bypass.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, message, .. }
            if code == "context_refused" && message.contains("only through the Switchboard gateway"))),
        "{:?}",
        bypass.seen
    );
    let mut refused = Client::start(&running.url("?agent=banking"), None).await;
    let (code, reason) = refused.closed().await;
    assert_eq!(code, switchboard_core::protocol::close_code::NOT_EXPOSED, "{reason}");
    assert!(
        refused.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, message, .. }
            if code == "not_exposed" && message.contains("gateway.expose"))),
        "{:?}",
        refused.seen
    );
    let mut client = running.runtime_client("?agent=banking").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    client.say("What is the balance of 87654321?").await;
    let answer = client.turn().await;
    assert!(
        !answer.iter().any(|m| matches!(m, ServerMessage::ToolStart { .. } | ServerMessage::ToolComplete { .. })),
        "no tool runs for an unverified session: {answer:?}"
    );
    assert!(!all_text(&client.seen).contains(OTHER_BALANCE), "{:?}", client.seen);
    assert!(!replies(&answer).is_empty(), "the agent still answers: {answer:?}");
}

/// A model that, after Ada's verification, asks the balance tool for Alan's account is
/// refused (`bound_input`, and the model is told to call again without it); the next call,
/// without an account, runs on Ada's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_caller_gets_only_their_own_account_whatever_the_model_asks() {
    let rule = r#"
  - name: another-account
    when:
      userText: "(?i)balance of (?P<account>\\d{8})"
      system: "\\b\\d{8}\\b"
      tools: [check_balance]
    reply: { toolUse: { name: check_balance, input: { accountNumber: "{account}" } } }
"#;
    let script = switchboard_sim::script::BANKING_SCRIPT_YAML.replacen("rules:\n", &format!("rules:{rule}"), 1);
    let running = common::banking_scripted(&script).await;
    let mut client = Client::start(&running.url(""), None).await;
    client.verify_at_idv().await;

    client.say("What is the balance of 87654321?").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let refused = client.turn().await;
    let asked = refused.iter().find_map(|m| match m {
        ServerMessage::ToolStart { name, input, .. } if name == "check_balance" => Some(input.clone()),
        _ => None,
    });
    assert_eq!(asked, Some(serde_json::json!({ "accountNumber": "87654321" })), "the model asked: {refused:?}");
    let error = refused.iter().find_map(|m| match m {
        ServerMessage::ToolError { name, kind, message, .. } if name == "check_balance" => {
            Some((kind.clone(), message.clone()))
        }
        _ => None,
    });
    let (kind, message) = error.expect("a tool_error for the refused call");
    assert_eq!(kind, "bound_input");
    assert!(message.contains("accountNumber must not be given"), "{message}");
    assert!(!refused.iter().any(|m| matches!(m, ServerMessage::ToolComplete { .. })), "{refused:?}");

    client.say("My balance please").await;
    let own = client.turn().await;
    let result = own.iter().find_map(|m| match m {
        ServerMessage::ToolComplete { name, result, .. } if name == "check_balance" => Some(result.clone()),
        _ => None,
    });
    let result = result.expect("check_balance ran");
    assert_eq!((result["accountNumber"].as_str(), result["balance"].as_f64()), (Some("12345678"), Some(1234.56)));
    assert!(replies(&own).iter().any(|r| r.contains("1234.56 GBP")), "{own:?}");
    assert!(!all_text(&client.seen).contains(OTHER_BALANCE), "{:?}", client.seen);
}
