//! Handoffs between agents: the context a session carries when it is transferred to
//! another agent (`transfer_to_<agent>`) or returned to the agent that handed it over
//! (`return_to_<agent>`).
//!
//! Returns use tail-call semantics: when an agent that was itself entered by a handoff
//! transfers onward, the new context keeps the original return target, so in the Example
//! Bank triage -> idv -> banking, banking gets `return_to_triage`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Transfer to another agent, or return to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandoffKind {
    /// `transfer_to_<agent>`.
    Transfer,
    /// `return_to_<agent>`.
    Return,
}

/// How the work of a returning agent ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReturnStatus {
    /// The agent did what it was handed the session for.
    Completed,
    /// It could not (e.g. verification failed).
    Failed,
    /// The customer no longer wanted it.
    Cancelled,
}

/// One turn of carried conversation, reduced to text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryTurn {
    /// `user` or `assistant`.
    pub role: crate::transcript::TranscriptRole,
    /// What was said.
    pub text: String,
}

/// Where the session was in the handing-over agent's workflow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowSnapshot {
    /// The handing-over agent.
    pub agent: String,
    /// Its current node.
    pub node: String,
    /// The nodes visited, in order.
    pub visited: Vec<String>,
    /// The skills in use at the current node (the `inUse` of the last `use_skill` result),
    /// so that a session resumed elsewhere keeps its skills' instructions and data context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
}

/// Everything a receiving agent is told about a handed-over session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HandoffContext {
    /// The agent handing over.
    pub from_agent: String,
    /// Transfer or return.
    pub kind: HandoffKind,
    /// Why, in the model's words (the tool call's `reason`).
    pub reason: String,
    /// The user's last message before the handoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_message: Option<String>,
    /// What the user wants (memory `intent` when set, else the reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// The verified user (memory `verifiedUser`), when identity was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_user: Option<serde_json::Value>,
    /// Where the handing-over agent was in its workflow.
    pub workflow_state: WorkflowSnapshot,
    /// The agent the receiving agent may return to (`return_to_<agent>`); kept across
    /// onward transfers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_to: Option<String>,
    /// For returns: how the work ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ReturnStatus>,
    /// For returns: what was done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The whole session memory.
    #[serde(default)]
    pub memory: BTreeMap<String, serde_json::Value>,
    /// The conversation so far, as text, oldest first.
    #[serde(default)]
    pub history: Vec<HistoryTurn>,
}

/// A request, produced by the core, to move the session to `target`.
#[derive(Clone, Debug, PartialEq)]
pub struct HandoffRequest {
    /// The agent to move to.
    pub target: String,
    /// What it is told.
    pub context: HandoffContext,
}
