//! The resolved, self-contained description of one agent that the operator hands to its
//! pods (as `runtime.json` in a ConfigMap) and the local runner builds in memory.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::{
    GatewaySettings, Mode, ModelSettings, RecordSettings, SessionSettings, Skill, Telephony, ToolPolicy, ToolSpec,
};
use crate::persona::PersonaSpec;
use crate::workflow::WorkflowSpec;

/// `kind` of a serialised RuntimeSpec.
pub const RUNTIME_SPEC_KIND: &str = "RuntimeSpec";
/// Prefix of the tool that transfers a session to another agent.
pub const TRANSFER_PREFIX: &str = "transfer_to_";
/// Prefix of the tool that returns a session to the agent that handed it over.
pub const RETURN_PREFIX: &str = "return_to_";

/// Everything a runtime pod needs to run one agent: persona, workflow, tools, handoff
/// targets and model settings, with every default filled in and every reference resolved.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSpec {
    /// Always `switchboard.dev/v1alpha1`.
    pub api_version: String,
    /// Always `RuntimeSpec`.
    pub kind: String,
    /// Which Agent this is.
    pub agent: AgentIdentity,
    /// Who the agent is: role, description, avatar (left out when none is set).
    #[serde(default, skip_serializing_if = "Profile::is_empty")]
    pub profile: Profile,
    /// voice, text or hybrid.
    pub mode: Mode,
    /// The resolved Persona.
    pub persona: NamedPersona,
    /// The resolved Workflow.
    pub workflow: NamedWorkflow,
    /// Model settings with defaults applied.
    pub model: ModelSettings,
    /// The Agent's own tools (handoff tools are listed under `handoffs`).
    pub tools: Vec<ToolSpec>,
    /// Tools refused everywhere (left out when nothing is).
    #[serde(default, skip_serializing_if = "ToolPolicy::is_empty")]
    pub tool_policy: ToolPolicy,
    /// The Agent's skills, each data context read: a skill's `dataContext` here is always
    /// inline `text` (left out when the Agent has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<Skill>,
    /// The Agent's knowledge, read from its sources (left out when it has none).
    #[serde(default, skip_serializing_if = "ResolvedKnowledge::is_empty")]
    pub knowledge: ResolvedKnowledge,
    /// Memory keys only the tools marked `identityProvider` may write (the Agent's
    /// `identityKeys`). Specs written before the field existed read as `[verifiedUser]`.
    #[serde(default = "crate::agent::default_identity_keys")]
    pub identity_keys: Vec<String>,
    /// Agents this one may transfer to, each with its transfer tool.
    pub handoffs: Vec<ResolvedHandoff>,
    /// Session limits and draining.
    pub sessions: SessionSettings,
    /// Gateway exposure.
    pub gateway: GatewaySettings,
    /// What the gateway's record keeps (its redaction rules; local mode routes with them).
    #[serde(default, skip_serializing_if = "RecordSettings::is_empty")]
    pub record: RecordSettings,
    /// The Agent's place in the shared model quota (local mode routes with it).
    #[serde(default, skip_serializing_if = "crate::agent::CapacitySettings::is_default")]
    pub capacity: crate::agent::CapacitySettings,
    /// What the Agent takes from the host app's backend (the gateway applies it; local mode
    /// routes with it; left out when nothing).
    #[serde(default, skip_serializing_if = "crate::agent::AppContext::is_default")]
    pub app_context: crate::agent::AppContext,
    /// The phone numbers the Agent answers (local mode routes calls with them).
    #[serde(default, skip_serializing_if = "Telephony::is_empty")]
    pub telephony: Telephony,
    /// The Agent's variants, resolved (left out when it has none). Their weights are not
    /// here but in the gateway's routing table: a change of weights changes no pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<RuntimeVariant>,
}

/// One variant of the Agent, resolved: what it holds differs from the Agent's own.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeVariant {
    /// The variant's name.
    pub name: String,
    /// Its Persona, when not the Agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona: Option<NamedPersona>,
    /// Its Workflow, when not the Agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<NamedWorkflow>,
    /// Its text model, when not the Agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_model_id: Option<String>,
    /// Its system prompt template, when not its Persona's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
}

/// Name and namespace of an Agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentIdentity {
    /// The Agent's name.
    pub name: String,
    /// The Agent's namespace.
    pub namespace: String,
}

/// Who an agent is, as its Agent says.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// `spec.role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `spec.description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `spec.avatar`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
}

impl Profile {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// An Agent's knowledge with every source read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedKnowledge {
    /// The agent-level data context; empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data_context: String,
    /// The bootstrap files, in the order the Agent lists them (a whole ConfigMap's keys in
    /// key order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<KnowledgeFile>,
}

impl ResolvedKnowledge {
    /// True when there is no data context and no file.
    pub fn is_empty(&self) -> bool {
        self.data_context.is_empty() && self.files.is_empty()
    }
}

/// One bootstrap file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeFile {
    /// Its name: the ConfigMap key.
    pub name: String,
    /// Its text.
    pub text: String,
}

/// A Persona with its name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedPersona {
    /// The Persona's name.
    pub name: String,
    /// Its spec.
    #[serde(flatten)]
    pub spec: PersonaSpec,
}

/// A Workflow with its name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedWorkflow {
    /// The Workflow's name.
    pub name: String,
    /// Its spec.
    #[serde(flatten)]
    pub spec: WorkflowSpec,
}

/// A handoff target with the tool the model calls to transfer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedHandoff {
    /// The target Agent's name.
    pub agent: String,
    /// The transfer tool's name, `transfer_to_<agent>`.
    pub tool: String,
    /// The transfer tool's description.
    pub description: String,
}

/// The name of the tool that transfers a session to `agent`.
pub fn transfer_tool_name(agent: &str) -> String {
    format!("{TRANSFER_PREFIX}{agent}")
}

/// The name of the tool that returns a session to `caller`.
pub fn return_tool_name(caller: &str) -> String {
    format!("{RETURN_PREFIX}{caller}")
}

/// A RuntimeSpec document that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeSpecError {
    /// Not valid JSON/YAML, or not a RuntimeSpec.
    #[error("runtime spec is not valid: {0}")]
    Parse(String),
    /// A RuntimeSpec of another version.
    #[error(
        "runtime spec has apiVersion {found:?} and kind {kind:?}; this runtime reads {} {}",
        crate::API_VERSION,
        RUNTIME_SPEC_KIND
    )]
    Version {
        /// The apiVersion found.
        found: String,
        /// The kind found.
        kind: String,
    },
}

impl RuntimeSpec {
    /// Reads a RuntimeSpec from JSON or YAML text, checking its apiVersion and kind.
    pub fn parse(text: &str) -> Result<Self, RuntimeSpecError> {
        let spec: RuntimeSpec = serde_yaml::from_str(text).map_err(|e| RuntimeSpecError::Parse(e.to_string()))?;
        if spec.api_version != crate::API_VERSION || spec.kind != RUNTIME_SPEC_KIND {
            return Err(RuntimeSpecError::Version { found: spec.api_version, kind: spec.kind });
        }
        Ok(spec)
    }

    /// The spec of variant `name`: this one with the variant's Persona, Workflow, text
    /// model and prompt in place (and no variants of its own). None when there is no such
    /// variant.
    pub fn variant(&self, name: &str) -> Option<RuntimeSpec> {
        let variant = self.variants.iter().find(|v| v.name == name)?;
        let mut spec = RuntimeSpec { variants: Vec::new(), ..self.clone() };
        if let Some(persona) = &variant.persona {
            spec.persona = persona.clone();
        }
        if let Some(workflow) = &variant.workflow {
            spec.workflow = workflow.clone();
        }
        if let Some(model) = &variant.text_model_id {
            spec.model.text_model_id = model.clone();
        }
        if let Some(prompt) = &variant.system_prompt {
            spec.persona.spec.system_prompt = prompt.clone();
        }
        Some(spec)
    }

    /// Canonical JSON: stable for equal specs, so a hash of it changes only when the spec does.
    pub fn to_canonical_json(&self) -> String {
        // Struct fields serialise in declaration order and maps are BTreeMaps, so the output
        // is deterministic. Tool input schemas are serde_json::Value objects, whose keys are
        // sorted (serde_json without preserve_order).
        serde_json::to_string(self).unwrap_or_else(|e| unreachable!("RuntimeSpec serialises: {e}"))
    }
}
