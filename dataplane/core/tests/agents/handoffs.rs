//! Handoff detection and context preservation, tail-call return targets, return status.

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::prelude::*;
use switchboard_core::{
    Effect, HandoffContext, HandoffKind, HandoffRequest, Input, ReturnStatus, Session, WorkflowSnapshot,
};

use crate::common::{self, call, calls};

fn handoff(effects: &[Effect]) -> Option<HandoffRequest> {
    effects.iter().find_map(|e| if let Effect::Handoff(r) = e { Some(r.clone()) } else { None })
}

fn arrival(
    from: &str,
    return_to: Option<&str>,
    memory: BTreeMap<String, serde_json::Value>,
    last: &str,
) -> HandoffContext {
    HandoffContext {
        from_agent: from.into(),
        kind: HandoffKind::Transfer,
        reason: "help".into(),
        last_user_message: Some(last.into()),
        intent: None,
        verified_user: memory.get("verifiedUser").cloned(),
        workflow_state: WorkflowSnapshot::default(),
        return_to: return_to.map(str::to_owned),
        status: None,
        summary: None,
        memory,
        history: vec![switchboard_core::HistoryTurn {
            role: switchboard_core::protocol::TranscriptRole::User,
            text: last.into(),
        }],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// triage -> idv -> banking: the transfer is detected, carries memory, verified user,
    /// last user message and workflow state, and keeps the original return target.
    #[test]
    fn handoff_detection_and_context(account in "[0-9]{8}", ask in "[a-z]{1,12}( [a-z]{1,12}){0,3}", reason in "[a-z ]{1,20}") {
        let now = Instant::now();
        let mut init = common::init(BTreeMap::new());
        init.carried.handoff = Some(arrival("triage", Some("triage"), BTreeMap::new(), &ask));
        let (mut idv, first) = Session::start(common::core("idv"), init);
        prop_assert_eq!(common::model_calls(&first).len(), 1, "the receiving agent answers the carried request");
        prop_assert_eq!(idv.return_to(), Some("triage"));
        common::says(&mut idv, "details please", now);
        idv.handle(Input::user_text("my details".into()), now);
        let input = serde_json::json!({ "name": "Ada Lovelace", "accountNumber": account, "sortCode": "12-34-56" });
        calls(&mut idv, vec![call("t1", "perform_idv_check", input)], now);
        let result = serde_json::json!({ "verified": true, "user": { "name": "Ada Lovelace", "accountNumber": account } });
        idv.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(result) }, now);
        common::says(&mut idv, "verified", now);
        idv.handle(Input::user_text(ask.clone()), now);
        let effects = calls(&mut idv, vec![call("t2", "transfer_to_banking", serde_json::json!({ "reason": reason }))], now);
        let request = handoff(&effects).expect("transfer detected");
        prop_assert_eq!(&request.target, "banking");
        let context = &request.context;
        prop_assert_eq!(context.kind, HandoffKind::Transfer);
        prop_assert_eq!(context.return_to.as_deref(), Some("triage"), "tail call keeps the original caller");
        prop_assert_eq!(context.reason.as_str(), reason.as_str());
        prop_assert_eq!(context.last_user_message.as_deref(), Some(ask.as_str()));
        prop_assert_eq!(context.verified_user.as_ref().map(|u| u["accountNumber"].clone()), Some(account.clone().into()));
        prop_assert_eq!(context.memory.get("verifiedUser").map(|u| u["accountNumber"].clone()), Some(account.clone().into()));
        prop_assert_eq!(context.workflow_state.node.as_str(), "to_banking");
        prop_assert!(idv.is_over());
        prop_assert!(idv.memory().is_empty(), "the handing-over session forgets");

        let mut init = common::init(BTreeMap::new());
        init.carried.handoff = Some(request.context.clone());
        let (banking, _) = Session::start(common::core("banking"), init);
        prop_assert_eq!(banking.return_to(), Some("triage"));
        prop_assert_eq!(banking.memory().get("verifiedUser").map(|u| u["accountNumber"].clone()), Some(account.into()));
    }

    /// A return carries its status and summary; returning anywhere else is refused.
    #[test]
    fn return_handoff_status(status in prop::sample::select(vec!["completed", "failed", "cancelled"]), summary in "[a-z ]{1,40}", other in "[a-z]{3,8}") {
        let now = Instant::now();
        let mut init = common::init(BTreeMap::new());
        init.carried.handoff = Some(arrival("idv", Some("triage"), common::verified_memory("12345678"), "balance"));
        let (mut banking, _) = Session::start(common::core("banking"), init);
        common::says(&mut banking, "here you go", now);
        banking.handle(Input::user_text("that is all".into()), now);
        let wrong = calls(&mut banking, vec![call("t0", &format!("return_to_{other}x"), serde_json::json!({ "summary": "x" }))], now);
        prop_assert!(handoff(&wrong).is_none());
        banking.handle(Input::user_text("that is all".into()), now);
        let effects = calls(&mut banking, vec![call("t1", "return_to_triage", serde_json::json!({ "status": status, "summary": summary }))], now);
        let request = handoff(&effects).expect("return detected");
        prop_assert_eq!(&request.target, "triage");
        prop_assert_eq!(request.context.kind, HandoffKind::Return);
        let expected: ReturnStatus = serde_json::from_value(serde_json::json!(status)).expect("status");
        prop_assert_eq!(request.context.status, Some(expected));
        prop_assert_eq!(request.context.summary.as_deref(), Some(summary.as_str()));
        prop_assert_eq!(request.context.return_to, None);
    }
}
