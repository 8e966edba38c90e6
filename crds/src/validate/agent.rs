//! Checks of an Agent, including those that look at the objects it references.

use std::collections::BTreeSet;

use super::{Problem, Reason, duplicates, is_dns_label, summarize};
use crate::agent::{
    AgentSpec, CREDENTIAL_HEADERS, ClientTool, ConfigMaps, ContextSource, Provider, ToolSpec, check_sonic_voice,
    is_valid_pattern, sonic_model,
};
use crate::persona::PersonaSpec;
use crate::runtime::{RETURN_PREFIX, TRANSFER_PREFIX, transfer_tool_name};
use crate::validate::{validate_persona, validate_workflow};
use crate::workflow::WorkflowSpec;

/// What an Agent references, as found by the caller (a cluster cache or a folder of files).
#[derive(Clone, Copy)]
pub struct References<'a> {
    /// The Persona named by `personaRef`, if it exists.
    pub persona: Option<&'a PersonaSpec>,
    /// The Workflow named by `workflowRef`, if it exists.
    pub workflow: Option<&'a WorkflowSpec>,
    /// Whether an Agent of this name exists in the same namespace.
    pub agent_exists: &'a dyn Fn(&str) -> bool,
    /// The ConfigMaps the Agent references (knowledge, skills) that exist, with their data.
    pub config_maps: &'a ConfigMaps,
}

impl<'a> References<'a> {
    /// References with no ConfigMaps (for Agents that read none).
    pub fn new(
        persona: Option<&'a PersonaSpec>,
        workflow: Option<&'a WorkflowSpec>,
        agent_exists: &'a dyn Fn(&str) -> bool,
    ) -> Self {
        static NONE: ConfigMaps = ConfigMaps::new();
        Self { persona, workflow, agent_exists, config_maps: &NONE }
    }
}

impl std::fmt::Debug for References<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("References")
            .field("persona", &self.persona.is_some())
            .field("workflow", &self.workflow.is_some())
            .field("config_maps", &self.config_maps.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Every problem with the Agent `name` in `namespace`, given what it references.
pub fn validate_agent(name: &str, namespace: &str, spec: &AgentSpec, refs: References<'_>) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !is_dns_label(name) {
        problems.push(Problem::new(
            Reason::InvalidField,
            "metadata.name",
            format!("{name:?} must be a DNS label (lowercase letters, digits and '-', at most 63) because it names the agent's Service"),
        ));
    }
    check_references(namespace, spec, refs, &mut problems);
    check_tools(&spec.tools, &mut problems);
    check_tool_policy(spec, &mut problems);
    check_sources(spec, &mut problems);
    super::knowledge::check_skills(spec, &mut problems);
    problems.extend(super::knowledge::gather_knowledge(spec, namespace, refs.config_maps).problems);
    super::authority::check_authority(spec, &mut problems);
    super::record::check_record(spec, &mut problems);
    super::telephony::check_telephony(spec, &mut problems);
    super::variant::check_fields(spec, &mut problems);
    check_handoffs(name, namespace, spec, refs, &mut problems);
    if let Some(workflow) = refs.workflow {
        super::fits::check_workflow_fits(spec, workflow, &mut problems);
    }
    check_scaling_and_model(spec, &mut problems);
    super::model::check_model(spec, refs.persona, &mut problems);
    check_voice(spec, refs.persona, &mut problems);
    if let Err(message) = spec.capacity.check() {
        problems.push(Problem::new(Reason::InvalidField, "spec.capacity", message));
    }
    if let Some(outage) = &spec.outage {
        let people = spec.telephony.people.iter().map(|p| p.name.as_str());
        for (field, message) in outage.problems(spec.mode, people) {
            problems.push(Problem::new(Reason::InvalidField, field, message));
        }
    }
    problems
}

/// A voice or hybrid agent's Nova Sonic model must be available and speak with the
/// Persona's voice (the voice lives in the Persona, the model in the Agent: only the Agent
/// sees both).
fn check_voice(spec: &AgentSpec, persona: Option<&PersonaSpec>, problems: &mut Vec<Problem>) {
    if spec.mode == crate::Mode::Text {
        return;
    }
    let model = &spec.model.voice_model_id;
    if sonic_model(model).is_some_and(|m| m.end_of_life.is_some()) {
        if let Err(message) = check_sonic_voice(model, "") {
            problems.push(Problem::new(Reason::InvalidField, "spec.model.voiceModelId", message));
        }
        return;
    }
    if let Some(persona) = persona
        && let Err(message) = check_sonic_voice(model, &persona.voice)
    {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.personaRef",
            format!("the persona's voice does not fit spec.model.voiceModelId: {message}"),
        ));
    }
    for language in persona.map_or(&[][..], |p| &p.languages[..]) {
        if let Err(message) = check_sonic_voice(model, &language.voice) {
            problems.push(Problem::new(
                Reason::InvalidField,
                "spec.personaRef",
                format!("the persona's voice for {} does not fit spec.model.voiceModelId: {message}", language.code),
            ));
        }
    }
}

fn check_references(namespace: &str, spec: &AgentSpec, refs: References<'_>, problems: &mut Vec<Problem>) {
    let persona = &spec.persona_ref.name;
    match refs.persona {
        None => problems.push(Problem::new(
            Reason::PersonaNotFound,
            "spec.personaRef",
            format!(
                "persona {persona:?} does not exist in namespace {namespace:?}; create it or fix spec.personaRef.name"
            ),
        )),
        Some(p) => {
            if let Some((_, msg)) = summarize(&validate_persona(p)) {
                problems.push(Problem::new(
                    Reason::PersonaInvalid,
                    "spec.personaRef",
                    format!("persona {persona:?} is invalid: {msg}"),
                ));
            }
        }
    }
    let workflow = &spec.workflow_ref.name;
    match refs.workflow {
        None => problems.push(Problem::new(
            Reason::WorkflowNotFound,
            "spec.workflowRef",
            format!("workflow {workflow:?} does not exist in namespace {namespace:?}; create it or fix spec.workflowRef.name"),
        )),
        Some(w) => {
            if let Some((_, msg)) = summarize(&validate_workflow(w)) {
                problems.push(Problem::new(
                    Reason::WorkflowInvalid,
                    "spec.workflowRef",
                    format!("workflow {workflow:?} is invalid: {msg}"),
                ));
            }
        }
    }
}

fn check_tools(tools: &[ToolSpec], problems: &mut Vec<Problem>) {
    for dup in duplicates(tools.iter().map(|t| t.name.as_str())) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.tools",
            format!("tool name {dup:?} is used more than once; tool names must be unique"),
        ));
    }
    for (i, tool) in tools.iter().enumerate() {
        let field = format!("spec.tools[{i}]");
        if !is_tool_name(&tool.name) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.name"),
                format!(
                    "{:?} is not a valid tool name (a letter, then letters, digits, '_' or '-', at most 64)",
                    tool.name
                ),
            ));
        }
        if tool.name.starts_with(TRANSFER_PREFIX) || tool.name.starts_with(RETURN_PREFIX) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.name"),
                format!(
                    "{:?} uses a prefix reserved for handoff tools; list the agent under spec.handoffs instead",
                    tool.name
                ),
            ));
        }
        if tool.target().is_none() {
            problems.push(Problem::new(
                Reason::InvalidField,
                field.clone(),
                format!("tool {:?} must set exactly one of http, mcp, builtin and client", tool.name),
            ));
        }
        if let Some(client) = &tool.client {
            check_client_tool(tool, client, &field, problems);
        }
        if let Err(msg) = check_input_schema(&tool.input_schema) {
            problems.push(Problem::new(
                Reason::InvalidToolSchema,
                format!("{field}.inputSchema"),
                format!("tool {:?}: {msg}", tool.name),
            ));
        }
        if let Some((headers, secret)) = tool.headers() {
            let target = if tool.http.is_some() { "http" } else { "mcp" };
            for name in headers.keys() {
                if CREDENTIAL_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                    problems.push(Problem::new(
                        Reason::InvalidField,
                        format!("{field}.{target}.headers.{name}"),
                        format!(
                            "the {name} header carries a credential as plain text in the Agent; put it in a Secret and name it under {target}.secretHeaders (secretKeyRef, and prefix \"Bearer \" for a token)"
                        ),
                    ));
                }
            }
            let names: Vec<String> = headers
                .keys()
                .map(|n| n.to_ascii_lowercase())
                .chain(secret.iter().map(|h| h.name.to_ascii_lowercase()))
                .collect();
            for dup in duplicates(names.iter().map(String::as_str)) {
                problems.push(Problem::new(
                    Reason::DuplicateName,
                    format!("{field}.{target}"),
                    format!("the header {dup:?} is set more than once (headers and secretHeaders together)"),
                ));
            }
        }
        if let Some(mem) = &tool.remember {
            for (part, pointer) in [("value", &mem.value), ("when", &mem.when)] {
                if !pointer.is_empty() && !pointer.starts_with('/') {
                    problems.push(Problem::new(
                        Reason::InvalidField,
                        format!("{field}.remember.{part}"),
                        format!(
                            "{pointer:?} is not a JSON Pointer; it must be empty or start with '/', e.g. \"/user\""
                        ),
                    ));
                }
            }
        }
    }
}

/// A client tool: its answer comes from outside the cluster, so nothing trusts it (no
/// cache, no memory, no identity), and its output schema must be usable.
fn check_client_tool(tool: &ToolSpec, client: &ClientTool, field: &str, problems: &mut Vec<Problem>) {
    let name = &tool.name;
    if !(1..=300).contains(&client.timeout_seconds) {
        problems.push(Problem::new(
            Reason::InvalidField,
            format!("{field}.client.timeoutSeconds"),
            format!(
                "tool {name:?}: timeoutSeconds must be between 1 and 300 (the client's answer is awaited that long)"
            ),
        ));
    }
    let untrusted = [
        (tool.cache_ttl_seconds > 0, "cacheTtlSeconds", "set cacheTtlSeconds to 0"),
        (tool.remember.is_some(), "remember", "remove remember; memory comes from tools the cluster runs"),
        (
            tool.identity_provider,
            "identityProvider",
            "remove identityProvider; a client cannot vouch for who the caller is",
        ),
    ];
    for (set, part, fix) in untrusted {
        if set {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.{part}"),
                format!("tool {name:?} runs in the client, whose answer is not trusted: {fix}"),
            ));
        }
    }
    if let Some(schema) = &client.output_schema
        && let Err(msg) = check_output_schema(schema)
    {
        problems.push(Problem::new(
            Reason::InvalidToolSchema,
            format!("{field}.client.outputSchema"),
            format!("tool {name:?}: {msg}"),
        ));
    }
}

/// A client tool's output schema must be a valid JSON Schema.
pub(crate) fn check_output_schema(schema: &serde_json::Value) -> Result<(), String> {
    if !schema.is_object() {
        return Err("outputSchema must be a JSON object".into());
    }
    jsonschema::meta::validate(schema).map_err(|e| format!("outputSchema is not a valid JSON Schema: {e}"))?;
    jsonschema::validator_for(schema).map(|_| ()).map_err(|e| format!("outputSchema cannot be used: {e}"))
}

/// A tool input schema must be a valid JSON Schema whose top level describes an object.
pub(crate) fn check_input_schema(schema: &serde_json::Value) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return Err("inputSchema must be a JSON object".into());
    };
    if obj.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Err("inputSchema must have \"type\": \"object\" at its top level".into());
    }
    jsonschema::meta::validate(schema).map_err(|e| format!("inputSchema is not a valid JSON Schema: {e}"))?;
    jsonschema::validator_for(schema).map(|_| ()).map_err(|e| format!("inputSchema cannot be used: {e}"))
}

fn check_handoffs(name: &str, namespace: &str, spec: &AgentSpec, refs: References<'_>, problems: &mut Vec<Problem>) {
    for dup in duplicates(spec.handoffs.iter().map(|h| h.agent.as_str())) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.handoffs",
            format!("handoff target {dup:?} is listed more than once"),
        ));
    }
    let tool_names: BTreeSet<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
    for (i, h) in spec.handoffs.iter().enumerate() {
        let field = format!("spec.handoffs[{i}].agent");
        if h.agent == name {
            problems.push(Problem::new(Reason::InvalidField, field, "an agent cannot hand off to itself"));
            continue;
        }
        let tool = transfer_tool_name(&h.agent);
        if tool.len() > 64 {
            problems.push(Problem::new(
                Reason::InvalidField,
                field.clone(),
                format!("agent name {:?} is too long for its tool name {tool:?} (at most 64 characters)", h.agent),
            ));
        }
        if tool_names.contains(tool.as_str()) {
            problems.push(Problem::new(
                Reason::DuplicateName,
                field.clone(),
                format!("tool {tool:?} is defined twice"),
            ));
        }
        if !(refs.agent_exists)(&h.agent) {
            problems.push(Problem::new(
                Reason::HandoffTargetNotFound,
                field,
                format!(
                    "agent {:?} does not exist in namespace {namespace:?}; create it or remove the handoff",
                    h.agent
                ),
            ));
        }
    }
}

/// Tool names and patterns of the Agent's deny list are well formed.
fn check_tool_policy(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    for (i, entry) in spec.tool_policy.deny.iter().enumerate() {
        if !is_valid_pattern(entry) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("spec.toolPolicy.deny[{i}]"),
                format!(
                    "{entry:?} is not a tool name or pattern (letters, digits, '_', '-', and '*' or '?' as wildcards, at most 64)"
                ),
            ));
        }
    }
}

/// Every data context sets exactly one of `text` and `configMapRef`, and inline text fits.
fn check_sources(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    let sources = spec.knowledge.data_context.iter().map(|c| ("spec.knowledge.dataContext".to_owned(), c)).chain(
        spec.skills
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.data_context.as_ref().map(|c| (format!("spec.skills[{i}].dataContext"), c))),
    );
    for (field, ContextSource { text, config_map_ref }) in sources {
        if text.is_some() == config_map_ref.is_some() {
            problems.push(Problem::new(Reason::InvalidField, field, "set exactly one of text and configMapRef"));
        } else if text.as_ref().is_some_and(|t| t.len() > crate::agent::MAX_INLINE_BYTES) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.text"),
                format!(
                    "inline text is limited to {} bytes; put longer text in a ConfigMap (configMapRef)",
                    crate::agent::MAX_INLINE_BYTES
                ),
            ));
        }
    }
}

fn check_scaling_and_model(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    if let Some(a) = &spec.autoscaling {
        if spec.replicas.is_some() {
            problems.push(Problem::new(
                Reason::InvalidField,
                "spec.replicas",
                "set either replicas or autoscaling, not both",
            ));
        }
        if a.min_replicas < 1 || a.max_replicas < a.min_replicas {
            problems.push(Problem::new(
                Reason::InvalidField,
                "spec.autoscaling",
                format!("need 1 <= minReplicas <= maxReplicas, got {} and {}", a.min_replicas, a.max_replicas),
            ));
        }
    }
    if spec.replicas.is_some_and(|r| r < 0) {
        problems.push(Problem::new(Reason::InvalidField, "spec.replicas", "must not be negative"));
    }
    if spec.model.provider == Provider::Openai && spec.model.endpoint.is_none() {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.model.endpoint",
            "provider openai needs the server's base URL in spec.model.endpoint, e.g. http://vllm:8000/v1",
        ));
    }
    for (field, v) in [("temperature", spec.model.temperature), ("topP", spec.model.top_p)] {
        if !(0.0..=1.0).contains(&v) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("spec.model.{field}"),
                format!("must be between 0 and 1, got {v}"),
            ));
        }
    }
    if let Some(sa) = spec.credentials.as_ref().and_then(|c| c.service_account_name.as_deref())
        && !sa.split('.').all(is_dns_label)
    {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.credentials.serviceAccountName",
            format!("{sa:?} is not a valid service account name"),
        ));
    }
}

fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.as_bytes()[0].is_ascii_alphabetic()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
