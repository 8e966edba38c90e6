//! What a voice session does besides relaying: the client's `session_update`, the filler
//! a long tool call gets ([`super::filler`]), and the dead air counted when the caller
//! waits for the agent's voice.

use std::time::Instant;

use switchboard_core::protocol::{ErrorCode, ServerMessage, SessionUpdate, TranscriptRole};
use switchboard_crds::Mode;

use super::super::agent::Exit;
use super::{Voice, filler};

impl Voice<'_> {
    /// What the caller hears of the agent's turn, from the messages sent: a pause of
    /// more than two seconds in its speech is counted.
    pub(super) fn heard(&mut self, message: &ServerMessage) {
        match message {
            ServerMessage::BidiAudioStream { .. } if self.dead_air.audio(Instant::now()) => {
                self.shared.metrics.silences.with_label_values(&[self.agent.core.name()]).inc();
            }
            ServerMessage::BidiSpeechStarted {}
            | ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, is_final: true, .. }
            | ServerMessage::BidiResponseComplete { .. }
            | ServerMessage::BidiInterruption {}
            | ServerMessage::ConsentRequest { .. } => self.dead_air.over(),
            _ => {}
        }
    }

    /// A tool call has run long: the model is asked to say a filler line now.
    pub(super) async fn filler(&mut self) -> Option<Exit> {
        let tool = self.fillers.due(Instant::now())?;
        let spec = self.agent.core.spec();
        let description = spec.tools.iter().find(|t| t.name == tool).map_or("", |t| t.description.as_str());
        let prompt = filler::filler_prompt(&tool, description);
        self.shared.metrics.fillers.with_label_values(&[spec.agent.name.as_str()]).inc();
        self.stream.send_text(prompt).await.err().map(|_| Exit::model_gone())
    }

    /// `session_update`: every setting it names applies, or none does (with a
    /// `bidi_error` saying why).
    pub(super) async fn update(&mut self, update: SessionUpdate) -> Option<Exit> {
        let modalities = match update.check() {
            Ok(modalities) => modalities,
            Err((code, message)) => return self.error(code, message).await,
        };
        let spec = self.agent.core.spec();
        if let Some(voice) = &update.voice
            && let Err(why) = switchboard_crds::agent::check_sonic_voice(&spec.model.voice_model_id, voice)
        {
            return self.error(ErrorCode::InvalidVoice, format!("{why}; nothing was changed")).await;
        }
        if let Some(modalities) = modalities
            && let Err(why) = modalities.check_voice_session(spec.mode == Mode::Hybrid)
        {
            let message = format!("agent {} {why}; nothing was changed", spec.agent.name);
            return self.error(ErrorCode::UnsupportedModality, message).await;
        }
        if let Some(voice) = &update.voice
            && self.stream.change_voice(voice.clone()).await.is_err()
        {
            return Some(Exit::model_gone());
        }
        if let Some(modalities) = modalities {
            self.audio_on = modalities.audio;
        }
        // What changed, for the client and the gateway (which keeps it for the session).
        let updated =
            ServerMessage::BidiSessionUpdated { voice: update.voice, modalities: modalities.map(|m| m.names()) };
        self.send(updated).await.err()
    }
}
