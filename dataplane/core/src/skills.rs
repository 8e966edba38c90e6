//! Skills in a session. The prompt lists every skill (name and when to use it); the model
//! calls the built-in `use_skill` tool to use one, and from then on — until the session
//! moves to another workflow step — the skill's instructions and data context are in the
//! system prompt (its data context in place of the agent-level one) and the tools it lists
//! are offered. Using a skill that one in use `delegatesTo` adds it; using any other
//! replaces the skills in use. A tool a skill lists is refused while no skill listing it
//! is in use, with a message that says which skill to use.
//!
//! A voice model's system prompt is fixed for its stream, so there `use_skill`'s result
//! itself carries the instructions and data context (the prompt still changes, for the
//! streams that replace the current one).
//!
//! This module owns the agent's side of skills (which skill holds which tool, putting one
//! in use); a session's `use_skill` call is planned with its other tool calls
//! (`session::calls`).

use switchboard_crds::agent::{Skill, USE_SKILL_TOOL};

use super::agent::AgentCore;
use super::workflow::WorkflowState;
use crate::model::ToolDefinition;

impl AgentCore {
    /// The agent's skill called `name`.
    pub fn skill(&self, name: &str) -> Option<&Skill> {
        self.spec().skills.iter().find(|s| s.name == name)
    }

    /// The skills that list tool `tool` (empty for a tool no skill holds back).
    pub fn skills_of(&self, tool: &str) -> Vec<&str> {
        self.spec().skills.iter().filter(|s| s.tools.iter().any(|t| t == tool)).map(|s| s.name.as_str()).collect()
    }

    /// Whether tool `name` may be offered and run at `state` as far as skills go: no skill
    /// lists it, or one of the skills in use does.
    pub fn skill_allows(&self, state: &WorkflowState, name: &str) -> bool {
        let holders = self.skills_of(name);
        holders.is_empty() || holders.iter().any(|h| state.skills().iter().any(|s| s == h))
    }

    /// Puts skill `name` in use at `state`: beside the skills in use when one of them
    /// delegates to it, else instead of them. The error, for the model, names the skills.
    pub fn use_skill(&self, state: &mut WorkflowState, name: &str) -> Result<&Skill, String> {
        let Some(skill) = self.skill(name) else {
            let names: Vec<&str> = self.spec().skills.iter().map(|s| s.name.as_str()).collect();
            return Err(format!("there is no skill {name:?}; the skills are: {}", names.join(", ")));
        };
        let delegated =
            state.skills().iter().filter_map(|s| self.skill(s)).any(|s| s.delegates_to.iter().any(|d| d == name));
        state.use_skill(name, delegated);
        Ok(skill)
    }

    /// `use_skill`, when the agent has skills: its input names one of them.
    pub fn use_skill_tool(&self) -> Option<ToolDefinition> {
        let skills = &self.spec().skills;
        if skills.is_empty() {
            return None;
        }
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        let list: Vec<String> = skills.iter().map(|s| format!("{}: {}", s.name, s.description)).collect();
        Some(ToolDefinition {
            name: USE_SKILL_TOOL.to_owned(),
            description: format!(
                "Use one of your skills before doing what it covers: its instructions, data and tools become available for this step. Skills: {}",
                list.join("; ")
            ),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": { "skill": { "type": "string", "enum": names, "description": "The skill's name." } },
                "required": ["skill"]
            }),
        })
    }
}

/// The data context of a skill (its inline text after resolution), if any.
pub fn skill_data(skill: &Skill) -> &str {
    skill.data_context.as_ref().and_then(|c| c.text.as_deref()).unwrap_or_default()
}
