//! Prompt assembly: the persona's template with its placeholders filled, the response
//! style guidance, the agent's identity, skills, examples and knowledge, the workflow, the
//! skills in use, and what the session carries (handoff context, a summary of compacted
//! turns). Pure functions of session state ([`session_prompt`] puts them together); the
//! session rebuilds the prompt whenever that state changes.
//!
//! Every prompt carries the current date: `{date}` in the template, or a line of its own.
//! Parts the template has no placeholder for are added as sections of their own when they
//! have something to say: the identity (`{role}`, `{description}`), the skill list
//! (`{skills}`), the skills' examples (`{examples}`) and the data context (`{dataContext}`:
//! the data of the skills in use when they have any, else the agent-level data context).
//! Bootstrap files and the instructions of the skills in use have no placeholder; they
//! always come as sections.

use switchboard_crds::Mode;
use switchboard_crds::persona::ResponseStyle;

use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::USE_SKILL_TOOL;

use super::handoff::{HandoffContext, HandoffKind};
use super::memory::Memory;
use super::skills::skill_data;
use super::workflow::{self, WorkflowState};

/// Values for the template's placeholders.
#[derive(Clone, Debug)]
pub struct TemplateValues<'a> {
    /// `{name}`: the persona's display name.
    pub name: &'a str,
    /// `{agent}`: the Agent's name.
    pub agent: &'a str,
    /// `{memory}`: the rendered session memory.
    pub memory: &'a str,
    /// `{date}`: today, ISO 8601.
    pub date: &'a str,
    /// `{language}`: the persona's language tag.
    pub language: &'a str,
    /// `{role}`: the Agent's role.
    pub role: &'a str,
    /// `{description}`: the Agent's description.
    pub description: &'a str,
    /// `{skills}`: the skill list ([`render_skills`]).
    pub skills: &'a str,
    /// `{examples}`: the skills' examples ([`render_examples`]).
    pub examples: &'a str,
    /// `{dataContext}`: the data context in force ([`data_context`]).
    pub data_context: &'a str,
}

/// Fills the placeholders of `template` (see [`TemplateValues`]); `{{` and `}}` become
/// literal braces. Anything else in braces is kept as written (validation rejects such
/// templates before they get here).
pub fn render_template(template: &str, values: &TemplateValues<'_>) -> String {
    switchboard_crds::template::render(template, |key| {
        let value = match key {
            "name" => values.name,
            "agent" => values.agent,
            "memory" => values.memory,
            "date" => values.date,
            "language" => values.language,
            "role" => values.role,
            "description" => values.description,
            "skills" => values.skills,
            "examples" => values.examples,
            "dataContext" => values.data_context,
            _ => return None,
        };
        Some(value.to_owned())
    })
}

/// The skill list: each skill's name and when to use it, those in `in_use` marked.
/// Empty when the agent has no skills.
pub fn render_skills(spec: &RuntimeSpec, in_use: &[String]) -> String {
    if spec.skills.is_empty() {
        return String::new();
    }
    let mut out = format!("Skills (call {USE_SKILL_TOOL} with a skill's name before doing what it covers):");
    for skill in &spec.skills {
        let marker = if in_use.contains(&skill.name) { " (in use)" } else { "" };
        out.push_str(&format!("\n- {}{marker}: {}", skill.name, skill.description));
    }
    out
}

/// Every skill's examples, as `User:` / `Assistant:` pairs. Empty when there are none.
pub fn render_examples(spec: &RuntimeSpec) -> String {
    let pairs: Vec<String> = spec
        .skills
        .iter()
        .flat_map(|s| s.examples.iter())
        .map(|e| format!("User: {}\nAssistant: {}", e.user.trim(), e.assistant.trim()))
        .collect();
    if pairs.is_empty() { String::new() } else { format!("Examples:\n{}", pairs.join("\n\n")) }
}

/// The data context in force: the data of the skills in use (each under its name) when
/// any has data, else the agent-level data context.
pub fn data_context(spec: &RuntimeSpec, in_use: &[String]) -> String {
    let skills: Vec<String> = in_use
        .iter()
        .filter_map(|name| spec.skills.iter().find(|s| &s.name == name))
        .filter(|s| !skill_data(s).trim().is_empty())
        .map(|s| format!("Data of the {} skill:\n{}", s.name, skill_data(s).trim()))
        .collect();
    if skills.is_empty() { spec.knowledge.data_context.trim().to_owned() } else { skills.join("\n\n") }
}

/// The instructions of the skills in use. Empty when none is in use.
pub fn render_skills_in_use(spec: &RuntimeSpec, in_use: &[String]) -> String {
    in_use
        .iter()
        .filter_map(|name| spec.skills.iter().find(|s| &s.name == name))
        .map(|s| {
            let instructions = s.instructions.trim();
            if instructions.is_empty() {
                format!("You are using the {} skill.", s.name)
            } else {
                format!("You are using the {} skill. Its instructions:\n{instructions}", s.name)
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The bootstrap files, each under its name. Empty when there are none.
pub fn render_files(spec: &RuntimeSpec) -> String {
    let files: Vec<String> =
        spec.knowledge.files.iter().map(|f| format!("### {}\n{}", f.name, f.text.trim())).collect();
    if files.is_empty() { String::new() } else { format!("Reference documents:\n{}", files.join("\n\n")) }
}

/// `text` as a section of its own when the template has no `{placeholder}` for it.
fn unless_placed(template: &str, placeholder: &str, text: String) -> String {
    if template.contains(&format!("{{{placeholder}}}")) { String::new() } else { text }
}

/// The style guidance for `style` in `mode`: voice modes always use the voice-friendly
/// guidance, since the reply is spoken.
pub fn style_guidance(style: ResponseStyle, mode: Mode) -> &'static str {
    if mode.has_audio() { ResponseStyle::VoiceFriendly.guidance() } else { style.guidance() }
}

/// The paragraph telling the model how the session reached it.
pub fn render_handoff(context: &HandoffContext) -> String {
    match context.kind {
        HandoffKind::Transfer => {
            let mut text = format!(
                "This customer was transferred to you by the {} agent. Reason: {}.",
                context.from_agent, context.reason
            );
            if let Some(intent) = &context.intent
                && intent != &context.reason
            {
                text.push_str(&format!(" Their intent: {intent}."));
            }
            text
        }
        HandoffKind::Return => {
            let status = context.status.map(|s| format!("{s:?}").to_lowercase()).unwrap_or_else(|| "completed".into());
            let summary = context.summary.as_deref().unwrap_or("no summary given");
            format!(
                "The customer returned to you from the {} agent (status: {status}). Summary: {summary}.",
                context.from_agent
            )
        }
    }
}

/// Joins the parts of a system prompt, skipping empty ones.
pub fn assemble(parts: &[&str]) -> String {
    parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()).collect::<Vec<_>>().join("\n\n")
}

/// A session's system prompt: the persona's template filled from `memory` and `today`,
/// then every part it has no placeholder for, the workflow at `state`, how the session
/// arrived (`arrival`) and the `summary` of compacted turns.
pub fn session_prompt(
    spec: &RuntimeSpec,
    memory: &Memory,
    state: &WorkflowState,
    today: &str,
    arrival: Option<&HandoffContext>,
    summary: &str,
) -> String {
    let persona = &spec.persona.spec;
    let template = persona.system_prompt.as_str();
    let memory = memory.render();
    let in_use = state.skills();
    let profile = &spec.profile;
    let skills = render_skills(spec, in_use);
    let examples = render_examples(spec);
    let data = data_context(spec, in_use);
    let values = TemplateValues {
        name: &persona.display_name,
        agent: &spec.agent.name,
        memory: &memory,
        date: today,
        language: &persona.language,
        role: profile.role.as_deref().unwrap_or_default(),
        description: profile.description.as_deref().unwrap_or_default(),
        skills: &skills,
        examples: &examples,
        data_context: &data,
    };
    let body = render_template(template, &values);
    let identity = if template.contains("{role}") || template.contains("{description}") {
        String::new()
    } else {
        let role = profile.role.as_deref().map(|r| format!("Your role: {r}.")).unwrap_or_default();
        [role, profile.description.clone().unwrap_or_default()].join(" ")
    };
    let date = unless_placed(template, "date", format!("Today's date: {today}."));
    let memory_part = unless_placed(template, "memory", format!("What the session knows:\n{memory}"));
    let data_part = if data.is_empty() { String::new() } else { format!("Data context:\n{data}") };
    let workflow = workflow::render(&spec.workflow.spec, state);
    let arrival = arrival.map(render_handoff).unwrap_or_default();
    let summary =
        if summary.is_empty() { String::new() } else { format!("Summary of the earlier conversation:\n{summary}") };
    assemble(&[
        &body,
        &identity,
        &date,
        &memory_part,
        style_guidance(persona.response_style, spec.mode),
        &unless_placed(template, "skills", skills.clone()),
        &unless_placed(template, "examples", examples.clone()),
        &render_files(spec),
        &unless_placed(template, "dataContext", data_part),
        &workflow,
        &render_skills_in_use(spec, in_use),
        &arrival,
        &summary,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> TemplateValues<'static> {
        TemplateValues {
            name: "Ava",
            agent: "triage",
            memory: "nothing yet",
            date: "2026-11-21",
            language: "en-US",
            role: "Front desk",
            description: "Routes callers.",
            skills: "SKILLS",
            examples: "EXAMPLES",
            data_context: "DATA",
        }
    }

    #[test]
    fn placeholders_and_escapes() {
        let out = render_template("I am {name} ({agent}) on {date} in {language}: {memory}. {{literal}} }}", &values());
        assert_eq!(out, "I am Ava (triage) on 2026-11-21 in en-US: nothing yet. {literal} }");
    }

    #[test]
    fn the_agent_placeholders() {
        let out = render_template("{role}: {description} {skills} {examples} {dataContext}", &values());
        assert_eq!(out, "Front desk: Routes callers. SKILLS EXAMPLES DATA");
    }

    #[test]
    fn unknown_and_unclosed_braces_are_kept() {
        assert_eq!(render_template("{other} and {name", &values()), "{other} and {name");
    }
}
