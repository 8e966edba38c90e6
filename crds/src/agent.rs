//! The `Agent` resource: one deployable agent — its mode, persona, workflow, model,
//! tools, handoff targets and how it runs.

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ObjectRef;

mod answering_machine;
mod app_context;
mod authority;
mod capacity;
mod knowledge;
mod model;
mod outage;
mod policy;
mod record;
mod skill;
mod sonic;
mod telephony;
mod text_models;
mod tool;
mod variant;

pub use answering_machine::{
    AnsweringMachine, BEEP_TIMEOUT_SECONDS, DECISION_TIMEOUT_MILLIS, GREETING_MAX_MILLIS, MESSAGE_MAX_CHARS, OnMachine,
    SILENCE_AFTER_GREETING_MILLIS,
};
pub use app_context::{AppContext, MAX_APP_MEMORY_KEYS};
pub use authority::{
    GATEWAY_KEYS, MAX_KEY_LEN, MemoryPath, MemoryPathError, VERIFIED_USER, default_identity_keys, is_memory_key,
};
pub use capacity::{CapacitySettings, DEFAULT_ACCOUNT, MAX_HOLD_MESSAGE, PRIORITY_RANGE, WhenFull};

pub use knowledge::{
    ConfigMapKeyRef, ConfigMaps, ContextSource, DEFAULT_KNOWLEDGE_BYTES, Knowledge, MAX_INLINE_BYTES,
    MAX_KNOWLEDGE_BYTES, referenced_config_maps,
};
pub use model::{
    DEFAULT_REGION, FallbackModel, ModelSettings, Provider, Reasoning, ReasoningEffort, TurnDetection, VoiceFallback,
};
pub use outage::{Breaker, Fallback, MAX_FALLBACK_MESSAGE, MAX_RAMP_STEPS, OutageSettings};
pub use policy::{ToolPolicy, glob_match, is_pattern, is_valid_pattern, matches_any};
pub use record::{
    AnalysisField, AnalysisFieldType, AnalysisSettings, MAX_ANALYSIS_DESCRIPTION_LEN, MAX_ANALYSIS_FIELDS,
    MAX_ANALYSIS_VALUES, MAX_REDACT_PATTERN_LEN, MAX_REDACT_RULES, RESOLVED_FIELD, RecordSettings, RedactRule,
};
pub use skill::{Example, Skill, USE_SKILL_TOOL};
pub use sonic::{SONIC_MODELS, SonicModel, check_sonic_voice, sonic_model};
pub use telephony::{
    DEFAULT_TRANSFER_TIMEOUT_SECONDS, E164_PATTERN, MAX_NUMBERS, MAX_PEOPLE, PERSON_ADDRESS_PATTERN, Person,
    SEND_DIGITS_TOOL, TRANSFER_TO_PERSON_TOOL, Telephony, TransferMode, is_e164, is_person_address,
};
pub use text_models::{
    DEFAULT_WINDOW_SHARE, FALLBACK_CONTEXT_TOKENS, ReasoningStyle, TEXT_MODELS, TextModel, default_context_tokens,
    text_model,
};
pub use tool::{
    BuiltinKind, BuiltinTool, CREDENTIAL_HEADERS, ClientTool, Consent, DEFAULT_CLIENT_TIMEOUT_SECONDS, HttpTool,
    KeypadInput, McpTool, SecretHeader, SecretKeyRef, ToolMemory, ToolSpec, ToolTarget,
};
pub use variant::{MAX_VARIANTS, TOTAL_WEIGHT, Variant, pick as pick_variant};

/// An AI agent that talks with people by voice, text or both. The operator resolves its
/// Persona and Workflow into a runtime configuration and runs it as pods behind the
/// session gateway.
// kube's printcolumn(...) arguments repeat `type_ = "string"`, which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "switchboard.dev",
    version = "v1alpha1",
    kind = "Agent",
    namespaced,
    status = "AgentStatus",
    shortname = "sba",
    category = "switchboard",
    doc = "A Switchboard agent: mode (voice, text or hybrid), persona, workflow, model, tools and handoff targets.",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(name = "Accepted", type_ = "string", json_path = ".status.conditions[?(@.type==\"Accepted\")].status"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".status.endpoint", priority = 1),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(
    validation = Rule::new("!(has(self.replicas) && has(self.autoscaling))").message("set either replicas or autoscaling, not both"),
    validation = Rule::new("!has(self.skills) || self.skills.all(s, !has(s.delegatesTo) || s.delegatesTo.all(d, d != s.name && self.skills.exists(o, o.name == d)))").message("a skill's delegatesTo must name other skills of spec.skills"),
    validation = Rule::new("!has(self.skills) || self.skills.all(s, !has(s.tools) || s.tools.all(n, has(self.tools) && self.tools.exists(t, t.name == n)))").message("a skill's tools must be tools of spec.tools"),
    validation = Rule::new("!has(self.variants) || size(self.variants) == 0 || self.variants.map(v, v.weight).sum() == 100").message("the weights of spec.variants must add up to 100"),
    validation = Rule::new("!has(self.record) || !has(self.record.analysis) || self.record.analysis.fields.all(f, (f.type == 'enum') == (has(f.values) && size(f.values) > 0))").message("an enum field of spec.record.analysis lists its values, and only an enum field has values"),
    validation = Rule::new("!has(self.record) || !has(self.record.analysis) || self.record.analysis.fields.all(f, self.record.analysis.fields.exists_one(g, g.name == f.name))").message("each field of spec.record.analysis has its own name"),
    validation = Rule::new("!has(self.appContext) || !has(self.appContext.memory) || self.appContext.memory.all(k, !(k in (has(self.identityKeys) ? self.identityKeys : ['verifiedUser'])))").message("spec.appContext.memory may not list an identity key (spec.identityKeys, default [verifiedUser]): the caller from the app is taken with spec.appContext.identity: true"),
    validation = Rule::new("!has(self.tools) || self.tools.all(t, !has(t.remember) || (has(t.identityProvider) && t.identityProvider) || !(t.remember.key in (has(self.identityKeys) ? self.identityKeys : ['verifiedUser'])))").message("only a tool with identityProvider: true may remember into an identity key (spec.identityKeys, default [verifiedUser])")
)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    /// How users talk with the agent: `voice` (speech to speech through Nova Sonic),
    /// `text` (streaming chat through Bedrock Converse) or `hybrid` (both on one session).
    pub mode: Mode,

    /// The Persona (in this namespace) that sets the agent's name, prompt and voice.
    pub persona_ref: ObjectRef,

    /// The Workflow (in this namespace) the agent follows.
    pub workflow_ref: ObjectRef,

    /// What the agent does, in a few words (e.g. "Account specialist"). In the prompt as
    /// `{role}` and listed by the gateway's agent directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub role: Option<String>,

    /// What the agent helps with, in a sentence or two. In the prompt as `{description}`
    /// and shown to people choosing an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub description: Option<String>,

    /// A picture of the agent for the web page and the agent directory: an `https://` or
    /// `http://` URL, or a `data:image/...` URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 8192), regex(pattern = r"^(https?://|data:image/)"))]
    pub avatar: Option<String>,

    /// Which models the agent uses and how. Defaults suit Amazon Bedrock in `us-east-1`.
    #[serde(default)]
    pub model: ModelSettings,

    /// Tools the model may call. A Workflow node may narrow them further.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub tools: Vec<ToolSpec>,

    /// Tools refused everywhere, beside the Workflow nodes' allow and deny lists.
    #[serde(default, skip_serializing_if = "ToolPolicy::is_empty")]
    pub tool_policy: ToolPolicy,

    /// Skills: named bundles of instructions, tools, examples and data context that enter
    /// the model's context only when the model uses them (the built-in `use_skill` tool).
    /// Names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub skills: Vec<Skill>,

    /// What the agent knows in every turn: a data context and bootstrap files, inline or
    /// from ConfigMaps, within a size limit.
    #[serde(default, skip_serializing_if = "Knowledge::is_default")]
    pub knowledge: Knowledge,

    /// Memory keys that say who the caller is. Only tools marked `identityProvider` may
    /// `remember` into them, so no other tool's result can change who the caller is; tools
    /// that act for the caller `bind` their inputs to these keys. Default `[verifiedUser]`.
    #[serde(default = "default_identity_keys")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 63), regex(pattern = r"^[a-zA-Z][a-zA-Z0-9_]*$")))]
    pub identity_keys: Vec<String>,

    /// What the Agent takes from the host app's backend when a session starts with it
    /// (`session_start.app_context`, a token the gateway checks): other memory keys, and the
    /// logged-in customer only when `identity` is true. Nothing by default.
    #[serde(default, skip_serializing_if = "AppContext::is_default")]
    pub app_context: AppContext,

    /// Agents this one may transfer a session to. Each becomes a `transfer_to_<agent>`
    /// tool; the receiving agent gets a `return_to_<caller>` tool for the way back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["agent".into()]))]
    pub handoffs: Vec<HandoffTarget>,

    /// Fixed number of runtime pods. Leave unset when `autoscaling` is set. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub replicas: Option<i32>,

    /// Scale runtime pods with a HorizontalPodAutoscaler instead of a fixed `replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,

    /// CPU and memory for each runtime pod. Defaults come from the operator's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Where the runtime pods get model credentials. Without it, pods use the default AWS
    /// credential chain (e.g. the node's role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<Credentials>,

    /// Session limits and draining for the runtime pods.
    #[serde(default)]
    pub sessions: SessionSettings,

    /// How the session gateway exposes the agent.
    #[serde(default)]
    pub gateway: GatewaySettings,

    /// What the conversation record keeps of its sessions (its own redaction rules).
    #[serde(default, skip_serializing_if = "RecordSettings::is_empty")]
    pub record: RecordSettings,

    /// The Agent's place in the shared model quota: the provider account its streams count
    /// against (with `model.region`), its priority in the queue, and whether a new session
    /// waits or is refused when the quota is full.
    #[serde(default, skip_serializing_if = "CapacitySettings::is_default")]
    pub capacity: CapacitySettings,
    /// Variants compared on live traffic: each a different Persona, Workflow, text model
    /// or system prompt, with the percent of new sessions it gets (the weights add up to
    /// 100). A session keeps its variant; a verified caller keeps theirs across sessions
    /// while the weights stay. Changing only the weights redeploys nothing. Names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub variants: Vec<Variant>,
    /// Phone calls: the numbers this Agent answers through the SIP edge, the people it may
    /// put a caller through to, answering-machine detection, and whether it may press keys.
    #[serde(default, skip_serializing_if = "Telephony::is_empty")]
    pub telephony: Telephony,
    /// Outage mode: where new sessions go when the model service fails (a circuit breaker
    /// over model errors and time to first audio, in the gateway) or when `active` is
    /// switched on — a person of `telephony.people`, a message, or both; for a voice or
    /// hybrid agent also a text-only reply to clients that read text — and how traffic
    /// ramps back. Absent: no outage mode. Changing it rolls no pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage: Option<OutageSettings>,
}

/// How users talk with an agent.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// Speech to speech through Amazon Nova Sonic.
    Voice,
    /// Streaming text chat through Bedrock Converse (or an OpenAI-compatible server).
    Text,
    /// Audio and text on one session through Nova Sonic.
    Hybrid,
}

impl Mode {
    /// The lowercase name, as in the spec and the runtime's `MODE` variable.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Voice => "voice",
            Mode::Text => "text",
            Mode::Hybrid => "hybrid",
        }
    }

    /// True for modes that carry audio.
    pub fn has_audio(self) -> bool {
        matches!(self, Mode::Voice | Mode::Hybrid)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Another Agent this one may hand a session to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandoffTarget {
    /// Name of the target Agent in the same namespace.
    #[schemars(length(min = 1, max = 63))]
    pub agent: String,
    /// When to transfer, in plain language; becomes the transfer tool's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

/// HorizontalPodAutoscaler settings for an Agent's runtime pods.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("self.maxReplicas >= self.minReplicas").message("maxReplicas must be at least minReplicas"))]
#[serde(rename_all = "camelCase")]
pub struct Autoscaling {
    /// Fewest pods. Default 1.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 1000))]
    pub min_replicas: i32,
    /// Most pods; at least `minReplicas`.
    #[schemars(range(min = 1, max = 1000))]
    pub max_replicas: i32,
    /// Average CPU utilisation, in percent of requests, the autoscaler aims for. Default 70.
    #[serde(default = "seventy")]
    #[schemars(range(min = 1, max = 100))]
    pub target_cpu_utilization_percentage: i32,
}

/// Where runtime pods get model credentials.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// A Secret with the model credentials — `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
    /// and optionally `AWS_SESSION_TOKEN`, or `OPENAI_API_KEY` — mounted read-only in the
    /// runtime pods, which read it again as it ages: a rotation needs no restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<ObjectRef>,
    /// The service account the pods run as, e.g. one annotated for IAM roles for service
    /// accounts (IRSA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// Session limits and draining for an Agent's runtime pods.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSettings {
    /// Most concurrent sessions one pod accepts; further ones are refused. Default 200.
    #[serde(default = "default_max_sessions")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_concurrent: u32,
    /// Seconds a stopping pod waits for live sessions to finish before it exits. Default 300.
    #[serde(default = "default_drain")]
    #[schemars(range(min = 0, max = 3600))]
    pub drain_timeout_seconds: u32,
    /// Seconds of silence (no input) after which a session is closed. Default 600.
    #[serde(default = "default_idle")]
    #[schemars(range(min = 10, max = 86400))]
    pub idle_timeout_seconds: u32,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            max_concurrent: default_max_sessions(),
            drain_timeout_seconds: default_drain(),
            idle_timeout_seconds: default_idle(),
        }
    }
}

/// How the session gateway exposes an Agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySettings {
    /// Whether clients may start sessions with this agent directly. Agents reached only
    /// through handoffs may set `false`. Default true.
    #[serde(default = "yes")]
    pub expose: bool,
    /// Whether this is the namespace's default agent for sessions that name none.
    #[serde(default)]
    pub default: bool,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self { expose: true, default: false }
    }
}

/// Observed state of an Agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted` (spec valid, references resolved) and `Ready` (at least one pod ready).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Where the gateway routes this agent's sessions (`host:port` of its Service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Runtime pods that are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Runtime pods wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

fn one() -> i32 {
    1
}
fn seventy() -> i32 {
    70
}
fn yes() -> bool {
    true
}
fn default_max_sessions() -> u32 {
    200
}
fn default_drain() -> u32 {
    300
}
fn default_idle() -> u32 {
    600
}
