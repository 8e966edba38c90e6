//! The tool pipeline: schema validation, workflow policy, errors, caching, truncation,
//! consent.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use switchboard_core::model::{ContentBlock, ToolResultStatus};
use switchboard_core::protocol::ServerMessage;
use switchboard_core::{Effect, FailureKind, Input, ToolFailure};

use crate::common::{self, call, calls, executions, model_calls};

fn tool_errors(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(ServerMessage::ToolError { kind, .. }) => Some(kind.clone()),
            _ => None,
        })
        .collect()
}

fn last_results(effects: &[Effect]) -> Vec<(ToolResultStatus, serde_json::Value)> {
    let request = model_calls(effects)[0];
    request
        .messages
        .last()
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| {
                    if let ContentBlock::ToolResult(r) = b { Some((r.status, r.content.clone())) } else { None }
                })
                .collect()
        })
        .unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A call runs exactly when its input matches the tool's JSON schema; otherwise the
    /// model gets an invalid_input error result.
    #[test]
    fn tool_pipeline_validates_input(name in proptest::option::of("[a-zA-Z ]{0,12}"), account in "[0-9a-z]{6,9}", sort in "[0-9-]{5,9}", extra: bool) {
        let now = Instant::now();
        let (mut session, _) = common::start("idv", BTreeMap::new());
        session.handle(Input::user_text("check me".into()), now);
        let mut input = serde_json::json!({ "accountNumber": account, "sortCode": sort });
        if let Some(name) = &name { input["name"] = name.clone().into(); }
        if extra { input["pin"] = "1234".into(); }
        let schema = &common::spec("idv").tools[0].input_schema;
        let valid = jsonschema::is_valid(schema, &input);
        let effects = calls(&mut session, vec![call("t1", "perform_idv_check", input)], now);
        prop_assert_eq!(executions(&effects).len(), usize::from(valid));
        if !valid {
            prop_assert_eq!(tool_errors(&effects), vec!["invalid_input".to_owned()]);
            prop_assert_eq!(last_results(&effects)[0].0, ToolResultStatus::Error);
        }
    }

    /// Every tool failure becomes an error result the model sees, and the session goes on.
    #[test]
    fn tool_errors_reach_the_model(kind in prop::sample::select(vec![FailureKind::Timeout, FailureKind::HttpStatus, FailureKind::BadResponse, FailureKind::Connection]), message in "[a-z ]{1,30}") {
        let now = Instant::now();
        let (mut session, _) = common::start("banking", common::verified_memory("12345678"));
        session.handle(Input::user_text("balance".into()), now);
        calls(&mut session, vec![call("t1", "check_balance", serde_json::json!({}))], now);
        let failure = ToolFailure::new(kind, message.clone());
        let effects = session.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Err(failure) }, now);
        prop_assert_eq!(tool_errors(&effects), vec![kind.as_str().to_owned()]);
        let results = last_results(&effects);
        prop_assert_eq!(results[0].0, ToolResultStatus::Error);
        prop_assert_eq!(results[0].1["error"]["message"].as_str(), Some(message.as_str()));
        common::says(&mut session, "sorry", now);
        prop_assert!(!session.is_over());
        prop_assert_eq!(model_calls(&session.handle(Input::user_text("again".into()), now)).len(), 1);
    }

    /// Unknown tools and tools of steps the model cannot reach are refused.
    #[test]
    fn workflow_policy_refuses(name in "[a-z_]{3,12}") {
        let now = Instant::now();
        let (mut session, _) = common::start("idv", BTreeMap::new());
        session.handle(Input::user_text("hi".into()), now);
        let effects = calls(&mut session, vec![
            call("t1", &name, serde_json::json!({})),
            call("t2", "transfer_to_banking", serde_json::json!({ "reason": "balance" })),
        ], now);
        prop_assert!(executions(&effects).is_empty());
        prop_assert!(!effects.iter().any(|e| matches!(e, Effect::Handoff(_))), "no transfer before verification");
        prop_assert_eq!(tool_errors(&effects), vec!["unknown_tool".to_owned(), "not_allowed".to_owned()]);
    }

    /// A cacheable tool is not re-run for the same input within its TTL, and is after it.
    /// The input that counts is the one the tool runs with, the verified caller's account
    /// filled in.
    #[test]
    fn tool_caching(account in "[0-9]{8}", later in 0u64..60) {
        let now = Instant::now();
        let (mut session, _) = common::start("banking", common::verified_memory(&account));
        let input = serde_json::json!({});
        session.handle(Input::user_text("balance".into()), now);
        let ran = executions(&calls(&mut session, vec![call("t1", "check_balance", input.clone())], now));
        prop_assert_eq!(ran.len(), 1);
        prop_assert_eq!(&ran[0].2, &serde_json::json!({ "accountNumber": account }));
        session.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(serde_json::json!({ "balance": 1 })) }, now);
        common::says(&mut session, "one", now);
        let then = now + Duration::from_secs(later);
        session.handle(Input::user_text("balance again".into()), then);
        let effects = calls(&mut session, vec![call("t2", "check_balance", input)], then);
        let ran = executions(&effects).len();
        prop_assert_eq!(ran, usize::from(later >= 30), "TTL is 30 s");
        if ran == 0 {
            let cached = effects.iter().any(|e| matches!(e, Effect::Send(ServerMessage::ToolComplete { cached: true, .. })));
            prop_assert!(cached);
        }
    }

    /// Results longer than maxOutputBytes reach the model truncated to fit.
    #[test]
    fn truncation(items in 1usize..400) {
        let now = Instant::now();
        let (mut session, _) = common::start("banking", common::verified_memory("12345678"));
        session.handle(Input::user_text("transactions".into()), now);
        calls(&mut session, vec![call("t1", "get_transactions", serde_json::json!({}))], now);
        let list: Vec<_> = (0..items).map(|i| serde_json::json!({ "id": format!("tx-{i}"), "description": "A payment" })).collect();
        let result = serde_json::json!({ "transactions": list });
        let fits = result.to_string().len() <= 8192;
        let effects = session.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(result.clone()) }, now);
        let (status, content) = last_results(&effects).remove(0);
        prop_assert_eq!(status, ToolResultStatus::Success);
        prop_assert!(content.to_string().len() <= 8192);
        prop_assert_eq!(content == result, fits);
    }

    /// A consent-required tool never runs before approval; a refusal is an error result.
    #[test]
    fn consent_is_enforced(approve: bool, transaction in "tx-[0-9]{4}") {
        let now = Instant::now();
        let (mut session, _) = common::start("disputes", common::verified_memory("12345678"));
        session.handle(Input::user_text("dispute it".into()), now);
        let input = serde_json::json!({ "transactionId": transaction, "reason": "not me" });
        let effects = calls(&mut session, vec![call("t1", "open_dispute", input)], now);
        prop_assert!(executions(&effects).is_empty(), "not before approval");
        let asked = effects.iter().find_map(|e| match e {
            Effect::Send(ServerMessage::ConsentRequest { input, .. }) => Some(input.clone()),
            _ => None,
        });
        let filled = serde_json::json!({ "accountNumber": "12345678", "transactionId": transaction, "reason": "not me" });
        prop_assert_eq!(asked, Some(filled.clone()), "consent is asked for what will run, the caller's account filled in");
        prop_assert!(model_calls(&effects).is_empty(), "the turn waits for the user");
        let effects = session.handle(Input::Consent { tool_use_id: "t1".into(), approved: approve }, now);
        let ran = executions(&effects);
        prop_assert_eq!(ran.len(), usize::from(approve));
        if approve {
            prop_assert_eq!(&ran[0].2, &filled);
        }
        if !approve {
            prop_assert_eq!(tool_errors(&effects), vec!["consent_declined".to_owned()]);
        }
    }
}
