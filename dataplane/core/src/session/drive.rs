//! What drives a session: a text model called once per round ([`Drive::Text`]), or one
//! long-lived streaming voice model (Nova Sonic) that hears the user and speaks by itself
//! ([`Drive::Voice`]). The voice side's own bookkeeping lives in [`Voice`]: the typed texts
//! sent into the stream (to recognise the model's echo of them), a reply cut off by a
//! barge-in until what was heard of it is known, whether a user turn is open, and how much
//! of the conversation a new stream replays. What only a stream does comes back from it as
//! a [`VoiceEffect`]: text sent into the stream (remembered as it goes), the history a new
//! stream forgets after compaction.
//!
//! The session asks which drive it has only where the two genuinely differ: typed text
//! (a model call, or text into the stream), voice inputs (a text session ignores them), the
//! request a handoff carries (called with, or sent into the stream), who answers a round of
//! tool results (another call, or the stream), when to compact (before each call, or
//! between turns; a stream replays at most `VOICE_REPLAY_TOKENS`), what `bidi_cancel`
//! stops, the state a client is shown, and a skill's result (a stream's prompt is fixed, so
//! the result carries the skill). Everything else is the same turn, in `flow`.

use crate::events::{Effect, VoiceEffect};

use super::heard::Cut;

/// Most typed texts remembered for recognising the voice model's echo of them.
const MAX_TYPED_PENDING: usize = 16;

/// What drives the session.
#[derive(Debug)]
pub(crate) enum Drive {
    /// A text model, called once per round.
    Text,
    /// A streaming voice model, with its own state.
    Voice(Voice),
}

/// A voice session's own state.
#[derive(Debug, Default)]
pub(crate) struct Voice {
    /// Typed texts sent into the stream, in case the model echoes them.
    typed: Vec<String>,
    /// A reply cut off by a barge-in, until what was heard of it is recorded.
    cut: Option<Cut>,
    /// A user turn is open (its `bidi_response_complete` is still due).
    turn_open: bool,
    /// How many of the conversation's messages a new stream replays as history.
    replay_len: usize,
}

impl Drive {
    /// A drive of the kind asked for.
    pub(crate) fn new(voice: bool) -> Self {
        if voice { Self::Voice(Voice::default()) } else { Self::Text }
    }

    /// Whether a streaming voice model drives the session.
    pub(crate) fn is_voice(&self) -> bool {
        matches!(self, Self::Voice(_))
    }

    /// The voice side, in a voice session.
    pub(crate) fn voice(&self) -> Option<&Voice> {
        match self {
            Self::Voice(voice) => Some(voice),
            Self::Text => None,
        }
    }

    /// The voice side, in a voice session, to change.
    pub(crate) fn voice_mut(&mut self) -> Option<&mut Voice> {
        match self {
            Self::Voice(voice) => Some(voice),
            Self::Text => None,
        }
    }

    /// Whether a voice turn is open (never in a text session).
    pub(crate) fn turn_open(&self) -> bool {
        self.voice().is_some_and(Voice::turn_open)
    }

    /// Voice: the model is asked to put a question to the caller in words (`question`, sent
    /// into the stream as text; its echo is not the caller's answer). A text session shows
    /// the client the request itself: nothing.
    pub(crate) fn ask_caller(&mut self, question: impl FnOnce() -> String) -> Option<Effect> {
        let voice = self.voice_mut()?;
        Some(voice.send_text(question()))
    }

    /// The oldest `count` messages, `bytes` of text of them spoken, were compacted away: a
    /// stream replays fewer, and is told to forget them. Nothing to do in text.
    pub(crate) fn forget(&mut self, count: usize, bytes: usize) -> Option<Effect> {
        let voice = self.voice_mut()?;
        voice.replay_len = voice.replay_len.saturating_sub(count);
        Some(Effect::Voice(VoiceEffect::ForgetHistory { bytes }))
    }
}

impl Voice {
    /// `text` goes into the stream as text, remembered to recognise the model's echo of it.
    pub(crate) fn send_text(&mut self, text: String) -> Effect {
        self.remember_typed(&text);
        Effect::Voice(VoiceEffect::SendText(text))
    }

    /// Text sent into the stream that the model may echo as the user's: recognised then.
    pub(crate) fn remember_typed(&mut self, text: &str) {
        if self.typed.len() >= MAX_TYPED_PENDING {
            self.typed.remove(0);
        }
        self.typed.push(text.trim().to_owned());
    }

    /// Whether `text` (trimmed) is the model's echo of typed text; the echo is recognised once.
    pub(crate) fn take_echo(&mut self, text: &str) -> bool {
        match self.typed.iter().position(|t| t == text) {
            Some(index) => {
                self.typed.remove(index);
                true
            }
            None => false,
        }
    }

    /// A reply was cut off: remembered until what was heard of it is known.
    pub(crate) fn set_cut(&mut self, cut: Cut) {
        self.cut = Some(cut);
    }

    /// The cut reply, once.
    pub(crate) fn take_cut(&mut self) -> Option<Cut> {
        self.cut.take()
    }

    /// Whether a user turn is open.
    pub(crate) fn turn_open(&self) -> bool {
        self.turn_open
    }

    /// A user turn opens (`open`) or closes; returns whether one was open.
    pub(crate) fn set_turn_open(&mut self, open: bool) -> bool {
        std::mem::replace(&mut self.turn_open, open)
    }

    /// How many messages a new stream replays.
    pub(crate) fn replay_len(&self) -> usize {
        self.replay_len
    }

    /// A new stream replays the first `len` messages.
    pub(crate) fn set_replay_len(&mut self, len: usize) {
        self.replay_len = len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_has_no_voice_state() {
        let mut text = Drive::new(false);
        assert!(!text.is_voice() && !text.turn_open());
        assert_eq!(text.ask_caller(|| "hello".into()), None);
        assert_eq!(text.forget(3, 30), None);
        assert!(text.voice().is_none());
    }

    #[test]
    fn an_echo_is_recognised_once_and_the_memory_is_bounded() {
        let mut voice = Voice::default();
        voice.remember_typed("  hello ");
        assert!(voice.take_echo("hello"));
        assert!(!voice.take_echo("hello"), "once");
        for i in 0..=MAX_TYPED_PENDING {
            voice.remember_typed(&format!("typed {i}"));
        }
        assert!(!voice.take_echo("typed 0"), "the oldest was forgotten");
        assert!(voice.take_echo(&format!("typed {MAX_TYPED_PENDING}")));
    }

    #[test]
    fn the_replay_shrinks_with_compaction_and_the_cut_is_taken_once() {
        let mut drive = Drive::new(true);
        let voice = drive.voice_mut().expect("voice");
        voice.set_replay_len(5);
        voice.set_cut(Cut::new("Once upon".into(), 100, 10_000));
        assert!(!voice.set_turn_open(true));
        assert_eq!(drive.forget(2, 20), Some(Effect::Voice(VoiceEffect::ForgetHistory { bytes: 20 })));
        drive.forget(10, 100);
        let voice = drive.voice_mut().expect("voice");
        assert_eq!(voice.replay_len(), 0);
        assert!(voice.take_cut().is_some());
        assert!(voice.take_cut().is_none());
        assert!(drive.turn_open());
    }

    #[test]
    fn a_question_for_the_caller_goes_into_the_stream_and_its_echo_is_recognised() {
        let mut drive = Drive::new(true);
        let asked = drive.ask_caller(|| "(Ask whether to go ahead.)".into());
        assert_eq!(asked, Some(Effect::Voice(VoiceEffect::SendText("(Ask whether to go ahead.)".into()))));
        let voice = drive.voice_mut().expect("voice");
        assert!(voice.take_echo("(Ask whether to go ahead.)"), "the model's echo is not the caller's answer");
        let sent = voice.send_text(" typed ".into());
        assert_eq!(sent, Effect::Voice(VoiceEffect::SendText(" typed ".into())), "sent as given");
        assert!(voice.take_echo("typed"), "recognised trimmed");
    }
}
