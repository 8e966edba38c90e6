//! Checks of a Persona on its own.

use super::{Problem, Reason};
use crate::persona::{PersonaSpec, TEMPLATE_PLACEHOLDERS};

/// Every problem with a Persona spec.
pub fn validate_persona(spec: &PersonaSpec) -> Vec<Problem> {
    let mut problems = Vec::new();
    if spec.display_name.trim().is_empty() {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.displayName",
            "must not be empty: give the name the agent introduces itself with",
        ));
    }
    if spec.system_prompt.trim().is_empty() {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.systemPrompt",
            "must not be empty: describe who the agent is and how it behaves",
        ));
    }
    if let Err(msg) = check_template(&spec.system_prompt) {
        problems.push(Problem::new(Reason::InvalidTemplate, "spec.systemPrompt", msg));
    }
    if spec.voice.is_empty()
        || !spec.voice.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.voice",
            format!("{:?} is not a Nova Sonic voice id (lowercase, e.g. \"matthew\")", spec.voice),
        ));
    }
    problems
}

fn check_template(template: &str) -> Result<(), String> {
    crate::template::check(template, TEMPLATE_PLACEHOLDERS)
}
