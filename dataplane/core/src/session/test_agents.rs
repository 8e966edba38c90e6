//! The example bank's agents, for the sub-states' unit tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use switchboard_crds::Catalog;

use crate::agent::AgentCore;
use crate::events::SessionInit;
use crate::grant::Carried;

/// The core of the example bank's agent `agent`.
pub(crate) fn core(agent: &str) -> Arc<AgentCore> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/banking");
    let catalog = Catalog::load_paths(&[dir]).expect("examples load");
    let spec = catalog.agents().map(|a| catalog.resolve_agent(a).expect("resolves")).find(|s| s.agent.name == agent);
    Arc::new(AgentCore::new(spec.expect("an example agent")).expect("example agents are runnable"))
}

/// A new session's start, with a verified caller.
pub(crate) fn init() -> SessionInit {
    let mut memory = BTreeMap::new();
    memory
        .insert("verifiedUser".to_owned(), serde_json::json!({ "name": "Ada Lovelace", "accountNumber": "12345678" }));
    let carried = Carried { memory, ..Carried::default() };
    SessionInit { session_id: "s-1".into(), today: "2026-11-21".into(), carried, ..SessionInit::default() }
}

/// The example bank's `banking` agent with a client tool `pick_account` (its result must
/// name an account), offered at its `serve` step.
pub(crate) fn client_core(timeout_seconds: u32) -> std::sync::Arc<crate::agent::AgentCore> {
    let mut spec = core("banking").spec().clone();
    let tool: switchboard_crds::agent::ToolSpec = serde_json::from_value(serde_json::json!({
        "name": "pick_account",
        "description": "Ask the app which of the customer's accounts they mean.",
        "inputSchema": { "type": "object", "properties": { "question": { "type": "string" } } },
        "client": {
            "timeoutSeconds": timeout_seconds,
            "outputSchema": {
                "type": "object",
                "properties": { "account": { "type": "string", "pattern": "^[0-9]{8}$" } },
                "required": ["account"]
            }
        }
    }))
    .expect("a client tool");
    spec.tools.push(tool);
    for node in &mut spec.workflow.spec.nodes {
        node.tools.push("pick_account".into());
    }
    std::sync::Arc::new(crate::agent::AgentCore::new(spec).expect("runnable"))
}
