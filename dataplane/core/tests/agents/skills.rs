//! Skills, knowledge and tool policy in a session (issue 28), on the Example Bank banking
//! agent: its fees skill's fee schedule reaches the model only once the model uses the
//! skill, in place of the agent-level data context, until the session leaves the step.

use std::sync::Arc;
use std::time::Instant;

use switchboard_core::model::{ContentBlock, ModelRequest, ToolResultStatus};
use switchboard_core::{AgentCore, Effect, Input, Session, VoiceEffect, VoiceInput};
use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::{ContextSource, Skill, ToolPolicy};

use crate::common::{self, call, calls, executions, init, model_calls, verified_memory};

const FEE: &str = "International transfer: 15.00 GBP per transfer";
const HOURS: &str = "Phone banking is open 8am to 8pm";

fn banking(spec: RuntimeSpec) -> (Session, Instant) {
    let core = Arc::new(AgentCore::new(spec).expect("runnable"));
    let (session, _) = Session::start(core, init(verified_memory("12345678")));
    (session, Instant::now())
}

fn ask(session: &mut Session, text: &str, now: Instant) -> ModelRequest {
    let effects = session.handle(Input::user_text(text.into()), now);
    model_calls(&effects).first().cloned().cloned().expect("a model call")
}

fn next_request(effects: &[Effect]) -> ModelRequest {
    model_calls(effects).first().cloned().cloned().expect("a model call")
}

fn last_result(request: &ModelRequest) -> (ToolResultStatus, serde_json::Value) {
    request
        .messages
        .last()
        .and_then(|m| {
            m.content.iter().find_map(|b| match b {
                ContentBlock::ToolResult(r) => Some((r.status, r.content.clone())),
                _ => None,
            })
        })
        .expect("a tool result")
}

fn tools(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

/// The banking agent with a second skill, `statements`, that holds back get_transactions.
fn with_statements(fees_delegates: bool) -> RuntimeSpec {
    let mut spec = common::spec("banking");
    spec.skills.push(Skill {
        name: "statements".into(),
        description: "Recent transactions.".into(),
        instructions: "List at most five.".into(),
        tools: vec!["get_transactions".into()],
        examples: vec![],
        data_context: Some(ContextSource::text("Statements are monthly.")),
        delegates_to: vec![],
    });
    if fees_delegates {
        spec.skills[0].delegates_to = vec!["statements".into()];
    }
    spec
}

#[test]
fn the_fee_schedule_reaches_the_model_only_once_the_skill_is_used() {
    let (mut session, now) = banking(common::spec("banking"));
    let before = ask(&mut session, "What does an international transfer cost?", now);
    // Every prompt: the date, the skill list and its examples, the agent-level data context.
    assert!(before.system.contains("Today's date: 2026-11-21."), "{}", before.system);
    assert!(before.system.contains("- fees: What a service costs"), "{}", before.system);
    assert!(before.system.contains("User: How much is an international transfer?"), "{}", before.system);
    assert!(before.system.contains(HOURS) && before.system.contains("Your role: Account specialist."));
    assert!(!before.system.contains(FEE), "the schedule is not loaded before the skill is used");
    assert!(tools(&before).contains(&"use_skill".to_owned()), "{:?}", tools(&before));

    let effects = calls(&mut session, vec![call("u1", "use_skill", serde_json::json!({ "skill": "fees" }))], now);
    assert!(executions(&effects).is_empty(), "use_skill runs in the core");
    let after = next_request(&effects);
    let (status, result) = last_result(&after);
    assert_eq!(status, ToolResultStatus::Success);
    assert_eq!(result["skill"], "fees");
    assert_eq!(result["inUse"], serde_json::json!(["fees"]));
    assert!(after.system.contains(FEE), "{}", after.system);
    assert!(after.system.contains("You are using the fees skill. Its instructions:\nAnswer from the fee schedule"));
    assert!(after.system.contains("- fees (in use):"));
    assert!(!after.system.contains(HOURS), "the skill's data replaces the agent-level data context");

    // The next turn at the same step still has it; leaving the step puts it down.
    session
        .handle(Input::ModelReply(switchboard_core::ModelReply { text: "15 GBP.".into(), ..Default::default() }), now);
    assert!(ask(&mut session, "And the ATM limit?", now).system.contains(FEE));
    let effects = calls(&mut session, vec![call("g1", "workflow_goto", serde_json::json!({ "step": "done" }))], now);
    let left = next_request(&effects);
    assert!(!left.system.contains(FEE) && left.system.contains(HOURS), "{}", left.system);
    assert!(session.workflow().skills().is_empty());
}

#[test]
fn an_unknown_skill_is_an_error_result_that_names_the_skills() {
    let (mut session, now) = banking(common::spec("banking"));
    ask(&mut session, "fees?", now);
    let effects = calls(&mut session, vec![call("u1", "use_skill", serde_json::json!({ "skill": "loans" }))], now);
    let (status, result) = last_result(&next_request(&effects));
    assert_eq!(status, ToolResultStatus::Error);
    let message = result["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("there is no skill \"loans\"; the skills are: fees"), "{result}");
    assert!(session.workflow().skills().is_empty());
}

#[test]
fn a_skills_tools_are_held_back_until_it_is_used() {
    let (mut session, now) = banking(with_statements(false));
    let request = ask(&mut session, "my transactions", now);
    assert!(!tools(&request).contains(&"get_transactions".to_owned()), "{:?}", tools(&request));
    assert!(tools(&request).contains(&"check_balance".to_owned()), "a tool no skill lists is offered as before");
    let effects = calls(&mut session, vec![call("t1", "get_transactions", serde_json::json!({}))], now);
    assert!(executions(&effects).is_empty());
    let (status, result) = last_result(&next_request(&effects));
    assert_eq!(status, ToolResultStatus::Error);
    assert_eq!(result["error"]["kind"], "not_allowed");
    assert!(result["error"]["message"].as_str().unwrap_or_default().contains("call use_skill with that skill first"));

    // Used (and its tool called in the same reply): offered and run.
    let uses = vec![
        call("u1", "use_skill", serde_json::json!({ "skill": "statements" })),
        call("t2", "get_transactions", serde_json::json!({})),
    ];
    let effects = calls(&mut session, uses, now);
    assert_eq!(executions(&effects).len(), 1, "get_transactions runs once its skill is in use");
}

#[test]
fn delegating_adds_a_skill_and_anything_else_replaces_them() {
    let (mut session, now) = banking(with_statements(true));
    ask(&mut session, "fees and statements", now);
    let both = vec![
        call("u1", "use_skill", serde_json::json!({ "skill": "fees" })),
        call("u2", "use_skill", serde_json::json!({ "skill": "statements" })),
    ];
    let request = next_request(&calls(&mut session, both, now));
    assert_eq!(session.workflow().skills(), ["fees", "statements"], "fees delegates to statements");
    assert!(
        request.system.contains("Data of the fees skill:") && request.system.contains("Data of the statements skill:")
    );
    assert!(tools(&request).contains(&"get_transactions".to_owned()));

    let (mut session, now) = banking(with_statements(false));
    ask(&mut session, "fees and statements", now);
    let both = vec![
        call("u1", "use_skill", serde_json::json!({ "skill": "fees" })),
        call("u2", "use_skill", serde_json::json!({ "skill": "statements" })),
    ];
    let request = next_request(&calls(&mut session, both, now));
    assert_eq!(session.workflow().skills(), ["statements"], "without delegation the second replaces the first");
    assert!(!request.system.contains(FEE));
}

#[test]
fn node_globs_node_denials_and_the_agent_policy_decide_what_is_offered() {
    let mut spec = common::spec("banking");
    spec.workflow.spec.nodes[0].tools = vec!["check_*".into(), "get_*".into()];
    let (mut session, now) = banking(spec.clone());
    let offered = tools(&ask(&mut session, "hi", now));
    assert!(offered.contains(&"check_balance".into()) && offered.contains(&"get_transactions".into()), "{offered:?}");

    spec.workflow.spec.nodes[0].deny_tools = vec!["get_*".into()];
    let (mut session, now) = banking(spec.clone());
    let offered = tools(&ask(&mut session, "hi", now));
    assert!(offered.contains(&"check_balance".into()) && !offered.contains(&"get_transactions".into()), "{offered:?}");

    spec.workflow.spec.nodes[0].deny_tools.clear();
    spec.tool_policy = ToolPolicy { deny: vec!["check_*".into()] };
    let core = AgentCore::new(spec.clone()).expect("runnable");
    let all: Vec<String> = core.all_tools(None, &Default::default()).into_iter().map(|t| t.name).collect();
    assert!(!all.contains(&"check_balance".into()), "the voice tool list leaves denied tools out: {all:?}");
    let (mut session, now) = banking(spec);
    let offered = tools(&ask(&mut session, "hi", now));
    assert!(!offered.contains(&"check_balance".into()) && offered.contains(&"get_transactions".into()));
    let effects = calls(&mut session, vec![call("c1", "check_balance", serde_json::json!({}))], now);
    assert!(executions(&effects).is_empty(), "a denied tool never runs");
    assert_eq!(last_result(&next_request(&effects)).1["error"]["kind"], "not_allowed");
}

#[test]
fn a_voice_session_gets_the_skill_in_the_tool_result() {
    let core = Arc::new(AgentCore::new(common::spec("banking")).expect("runnable"));
    let (mut session, _) = Session::start_voice(core, init(verified_memory("12345678")));
    let now = Instant::now();
    let effects = session.handle(
        Input::Voice(VoiceInput::ToolUse(call("u1", "use_skill", serde_json::json!({ "skill": "fees" })))),
        now,
    );
    let result = effects
        .iter()
        .find_map(|e| match e {
            Effect::Voice(VoiceEffect::SendToolResult(r)) => Some(r.content.clone()),
            _ => None,
        })
        .expect("a tool result for the stream");
    assert!(result["dataContext"].as_str().unwrap_or_default().contains(FEE), "{result}");
    assert!(result["instructions"].as_str().unwrap_or_default().contains("fee schedule"), "{result}");
}
