//! Checks of an Agent's model choice: fallback models, the voice fallback, reasoning
//! settings, the models a session may choose, and a `contextTokens` that fits the models.

use super::{Problem, Reason, duplicates};
use crate::agent::{AgentSpec, Provider, ReasoningStyle, TEXT_MODELS, check_sonic_voice, text_model};
use crate::persona::PersonaSpec;

/// Every problem with `spec.model`'s fallbacks, reasoning, session models and context budget.
pub(super) fn check_model(spec: &AgentSpec, persona: Option<&PersonaSpec>, problems: &mut Vec<Problem>) {
    check_fallbacks(spec, problems);
    check_voice_fallback(spec, persona, problems);
    check_reasoning(spec, problems);
    check_session_models(spec, problems);
    check_context_tokens(spec, problems);
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem::new(Reason::InvalidField, field, message)
}

fn check_fallbacks(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let model = &spec.model;
    let mut seen = vec![(model.text_model_id.as_str(), model.region.as_str())];
    for (i, fallback) in model.fallbacks.iter().enumerate() {
        let field = format!("spec.model.fallbacks[{i}]");
        if fallback.model_id.trim().is_empty() {
            problems.push(invalid(format!("{field}.modelId"), "must name a model"));
        }
        if fallback.region.is_some() && model.provider == Provider::Openai {
            problems.push(invalid(
                format!("{field}.region"),
                "a region applies to Bedrock models; provider openai serves every fallback from spec.model.endpoint",
            ));
        }
        let pair = (fallback.model_id.as_str(), fallback.region.as_deref().unwrap_or(&model.region));
        if seen.contains(&pair) {
            problems.push(Problem::new(
                Reason::DuplicateName,
                field,
                format!(
                    "model {:?} in {:?} is already tried before this fallback (as the text model or an earlier fallback); a fallback must differ in model or region",
                    pair.0, pair.1
                ),
            ));
        } else {
            seen.push(pair);
        }
    }
}

fn check_voice_fallback(spec: &AgentSpec, persona: Option<&PersonaSpec>, problems: &mut Vec<Problem>) {
    let Some(fallback) = &spec.model.voice_fallback else {
        return;
    };
    let field = "spec.model.voiceFallback";
    if !spec.mode.has_audio() {
        problems
            .push(invalid(field, "a voice fallback applies to voice and hybrid agents; this agent runs in text mode"));
        return;
    }
    let model = fallback.model_id.as_deref().unwrap_or(&spec.model.voice_model_id);
    let region = fallback.region.as_deref().unwrap_or(&spec.model.region);
    if fallback.model_id.is_none() && fallback.region.is_none() {
        problems.push(invalid(field, "set a modelId, a region or both"));
    } else if model == spec.model.voice_model_id && region == spec.model.region {
        problems.push(invalid(
            field,
            format!("model {model:?} in {region:?} is the agent's own voice model; a fallback must differ in model or region"),
        ));
    }
    // A fallback of the agent's own model in another region is checked with the agent.
    if let Some(persona) = persona.filter(|_| fallback.model_id.is_some())
        && let Err(message) = check_sonic_voice(model, &persona.voice)
    {
        problems.push(invalid(
            format!("{field}.modelId"),
            format!("the persona's voice does not fit the voice fallback: {message}"),
        ));
    }
}

fn check_reasoning(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    if spec.model.reasoning.is_none() {
        return;
    }
    let field = "spec.model.reasoning";
    if spec.model.provider == Provider::Openai {
        problems.push(invalid(field, "reasoning settings apply to Bedrock models; provider openai takes none"));
        return;
    }
    let id = &spec.model.text_model_id;
    if text_model(id).is_none_or(|m| m.reasoning == ReasoningStyle::None) {
        let takers: Vec<&str> =
            TEXT_MODELS.iter().filter(|m| m.reasoning != ReasoningStyle::None).map(|m| m.prefix).collect();
        problems.push(invalid(
            field,
            format!(
                "text model {id:?} takes no reasoning settings; remove spec.model.reasoning or use a model that does ({})",
                takers.join(", ")
            ),
        ));
    }
}

fn check_session_models(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let models = &spec.model.session_models;
    for (i, id) in models.iter().enumerate() {
        if id.trim().is_empty() {
            problems.push(invalid(format!("spec.model.sessionModels[{i}]"), "must name a model"));
        }
    }
    for dup in duplicates(models.iter().map(String::as_str).chain([spec.model.text_model_id.as_str()])) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.model.sessionModels",
            format!("model {dup:?} is listed more than once (textModelId is always allowed)"),
        ));
    }
}

/// An explicit `contextTokens` must fit the context window of every known text model the
/// agent may call.
fn check_context_tokens(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let Some(tokens) = spec.model.context_tokens else {
        return;
    };
    let model = &spec.model;
    let ids = std::iter::once(&model.text_model_id)
        .chain(model.fallbacks.iter().map(|f| &f.model_id))
        .chain(model.session_models.iter());
    for id in ids {
        if let Some(known) = text_model(id)
            && tokens > known.context_window
        {
            problems.push(invalid(
                "spec.model.contextTokens",
                format!(
                    "{tokens} tokens do not fit the {}-token context window of {id:?} ({}); lower contextTokens or leave it unset for the model's default",
                    known.context_window, known.name
                ),
            ));
        }
    }
}
