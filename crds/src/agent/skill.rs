//! Skills: named bundles of what an agent does for one kind of request — instructions, the
//! tools they need, examples and their own data context. The prompt lists every skill in
//! one line each; a skill's instructions and data context enter the model's context only
//! once the model calls the built-in `use_skill` tool for it, and its tools are offered
//! only then. So a large menu or fee schedule costs nothing in the turns that do not need it.
//!
//! Skills are part of the Agent (`spec.skills`), not a kind of their own: a skill names the
//! Agent's tools, so the Agent and its skills are checked, applied and read
//! (`kubectl get agent -o yaml`) as one object, and a long data context that several Agents
//! share lives in a ConfigMap, which is already a kind of its own.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::knowledge::ContextSource;

/// The built-in tool the model calls to use a skill.
pub const USE_SKILL_TOOL: &str = "use_skill";

/// One skill of an Agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    /// How the model names the skill: lowercase letters, digits, `_` and `-`, starting with
    /// a letter.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_-]*$"))]
    pub name: String,

    /// When to use the skill, in one sentence. Always in the prompt (`{skills}`), so the
    /// model knows when to call `use_skill`.
    #[schemars(length(min = 1, max = 1024))]
    pub description: String,

    /// What to do while the skill is in use. Enters the prompt only once it is used.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 16384))]
    pub instructions: String,

    /// Names of the Agent's tools this skill needs. They are offered to the model only while
    /// the skill (or another skill listing them) is in use, and still only where the
    /// Workflow allows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 64)))]
    pub tools: Vec<String>,

    /// Example exchanges showing when and how the skill is used; in the prompt's
    /// `{examples}` in every turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub examples: Vec<Example>,

    /// The skill's own data context (a fee schedule, a menu): in the prompt only while the
    /// skill is in use, in place of the Agent's `knowledge.dataContext`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_context: Option<ContextSource>,

    /// Other skills of this Agent this one hands part of its work to. Using one of them
    /// while this skill is in use adds it (both stay in use); using any other skill
    /// replaces the skills in use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 63)))]
    pub delegates_to: Vec<String>,
}

/// One example exchange.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Example {
    /// What the user says.
    #[schemars(length(min = 1, max = 2048))]
    pub user: String,
    /// How the agent answers (or what it does, e.g. "uses the fees skill, then ...").
    #[schemars(length(min = 1, max = 4096))]
    pub assistant: String,
}
