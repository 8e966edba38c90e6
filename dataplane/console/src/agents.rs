//! What the web console shows of each agent (`GET /v1/agents`): built from the agent's
//! resolved `RuntimeSpec`, the same one its runtime serves, so the Agents panel and the
//! workflow graph show the folder's resources as loaded, never a second copy of them.
//! The persona's system prompt, tool URLs and secret header names are left out: the page
//! needs who the agent is and what it can do, not how it is wired.

use serde::Serialize;
use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::Consent;
use switchboard_crds::runtime::{NamedWorkflow, Profile, ResolvedHandoff};

/// One agent as the console shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AgentEntry {
    /// Its name.
    pub name: String,
    /// `voice`, `text` or `hybrid`.
    pub mode: String,
    /// Role, description and avatar (`spec.role`, `spec.description`, `spec.avatar`), each
    /// left out when the Agent sets none.
    #[serde(flatten)]
    pub profile: Profile,
    /// Its persona, without the system prompt.
    pub persona: PersonaView,
    /// Its own tools (handoff tools are under `handoffs`).
    pub tools: Vec<ToolView>,
    /// The agents it may transfer to, each with its transfer tool.
    pub handoffs: Vec<ResolvedHandoff>,
    /// Its workflow: nodes, edges and entry, as resolved (camelCase, as in the Workflow).
    pub workflow: NamedWorkflow,
}

/// How an agent sounds and speaks.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PersonaView {
    /// The Persona's name.
    pub name: String,
    /// The name the agent introduces itself with.
    pub display_name: String,
    /// The Nova Sonic voice (used in voice and hybrid modes).
    pub voice: String,
    /// Its language (BCP 47).
    pub language: String,
    /// What it says when a session starts, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub greeting: Option<String>,
}

/// One tool of an agent.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ToolView {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// How it runs: `http`, `mcp` or `builtin`.
    pub runs: &'static str,
    /// Whether each call waits for the user's consent.
    pub consent: bool,
    /// Seconds a result is reused for the same input (0: never).
    pub cache_ttl_seconds: u32,
}

impl AgentEntry {
    /// The console's view of `spec`.
    pub fn from_spec(spec: &RuntimeSpec) -> Self {
        let persona = &spec.persona;
        let tools = spec
            .tools
            .iter()
            .map(|tool| ToolView {
                name: tool.name.clone(),
                description: tool.description.clone(),
                runs: tool.runs(),
                consent: tool.consent == Consent::Required,
                cache_ttl_seconds: tool.cache_ttl_seconds,
            })
            .collect();
        AgentEntry {
            name: spec.agent.name.clone(),
            mode: spec.mode.to_string(),
            profile: spec.profile.clone(),
            persona: PersonaView {
                name: persona.name.clone(),
                display_name: persona.spec.display_name.clone(),
                voice: persona.spec.voice.clone(),
                language: persona.spec.language.clone(),
                greeting: persona.spec.greeting.clone(),
            },
            tools,
            handoffs: spec.handoffs.clone(),
            workflow: spec.workflow.clone(),
        }
    }
}

/// What `GET /v1/agents` answers.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AgentList {
    /// The agents a session may start with, the default first.
    pub agents: Vec<AgentEntry>,
    /// The agents reached only by handoff (`gateway.expose: false`): a session cannot
    /// start with them.
    pub by_handoff: Vec<AgentEntry>,
    /// The default agent (a session that names no agent gets it).
    pub default: Option<String>,
}

impl AgentList {
    /// The list of `specs` (in the order given, the default first): those a client may
    /// start with (exposed, or the default, which a session naming no agent gets), then
    /// those reached only by handoff.
    pub fn new<'a>(specs: impl IntoIterator<Item = &'a RuntimeSpec>, default: Option<String>) -> Self {
        let (agents, by_handoff) = specs
            .into_iter()
            .partition::<Vec<_>, _>(|spec| spec.gateway.expose || default.as_deref() == Some(&spec.agent.name));
        AgentList {
            agents: agents.into_iter().map(AgentEntry::from_spec).collect(),
            by_handoff: by_handoff.into_iter().map(AgentEntry::from_spec).collect(),
            default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use switchboard_crds::Catalog;

    fn banking() -> Vec<RuntimeSpec> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/banking");
        let catalog = Catalog::load_paths(&[dir.as_path()]).expect("the banking example loads");
        catalog.agents().map(|agent| catalog.resolve_agent(agent).expect("resolves")).collect()
    }

    #[test]
    fn the_list_names_agents_reached_by_handoff_apart() {
        let specs = banking();
        let list = AgentList::new(&specs, Some("triage".into()));
        let names = |entries: &[AgentEntry]| entries.iter().map(|a| a.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&list.agents), ["triage"]);
        assert_eq!(names(&list.by_handoff), ["banking", "disputes", "idv"]);
        let json = serde_json::to_value(&list).expect("serialises");
        assert_eq!(json["default"], "triage");
        assert!(json["by_handoff"].is_array());
    }

    #[test]
    fn an_entry_shows_what_the_resources_say_and_not_the_prompt() {
        let specs = banking();
        let spec = specs.iter().find(|s| s.agent.name == "banking").expect("banking");
        let json = serde_json::to_value(AgentEntry::from_spec(spec)).expect("serialises");
        assert_eq!(json["mode"], spec.mode.to_string());
        assert_eq!(json["role"], "Account specialist");
        assert_eq!(json["persona"]["voice"], spec.persona.spec.voice);
        assert_eq!(json["persona"]["display_name"], spec.persona.spec.display_name);
        assert!(json["persona"].get("systemPrompt").is_none() && json["persona"].get("system_prompt").is_none());
        let tools: Vec<&str> =
            json["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(tools, spec.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>());
        assert!(
            json["tools"]
                .as_array()
                .expect("tools")
                .iter()
                .all(|t| t["runs"] == "http" || t["runs"] == "builtin" || t["runs"] == "mcp")
        );
        assert!(!json.to_string().contains(&spec.persona.spec.system_prompt), "the system prompt stays on the server");
        assert_eq!(json["workflow"]["entry"], spec.workflow.spec.entry);
        assert_eq!(json["workflow"]["nodes"].as_array().map(Vec::len), Some(spec.workflow.spec.nodes.len()));
        assert_eq!(json["workflow"]["edges"].as_array().map(Vec::len), Some(spec.workflow.spec.edges.len()));
        assert_eq!(json["handoffs"].as_array().map(Vec::len), Some(spec.handoffs.len()));
    }
}
