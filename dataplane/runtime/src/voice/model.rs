//! The Nova Sonic clients of one agent and how a session's stream opens (with the voice
//! fallback when the agent's model is throttled or unavailable).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_sdk_bedrockruntime::Client;
use switchboard_core::Session;
use switchboard_core::protocol::TranscriptRole;
use switchboard_crds::RuntimeSpec;
use switchboard_models::ModelError;
use switchboard_models::bedrock::{BedrockConfig, build_client};
use switchboard_models::sonic::{HistoryEntry, SonicConfig, SonicEvents, SonicSession, Speaker};

use super::fallback;

/// Concurrent Nova Sonic streams planned per SDK client (one HTTP/2 connection).
pub const STREAMS_PER_CLIENT: usize = 100;
/// Most SDK clients per agent.
pub const MAX_CLIENTS: usize = 16;
/// The Nova Sonic clients of one agent, used in turn.
#[derive(Debug)]
pub struct VoiceModel {
    clients: Vec<Client>,
    next: AtomicUsize,
    /// `model.voiceFallback`, when the agent has one.
    fallback: Option<fallback::VoiceFallback>,
}

impl VoiceModel {
    /// Clients for `spec` with `bedrock`'s settings (its endpoint and CA overrides
    /// applied), enough for the agent's session limit.
    pub async fn connect(spec: &RuntimeSpec, bedrock: &BedrockConfig) -> Result<Self, ModelError> {
        let mut config = bedrock.clone();
        config.region = spec.model.region.clone();
        if config.endpoint_url.is_none() {
            config.endpoint_url = spec.model.endpoint.clone();
        }
        let count = switchboard_models::pool::clients_for(
            spec.sessions.max_concurrent as usize,
            STREAMS_PER_CLIENT,
            MAX_CLIENTS,
        );
        let mut clients = Vec::with_capacity(count);
        for _ in 0..count {
            clients.push(build_client(&config).await?);
        }
        let fallback = match clients.first() {
            Some(primary) => fallback::VoiceFallback::connect(spec, bedrock, primary).await?,
            None => None,
        };
        Ok(Self { clients, next: AtomicUsize::new(0), fallback })
    }

    fn client(&self) -> Client {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len().max(1);
        self.clients[index].clone()
    }

    /// Opens the Nova Sonic session for `session`: the agent's model settings, the
    /// persona's voice (or `voice` from `session_start`), the core's system prompt and
    /// tools, and the carried history; its streams are replaced once `rotate_after` old, and
    /// the caller's audio goes to them in events of `audio_chunk` ([`SonicConfig::audio_chunk`]).
    /// When the agent's model is throttled or unavailable, the voice fallback opens it
    /// (counted in `metrics`).
    pub async fn open(
        &self,
        spec: &RuntimeSpec,
        session: &mut Session,
        voice: Option<&str>,
        (rotate_after, audio_chunk): (Duration, Duration),
        metrics: &crate::Metrics,
    ) -> Result<(SonicSession, SonicEvents), ModelError> {
        let voice = voice.unwrap_or(&spec.persona.spec.voice);
        let mut config = SonicConfig::from_settings(&spec.model, session.system_prompt(), voice);
        config.rotate_after = rotate_after;
        config.audio_chunk = audio_chunk;
        config.tools = session.voice_tools();
        config.history = session
            .voice_history()
            .into_iter()
            .map(|turn| match turn.role {
                TranscriptRole::User => HistoryEntry { speaker: Speaker::User, text: turn.text },
                TranscriptRole::Assistant => HistoryEntry { speaker: Speaker::Assistant, text: turn.text },
            })
            .collect();
        match (SonicSession::start(self.client(), config.clone()).await, &self.fallback) {
            (Err(error), Some(fallback)) => fallback.open(spec, error, config, metrics).await,
            (opened, _) => opened,
        }
    }
}
