//! Model choice (issue 28): fallback models, the voice fallback, reasoning settings, the
//! models a session may choose, and per-model context budgets — validated with messages a
//! person can act on, and carried into the RuntimeSpec.

mod common;

use common::{catalog, problems};
use switchboard_crds::agent::{FallbackModel, ReasoningEffort, default_context_tokens};
use switchboard_crds::validate::Reason;

const PERSONA: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Persona
metadata: { name: p }
spec: { displayName: Pat, systemPrompt: "You are {name}.", voice: tiffany }
"#;

const WORKFLOW: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Workflow
metadata: { name: w }
spec: { entry: start, nodes: [{ id: start, kind: message }] }
"#;

fn agent(mode: &str, model: &str) -> String {
    format!(
        "apiVersion: switchboard.dev/v1alpha1\nkind: Agent\nmetadata: {{ name: a }}\nspec:\n  mode: {mode}\n  personaRef: {{ name: p }}\n  workflowRef: {{ name: w }}\n  model:\n{model}"
    )
}

/// The (reason, field, message) of every problem of an Agent with `model` settings.
fn found(mode: &str, model: &str) -> Vec<(Reason, String, String)> {
    problems(&[PERSONA, WORKFLOW, &agent(mode, model)]).into_iter().map(|p| (p.reason, p.field, p.message)).collect()
}

#[test]
fn model_choice_resolves_into_the_runtime_spec() {
    let model = "    textModelId: amazon.nova-2-lite-v1:0\n    reasoning: { effort: high }\n    fallbacks:\n      - { modelId: amazon.nova-lite-v1:0 }\n      - { modelId: amazon.nova-2-lite-v1:0, region: us-west-2 }\n    sessionModels: [amazon.nova-pro-v1:0]\n    voiceFallback: { region: eu-north-1 }\n";
    let c = catalog(&[PERSONA, WORKFLOW, &agent("hybrid", model)]);
    let a = c.agents().next().expect("an agent");
    assert_eq!(c.validate_agent(a), [], "valid");
    let spec = c.resolve_agent(a).expect("resolves");
    let settings = &spec.model;
    assert_eq!(
        settings.fallbacks[1],
        FallbackModel { model_id: "amazon.nova-2-lite-v1:0".into(), region: Some("us-west-2".into()) }
    );
    assert_eq!(settings.reasoning.as_ref().map(|r| r.effort), Some(ReasoningEffort::High));
    assert!(
        settings.allows_session_model("amazon.nova-pro-v1:0")
            && settings.allows_session_model("amazon.nova-2-lite-v1:0")
    );
    assert!(!settings.allows_session_model("anthropic.claude-3-haiku-20240307-v1:0"));
    assert_eq!(settings.voice_fallback.as_ref().and_then(|v| v.region.as_deref()), Some("eu-north-1"));
    assert_eq!(settings.context_tokens_for(&settings.text_model_id), 250_000, "a quarter of Nova 2 Lite's 1M window");
    assert_eq!(settings.context_tokens_for("amazon.nova-pro-v1:0"), 75_000);
    // The spec the pods read keeps the choice: unset stays unset, so each model gets its own.
    let json: serde_json::Value = serde_json::from_str(&spec.to_canonical_json()).expect("json");
    assert!(json["model"].get("contextTokens").is_none(), "{}", json["model"]);
}

#[test]
fn an_explicit_context_budget_wins_but_must_fit_every_known_model() {
    let c = catalog(&[PERSONA, WORKFLOW, &agent("text", "    contextTokens: 20000\n")]);
    let spec = c.resolve_agent(c.agents().next().expect("agent")).expect("resolves");
    assert_eq!(spec.model.context_tokens_for("amazon.nova-premier-v1:0"), 20_000);
    assert_eq!(default_context_tokens("some-custom-model"), 32_000, "an unknown model keeps the old default");
    let too_big = "    textModelId: amazon.nova-pro-v1:0\n    contextTokens: 400000\n    fallbacks: [{ modelId: amazon.nova-micro-v1:0 }]\n";
    let problems = found("text", too_big);
    let fields: Vec<&str> = problems.iter().map(|(_, f, _)| f.as_str()).collect();
    assert_eq!(fields, ["spec.model.contextTokens", "spec.model.contextTokens"], "{problems:?}");
    assert!(
        problems[0].2.contains("300000-token context window") && problems[1].2.contains("amazon.nova-micro-v1:0"),
        "{problems:?}"
    );
}

#[test]
fn reasoning_is_refused_for_models_that_take_none() {
    let problems = found("text", "    textModelId: amazon.nova-lite-v1:0\n    reasoning: { effort: low }\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    let (reason, field, message) = &problems[0];
    assert_eq!((*reason, field.as_str()), (Reason::InvalidField, "spec.model.reasoning"));
    assert!(message.contains("takes no reasoning settings") && message.contains("amazon.nova-2-lite"), "{message}");
    let openai = "    provider: openai\n    endpoint: http://vllm:8000/v1\n    textModelId: amazon.nova-2-lite-v1:0\n    reasoning: { effort: low }\n";
    assert!(found("text", openai).iter().any(|(_, f, m)| f == "spec.model.reasoning" && m.contains("openai")));
    assert_eq!(found("text", "    textModelId: us.amazon.nova-2-lite-v1:0\n    reasoning: { effort: low }\n"), []);
}

#[test]
fn fallbacks_must_differ_from_what_is_tried_before_them() {
    let same = "    textModelId: amazon.nova-lite-v1:0\n    fallbacks:\n      - { modelId: amazon.nova-lite-v1:0, region: us-east-1 }\n      - { modelId: amazon.nova-pro-v1:0 }\n      - { modelId: amazon.nova-pro-v1:0 }\n";
    let problems = found("text", same);
    let fields: Vec<(Reason, &str)> = problems.iter().map(|(r, f, _)| (*r, f.as_str())).collect();
    assert_eq!(
        fields,
        [(Reason::DuplicateName, "spec.model.fallbacks[0]"), (Reason::DuplicateName, "spec.model.fallbacks[2]")],
        "{problems:?}"
    );
    let openai = "    provider: openai\n    endpoint: http://vllm:8000/v1\n    fallbacks: [{ modelId: other, region: us-west-2 }]\n";
    assert!(found("text", openai).iter().any(|(_, f, _)| f == "spec.model.fallbacks[0].region"));
    let listed_twice = "    sessionModels: [amazon.nova-pro-v1:0, amazon.nova-pro-v1:0, amazon.nova-lite-v1:0]\n";
    let problems = found("text", listed_twice);
    assert_eq!(problems.len(), 2, "the repeated model and the agent's own model: {problems:?}");
}

#[test]
fn a_voice_fallback_needs_audio_a_difference_and_the_personas_voice() {
    let text = found("text", "    voiceFallback: { region: us-west-2 }\n");
    assert!(text.iter().any(|(_, f, m)| f == "spec.model.voiceFallback" && m.contains("text mode")), "{text:?}");
    let same = found("voice", "    voiceFallback: { region: us-east-1 }\n");
    assert!(same.iter().any(|(_, _, m)| m.contains("the agent's own voice model")), "{same:?}");
    let retired = found("voice", "    voiceFallback: { modelId: amazon.nova-sonic-v1:0 }\n");
    assert!(
        retired.iter().any(|(_, f, m)| f == "spec.model.voiceFallback.modelId" && m.contains("end of life")),
        "{retired:?}"
    );
    assert_eq!(found("voice", "    voiceFallback: { modelId: amazon.nova-2-5-sonic, region: us-west-2 }\n"), []);
}
