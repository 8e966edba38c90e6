//! The shared state on its own: what a session starts with, the prompt's cache, the
//! budget, and the handoff request it builds.

use super::*;
use crate::session::test_agents::{core, init};

fn context(kind: HandoffKind, return_to: Option<&str>) -> HandoffContext {
    HandoffContext {
        from_agent: "triage".into(),
        kind,
        reason: "verify".into(),
        last_user_message: None,
        intent: None,
        verified_user: None,
        workflow_state: WorkflowSnapshot::default(),
        return_to: return_to.map(str::to_owned),
        status: None,
        summary: None,
        memory: [("intent".to_owned(), serde_json::json!("balance"))].into_iter().collect(),
        history: vec![HistoryTurn { role: TranscriptRole::User, text: "my balance".into() }],
    }
}

/// [`init`], carrying what `change` sets.
fn carrying(change: impl FnOnce(&mut Carried)) -> SessionInit {
    let mut init = init();
    change(&mut init.carried);
    init
}

#[test]
fn a_handoff_brings_its_memory_history_and_return_target() {
    let arrival = carrying(|carried| carried.handoff = Some(context(HandoffKind::Transfer, Some("triage"))));
    let (common, conversation) = Common::new(core("idv"), arrival);
    assert!(common.arrived());
    assert_eq!(common.return_to(), Some("triage"));
    assert!(common.memory().get("intent").is_some() && common.memory().get("verifiedUser").is_some());
    assert_eq!(conversation.messages().len(), 1, "the carried request");
    let returned = carrying(|carried| carried.handoff = Some(context(HandoffKind::Return, Some("triage"))));
    assert_eq!(Common::new(core("triage"), returned).0.return_to(), None, "a return goes back to no one");
}

#[test]
fn a_resumed_position_is_kept_for_this_agent_only() {
    let core = core("triage");
    let node = core.spec().workflow.spec.nodes.last().map(|n| n.id.clone()).expect("nodes");
    let at = |agent: &str| WorkflowSnapshot { agent: agent.into(), node: node.clone(), ..WorkflowSnapshot::default() };
    let resumed = Common::new(core.clone(), carrying(|carried| carried.workflow = Some(at("triage")))).0;
    assert_eq!(resumed.workflow().node(), node);
    let elsewhere = Common::new(core.clone(), carrying(|carried| carried.workflow = Some(at("idv")))).0;
    assert_eq!(elsewhere.workflow().node(), core.spec().workflow.spec.entry);
}

#[test]
fn the_prompt_is_cached_until_told_and_voice_keeps_what_a_stream_replays() {
    let (mut common, _) = Common::new(core("triage"), init());
    let first = common.prompt("").to_owned();
    assert_eq!(common.prompt("a summary"), first, "cached");
    common.invalidate_prompt();
    assert!(common.prompt("a summary").contains("a summary"));
    assert!(common.budget(true) <= VOICE_REPLAY_TOKENS);
    assert!(common.budget(true) <= common.budget(false));
}

#[test]
fn a_transfer_names_this_agent_to_return_to_and_a_return_says_how_it_went() {
    let (common, _) = Common::new(core("triage"), init());
    let history = vec![HistoryTurn { role: TranscriptRole::User, text: "hi".into() }];
    let transfer = common.handoff_request(
        "idv",
        HandoffKind::Transfer,
        &serde_json::json!({ "reason": "verify" }),
        history.clone(),
        Some("hi".into()),
    );
    assert_eq!(transfer.target, "idv");
    assert_eq!(transfer.context.return_to.as_deref(), Some("triage"));
    assert_eq!(transfer.context.intent.as_deref(), Some("verify"), "the reason when memory has no intent");
    assert_eq!(transfer.context.history, history);
    let back = common.handoff_request(
        "triage",
        HandoffKind::Return,
        &serde_json::json!({ "status": "failed", "summary": "could not verify" }),
        Vec::new(),
        None,
    );
    assert_eq!(back.context.status, Some(ReturnStatus::Failed));
    assert_eq!(back.context.summary.as_deref(), Some("could not verify"));
    assert_eq!(back.context.return_to, None);
}
