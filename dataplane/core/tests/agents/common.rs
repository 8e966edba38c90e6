//! Helpers: the banking agents' cores, and driving a session by hand.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use switchboard_core::grant::Carried;
use switchboard_core::model::{ModelRequest, ToolUse};
use switchboard_core::{AgentCore, Effect, Input, ModelReply, Session, SessionInit};
use switchboard_crds::{Catalog, RuntimeSpec};

pub fn specs() -> &'static BTreeMap<String, RuntimeSpec> {
    static SPECS: OnceLock<BTreeMap<String, RuntimeSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/banking");
        let catalog = Catalog::load_paths(&[dir]).expect("examples load");
        catalog
            .agents()
            .map(|a| {
                let spec = catalog.resolve_agent(a).expect("examples resolve");
                (spec.agent.name.clone(), spec)
            })
            .collect()
    })
}

pub fn spec(agent: &str) -> RuntimeSpec {
    specs()[agent].clone()
}

pub fn core(agent: &str) -> Arc<AgentCore> {
    Arc::new(AgentCore::new(spec(agent)).expect("example agents are runnable"))
}

pub fn init(memory: BTreeMap<String, serde_json::Value>) -> SessionInit {
    let carried = Carried { memory, ..Carried::default() };
    SessionInit { session_id: "s-1".into(), today: "2026-11-21".into(), carried, ..SessionInit::default() }
}

pub fn start(agent: &str, memory: BTreeMap<String, serde_json::Value>) -> (Session, Vec<Effect>) {
    Session::start(core(agent), init(memory))
}

pub fn verified_memory(account: &str) -> BTreeMap<String, serde_json::Value> {
    let mut memory = BTreeMap::new();
    memory.insert("verifiedUser".to_owned(), serde_json::json!({ "name": "Ada Lovelace", "accountNumber": account }));
    memory
}

pub fn model_calls(effects: &[Effect]) -> Vec<&ModelRequest> {
    effects.iter().filter_map(|e| if let Effect::CallModel(r) = e { Some(r) } else { None }).collect()
}

pub fn executions(effects: &[Effect]) -> Vec<(String, String, serde_json::Value)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::ExecuteTool { tool_use_id, tool, input } => {
                Some((tool_use_id.clone(), tool.clone(), input.clone()))
            }
            _ => None,
        })
        .collect()
}

pub fn call(id: &str, name: &str, input: serde_json::Value) -> ToolUse {
    ToolUse { id: id.into(), name: name.into(), input }
}

/// The model answers with tool calls.
pub fn calls(session: &mut Session, uses: Vec<ToolUse>, now: Instant) -> Vec<Effect> {
    session.handle(Input::ModelReply(ModelReply { tool_uses: uses, ..ModelReply::default() }), now)
}

/// The model answers with text.
pub fn says(session: &mut Session, text: &str, now: Instant) -> Vec<Effect> {
    session.handle(Input::ModelReply(ModelReply { text: text.into(), ..ModelReply::default() }), now)
}
