//! What drives a session: a text model called once per round ([`Drive::Text`]), or one
//! long-lived streaming voice model (Nova Sonic) that hears the user and speaks by itself
//! ([`Drive::Voice`]). The voice side's own bookkeeping lives in [`Voice`]: the typed texts
//! sent into the stream (to recognise the model's echo of them), a reply cut off by a
//! barge-in until what was heard of it is known, whether a user turn is open, and how much
//! of the conversation a new stream replays.

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

    /// Voice: `text` goes into the stream as typed text (nothing to do in text).
    pub(crate) fn remember_typed(&mut self, text: &str) {
        if let Some(voice) = self.voice_mut() {
            voice.remember_typed(text);
        }
    }

    /// The oldest `count` messages were compacted away: a stream replays fewer.
    pub(crate) fn forget(&mut self, count: usize) {
        if let Some(voice) = self.voice_mut() {
            voice.replay_len = voice.replay_len.saturating_sub(count);
        }
    }
}

impl Voice {
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
        text.remember_typed("hello");
        text.forget(3);
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
        drive.forget(2);
        drive.forget(10);
        let voice = drive.voice_mut().expect("voice");
        assert_eq!(voice.replay_len(), 0);
        assert!(voice.take_cut().is_some());
        assert!(voice.take_cut().is_none());
        assert!(drive.turn_open());
    }
}
