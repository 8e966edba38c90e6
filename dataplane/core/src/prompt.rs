//! Prompt assembly: the persona's template with its placeholders filled, the response
//! style guidance, the workflow, and what the session carries (handoff context, a summary
//! of compacted turns). Pure functions of session state; the session rebuilds the prompt
//! whenever that state changes.

use switchboard_crds::Mode;
use switchboard_crds::persona::ResponseStyle;

use super::handoff::{HandoffContext, HandoffKind};
use super::session::Session;
use super::workflow;

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
}

/// Fills `{name}`, `{agent}`, `{memory}`, `{date}` and `{language}` in `template`; `{{`
/// and `}}` become literal braces. Anything else in braces is kept as written (validation
/// rejects such templates before they get here).
pub fn render_template(template: &str, values: &TemplateValues<'_>) -> String {
    switchboard_crds::template::render(template, |key| {
        let value = match key {
            "name" => values.name,
            "agent" => values.agent,
            "memory" => values.memory,
            "date" => values.date,
            "language" => values.language,
            _ => return None,
        };
        Some(value.to_owned())
    })
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

/// The session's system prompt, cached until its state changes.
impl Session {
    /// The system prompt as it stands (rebuilt if the state changed since).
    pub fn system_prompt(&mut self) -> String {
        self.system_prompt_ref().to_owned()
    }

    /// [`Session::system_prompt`], borrowed: rebuilt only after a state change.
    pub fn system_prompt_ref(&mut self) -> &str {
        if self.prompt.is_none() {
            self.prompt = Some(self.build_prompt());
        }
        self.prompt.as_deref().unwrap_or_default()
    }

    /// Marks the prompt stale after a state change.
    pub(super) fn invalidate_prompt(&mut self) {
        self.prompt = None;
    }

    fn build_prompt(&self) -> String {
        let spec = self.core.spec();
        let persona = &spec.persona.spec;
        let memory = self.memory.render();
        let values = TemplateValues {
            name: &persona.display_name,
            agent: &spec.agent.name,
            memory: &memory,
            date: &self.today,
            language: &persona.language,
        };
        let body = render_template(&persona.system_prompt, &values);
        let memory_part = if persona.system_prompt.contains("{memory}") {
            String::new()
        } else {
            format!("What the session knows:\n{memory}")
        };
        let workflow = workflow::render(&spec.workflow.spec, &self.workflow);
        let arrival = self.arrival.as_ref().map(render_handoff).unwrap_or_default();
        let summary = if self.summary.is_empty() {
            String::new()
        } else {
            format!("Summary of the earlier conversation:\n{}", self.summary)
        };
        assemble(&[
            &body,
            &memory_part,
            style_guidance(persona.response_style, spec.mode),
            &workflow,
            &arrival,
            &summary,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> TemplateValues<'static> {
        TemplateValues { name: "Ava", agent: "triage", memory: "nothing yet", date: "2026-11-21", language: "en-US" }
    }

    #[test]
    fn placeholders_and_escapes() {
        let out = render_template("I am {name} ({agent}) on {date} in {language}: {memory}. {{literal}} }}", &values());
        assert_eq!(out, "I am Ava (triage) on 2026-11-21 in en-US: nothing yet. {literal} }");
    }

    #[test]
    fn unknown_and_unclosed_braces_are_kept() {
        assert_eq!(render_template("{other} and {name", &values()), "{other} and {name");
    }
}
