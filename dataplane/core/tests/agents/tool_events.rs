//! Tool events a client can show (issue 26): `tool_start` with the tool's description,
//! `tool_complete` with how long the tool ran, `tool_error` with `recoverable` and the
//! caller's words from the one table of failure kinds.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use switchboard_core::protocol::ServerMessage;
use switchboard_core::{Effect, FailureKind, Input, ToolFailure};

use crate::common::{self, call, calls};

fn sent(effects: &[Effect]) -> Vec<&ServerMessage> {
    effects.iter().filter_map(|e| if let Effect::Send(m) = e { Some(m) } else { None }).collect()
}

fn description_of(effects: &[Effect]) -> Option<Option<String>> {
    sent(effects).into_iter().find_map(|m| match m {
        ServerMessage::ToolStart { description, .. } => Some(description.clone()),
        _ => None,
    })
}

fn completed(effects: &[Effect]) -> Option<(bool, u64)> {
    sent(effects).into_iter().find_map(|m| match m {
        ServerMessage::ToolComplete { cached, duration_ms, .. } => Some((*cached, *duration_ms)),
        _ => None,
    })
}

#[test]
fn tool_start_says_what_the_tool_does_in_the_words_of_the_agents_spec() {
    let now = Instant::now();
    let (mut banking, _) = common::start("banking", common::verified_memory("12345678"));
    banking.handle(Input::user_text("balance".into()), now);
    let effects = calls(&mut banking, vec![call("t1", "check_balance", serde_json::json!({}))], now);
    let spec = common::spec("banking");
    let tool = spec.tools.iter().find(|t| t.name == "check_balance").expect("the example's tool");
    assert_eq!(description_of(&effects), Some(Some(tool.description.clone())));

    // A handoff's tool: the handoff's description.
    let (mut triage, _) = common::start("triage", BTreeMap::new());
    triage.handle(Input::user_text("my balance".into()), now);
    let effects = calls(&mut triage, vec![call("t2", "transfer_to_idv", serde_json::json!({ "reason": "b" }))], now);
    let handoff =
        common::spec("triage").handoffs.iter().find(|h| h.agent == "idv").expect("triage hands to idv").clone();
    assert_eq!(description_of(&effects), Some(Some(handoff.description)));

    // A tool the agent does not have: nothing to describe.
    let (mut banking, _) = common::start("banking", common::verified_memory("12345678"));
    banking.handle(Input::user_text("x".into()), now);
    let effects = calls(&mut banking, vec![call("t3", "made_up_by_the_model", serde_json::json!({}))], now);
    assert_eq!(description_of(&effects), Some(None));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `duration_ms` is how long the tool ran, from the session's clock; a cached result
    /// did not run.
    #[test]
    fn tool_complete_says_how_long_the_tool_ran(ms in 0u64..120_000) {
        let now = Instant::now();
        let (mut banking, _) = common::start("banking", common::verified_memory("12345678"));
        banking.handle(Input::user_text("balance".into()), now);
        calls(&mut banking, vec![call("t1", "check_balance", serde_json::json!({}))], now);
        let done = now + Duration::from_millis(ms);
        let outcome = Ok(serde_json::json!({ "balance": 1 }));
        let effects = banking.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome }, done);
        prop_assert_eq!(completed(&effects), Some((false, ms)));
        common::says(&mut banking, "one", done);
        banking.handle(Input::user_text("balance again".into()), done);
        let effects = calls(&mut banking, vec![call("t2", "check_balance", serde_json::json!({}))], done);
        prop_assert_eq!(completed(&effects), Some((true, 0)), "the cache answered");
    }

    /// Every failure reaches the client with the table's words for its kind.
    #[test]
    fn tool_error_carries_the_tables_words_for_its_kind(index in 0usize..KINDS.len()) {
        let kind = KINDS[index];
        let now = Instant::now();
        let (mut banking, _) = common::start("banking", common::verified_memory("12345678"));
        banking.handle(Input::user_text("balance".into()), now);
        calls(&mut banking, vec![call("t1", "check_balance", serde_json::json!({}))], now);
        let outcome = Err(ToolFailure::new(kind, "the tool server at http://10.0.0.1 said 503"));
        let effects = banking.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome }, now);
        let error = sent(&effects).into_iter().find_map(|m| match m {
            ServerMessage::ToolError { kind, message, recoverable, user_message, suggestion, .. } => {
                Some((kind.clone(), message.clone(), *recoverable, user_message.clone(), suggestion.clone()))
            }
            _ => None,
        });
        let said = kind.for_people();
        let expected = (
            kind.as_str().to_owned(),
            "the tool server at http://10.0.0.1 said 503".to_owned(),
            said.recoverable,
            said.message.to_owned(),
            said.suggestion.to_owned(),
        );
        prop_assert_eq!(error, Some(expected));
    }
}

/// Every kind, once (a new kind fails to compile in `every_kind_is_listed`).
const KINDS: [FailureKind; 29] = [
    FailureKind::UnknownTool,
    FailureKind::NotAllowed,
    FailureKind::InvalidInput,
    FailureKind::ConsentDeclined,
    FailureKind::ConsentTimeout,
    FailureKind::Timeout,
    FailureKind::HttpStatus,
    FailureKind::BadResponse,
    FailureKind::Connection,
    FailureKind::Unsupported,
    FailureKind::Cancelled,
    FailureKind::ToolReported,
    FailureKind::RequirementUnmet,
    FailureKind::BoundInput,
    FailureKind::ClientTimeout,
    FailureKind::ClientBadResult,
    FailureKind::ClientReported,
    FailureKind::TransferBusy,
    FailureKind::TransferNoAnswer,
    FailureKind::TransferDeclined,
    FailureKind::TransferUnreachable,
    FailureKind::TransferRejected,
    FailureKind::TransferFailed,
    FailureKind::DigitsUnsupported,
    FailureKind::DigitsInterrupted,
    FailureKind::DigitsRejected,
    FailureKind::KeypadTimeout,
    FailureKind::KeypadTooShort,
    FailureKind::KeypadInvalid,
];

#[test]
fn every_kind_is_listed() {
    for kind in KINDS {
        match kind {
            FailureKind::UnknownTool
            | FailureKind::NotAllowed
            | FailureKind::InvalidInput
            | FailureKind::ConsentDeclined
            | FailureKind::ConsentTimeout
            | FailureKind::Timeout
            | FailureKind::HttpStatus
            | FailureKind::BadResponse
            | FailureKind::Connection
            | FailureKind::Unsupported
            | FailureKind::Cancelled
            | FailureKind::ToolReported
            | FailureKind::RequirementUnmet
            | FailureKind::BoundInput
            | FailureKind::ClientTimeout
            | FailureKind::ClientBadResult
            | FailureKind::ClientReported
            | FailureKind::TransferBusy
            | FailureKind::TransferNoAnswer
            | FailureKind::TransferDeclined
            | FailureKind::TransferUnreachable
            | FailureKind::TransferRejected
            | FailureKind::TransferFailed
            | FailureKind::DigitsUnsupported
            | FailureKind::DigitsInterrupted
            | FailureKind::DigitsRejected
            | FailureKind::KeypadTimeout
            | FailureKind::KeypadTooShort
            | FailureKind::KeypadInvalid => {}
        }
    }
}

#[test]
fn the_table_speaks_to_the_caller_not_to_developers() {
    for kind in KINDS {
        let said = kind.for_people();
        for text in [said.message, said.suggestion] {
            assert!(text.ends_with('.') && text.len() > 10, "{kind}: {text:?}");
            assert!(text.starts_with(char::is_uppercase), "{kind}: {text:?}");
            for jargon in ["_", "http", "tool", "schema", "json", "model", "{"] {
                assert!(!text.to_lowercase().contains(jargon), "{kind}: {text:?} says {jargon:?}");
            }
        }
    }
    // Trying again cannot help where the caller said no, or the agent cannot do it at all.
    let hopeless: Vec<FailureKind> = KINDS.into_iter().filter(|k| !k.for_people().recoverable).collect();
    // A transfer the trunk or client cannot make will not succeed on a second try either,
    // nor keys on a call whose far end takes none.
    let expected = [
        FailureKind::UnknownTool,
        FailureKind::ConsentDeclined,
        FailureKind::Unsupported,
        FailureKind::Cancelled,
        FailureKind::TransferRejected,
        FailureKind::DigitsUnsupported,
    ];
    assert_eq!(hopeless, expected);
}
