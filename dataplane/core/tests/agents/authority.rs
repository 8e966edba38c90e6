//! Authority at the tool, on the Example Bank agents: banking's and disputes' tools bind
//! `accountNumber` to `verifiedUser.accountNumber` and require `verifiedUser`; idv's check
//! is the identity provider. What the model asks for never changes whose account a tool
//! acts on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use proptest::prelude::*;
use switchboard_core::model::{ContentBlock, ToolResultStatus};
use switchboard_core::protocol::ServerMessage;
use switchboard_core::{AgentCore, ConfigError, Effect, Input, Session};

use crate::common::{self, call, calls, executions, model_calls};

/// The (kind, message) of every tool_error the client is sent.
fn tool_errors(effects: &[Effect]) -> Vec<(String, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(ServerMessage::ToolError { kind, message, .. }) => Some((kind.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

/// The error results the model receives in the next request.
fn error_results(effects: &[Effect]) -> Vec<serde_json::Value> {
    let request = model_calls(effects)[0];
    let last = request.messages.last().expect("a message");
    last.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) if r.status == ToolResultStatus::Error => Some(r.content.clone()),
            _ => None,
        })
        .collect()
}

fn offered(effects: &[Effect]) -> Vec<(String, serde_json::Value)> {
    model_calls(effects)[0].tools.iter().map(|t| (t.name.clone(), t.input_schema.clone())).collect()
}

#[test]
fn the_model_sees_no_bound_input_and_the_tool_runs_on_the_verified_account() {
    let now = Instant::now();
    let (mut session, _) = common::start("banking", common::verified_memory("12345678"));
    let asked = session.handle(Input::user_text("What is my balance?".into()), now);
    let tools = offered(&asked);
    let (_, balance) = tools.iter().find(|(n, _)| n == "check_balance").expect("check_balance is offered");
    assert_eq!(balance["properties"], serde_json::json!({}), "accountNumber is not the model's to give");
    assert!(balance.get("required").is_none(), "nothing left to require: {balance}");
    let (_, transactions) = tools.iter().find(|(n, _)| n == "get_transactions").expect("get_transactions is offered");
    assert!(
        transactions["properties"].get("limit").is_some() && transactions["properties"].get("accountNumber").is_none()
    );

    let effects = calls(&mut session, vec![call("t1", "check_balance", serde_json::json!({}))], now);
    let ran = executions(&effects);
    assert_eq!(
        ran,
        [("t1".to_owned(), "check_balance".to_owned(), serde_json::json!({ "accountNumber": "12345678" }))]
    );
}

#[test]
fn a_session_with_no_verified_caller_is_not_offered_the_tools_and_a_call_is_refused() {
    let now = Instant::now();
    let (mut session, _) = common::start("banking", BTreeMap::new());
    let asked = session.handle(Input::user_text("What is the balance of 87654321?".into()), now);
    let names: Vec<String> = offered(&asked).into_iter().map(|(n, _)| n).collect();
    assert!(!names.iter().any(|n| n == "check_balance" || n == "get_transactions"), "{names:?}");

    let input = serde_json::json!({ "accountNumber": "87654321" });
    let effects = calls(&mut session, vec![call("t1", "check_balance", input)], now);
    assert!(executions(&effects).is_empty(), "nothing runs without a verified caller");
    let errors = tool_errors(&effects);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "requirement_unmet");
    assert!(errors[0].1.contains("verifiedUser"), "{}", errors[0].1);
    let results = error_results(&effects);
    assert_eq!(results[0]["error"]["kind"], "requirement_unmet", "the model is told why: {results:?}");
}

#[test]
fn another_account_from_the_model_is_refused_and_the_retry_without_it_runs_on_the_callers() {
    let now = Instant::now();
    let (mut session, _) = common::start("banking", common::verified_memory("12345678"));
    session.handle(Input::user_text("What is the balance of 87654321?".into()), now);
    let input = serde_json::json!({ "accountNumber": "87654321" });
    let effects = calls(&mut session, vec![call("t1", "check_balance", input)], now);
    assert!(executions(&effects).is_empty());
    let errors = tool_errors(&effects);
    assert_eq!(errors[0].0, "bound_input", "{errors:?}");
    assert!(errors[0].1.contains("accountNumber must not be given"), "{}", errors[0].1);
    let results = error_results(&effects);
    assert!(results[0]["error"]["message"].as_str().is_some_and(|m| m.contains("again without it")), "{results:?}");

    let retry = calls(&mut session, vec![call("t2", "check_balance", serde_json::json!({}))], now);
    assert_eq!(executions(&retry)[0].2, serde_json::json!({ "accountNumber": "12345678" }));
}

#[test]
fn an_identity_key_is_written_only_by_an_identity_provider() {
    let now = Instant::now();
    let mut spec = common::spec("idv");
    spec.tools[0].identity_provider = false;
    let core = Arc::new(AgentCore::new(spec).expect("the core runs a spec the API crate would refuse"));
    let (mut session, _) = Session::start(core, common::init(BTreeMap::new()));
    session.handle(Input::user_text("I am Ada".into()), now);
    let input = serde_json::json!({ "name": "Ada Lovelace", "accountNumber": "12345678", "sortCode": "12-34-56" });
    calls(&mut session, vec![call("t1", "perform_idv_check", input)], now);
    let result = serde_json::json!({ "verified": true, "user": { "accountNumber": "12345678" } });
    let effects = session.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(result) }, now);
    assert!(!effects.iter().any(|e| matches!(e, Effect::Send(ServerMessage::MemoryUpdate { .. }))), "{effects:?}");
    assert!(session.memory().get("verifiedUser").is_none());
    assert_eq!(session.workflow().node(), "verify", "nobody is verified, so idv does not move on");
    let refused = effects.iter().any(|e| matches!(e, Effect::Transcript(t) if t.event == "memory_refused"));
    assert!(refused, "the refusal is in the transcript: {effects:?}");
}

#[test]
fn a_binding_the_schema_lacks_is_a_configuration_error() {
    let mut spec = common::spec("banking");
    spec.tools[0].bind.insert("account".into(), "verifiedUser.accountNumber".into());
    let error = AgentCore::new(spec).expect_err("refused");
    assert!(matches!(&error, ConfigError::ToolBinding { field, .. } if field == "account"), "{error}");
    assert!(error.to_string().contains("not a property of the tool's inputSchema"), "{error}");
}

#[test]
fn a_voice_stream_is_offered_the_tools_whose_memory_it_has_or_can_get() {
    let tools = |agent: &str, memory: BTreeMap<String, serde_json::Value>| -> Vec<String> {
        let (session, _) = Session::start_voice(common::core(agent), common::init(memory));
        session.voice_tools().into_iter().map(|t| t.name).collect()
    };
    assert!(!tools("banking", BTreeMap::new()).contains(&"check_balance".to_owned()), "it could never run");
    assert!(tools("banking", common::verified_memory("12345678")).contains(&"check_balance".to_owned()));
    // An agent with its own identity provider offers a tool that needs its verified caller
    // from the start: the caller may be verified later in the same stream.
    let mut spec = common::spec("idv");
    let mut balance = common::spec("banking").tools[0].clone();
    balance.name = "check_balance".into();
    spec.tools.push(balance);
    let core = Arc::new(AgentCore::new(spec).expect("valid"));
    let (session, _) = Session::start_voice(core, common::init(BTreeMap::new()));
    let names: Vec<String> = session.voice_tools().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"check_balance".to_owned()), "{names:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever account the model names, or none, a balance call runs only for a verified
    /// caller, only when the model named none, and always on the caller's own account.
    #[test]
    fn a_tool_acts_only_on_the_verified_callers_account(
        verified in proptest::option::of("[0-9]{8}"),
        asked in proptest::option::of("[0-9a-z]{1,10}"),
        tool in prop::sample::select(vec!["check_balance", "get_transactions"]),
    ) {
        let now = Instant::now();
        let memory = verified.as_deref().map(common::verified_memory).unwrap_or_default();
        let (mut session, _) = common::start("banking", memory);
        session.handle(Input::user_text("balance".into()), now);
        let input = match &asked {
            Some(account) => serde_json::json!({ "accountNumber": account }),
            None => serde_json::json!({}),
        };
        let ran = executions(&calls(&mut session, vec![call("t1", tool, input)], now));
        match (&verified, &asked) {
            (Some(account), None) => {
                prop_assert_eq!(ran.len(), 1);
                prop_assert_eq!(&ran[0].2["accountNumber"], &serde_json::json!(account));
            }
            _ => prop_assert!(ran.is_empty(), "{:?}", ran),
        }
    }
}
