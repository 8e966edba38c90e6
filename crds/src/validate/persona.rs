//! Checks of a Persona on its own.

use super::{Problem, Reason};
use crate::persona::languages::{MAX_LANGUAGES, SPOKEN_LANGUAGES, language_name, primary};
use crate::persona::turn_taking::{
    MAX_CALL_SECONDS, MAX_LINE_CHARS, MAX_MIN_INTERRUPTION_MS, MAX_PROMPTS, MAX_SILENCE_SECONDS, MIN_CALL_SECONDS,
};
use crate::persona::{PersonaSpec, TEMPLATE_PLACEHOLDERS, TurnTaking};

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
    check_turn_taking(&spec.turn_taking, &mut problems);
    check_languages(spec, &mut problems);
    problems
}

/// `spec.languages`: known languages, each once, not the Persona's own; voice ids.
fn check_languages(spec: &PersonaSpec, problems: &mut Vec<Problem>) {
    let known = || SPOKEN_LANGUAGES.iter().map(|(tag, name)| format!("{name} ({tag})")).collect::<Vec<_>>().join(", ");
    if spec.languages.len() > MAX_LANGUAGES {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.languages",
            format!("lists {} languages; at most {MAX_LANGUAGES}", spec.languages.len()),
        ));
    }
    if !spec.languages.is_empty() && language_name(&spec.language).is_none() {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.language",
            format!(
                "{:?} is not a language a call can switch back to, and spec.languages is set; use one of {} or remove spec.languages",
                spec.language,
                known()
            ),
        ));
    }
    let mut seen = vec![primary(&spec.language)];
    for (n, language) in spec.languages.iter().enumerate() {
        let field = format!("spec.languages[{n}]");
        let tag = primary(&language.code);
        if language_name(&language.code).is_none() {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.code"),
                format!("{:?} is not a language the agent can switch to; use one of {}", language.code, known()),
            ));
        } else if seen.contains(&tag) {
            let why = if seen.first() == Some(&tag) {
                format!("is the Persona's own language ({}); list only the others", spec.language)
            } else {
                format!("lists {tag} a second time; each language once")
            };
            problems.push(Problem::new(Reason::InvalidField, format!("{field}.code"), why));
        }
        seen.push(tag);
        if language.voice.is_empty()
            || !language.voice.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.voice"),
                format!("{:?} is not a Nova Sonic voice id (lowercase, e.g. \"lupe\")", language.voice),
            ));
        }
    }
}

/// `spec.turnTaking`: the limits the schema states, checked again for specs that did not
/// pass through the API server (local mode, the operator's own reads).
fn check_turn_taking(turn_taking: &TurnTaking, problems: &mut Vec<Problem>) {
    let mut invalid = |field: &str, message: String| {
        problems.push(Problem::new(Reason::InvalidField, format!("spec.turnTaking.{field}"), message));
    };
    if turn_taking.min_interruption_ms > MAX_MIN_INTERRUPTION_MS {
        invalid(
            "minInterruptionMs",
            format!(
                "{} ms is more than {MAX_MIN_INTERRUPTION_MS} ms: a caller could not stop the agent; use 0 to {MAX_MIN_INTERRUPTION_MS} (default 400)",
                turn_taking.min_interruption_ms
            ),
        );
    }
    let silence = &turn_taking.silence;
    if silence.after_seconds > MAX_SILENCE_SECONDS {
        invalid(
            "silence.afterSeconds",
            format!(
                "{} s is more than {MAX_SILENCE_SECONDS} s; use 1 to {MAX_SILENCE_SECONDS}, or 0 to turn silence handling off",
                silence.after_seconds
            ),
        );
    }
    if silence.max_prompts > MAX_PROMPTS {
        invalid(
            "silence.maxPrompts",
            format!("{} is more than {MAX_PROMPTS}; use 0 to {MAX_PROMPTS}", silence.max_prompts),
        );
    }
    if silence.after_seconds > 0 && silence.prompt.trim().is_empty() {
        invalid("silence.prompt", "is empty: write what the agent asks after a quiet period (e.g. \"Are you still there?\"), or set silence.afterSeconds to 0".into());
    }
    let max_call = &turn_taking.max_call;
    if max_call.seconds != 0 && !(MIN_CALL_SECONDS..=MAX_CALL_SECONDS).contains(&max_call.seconds) {
        invalid(
            "maxCall.seconds",
            format!(
                "{} s is outside {MIN_CALL_SECONDS} to {MAX_CALL_SECONDS} s; set a limit in that range, or 0 for none",
                max_call.seconds
            ),
        );
    }
    if max_call.seconds != 0 && max_call.warning_seconds >= max_call.seconds {
        invalid(
            "maxCall.warningSeconds",
            format!(
                "{} s is not less than maxCall.seconds ({} s): the warning would come before the call starts; make it shorter, or 0 for no warning",
                max_call.warning_seconds, max_call.seconds
            ),
        );
    }
    for (field, line) in [
        ("silence.prompt", &silence.prompt),
        ("silence.goodbye", &silence.goodbye),
        ("maxCall.warning", &max_call.warning),
        ("maxCall.goodbye", &max_call.goodbye),
    ] {
        if line.chars().count() > MAX_LINE_CHARS as usize {
            invalid(
                field,
                format!("is longer than {MAX_LINE_CHARS} characters; a line the agent says on a call should be short"),
            );
        } else if line.contains('"') {
            invalid(
                field,
                "contains a double quote (\"): the line is quoted to the voice model; use single quotes".into(),
            );
        }
    }
    for (field, line) in [
        ("silence.goodbye", &silence.goodbye),
        ("maxCall.warning", &max_call.warning),
        ("maxCall.goodbye", &max_call.goodbye),
    ] {
        if line.trim().is_empty() {
            invalid(field, "is empty: write the line the agent says".into());
        }
    }
}

fn check_template(template: &str) -> Result<(), String> {
    crate::template::check(template, TEMPLATE_PLACEHOLDERS)
}
