//! The `Workflow` resource: the conversation graph an agent follows.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ResourceStatus;

/// A conversation graph: nodes with instructions and allowed tools, edges with optional
/// deterministic conditions, and an entry node. The agent core renders the graph into the
/// prompt, tracks the current node per session and refuses transitions the graph lacks.
// kube's printcolumn(...) arguments repeat `type_ = "string"`, which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "switchboard.dev",
    version = "v1alpha1",
    kind = "Workflow",
    namespaced,
    status = "ResourceStatus",
    shortname = "sbwf",
    category = "switchboard",
    doc = "A Switchboard conversation graph: nodes, edges with conditions, and an entry node.",
    printcolumn(name = "Entry", type_ = "string", json_path = ".spec.entry"),
    printcolumn(name = "Accepted", type_ = "string", json_path = ".status.conditions[?(@.type==\"Accepted\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = Rule::new("self.nodes.exists(n, n.id == self.entry)").message("entry must be the id of one of the nodes"))]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSpec {
    /// The id of the node every session starts in.
    #[schemars(length(min = 1, max = 63))]
    pub entry: String,

    /// The nodes of the graph. Ids are unique.
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["id".into()]))]
    pub nodes: Vec<WorkflowNode>,

    /// The allowed transitions. An edge without `when` may be taken when the model decides
    /// to; an edge with `when` is taken by the core as soon as its condition holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    pub edges: Vec<WorkflowEdge>,
}

/// One step of the conversation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(
    validation = Rule::new("self.kind == 'handoff' || !has(self.handoffTo)").message("only handoff nodes may set handoffTo"),
    validation = Rule::new("self.kind != 'tool' || (has(self.tools) && size(self.tools) > 0)").message("a tool node must list the tools it may call")
)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowNode {
    /// Unique id of the node: lowercase letters, digits and `_`, starting with a letter.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_]*$"))]
    pub id: String,

    /// What the node does: `message` (talk with the user), `tool` (call one of `tools`),
    /// `decision` (choose among outgoing edges), `handoff` (transfer the session to another
    /// agent) or `end` (finish the conversation).
    #[serde(default)]
    pub kind: NodeKind,

    /// What the agent should do while in this node, in plain language. Rendered into the prompt.
    // Empty defaults are left out of the schema: Kubernetes 1.20 rejects `default: ''`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 8192))]
    pub instruction: String,

    /// The Agent's tools the model may call while in this node, by name or glob pattern
    /// (`crm_*`: `*` any run of characters, `?` one character). Tools not matched here are
    /// refused in this node. Handoff tools are governed by `handoff` nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(min = 1, max = 64), regex(pattern = r"^[a-zA-Z0-9_*?-]+$")))]
    pub tools: Vec<String>,

    /// Tools refused in this node even when `tools` matches them (e.g. `tools: [crm_*]`,
    /// `denyTools: [crm_delete_*]`), by name or glob pattern.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 64), regex(pattern = r"^[a-zA-Z0-9_*?-]+$")))]
    pub deny_tools: Vec<String>,

    /// For `handoff` nodes: the Agent to transfer to (it must be one of the Agent's
    /// `handoffs`). When absent, a handoff node returns the session to the agent that
    /// handed it over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_to: Option<String>,

    /// A line the agent says aloud, word for word, each time the session moves into this
    /// node (a legal disclosure, a notice before a payment), once the reply under way is
    /// over. Sessions with audio only (voice, or hybrid with `audio`); the session's start
    /// in the entry node is greeted by the Persona's `greeting` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub say: Option<NodeLine>,
}

/// Longest [`NodeLine::text`], in characters: about half a minute of speech.
pub const MAX_NODE_LINE_CHARS: usize = 512;

/// A line the agent says on entering a workflow node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("size(self.text.trim()) > 0").message("say.text must say something"))]
#[x_kube(validation = Rule::new("!self.text.contains('\"')").message("say.text must not contain a double quote (the line is quoted to the voice model); use single quotes"))]
#[serde(rename_all = "camelCase")]
pub struct NodeLine {
    /// The words, as the agent is to say them (at most 512 characters, no double quotes).
    #[schemars(length(min = 1, max = 512))]
    pub text: String,

    /// Whether the line is played whole: while it is spoken the caller's audio does not
    /// reach the model (as for the Persona's `turnTaking.uninterruptibleGreeting`), so
    /// talking over it does not cut it; the speech is counted as an interruption ignored,
    /// and the model hears it once the line is over.
    /// Otherwise the caller may interrupt it as any reply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uninterruptible: bool,
}

impl WorkflowNode {
    /// Whether the node lets the model call tool `name`: a `tools` entry matches it and no
    /// `denyTools` entry does.
    pub fn allows_tool(&self, name: &str) -> bool {
        crate::agent::matches_any(&self.tools, name) && !crate::agent::matches_any(&self.deny_tools, name)
    }
}

/// The kind of a workflow node.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NodeKind {
    /// Talk with the user.
    #[default]
    Message,
    /// Call one of the node's tools.
    Tool,
    /// Choose among the outgoing edges.
    Decision,
    /// Transfer the session to another agent, or back to the caller.
    Handoff,
    /// Finish the conversation.
    End,
}

/// An allowed transition between two nodes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowEdge {
    /// The id of the node the edge leaves.
    pub from: String,
    /// The id of the node the edge enters.
    pub to: String,
    /// When to take this edge, shown to the model for edges it chooses itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
    /// A deterministic condition on session state. Every field that is set must hold.
    /// When absent, the model chooses the edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<EdgeCondition>,
}

/// A condition on session state; every field that is set must hold.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.toolSucceeded) || has(self.toolFailed) || has(self.memorySet) || has(self.memoryEquals)").message("set at least one of toolSucceeded, toolFailed, memorySet, memoryEquals"))]
#[serde(rename_all = "camelCase")]
pub struct EdgeCondition {
    /// Holds once the named tool has returned a successful result in this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_succeeded: Option<String>,
    /// Holds once the named tool has failed in this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_failed: Option<String>,
    /// Holds when the session memory has a value under this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_set: Option<String>,
    /// Holds when the session memory value at `key` equals `value` (compared as text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_equals: Option<MemoryEquals>,
}

impl EdgeCondition {
    /// True when no field is set (such a condition is rejected by validation).
    pub fn is_empty(&self) -> bool {
        self.tool_succeeded.is_none()
            && self.tool_failed.is_none()
            && self.memory_set.is_none()
            && self.memory_equals.is_none()
    }

    /// The tool names this condition refers to.
    pub fn tools(&self) -> impl Iterator<Item = &str> {
        self.tool_succeeded.iter().chain(self.tool_failed.iter()).map(String::as_str)
    }
}

/// Compares one memory value with an expected text.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryEquals {
    /// The memory key, e.g. `intent`.
    pub key: String,
    /// The expected value, compared as text.
    pub value: String,
}

impl WorkflowSpec {
    /// The node with id `id`.
    pub fn node(&self, id: &str) -> Option<&WorkflowNode> {
        self.nodes.iter().find(|n| n.id == id)
    }
}
