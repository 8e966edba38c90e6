//! What the caller heard of a reply they spoke over (voice). Nova Sonic gives no FINAL
//! text for an interrupted reply, so without more the conversation would keep none of it,
//! though the caller heard its start. The adapter reports the cut reply
//! ([`VoiceInput::ReplyCut`](crate::VoiceInput::ReplyCut): the text it was to say, the
//! milliseconds of its audio sent, the voice's pace); the client may report how much it
//! really played (`bidi_audio_played.audio_played_ms`,
//! [`VoiceInput::AudioPlayed`](crate::VoiceInput::AudioPlayed)). The part of the text that fits the
//! audio heard — at the voice's pace, ended at a word boundary — enters the conversation as
//! the assistant's words, and the record as an `assistant` entry marked `interrupted`, when
//! the caller's next words arrive (or at once, on the client's report). Without a report,
//! all audio sent counts as heard.
//!
//! This module owns the [`Cut`] reply and the arithmetic; the voice state keeps the cut
//! until it is recorded.

/// A reply cut off by a barge-in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cut {
    text: String,
    sent_ms: u64,
    us_per_char: u64,
}

impl Cut {
    /// The reply that was to say `text`, of which `sent_ms` of audio went out, at
    /// `us_per_char` microseconds a character.
    pub(crate) fn new(text: String, sent_ms: u64, us_per_char: u64) -> Self {
        Self { text, sent_ms, us_per_char }
    }

    /// What was heard of it when `played_ms` of it played (at most what was sent; `None`:
    /// all that was sent), and the milliseconds that counted. Empty when not a word was.
    pub(crate) fn heard(&self, played_ms: Option<u64>) -> (&str, u64) {
        let played = played_ms.map_or(self.sent_ms, |ms| ms.min(self.sent_ms));
        (heard_part(&self.text, played, self.us_per_char), played)
    }
}

/// The start of `text` said in `played_ms` at `us_per_char`: whole words, or all of it.
pub fn heard_part(text: &str, played_ms: u64, us_per_char: u64) -> &str {
    let text = text.trim();
    let chars = usize::try_from(played_ms.saturating_mul(1000) / us_per_char.max(1)).unwrap_or(usize::MAX);
    let Some((end, _)) = text.char_indices().nth(chars) else { return text };
    // Cut before the word the audio stopped in.
    let head = &text[..end];
    match text[end..].starts_with(char::is_whitespace) {
        true => head.trim_end(),
        false => head.rfind(char::is_whitespace).map_or("", |space| head[..space].trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::{Cut, heard_part};

    #[test]
    fn the_heard_part_is_whole_words_at_the_voices_pace() {
        let text = "Once upon a time there was a bank";
        // 10 ms a character: 100 ms is 10 characters, "Once upon " -> "Once upon".
        assert_eq!(heard_part(text, 100, 10_000), "Once upon");
        assert_eq!(heard_part(text, 90, 10_000), "Once upon", "the cut falls on the space");
        assert_eq!(heard_part(text, 80, 10_000), "Once", "a word cut in the middle is not heard");
        assert_eq!(heard_part(text, 30, 10_000), "", "not even the first word");
        assert_eq!(heard_part(text, 10_000, 10_000), text, "all of it");
        assert_eq!(heard_part("  é è ê  ", 30, 10_000), "é è", "characters, not bytes");
        assert_eq!(heard_part(text, 100, 0), text, "no pace: all");
    }

    #[test]
    fn a_cut_counts_what_was_sent_at_most() {
        let cut = Cut::new("Once upon a time".into(), 100, 10_000);
        assert_eq!(cut.heard(None), ("Once upon", 100), "no report: all that was sent");
        assert_eq!(cut.heard(Some(50)), ("Once", 50));
        assert_eq!(cut.heard(Some(5_000)), ("Once upon", 100), "no more than was sent");
    }
}
