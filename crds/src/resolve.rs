//! Resolution: an Agent with its Persona, Workflow and the ConfigMaps its knowledge and
//! skills read becomes one self-contained [`RuntimeSpec`]. Pure; validation is separate
//! ([`crate::validate`]) and [`crate::Catalog::resolve_agent`] runs both.

use kube::ResourceExt;

use crate::agent::{Agent, AgentSpec, ConfigMaps};
use crate::persona::Persona;
use crate::runtime::{
    AgentIdentity, NamedPersona, NamedWorkflow, Profile, RUNTIME_SPEC_KIND, ResolvedHandoff, RuntimeSpec,
    RuntimeVariant, transfer_tool_name,
};
use crate::validate::{VariantRefs, gather_knowledge};
use crate::workflow::Workflow;

/// The namespace assumed for objects that name none (as `kubectl apply` does).
pub const DEFAULT_NAMESPACE: &str = "default";

/// Assembles the RuntimeSpec of `agent` from the Persona and Workflow it references and
/// the ConfigMaps its knowledge and skills read (`config_maps`, by name; pass an empty map
/// for an Agent that reads none). Call it on objects that passed validation; it does not
/// check references itself (a missing ConfigMap reads as empty text).
pub fn resolve(agent: &Agent, persona: &Persona, workflow: &Workflow, config_maps: &ConfigMaps) -> RuntimeSpec {
    let spec = &agent.spec;
    let namespace = agent.namespace().unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    let gathered = gather_knowledge(spec, &namespace, config_maps);
    let handoffs = spec
        .handoffs
        .iter()
        .map(|h| ResolvedHandoff {
            agent: h.agent.clone(),
            tool: transfer_tool_name(&h.agent),
            description: h
                .description
                .clone()
                .unwrap_or_else(|| format!("Transfer the conversation to the {} agent.", h.agent)),
        })
        .collect();
    RuntimeSpec {
        api_version: crate::API_VERSION.to_owned(),
        kind: RUNTIME_SPEC_KIND.to_owned(),
        agent: AgentIdentity { name: agent.name_any(), namespace },
        profile: Profile {
            role: spec.role.clone(),
            description: spec.description.clone(),
            avatar: spec.avatar.clone(),
        },
        mode: spec.mode,
        persona: NamedPersona { name: persona.name_any(), spec: persona.spec.clone() },
        workflow: NamedWorkflow { name: workflow.name_any(), spec: workflow.spec.clone() },
        model: spec.model.clone(),
        tools: spec.tools.clone(),
        tool_policy: spec.tool_policy.clone(),
        skills: gathered.skills,
        knowledge: gathered.knowledge,
        identity_keys: spec.identity_keys.clone(),
        handoffs,
        sessions: spec.sessions.clone(),
        gateway: spec.gateway.clone(),
        record: spec.record.clone(),
        capacity: spec.capacity.clone(),
        telephony: spec.telephony.clone(),
        app_context: spec.app_context.clone(),
        variants: Vec::new(),
    }
}

/// The variants of `spec` (`spec.variants`), each with the Persona and Workflow it names
/// from `refs`. Call it on an Agent whose variants passed [`crate::validate::check_variants`];
/// a reference missing from `refs` resolves to the Agent's own.
pub fn resolve_variants(spec: &AgentSpec, refs: &VariantRefs) -> Vec<RuntimeVariant> {
    spec.variants
        .iter()
        .map(|v| RuntimeVariant {
            name: v.name.clone(),
            persona: v.persona_ref.as_ref().and_then(|r| {
                refs.personas.get(&r.name).map(|p| NamedPersona { name: r.name.clone(), spec: p.clone() })
            }),
            workflow: v.workflow_ref.as_ref().and_then(|r| {
                refs.workflows.get(&r.name).map(|w| NamedWorkflow { name: r.name.clone(), spec: w.clone() })
            }),
            text_model_id: v.text_model_id.clone(),
            system_prompt: v.system_prompt.clone(),
        })
        .collect()
}
