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

/// Checks placeholders: `{known}` or escaped `{{` / `}}` only.
fn check_template(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        let after = &rest[i + 1..];
        if rest[i..].starts_with("{{") || rest[i..].starts_with("}}") {
            rest = &rest[i + 2..];
            continue;
        }
        if rest.as_bytes()[i] == b'}' {
            return Err("has an unmatched '}': write '}}' for a literal brace".into());
        }
        let Some(end) = after.find('}') else {
            return Err("has an unclosed '{': write '{{' for a literal brace".into());
        };
        let name = &after[..end];
        if !TEMPLATE_PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "has unknown placeholder {{{name}}}; known placeholders are {}",
                TEMPLATE_PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect::<Vec<_>>().join(", ")
            ));
        }
        rest = &after[end + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_template;

    #[test]
    fn templates() {
        assert!(check_template("You are {name}. Today is {date}. {memory}").is_ok());
        assert!(check_template("JSON looks like {{\"a\": 1}}").is_ok());
        assert!(check_template("plain").is_ok());
        let e = check_template("Hi {nmae}").unwrap_err();
        assert!(e.contains("{nmae}") && e.contains("{name}"), "{e}");
        assert!(check_template("oops {name").unwrap_err().contains("unclosed"));
        assert!(check_template("oops name}").unwrap_err().contains("unmatched"));
    }
}
