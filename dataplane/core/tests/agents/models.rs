//! Model choice in the core: the conversation budget follows the session's text model
//! (an explicit `contextTokens` still wins), a session's chosen model is the one called and
//! announced, and the Agent's reasoning settings travel with each request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use switchboard_core::protocol::ServerMessage;
use switchboard_core::{AgentCore, Effect, Input, Session, SessionInit};
use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::{Reasoning, ReasoningEffort};

use crate::common::{self, model_calls, says};

/// Whether the conversation of `spec`'s session was compacted within ten turns of about
/// 5,000 tokens each (and replies half that size): about 75,000 tokens in all.
fn compacts_within_ten_long_turns(spec: RuntimeSpec, model: Option<&str>) -> bool {
    let now = Instant::now();
    let core = Arc::new(AgentCore::new(spec).expect("runnable"));
    let init = SessionInit { model: model.map(str::to_owned), ..common::init(BTreeMap::new()) };
    let (mut session, _) = Session::start(core, init);
    for turn in 0..10 {
        let effects = session.handle(Input::user_text(format!("turn {turn} {}", "w ".repeat(10_000))), now);
        let request = model_calls(&effects)[0];
        if request.system.contains("Summary of the earlier conversation") {
            return true;
        }
        says(&mut session, &"r ".repeat(5_000), now);
    }
    false
}

#[test]
fn the_conversation_budget_follows_the_models_context_window_unless_set() {
    let spec = |model: &str, tokens: Option<u32>| {
        let mut spec = common::spec("triage");
        spec.model.text_model_id = model.into();
        spec.model.context_tokens = tokens;
        spec
    };
    // Nova Micro: 128k window, 32k budget; Nova Premier: 1M window, 250k budget.
    assert!(compacts_within_ten_long_turns(spec("amazon.nova-micro-v1:0", None), None));
    assert!(!compacts_within_ten_long_turns(spec("amazon.nova-premier-v1:0", None), None));
    assert!(compacts_within_ten_long_turns(spec("amazon.nova-premier-v1:0", Some(32_000)), None), "explicit wins");
    // A session that chose Nova Micro over the agent's Nova Premier gets Micro's budget.
    let mut chosen = spec("amazon.nova-premier-v1:0", None);
    chosen.model.session_models = vec!["amazon.nova-micro-v1:0".into()];
    assert!(compacts_within_ten_long_turns(chosen, Some("amazon.nova-micro-v1:0")));
}

#[test]
fn a_sessions_chosen_model_is_called_and_announced_with_the_agents_reasoning() {
    let now = Instant::now();
    let mut spec = common::spec("triage");
    spec.model.text_model_id = "amazon.nova-2-lite-v1:0".into();
    spec.model.session_models = vec!["amazon.nova-pro-v1:0".into()];
    spec.model.reasoning = Some(Reasoning { effort: ReasoningEffort::Medium });
    let core = Arc::new(AgentCore::new(spec).expect("runnable"));
    let init = SessionInit { model: Some("amazon.nova-pro-v1:0".into()), ..common::init(BTreeMap::new()) };
    let (mut session, opening) = Session::start(core.clone(), init);
    let announced = opening.iter().find_map(|e| match e {
        Effect::Send(ServerMessage::BidiConnectionStart { model, .. }) => Some(model.as_str()),
        _ => None,
    });
    assert_eq!(announced, Some("amazon.nova-pro-v1:0"));
    assert_eq!(session.model_id(), "amazon.nova-pro-v1:0");
    let effects = session.handle(Input::user_text("hello".into()), now);
    let request = model_calls(&effects)[0];
    assert_eq!(request.model_id, "amazon.nova-pro-v1:0");
    assert_eq!(request.reasoning, Some(ReasoningEffort::Medium), "the provider decides per model whether to send it");

    let (mut plain, _) = Session::start(core, common::init(BTreeMap::new()));
    let effects = plain.handle(Input::user_text("hello".into()), now);
    assert_eq!(model_calls(&effects)[0].model_id, "amazon.nova-2-lite-v1:0", "without a choice, the agent's model");
}
