//! What the web console shows of an Agent on a cluster, carried in the routing table
//! ([`super::RoutingTable::agents`]) because the gateway, which serves the console, sees no
//! Persona or Workflow: who the agent is (role, description, avatar), its persona without
//! the system prompt, its tools, its handoff targets and its workflow graph.
//!
//! The table is one ConfigMap (at most 1 MiB, with every route in it), so a summary is
//! compact and bounded: texts are cut to a few hundred characters, an avatar is kept only
//! when short (a URL; a large `data:` image is left to the page's initial), and the
//! operator keeps summaries only while the whole table stays under [`SUMMARY_BUDGET`]
//! ([`super::RoutingTable::with_summaries`]); an Agent past it is listed by its route alone,
//! as before. Field names are those of the console's `/v1/agents` entries.

use serde::{Deserialize, Serialize};

use crate::agent::Consent;
use crate::runtime::{Profile, RuntimeSpec};
use crate::workflow::{EdgeCondition, NodeKind};

/// The most bytes the routing table may take with summaries; beyond, summaries are left
/// out (routes never are). A ConfigMap holds at most 1 MiB; this leaves room for the
/// object's metadata and the pretty-printing of what is estimated.
pub const SUMMARY_BUDGET: usize = 800 * 1024;
/// The most characters kept of a description, greeting or instruction.
pub const TEXT_MAX: usize = 240;
/// The most characters of an avatar carried (a URL; a larger `data:` image is dropped).
pub const AVATAR_MAX: usize = 1024;
/// The most tools, nodes and edges carried of one Agent (the CRDs allow more).
pub const LIST_MAX: usize = 64;

/// One Agent as the console shows it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AgentSummary {
    /// Role, description and avatar, each left out when unset.
    #[serde(flatten)]
    pub profile: Profile,
    /// Its persona, without the system prompt.
    pub persona: PersonaSummary,
    /// Its own tools (handoff tools are under `handoffs`).
    #[serde(default)]
    pub tools: Vec<ToolSummary>,
    /// The agents it may transfer to.
    #[serde(default)]
    pub handoffs: Vec<HandoffSummary>,
    /// Its workflow graph.
    pub workflow: WorkflowSummary,
}

/// How an agent sounds and speaks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PersonaSummary {
    /// The Persona's name.
    pub name: String,
    /// The name the agent introduces itself with.
    pub display_name: String,
    /// The Nova Sonic voice.
    pub voice: String,
    /// Its language (BCP 47).
    pub language: String,
    /// What it says when a session starts (cut to [`TEXT_MAX`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greeting: Option<String>,
}

/// One tool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ToolSummary {
    /// The name the model calls it by.
    pub name: String,
    /// What it does (cut to [`TEXT_MAX`]).
    pub description: String,
    /// `http`, `mcp` or `builtin`.
    pub runs: String,
    /// Whether each call waits for the user's consent.
    pub consent: bool,
    /// Seconds a result is reused (0: never).
    pub cache_ttl_seconds: u32,
}

/// A handoff target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HandoffSummary {
    /// The target Agent's name.
    pub agent: String,
    /// The transfer tool's name.
    pub tool: String,
}

/// A workflow graph: nodes, edges and entry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WorkflowSummary {
    /// The Workflow's name.
    pub name: String,
    /// The node every session starts in.
    pub entry: String,
    /// Its nodes.
    pub nodes: Vec<NodeSummary>,
    /// Its edges.
    #[serde(default)]
    pub edges: Vec<EdgeSummary>,
}

/// A node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NodeSummary {
    /// Its id.
    pub id: String,
    /// What it does.
    pub kind: NodeKind,
    /// Its instruction (cut to [`TEXT_MAX`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instruction: String,
}

/// An edge.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct EdgeSummary {
    /// The node it leaves.
    pub from: String,
    /// The node it enters.
    pub to: String,
    /// When to take it (cut to [`TEXT_MAX`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The condition the core takes it on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<EdgeCondition>,
}

/// `text` cut to `max` characters (an ellipsis marks the cut).
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

impl AgentSummary {
    /// The bounded summary of `spec` (never its system prompt, tool URLs or headers).
    pub fn of(spec: &RuntimeSpec) -> Self {
        let profile = Profile {
            role: spec.profile.role.as_deref().map(|r| cut(r, TEXT_MAX)),
            description: spec.profile.description.as_deref().map(|d| cut(d, TEXT_MAX)),
            avatar: spec.profile.avatar.clone().filter(|a| a.len() <= AVATAR_MAX),
        };
        let persona = &spec.persona;
        let tools = spec
            .tools
            .iter()
            .take(LIST_MAX)
            .map(|tool| ToolSummary {
                name: tool.name.clone(),
                description: cut(&tool.description, TEXT_MAX),
                runs: tool.runs().to_owned(),
                consent: tool.consent == Consent::Required,
                cache_ttl_seconds: tool.cache_ttl_seconds,
            })
            .collect();
        let workflow = &spec.workflow;
        AgentSummary {
            profile,
            persona: PersonaSummary {
                name: persona.name.clone(),
                display_name: persona.spec.display_name.clone(),
                voice: persona.spec.voice.clone(),
                language: persona.spec.language.clone(),
                greeting: persona.spec.greeting.as_deref().map(|g| cut(g, TEXT_MAX)),
            },
            tools,
            handoffs: spec
                .handoffs
                .iter()
                .take(LIST_MAX)
                .map(|h| HandoffSummary { agent: h.agent.clone(), tool: h.tool.clone() })
                .collect(),
            workflow: WorkflowSummary {
                name: workflow.name.clone(),
                entry: workflow.spec.entry.clone(),
                nodes: workflow
                    .spec
                    .nodes
                    .iter()
                    .take(LIST_MAX)
                    .map(|n| NodeSummary { id: n.id.clone(), kind: n.kind, instruction: cut(&n.instruction, TEXT_MAX) })
                    .collect(),
                edges: workflow
                    .spec
                    .edges
                    .iter()
                    .take(LIST_MAX)
                    .map(|e| EdgeSummary {
                        from: e.from.clone(),
                        to: e.to.clone(),
                        description: e.description.as_deref().map(|d| cut(d, TEXT_MAX)),
                        when: e.when.clone(),
                    })
                    .collect(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_on_character_boundaries() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("ééééé", 3), "ééé…");
    }
}
