//! The voice fallback (`spec.model.voiceFallback`): when a session's Nova Sonic stream
//! cannot open because the service is throttled or unavailable (after the session's own
//! retries), it opens with the fallback's model, in the fallback's region, once. The move
//! is logged and counted in `switchboard_model_fallbacks_total`.

use aws_sdk_bedrockruntime::Client;
use switchboard_crds::RuntimeSpec;
use switchboard_models::ModelError;
use switchboard_models::bedrock::{BedrockConfig, build_client};
use switchboard_models::sonic::{SonicConfig, SonicEvents, SonicSession};

use super::super::metrics::Metrics;

/// The other model or region a voice session opens with.
#[derive(Debug)]
pub struct VoiceFallback {
    client: Client,
    model_id: String,
    region: Option<String>,
}

impl VoiceFallback {
    /// The fallback of `spec`, if it has one: a client for its region at that region's
    /// endpoint (or `bedrock`'s endpoint override: the simulator), or `primary` when the
    /// fallback stays in the agent's region.
    pub async fn connect(
        spec: &RuntimeSpec,
        bedrock: &BedrockConfig,
        primary: &Client,
    ) -> Result<Option<Self>, ModelError> {
        let Some(fallback) = &spec.model.voice_fallback else {
            return Ok(None);
        };
        let model_id = fallback.model_id.clone().unwrap_or_else(|| spec.model.voice_model_id.clone());
        let region = fallback.region.clone().filter(|r| *r != spec.model.region);
        let client = match &region {
            Some(region) => {
                let mut config = bedrock.clone();
                config.region = region.clone();
                build_client(&config).await?
            }
            None => primary.clone(),
        };
        Ok(Some(Self { client, model_id, region }))
    }

    /// `model` or `model@region`.
    fn label(&self) -> String {
        match &self.region {
            Some(region) => format!("{}@{region}", self.model_id),
            None => self.model_id.clone(),
        }
    }

    /// Opens the session with the fallback when `error` (opening it with the agent's own
    /// model) calls for one; returns `error` otherwise.
    pub async fn open(
        &self,
        spec: &RuntimeSpec,
        error: ModelError,
        mut config: SonicConfig,
        metrics: &Metrics,
    ) -> Result<(SonicSession, SonicEvents), ModelError> {
        if !error.calls_for_fallback() {
            return Err(error);
        }
        let (agent, mode, from, to) = (&spec.agent.name, spec.mode.as_str(), &spec.model.voice_model_id, self.label());
        metrics.fallbacks.with_label_values(&[agent, mode, from, &to, error.metric_label()]).inc();
        tracing::warn!(agent, from = %from, to = %to, reason = error.metric_label(), "the voice model stream falls back: {error}");
        config.model_id = self.model_id.clone();
        SonicSession::start(self.client.clone(), config).await
    }
}
