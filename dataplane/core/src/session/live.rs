//! What a client can show of a session: its state (`bidi_session_state`, sent only when it
//! changes) and, in sessions with audio, the caller's speech (`bidi_speech_started` /
//! `bidi_speech_stopped`, each only on a change).
//!
//! [`Live`] owns the audible side and the state last sent. What is audible reaches the core
//! as [`VoiceInput::Activity`](crate::VoiceInput::Activity): the adapter's voice activity
//! detection on the caller's audio and the voice model's own events. The session reads its
//! state off itself after every input and hands it to [`Live::push_state`].

use crate::events::{Activity, Effect};
use crate::protocol::{ServerMessage, SessionState};

/// The audible side of a session and the state last sent.
#[derive(Clone, Debug, Default)]
pub(crate) struct Live {
    /// The state the client was last told.
    shown: Option<SessionState>,
    /// Voice: the caller is speaking.
    caller_speaking: bool,
    /// Voice: a reply's audio is flowing.
    reply_audio: bool,
    /// Voice: audio answered the open turn since it opened (or since the last tool
    /// results went to the model).
    replied: bool,
    /// Voice: the user cancelled; the model's output is dropped until their next words
    /// (a transcript of the caller, or typed text).
    muted: bool,
    /// Voice: the caller's turn went to the model, whose answer (or transcript) is due.
    heard: bool,
}

/// What the rest of the session says about a voice session's state.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct VoiceWork {
    /// A tool call runs.
    running: bool,
    /// A user turn is open.
    turn_open: bool,
    /// A tool call waits for the user's consent.
    awaits_consent: bool,
}

impl VoiceWork {
    /// The rest of the session now: whether a tool call runs (`tool_running`), a user turn
    /// is open (`turn_open`), and a tool call waits for the user's consent
    /// (`awaits_consent`).
    pub(crate) fn new(tool_running: bool, turn_open: bool, awaits_consent: bool) -> Self {
        Self { running: tool_running, turn_open, awaits_consent }
    }
}

impl Live {
    /// A voice session's state now.
    pub(crate) fn voice_state(&self, work: VoiceWork) -> SessionState {
        if self.caller_speaking {
            SessionState::Listening
        } else if self.reply_audio {
            SessionState::Speaking
        } else if work.running {
            SessionState::ExecutingTool
        } else if (work.turn_open && !self.replied || self.heard) && !work.awaits_consent {
            SessionState::Processing
        } else {
            SessionState::Ready
        }
    }

    /// Adds `bidi_session_state` to `effects` when `state` is not the one last sent: before
    /// a closing effect, so `ended` reaches the client before the session closes.
    pub(crate) fn push_state(&mut self, state: SessionState, effects: &mut Vec<Effect>) {
        if self.shown == Some(state) {
            return;
        }
        self.shown = Some(state);
        let message = Effect::Send(ServerMessage::BidiSessionState { state });
        match effects.iter().position(|e| matches!(e, Effect::Close { .. })) {
            Some(at) => effects.insert(at, message),
            None => effects.push(message),
        }
    }

    /// Whether the model's output is held back (the user cancelled its reply and has not
    /// spoken or typed since).
    pub(crate) fn muted(&self) -> bool {
        self.muted
    }

    /// Whether a reply's audio flows.
    pub(crate) fn reply_audio(&self) -> bool {
        self.reply_audio
    }

    /// What became audible, or stopped being so.
    pub(crate) fn activity(&mut self, activity: Activity) -> Vec<Effect> {
        match activity {
            Activity::SpeechStarted => self.caller_started(),
            Activity::SpeechStopped => {
                let effects = self.caller_stopped();
                self.heard = !self.muted;
                effects
            }
            Activity::SpeechFaded => self.caller_stopped(),
            Activity::ReplyAudioStarted => {
                self.heard = false;
                if !self.muted {
                    self.reply_audio = true;
                    self.replied = true;
                }
                Vec::new()
            }
            Activity::ReplyAudioEnded => {
                self.reply_audio = false;
                Vec::new()
            }
        }
    }

    /// The caller speaks. (A cancelled reply stays silent until their words reach the
    /// model: what it still says before that belongs to the cancelled reply.)
    pub(crate) fn caller_started(&mut self) -> Vec<Effect> {
        self.heard = false;
        if std::mem::replace(&mut self.caller_speaking, true) {
            return Vec::new();
        }
        vec![Effect::Send(ServerMessage::BidiSpeechStarted {})]
    }

    /// The caller's speech ended.
    pub(crate) fn caller_stopped(&mut self) -> Vec<Effect> {
        if !std::mem::replace(&mut self.caller_speaking, false) {
            return Vec::new();
        }
        vec![Effect::Send(ServerMessage::BidiSpeechStopped {})]
    }

    /// Barge-in: the reply's audio stops.
    pub(crate) fn barge_in(&mut self) {
        self.reply_audio = false;
    }

    /// The user's next words (typed) reached the model: its output is theirs again.
    pub(crate) fn unmute(&mut self) {
        self.muted = false;
    }

    /// The caller's words reached the model as a final transcript.
    pub(crate) fn heard_out(&mut self) {
        self.muted = false;
        self.heard = false;
    }

    /// The user cancelled: the reply's audio stops and what the model still says is dropped.
    pub(crate) fn mute(&mut self) {
        self.muted = true;
        self.reply_audio = false;
        self.heard = false;
    }

    /// A turn opened, or tool results went to the model: its answer is due again.
    pub(crate) fn answer_due(&mut self) {
        self.replied = false;
    }

    /// A completion ended; unless it waits for a tool, nothing of the caller is pending.
    pub(crate) fn completion_end(&mut self, waits_for_tool: bool) {
        if !waits_for_tool {
            self.heard = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(effects: &[Effect]) -> Vec<SessionState> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Send(ServerMessage::BidiSessionState { state }) => Some(*state),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_state_is_sent_on_a_change_before_a_close() {
        let mut live = Live::default();
        let mut effects = vec![Effect::Close { reason: "done".into() }];
        live.push_state(SessionState::Ended, &mut effects);
        assert!(matches!(effects[0], Effect::Send(ServerMessage::BidiSessionState { .. })));
        let mut again = Vec::new();
        live.push_state(SessionState::Ended, &mut again);
        assert!(states(&again).is_empty(), "only on a change");
    }

    #[test]
    fn speech_starts_and_stops_once_each() {
        let mut live = Live::default();
        assert_eq!(live.activity(Activity::SpeechStarted).len(), 1);
        assert!(live.activity(Activity::SpeechStarted).is_empty());
        assert_eq!(live.voice_state(VoiceWork::default()), SessionState::Listening);
        assert_eq!(live.activity(Activity::SpeechStopped).len(), 1);
        assert_eq!(live.voice_state(VoiceWork::default()), SessionState::Processing, "the model heard the caller");
        assert!(live.activity(Activity::SpeechFaded).is_empty());
    }

    #[test]
    fn a_muted_reply_is_not_heard() {
        let mut live = Live::default();
        live.mute();
        live.activity(Activity::ReplyAudioStarted);
        assert!(!live.reply_audio() && live.muted());
        let work = VoiceWork { turn_open: true, ..Default::default() };
        assert_eq!(live.voice_state(work), SessionState::Processing, "not answered yet");
        live.heard_out();
        live.activity(Activity::ReplyAudioStarted);
        assert_eq!(live.voice_state(work), SessionState::Speaking);
        live.activity(Activity::ReplyAudioEnded);
        assert_eq!(live.voice_state(work), SessionState::Ready, "answered");
        let waiting = VoiceWork { awaits_consent: true, ..work };
        live.answer_due();
        assert_eq!(live.voice_state(waiting), SessionState::Ready, "a consent request waits for the user");
    }
}
