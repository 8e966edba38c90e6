//! Checks of an Agent's variants (`spec.variants`): names unique, weights within range and
//! adding up to 100 ([`check_fields`], part of the Agent's own checks), and the Personas and Workflows they reference present and valid (and
//! the Workflow fitting the Agent's tools, as the Agent's own must). The API server checks
//! the first two with the schema; this is for specs that do not pass through it (local
//! mode, the operator's own check) and for the references, which only the caller sees.

use std::collections::BTreeMap;

use super::{Problem, Reason, duplicates, summarize};
use crate::agent::{AgentSpec, MAX_VARIANTS, TOTAL_WEIGHT};
use crate::persona::PersonaSpec;
use crate::validate::{validate_persona, validate_workflow};
use crate::workflow::WorkflowSpec;

/// The Personas and Workflows (by name, in the Agent's namespace) the variants reference
/// that exist.
#[derive(Clone, Debug, Default)]
pub struct VariantRefs {
    /// Found Personas.
    pub personas: BTreeMap<String, PersonaSpec>,
    /// Found Workflows.
    pub workflows: BTreeMap<String, WorkflowSpec>,
}

impl VariantRefs {
    /// The Personas (the Agent's own too: a variant's prompt is checked against it) and
    /// Workflows `spec`'s variants reference, found by `persona` and `workflow`.
    pub fn gather(
        spec: &AgentSpec,
        persona: impl Fn(&str) -> Option<PersonaSpec>,
        workflow: impl Fn(&str) -> Option<WorkflowSpec>,
    ) -> Self {
        let mut refs = Self::default();
        if spec.variants.is_empty() {
            return refs;
        }
        let personas = spec.variants.iter().filter_map(|v| v.persona_ref.as_ref()).chain([&spec.persona_ref]);
        for name in personas.map(|r| &r.name) {
            if let Some(found) = persona(name) {
                refs.personas.insert(name.clone(), found);
            }
        }
        for name in spec.variants.iter().filter_map(|v| v.workflow_ref.as_ref()).map(|r| &r.name) {
            if let Some(found) = workflow(name) {
                refs.workflows.insert(name.clone(), found);
            }
        }
        refs
    }
}

/// What is wrong with `spec.variants` on its own — count, names, weights — for a person to
/// fix: part of [`super::validate_agent`].
pub(super) fn check_fields(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let variants = &spec.variants;
    if variants.is_empty() {
        return;
    }
    if variants.len() > MAX_VARIANTS {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.variants",
            format!("{} variants; an Agent runs at most {MAX_VARIANTS}", variants.len()),
        ));
    }
    for name in duplicates(variants.iter().map(|v| v.name.as_str())) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.variants",
            format!("two variants are named {name:?}; give each its own name"),
        ));
    }
    let total: u64 = variants.iter().map(|v| u64::from(v.weight)).sum();
    if total != u64::from(TOTAL_WEIGHT) || variants.iter().any(|v| v.weight > TOTAL_WEIGHT) {
        let listed: Vec<String> = variants.iter().map(|v| format!("{}={}", v.name, v.weight)).collect();
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.variants",
            format!(
                "the weights ({}) add up to {total}; they are percents of new sessions and must add up to {TOTAL_WEIGHT}",
                listed.join(", ")
            ),
        ));
    }
    for (i, variant) in variants.iter().enumerate() {
        if !super::is_dns_label(&variant.name) || variant.name.len() > 32 {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("spec.variants[{i}].name"),
                format!("{:?} must be lowercase letters, digits and '-', at most 32", variant.name),
            ));
        }
    }
}

/// What is wrong with the Personas, Workflows and prompts `spec.variants` reference
/// (`refs`: those found), for a person to fix. The variants' own fields are
/// [`super::validate_agent`]'s.
pub fn check_variants(namespace: &str, spec: &AgentSpec, refs: &VariantRefs) -> Vec<Problem> {
    let mut problems = Vec::new();
    let variants = &spec.variants;
    for (i, variant) in variants.iter().enumerate() {
        let field = |f: &str| format!("spec.variants[{i}].{f}");
        if let Some(persona) = &variant.persona_ref {
            match refs.personas.get(&persona.name) {
                None => problems.push(Problem::new(
                    Reason::PersonaNotFound,
                    field("personaRef"),
                    format!(
                        "persona {:?} of variant {:?} does not exist in namespace {namespace:?}; create it or fix the reference",
                        persona.name, variant.name
                    ),
                )),
                Some(p) => invalid(&validate_persona(p), Reason::PersonaInvalid, field("personaRef"), &persona.name)
                    .into_iter()
                    .for_each(|p| problems.push(p)),
            }
        }
        if let Some(workflow) = &variant.workflow_ref {
            match refs.workflows.get(&workflow.name) {
                None => problems.push(Problem::new(
                    Reason::WorkflowNotFound,
                    field("workflowRef"),
                    format!(
                        "workflow {:?} of variant {:?} does not exist in namespace {namespace:?}; create it or fix the reference",
                        workflow.name, variant.name
                    ),
                )),
                Some(w) => {
                    let found = invalid(&validate_workflow(w), Reason::WorkflowInvalid, field("workflowRef"), &workflow.name);
                    problems.extend(found);
                    let mut with = spec.clone();
                    with.workflow_ref = workflow.clone();
                    super::fits::check_workflow_fits(&with, w, &mut problems);
                }
            }
        }
        if let Some(prompt) = &variant.system_prompt {
            let base = variant.persona_ref.as_ref().map_or(&spec.persona_ref.name, |p| &p.name);
            if let Some(persona) = refs.personas.get(base) {
                let with = PersonaSpec { system_prompt: prompt.clone(), ..persona.clone() };
                let found = invalid(&validate_persona(&with), Reason::InvalidTemplate, field("systemPrompt"), base);
                problems.extend(found);
            }
        }
    }
    problems
}

fn invalid(found: &[Problem], reason: Reason, field: String, name: &str) -> Option<Problem> {
    summarize(found).map(|(_, message)| Problem::new(reason, field, format!("{name:?} is invalid: {message}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(variants: serde_json::Value) -> AgentSpec {
        serde_json::from_value(serde_json::json!({
            "mode": "text", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"}, "variants": variants
        }))
        .expect("spec")
    }

    fn persona(prompt: &str) -> PersonaSpec {
        serde_json::from_value(serde_json::json!({"displayName": "P", "systemPrompt": prompt})).expect("persona")
    }

    fn messages(spec: &AgentSpec, refs: &VariantRefs) -> Vec<String> {
        let mut found = check_variants("bank", spec, refs);
        check_fields(spec, &mut found);
        found.iter().map(|p| format!("{:?} {}: {}", p.reason, p.field, p.message)).collect()
    }

    #[test]
    fn weights_add_up_names_are_unique_and_references_exist() {
        let mut refs = VariantRefs::default();
        refs.personas.insert("p".into(), persona("You are {name}."));
        refs.personas.insert("warm".into(), persona("You are {name}, warmly."));
        let good = spec(serde_json::json!([
            {"name": "control", "weight": 90},
            {"name": "warm", "weight": 10, "personaRef": {"name": "warm"}, "systemPrompt": "Hi, {name}."}
        ]));
        assert!(messages(&good, &refs).is_empty(), "{:?}", messages(&good, &refs));
        assert!(messages(&spec(serde_json::json!([])), &refs).is_empty());

        let bad = spec(serde_json::json!([
            {"name": "a", "weight": 60},
            {"name": "a", "weight": 30, "personaRef": {"name": "gone"}, "workflowRef": {"name": "nowhere"}},
            {"name": "Bad_Name", "weight": 0, "systemPrompt": "Hello {nope}"}
        ]));
        let found = messages(&bad, &refs);
        let has = |needle: &str| found.iter().any(|m| m.contains(needle));
        assert!(has("DuplicateName spec.variants: two variants are named \"a\""), "{found:?}");
        assert!(has("add up to 90"), "{found:?}");
        assert!(has("PersonaNotFound spec.variants[1].personaRef: persona \"gone\""), "{found:?}");
        assert!(has("WorkflowNotFound spec.variants[1].workflowRef"), "{found:?}");
        assert!(has("spec.variants[2].name"), "{found:?}");
        assert!(has("InvalidTemplate spec.variants[2].systemPrompt"), "{found:?}");
    }

    #[test]
    fn refs_gather_what_the_variants_name_and_the_agents_own_persona() {
        let s = spec(
            serde_json::json!([{"name": "a", "weight": 100, "personaRef": {"name": "x"}, "workflowRef": {"name": "y"}}]),
        );
        let refs = VariantRefs::gather(&s, |name| (name != "missing").then(|| persona(name)), |_| None);
        assert_eq!(refs.personas.keys().collect::<Vec<_>>(), ["p", "x"]);
        assert!(refs.workflows.is_empty());
    }
}
