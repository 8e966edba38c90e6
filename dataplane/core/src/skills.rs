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

use switchboard_crds::agent::{Skill, USE_SKILL_TOOL};

use super::agent::AgentCore;
use super::session::Session;
use super::tools::{FailureKind, ToolFailure};
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

impl Session {
    /// The skills' part of a tool call: `use_skill` itself, or a tool held back by a skill
    /// not in use. `None` for every other call, which goes on through the pipeline.
    pub(super) fn skill_call(
        &mut self,
        name: &str,
        input: &serde_json::Value,
    ) -> Option<Result<serde_json::Value, ToolFailure>> {
        if name == USE_SKILL_TOOL && !self.core.spec().skills.is_empty() {
            return Some(self.use_skill(input));
        }
        if self.core.skill_allows(&self.workflow, name) {
            return None;
        }
        let holders = self.core.skills_of(name).join(" or ");
        Some(Err(ToolFailure::new(
            FailureKind::NotAllowed,
            format!("tool {name:?} belongs to the skill {holders}; call {USE_SKILL_TOOL} with that skill first"),
        )))
    }

    fn use_skill(&mut self, input: &serde_json::Value) -> Result<serde_json::Value, ToolFailure> {
        let name = input.get("skill").and_then(serde_json::Value::as_str).unwrap_or_default();
        let core = self.core.clone();
        let skill =
            core.use_skill(&mut self.workflow, name).map_err(|m| ToolFailure::new(FailureKind::InvalidInput, m))?;
        self.invalidate_prompt();
        let mut result = serde_json::json!({ "skill": skill.name, "inUse": self.workflow.skills() });
        if self.voice {
            result["instructions"] = skill.instructions.clone().into();
            result["dataContext"] = skill_data(skill).into();
        } else {
            result["note"] = "The skill's instructions and data are now in your system prompt.".into();
        }
        Ok(result)
    }
}
