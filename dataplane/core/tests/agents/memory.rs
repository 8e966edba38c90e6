//! Memory after identity verification, memory sync events, context injection.

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::prelude::*;
use switchboard_core::protocol::ServerMessage;
use switchboard_core::{Effect, Input};

use crate::common::{self, call, calls, executions, model_calls};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A successful identity check stores the verified user (the result's /user) exactly
    /// when /verified is true, emits one memory_update, and the next prompt carries it.
    #[test]
    fn memory_after_idv(name in "[A-Z][a-z]{2,8} [A-Z][a-z]{2,8}", account in "[0-9]{8}", verified: bool) {
        let now = Instant::now();
        let (mut session, _) = common::start("idv", BTreeMap::new());
        session.handle(Input::user_text(format!("I am {name}")), now);
        let input = serde_json::json!({ "name": name, "accountNumber": account, "sortCode": "12-34-56" });
        let effects = calls(&mut session, vec![call("t1", "perform_idv_check", input)], now);
        prop_assert_eq!(executions(&effects).len(), 1);
        let user = serde_json::json!({ "name": name, "accountNumber": account, "status": "active" });
        let result = if verified { serde_json::json!({ "verified": true, "user": user }) } else { serde_json::json!({ "verified": false }) };
        let effects = session.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(result) }, now);
        let updates: Vec<_> = effects.iter().filter_map(|e| match e {
            Effect::Send(ServerMessage::MemoryUpdate { key, value }) => Some((key.clone(), value.clone())),
            _ => None,
        }).collect();
        let request = model_calls(&effects)[0];
        if verified {
            prop_assert_eq!(updates, vec![("verifiedUser".to_owned(), user.clone())]);
            prop_assert_eq!(session.memory().get("verifiedUser"), Some(&user));
            prop_assert!(request.system.contains(&account), "the prompt carries the verified user");
            prop_assert_eq!(session.workflow().node(), "choose", "the memorySet condition advanced the workflow");
        } else {
            prop_assert!(updates.is_empty());
            prop_assert!(session.memory().is_empty());
            prop_assert!(!request.system.contains(&account));
            prop_assert_eq!(session.workflow().node(), "verify");
        }
    }

    /// Every memory change is emitted once; an unchanged value is not re-emitted.
    #[test]
    fn memory_sync(account in "[0-9]{8}", repeats in 1usize..4) {
        let now = Instant::now();
        let (mut session, _) = common::start("idv", BTreeMap::new());
        let mut emitted = 0;
        for i in 0..repeats {
            session.handle(Input::user_text("details".into()), now);
            let id = format!("t{i}");
            let input = serde_json::json!({ "name": "Ada Lovelace", "accountNumber": account, "sortCode": "123456" });
            calls(&mut session, vec![call(&id, "perform_idv_check", input)], now);
            let result = serde_json::json!({ "verified": true, "user": { "accountNumber": account } });
            let effects = session.handle(Input::ToolFinished { tool_use_id: id, outcome: Ok(result) }, now);
            emitted += effects.iter().filter(|e| matches!(e, Effect::Send(ServerMessage::MemoryUpdate { .. }))).count();
            common::says(&mut session, "ok", now);
            if i == 0 {
                // Later checks happen at the `choose` step, where perform_idv_check is refused.
                break;
            }
        }
        prop_assert_eq!(emitted, 1);
    }

    /// The prompt is rebuilt from state: persona placeholders, date and memory are filled in.
    #[test]
    fn context_injection(date in "20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])", account in "[0-9]{8}") {
        let core = common::core("triage");
        let mut init = common::init(common::verified_memory(&account));
        init.today = date.clone();
        let (mut session, _) = switchboard_core::Session::start(core, init);
        let prompt = session.system_prompt();
        prop_assert!(prompt.contains(&format!("Today is {date}")), "the date is filled in");
        prop_assert!(prompt.contains("You are Ava"));
        prop_assert!(prompt.contains(&account));
        prop_assert!(!prompt.contains("{memory}") && !prompt.contains("{name}"), "no placeholder is left");
        prop_assert!(prompt.contains("Workflow steps:"));
    }
}

/// A session reopened elsewhere (another pod, a resume) with its workflow position goes on
/// at that node; a position of another agent or an unknown node starts at the entry.
#[test]
fn a_reopened_session_goes_on_where_it_was_in_the_workflow() {
    use switchboard_core::Session;
    use switchboard_core::handoff::WorkflowSnapshot;
    let at = |agent: &str, node: &str| {
        let workflow = Some(WorkflowSnapshot {
            agent: agent.into(),
            node: node.into(),
            visited: vec!["collect".into(), "verify".into(), node.into()],
            skills: Vec::new(),
        });
        let mut init = common::init(common::verified_memory("12345678"));
        init.carried.workflow = workflow;
        Session::start(common::core("idv"), init).0.workflow().clone()
    };
    let resumed = at("idv", "choose");
    assert_eq!(resumed.node(), "choose");
    assert_eq!(resumed.visited(), ["collect", "verify", "choose"]);
    let entry = Session::start(common::core("idv"), common::init(BTreeMap::new())).0.workflow().node().to_owned();
    assert_eq!(entry, "collect");
    assert_eq!(at("triage", "choose").node(), entry, "another agent's position is not this one's");
    assert_eq!(at("idv", "no-such-node").node(), entry, "an unknown node starts at the entry");
}
