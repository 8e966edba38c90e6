//! What the client sends in a voice session: its messages, each turned into an input for
//! the core or handled here (push-to-talk's end of input, `session_update`, an identity
//! assertion, audio sent before `session_start`), with a recoverable `bidi_error` for one
//! that does not apply to a voice session.

use std::time::Instant;

use switchboard_core::audio::Format;
use switchboard_core::protocol::{ClientMessage, ErrorCode};
use switchboard_core::{Input, Session, VoiceInput};
use switchboard_crds::Mode;

use super::super::agent::Exit;
use super::{Voice, audio};

impl Voice<'_> {
    /// Push-to-talk: the caller's turn ends now. The model hears the silence that ends a
    /// turn at once (audio time), instead of waiting for it in real time.
    async fn end_of_input(&mut self, session: &mut Session) -> Option<Exit> {
        self.turns.audio_ended(Instant::now());
        let speech = self.speech.end();
        for frame in audio::silence_frames(audio::END_OF_TURN_SILENCE_MS) {
            if self.stream.send_audio(frame).await.is_err() {
                return Some(Exit::model_gone());
            }
        }
        self.speech_changed(session, speech).await
    }

    pub(super) async fn client_message(&mut self, session: &mut Session, message: ClientMessage) -> Option<Exit> {
        let input = match message {
            ClientMessage::BidiTextInput { text, id } if self.agent.core.spec().mode == Mode::Hybrid => {
                self.relay.user_input(Instant::now());
                Input::UserText { text, id }
            }
            ClientMessage::BidiTextInput { .. } => {
                let message = "this agent runs in voice mode: speak (bidi_audio_input or binary PCM frames); typed text needs a hybrid agent";
                return self.error(ErrorCode::UnsupportedModality, message.into()).await;
            }
            ClientMessage::ToolConsent { tool_use_id, approved } => Input::Consent { tool_use_id, approved },
            // Checked and gathered by the core, which tells the model at `#` or a pause;
            // never logged here (keys may be a PIN).
            ClientMessage::BidiDtmf { digits } => Input::Dtmf { digits },
            ClientMessage::ClientToolResult { tool_use_id, result, error } => {
                Input::ClientToolResult { tool_use_id, result, error }
            }
            ClientMessage::TransferResult { tool_use_id, outcome, message } => {
                Input::TransferResult { tool_use_id, outcome, message }
            }
            ClientMessage::DigitsResult { tool_use_id, outcome, sent, message } => {
                Input::DigitsResult { tool_use_id, outcome, sent, message }
            }
            ClientMessage::Close {} => Input::End,
            ClientMessage::BidiCancel {} => Input::Cancel,
            ClientMessage::BidiAudioPlayed { audio_played_ms } => {
                Input::Voice(VoiceInput::AudioPlayed { ms: audio_played_ms })
            }
            ClientMessage::BidiAudioInputEnd {} => return self.end_of_input(session).await,
            ClientMessage::SessionUpdate(update) => return self.update(update).await,
            ClientMessage::SessionStart(_) => {
                return self.error(ErrorCode::AlreadyStarted, "the session has already started".into()).await;
            }
            ClientMessage::IdentityAssertion { assertion } => {
                let refused = self.identity.accept(&assertion).err()?;
                if refused.is_quiet() {
                    tracing::debug!("an identity assertion was not used: {refused}");
                    return None;
                }
                let (agent, session_id) = (self.agent.core.name(), self.trace.session_id());
                tracing::warn!(agent, session_id, "an identity assertion was refused: {refused}");
                return self.error(ErrorCode::IdentityRefused, refused.to_string()).await;
            }
            // The reader turns audio messages into checked frames on the audio channel.
            // (Only audio sent before `session_start` comes here: the default format.)
            ClientMessage::BidiAudioInput { audio } => match audio::decode_base64(&audio, Format::MODEL_INPUT) {
                Ok(pcm) => return self.audio(session, pcm).await,
                Err(error) => return self.error(error.code(), error.to_string()).await,
            },
        };
        let effects = session.handle(input, Instant::now());
        self.apply(session, effects).await
    }
}
