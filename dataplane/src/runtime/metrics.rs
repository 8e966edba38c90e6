//! The runtime's Prometheus metrics, one registry per process. Labels are bounded: agent,
//! mode, model, tool, plus the small fixed sets `direction`, `modality`, `outcome` and
//! `type` — never a session id. Histogram buckets follow the OpenTelemetry GenAI semantic
//! conventions (`gen_ai.server.time_to_first_token`, `gen_ai.client.operation.duration`).

use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

/// Buckets of `gen_ai.server.time_to_first_token` (seconds).
pub const TTFT_BUCKETS: &[f64] =
    &[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];
/// Buckets of `gen_ai.client.operation.duration` (seconds).
pub const DURATION_BUCKETS: &[f64] =
    &[0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// A metric could not be registered (a programming error: duplicate names).
#[derive(Debug, thiserror::Error)]
#[error("cannot register metric: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

/// Every metric of a runtime process.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    /// End of user input -> first reply text, per turn.
    pub turn_latency: HistogramVec,
    /// Model call start -> first token.
    pub time_to_first_token: HistogramVec,
    /// Whole model calls.
    pub model_call_duration: HistogramVec,
    /// Tokens by direction (`input`/`output`) and modality (`text`/`speech`).
    pub tokens: IntCounterVec,
    /// Tool calls by outcome (`success`/`error`/`cached`).
    pub tool_duration: HistogramVec,
    /// Sessions open now.
    pub sessions_active: IntGaugeVec,
    /// Sessions started.
    pub sessions_total: IntCounterVec,
    /// Handoffs made by an agent.
    pub handoffs: IntCounterVec,
    /// Errors by type (`model_*`, `invalid_json`, `rate_limited`, ...).
    pub errors: IntCounterVec,
    /// Voice: end of the user's speech (last voiced input frame, or typed text) -> first
    /// reply audio sent to the client. Includes the model's end-of-turn pause.
    pub time_to_first_audio: HistogramVec,
    /// Voice: model streams replaced, by reason (`rotation`, `voice_change`,
    /// `stream_ended`, an error type).
    pub stream_restarts: IntCounterVec,
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let histogram =
            |name: &str, help: &str, buckets: &[f64], labels: &[&str]| -> Result<HistogramVec, MetricsError> {
                let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels)?;
                registry.register(Box::new(h.clone()))?;
                Ok(h)
            };
        let counter = |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, MetricsError> {
            let c = IntCounterVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let model = &["agent", "mode", "model"];
        let turn_latency = histogram(
            "switchboard_turn_latency_seconds",
            "End of user input to the first reply text of the turn.",
            TTFT_BUCKETS,
            model,
        )?;
        let time_to_first_token = histogram(
            "switchboard_time_to_first_token_seconds",
            "Model call start to its first token (gen_ai.server.time_to_first_token).",
            TTFT_BUCKETS,
            model,
        )?;
        let model_call_duration = histogram(
            "switchboard_model_call_duration_seconds",
            "Whole model calls (gen_ai.client.operation.duration).",
            DURATION_BUCKETS,
            model,
        )?;
        let tokens = counter(
            "switchboard_tokens_total",
            "Model tokens by direction (input/output) and modality (text/speech).",
            &["agent", "mode", "model", "direction", "modality"],
        )?;
        let tool_duration = histogram(
            "switchboard_tool_duration_seconds",
            "Tool calls by outcome (success, error, cached).",
            DURATION_BUCKETS,
            &["agent", "tool", "outcome"],
        )?;
        let sessions_active =
            IntGaugeVec::new(Opts::new("switchboard_sessions_active", "Sessions open now."), &["agent", "mode"])?;
        registry.register(Box::new(sessions_active.clone()))?;
        let sessions_total = counter("switchboard_sessions_total", "Sessions started.", &["agent", "mode"])?;
        let handoffs = counter("switchboard_handoffs_total", "Handoffs made by an agent.", &["agent"])?;
        let errors = counter("switchboard_errors_total", "Errors by type.", &["agent", "type"])?;
        let time_to_first_audio = histogram(
            "switchboard_time_to_first_audio_seconds",
            "Voice: end of the user's speech (last voiced frame, or typed text) to the first reply audio sent.",
            TTFT_BUCKETS,
            model,
        )?;
        let stream_restarts = counter(
            "switchboard_model_stream_restarts_total",
            "Voice: model streams replaced, by reason (rotation, voice_change, stream_ended, error type).",
            &["agent", "reason"],
        )?;
        Ok(Self {
            registry,
            turn_latency,
            time_to_first_token,
            model_call_duration,
            tokens,
            tool_duration,
            sessions_active,
            sessions_total,
            handoffs,
            errors,
            time_to_first_audio,
            stream_restarts,
        })
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            return format!("# encoding metrics failed: {e}\n");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}
