//! Model settings of an Agent: which provider and models, and how they are called.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The default Nova Sonic speech-to-speech model.
pub const DEFAULT_VOICE_MODEL: &str = "amazon.nova-2-sonic-v1:0";
/// The default Bedrock text model.
pub const DEFAULT_TEXT_MODEL: &str = "amazon.nova-lite-v1:0";
/// The default AWS region.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Which models an Agent uses and how.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(validation = Rule::new("self.provider != 'openai' || has(self.endpoint)").message("provider openai needs the server's base URL in endpoint"))]
#[serde(rename_all = "camelCase")]
pub struct ModelSettings {
    /// Who serves the text model: `bedrock` (the default) or `openai` for any
    /// OpenAI-compatible chat-completions server (vLLM, Ollama, ...). Voice always uses
    /// Nova Sonic on Bedrock.
    #[serde(default)]
    pub provider: Provider,

    /// AWS region of the Bedrock endpoint. Default `us-east-1`.
    #[serde(default = "default_region")]
    #[schemars(regex(pattern = r"^[a-z]{2}(-[a-z]+)+-\d+$"))]
    pub region: String,

    /// Nova Sonic model id for voice and hybrid modes. Default `amazon.nova-2-sonic-v1:0`.
    #[serde(default = "default_voice_model")]
    #[schemars(length(min = 1, max = 256))]
    pub voice_model_id: String,

    /// Text model id for text mode: a Bedrock model or inference profile id, or the model
    /// name an OpenAI-compatible server knows. Default `amazon.nova-lite-v1:0`.
    #[serde(default = "default_text_model")]
    #[schemars(length(min = 1, max = 256))]
    pub text_model_id: String,

    /// Override of the model endpoint URL: required for `openai` (e.g.
    /// `http://vllm.models:8000/v1`); for `bedrock`, a private or test endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https?://"))]
    pub endpoint: Option<String>,

    /// Most tokens in one reply. Default 1024.
    #[serde(default = "default_max_tokens")]
    #[schemars(range(min = 1, max = 65536))]
    pub max_tokens: u32,

    /// Sampling temperature, 0 to 1. Default 0.7.
    #[serde(default = "default_temperature")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub temperature: f32,

    /// Nucleus sampling, 0 to 1. Default 0.9.
    #[serde(default = "default_top_p")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub top_p: f32,

    /// Tokens of conversation kept before older turns are compacted into a summary.
    /// Default: a quarter of the text model's context window for the models Switchboard
    /// knows (32000 for Amazon Nova Micro, 75000 for Nova Lite and Pro, 50000 for Claude),
    /// 32000 for others. A value set here wins for every model the agent uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1024, max = 1000000))]
    pub context_tokens: Option<u32>,

    /// Text models tried in order, for the rest of a model call, when the text model is
    /// throttled or unavailable (throttling, service unavailable, model not ready,
    /// connection failures, timeouts); never on an invalid request or denied access.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub fallbacks: Vec<FallbackModel>,

    /// For voice and hybrid agents: the Nova Sonic model or region a session's stream opens
    /// with when opening it with `voiceModelId` in `region` fails because the service is
    /// throttled or unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_fallback: Option<VoiceFallback>,

    /// Extended thinking, for text models that take it (Amazon Nova 2); refused for others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,

    /// Text models a client may choose for one session (`session_start.model`) instead of
    /// `textModelId`. A session naming any other model is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 256)))]
    pub session_models: Vec<String>,

    /// Nova Sonic end-of-turn sensitivity: `high` answers sooner after the user pauses,
    /// `low` waits longer. Default `medium`.
    #[serde(default)]
    pub turn_detection: TurnDetection,
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self {
            provider: Provider::default(),
            region: default_region(),
            voice_model_id: default_voice_model(),
            text_model_id: default_text_model(),
            endpoint: None,
            max_tokens: default_max_tokens(),
            temperature: default_temperature(),
            top_p: default_top_p(),
            context_tokens: None,
            fallbacks: Vec::new(),
            voice_fallback: None,
            reasoning: None,
            session_models: Vec::new(),
            turn_detection: TurnDetection::default(),
        }
    }
}

/// Who serves the text model.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Provider {
    /// Amazon Bedrock (Converse for text, Nova Sonic for voice).
    #[default]
    Bedrock,
    /// An OpenAI-compatible chat-completions server; needs `endpoint`.
    Openai,
}

/// Nova Sonic end-of-turn sensitivity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TurnDetection {
    /// Wait longer before answering.
    Low,
    /// The service default.
    #[default]
    Medium,
    /// Answer soon after the user pauses.
    High,
}

fn default_region() -> String {
    DEFAULT_REGION.to_owned()
}
fn default_voice_model() -> String {
    DEFAULT_VOICE_MODEL.to_owned()
}
fn default_text_model() -> String {
    DEFAULT_TEXT_MODEL.to_owned()
}
fn default_max_tokens() -> u32 {
    1024
}
fn default_temperature() -> f32 {
    0.7
}
fn default_top_p() -> f32 {
    0.9
}

impl ModelSettings {
    /// The conversation budget of a session using text model `model_id`: `contextTokens`
    /// when set, else the model's default ([`super::text_models::default_context_tokens`]).
    pub fn context_tokens_for(&self, model_id: &str) -> u32 {
        self.context_tokens.unwrap_or_else(|| super::text_models::default_context_tokens(model_id))
    }

    /// Whether a session may use text model `model_id`: the agent's `textModelId` or one of
    /// its `sessionModels`.
    pub fn allows_session_model(&self, model_id: &str) -> bool {
        model_id == self.text_model_id || self.session_models.iter().any(|m| m == model_id)
    }
}

/// A text model tried when the ones before it are throttled or unavailable.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FallbackModel {
    /// The Bedrock model or inference profile id (or, for `openai`, a model name the same
    /// server knows).
    #[schemars(length(min = 1, max = 256))]
    pub model_id: String,
    /// The AWS region to call it in; default: the agent's `region`. Bedrock only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z]{2}(-[a-z]+)+-\d+$"))]
    pub region: Option<String>,
}

/// The Nova Sonic model or region a voice session opens with when the agent's own is
/// throttled or unavailable. At least one of the two is set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.modelId) || has(self.region)").message("voiceFallback needs a modelId, a region or both"))]
#[serde(rename_all = "camelCase")]
pub struct VoiceFallback {
    /// The Nova Sonic model id; default: `voiceModelId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub model_id: Option<String>,
    /// The AWS region; default: the agent's `region`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z]{2}(-[a-z]+)+-\d+$"))]
    pub region: Option<String>,
}

/// Extended thinking settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reasoning {
    /// How hard the model may think before it answers: `low`, `medium` or `high` (sent as
    /// Nova 2's `reasoningConfig.maxReasoningEffort`).
    pub effort: ReasoningEffort,
}

/// How hard a model may think.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReasoningEffort {
    /// A little.
    Low,
    /// More.
    Medium,
    /// The most.
    High,
}

impl ReasoningEffort {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}
