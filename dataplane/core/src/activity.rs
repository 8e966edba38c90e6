//! What a client can show of a session: its state (`bidi_session_state`, sent only when it
//! changes) and, in sessions with audio, the caller's speech (`bidi_speech_started` /
//! `bidi_speech_stopped`, each only on a change).
//!
//! The state is read off the session after every input ([`Session::state_now`]): the phase
//! of the turn, the tool calls under way and — voice — whether the caller speaks and
//! whether the reply's audio flows. What is audible reaches the core as
//! [`Input::VoiceActivity`](super::events::Input::VoiceActivity): the adapter's voice
//! activity detection on the caller's audio and the voice model's own events.

use super::events::{Activity, Effect};
use super::session::{Phase, Session};
use crate::protocol::{ServerMessage, SessionState};

/// The audible side of a session and the state last sent.
#[derive(Clone, Debug, Default)]
pub(super) struct Live {
    /// The state the client was last told.
    shown: Option<SessionState>,
    /// Voice: the caller is speaking.
    pub(super) caller_speaking: bool,
    /// Voice: a reply's audio is flowing.
    pub(super) reply_audio: bool,
    /// Voice: audio answered the open turn since it opened (or since the last tool
    /// results went to the model).
    pub(super) replied: bool,
    /// Voice: the user cancelled; the model's output is dropped until their next words
    /// (a transcript of the caller, or typed text).
    pub(super) muted: bool,
    /// Voice: the caller's turn went to the model, whose answer (or transcript) is due.
    pub(super) heard: bool,
}

impl Session {
    /// What the session is doing now; `None` once it moved to another agent (that agent's
    /// session says what it does).
    pub fn state_now(&self) -> Option<SessionState> {
        let running = self.calls.iter().any(|c| c.running);
        match self.phase {
            Phase::HandedOff => return None,
            Phase::Ended => return Some(SessionState::Ended),
            _ => {}
        }
        if self.voice {
            let state = if self.live.caller_speaking {
                SessionState::Listening
            } else if self.live.reply_audio {
                SessionState::Speaking
            } else if running {
                SessionState::ExecutingTool
            } else if (self.turn_open && !self.live.replied || self.live.heard) && !self.awaits_consent() {
                SessionState::Processing
            } else {
                SessionState::Ready
            };
            return Some(state);
        }
        Some(match self.phase {
            Phase::Model => SessionState::Processing,
            Phase::Tools if running => SessionState::ExecutingTool,
            _ => SessionState::Ready,
        })
    }

    /// Voice: whether the model's output is held back (the user cancelled its reply and has
    /// not spoken or typed since).
    pub fn output_muted(&self) -> bool {
        self.live.muted
    }

    /// Whether a tool call waits for the user's consent.
    pub fn awaits_consent(&self) -> bool {
        self.calls.iter().any(|c| c.awaiting_consent)
    }

    /// Adds `bidi_session_state` to `effects` when the state changed: before a closing
    /// effect, so `ended` reaches the client before the session closes.
    pub(super) fn push_state(&mut self, effects: &mut Vec<Effect>) {
        let Some(state) = self.state_now() else { return };
        if self.live.shown == Some(state) {
            return;
        }
        self.live.shown = Some(state);
        let message = Effect::Send(ServerMessage::BidiSessionState { state });
        match effects.iter().position(|e| matches!(e, Effect::Close { .. })) {
            Some(at) => effects.insert(at, message),
            None => effects.push(message),
        }
    }

    /// What became audible, or stopped being so.
    pub(super) fn voice_activity(&mut self, activity: Activity) -> Vec<Effect> {
        match activity {
            Activity::SpeechStarted => self.caller_started(),
            Activity::SpeechStopped => {
                let effects = self.caller_stopped();
                self.live.heard = !self.live.muted;
                effects
            }
            Activity::SpeechFaded => self.caller_stopped(),
            Activity::ReplyAudioStarted => {
                self.live.heard = false;
                if !self.live.muted {
                    self.live.reply_audio = true;
                    self.live.replied = true;
                }
                Vec::new()
            }
            Activity::ReplyAudioEnded => {
                self.live.reply_audio = false;
                Vec::new()
            }
        }
    }

    /// The caller speaks. (A cancelled reply stays silent until their words reach the
    /// model: what it still says before that belongs to the cancelled reply.)
    pub(super) fn caller_started(&mut self) -> Vec<Effect> {
        self.live.heard = false;
        if std::mem::replace(&mut self.live.caller_speaking, true) {
            return Vec::new();
        }
        vec![Effect::Send(ServerMessage::BidiSpeechStarted {})]
    }

    /// The caller's speech ended.
    pub(super) fn caller_stopped(&mut self) -> Vec<Effect> {
        if !std::mem::replace(&mut self.live.caller_speaking, false) {
            return Vec::new();
        }
        vec![Effect::Send(ServerMessage::BidiSpeechStopped {})]
    }
}
