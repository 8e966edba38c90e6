//! The OpenTelemetry GenAI semantic conventions' side of the metrics: their bucket
//! boundaries, the operation name, `gen_ai.system` of each provider, and the labels of one
//! agent's model calls in both the runtime's own form and the conventions'.

use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::Provider;

/// Buckets of `gen_ai.server.time_to_first_token` (seconds).
pub const TTFT_BUCKETS: &[f64] =
    &[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];
/// Buckets of `gen_ai.client.operation.duration` (seconds).
pub const DURATION_BUCKETS: &[f64] =
    &[0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
/// Buckets of `gen_ai.client.token.usage` (tokens).
pub const TOKEN_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];
/// `gen_ai.operation.name` of every model call here: Converse streams and Nova Sonic's
/// bidirectional streams are both chats.
pub const OPERATION: &str = "chat";

/// The labels of the GenAI series, in order.
pub(super) const GEN_AI: &[&str; 4] = &["agent", "gen_ai_operation_name", "gen_ai_system", "gen_ai_request_model"];

/// `gen_ai.system` of a model provider.
pub fn gen_ai_system(provider: Provider) -> &'static str {
    match provider {
        Provider::Bedrock => "aws.bedrock",
        Provider::Openai => "openai",
    }
}

/// The labels of one agent's model calls: ours (`agent`, `mode`, `model`) and the GenAI
/// conventions' (`gen_ai_system`, `gen_ai_request_model`).
#[derive(Clone, Copy, Debug)]
pub struct ModelLabels<'a> {
    /// The Agent's name.
    pub agent: &'a str,
    /// voice, text or hybrid.
    pub mode: &'static str,
    /// The model id asked for.
    pub model: &'a str,
    /// `gen_ai.system`.
    pub system: &'static str,
}

impl<'a> ModelLabels<'a> {
    /// The labels of `spec`'s text model calls.
    pub fn text(spec: &'a RuntimeSpec) -> Self {
        let system = gen_ai_system(spec.model.provider);
        Self { agent: &spec.agent.name, mode: spec.mode.as_str(), model: &spec.model.text_model_id, system }
    }

    /// The labels of `spec`'s Nova Sonic streams.
    pub fn voice(spec: &'a RuntimeSpec) -> Self {
        let (agent, mode, model) = (&spec.agent.name, spec.mode.as_str(), &spec.model.voice_model_id);
        Self { agent, mode, model, system: gen_ai_system(Provider::Bedrock) }
    }

    pub(super) fn ours(&self) -> [&str; 3] {
        [self.agent, self.mode, self.model]
    }

    pub(super) fn gen_ai(&self) -> [&str; 4] {
        [self.agent, OPERATION, self.system, self.model]
    }
}
