//! What the caller heard of a reply they spoke over (voice). Nova Sonic gives no FINAL
//! text for an interrupted reply, so without more the conversation would keep none of it,
//! though the caller heard its start. The adapter reports the cut reply
//! ([`Input::VoiceReplyCut`](super::events::Input::VoiceReplyCut): the text it was to say,
//! the milliseconds of its audio sent, the voice's pace); the client may report how much
//! it really played (`bidi_audio_played.audio_played_ms`,
//! [`Input::AudioPlayed`](super::events::Input::AudioPlayed)). The part of the text that
//! fits the audio heard — at the voice's pace, ended at a word boundary — enters the
//! conversation as the assistant's words, and the record as an `assistant` entry marked
//! `interrupted`, when the caller's next words arrive (or at once, on the client's report).
//! Without a report, all audio sent counts as heard.

use super::events::Effect;
use super::session::Session;
use crate::model::{ContentBlock, Message, Role};

/// A reply cut off by a barge-in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Cut {
    text: String,
    sent_ms: u64,
    us_per_char: u64,
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

impl Session {
    /// A reply was cut off: remembered until what was heard of it is known.
    pub(super) fn voice_reply_cut(&mut self, text: String, sent_ms: u64, us_per_char: u64) -> Vec<Effect> {
        // A cancelled reply's audio was not passed on.
        if self.live.muted || text.trim().is_empty() {
            return Vec::new();
        }
        let effects = self.record_cut(None);
        self.cut = Some(Cut { text, sent_ms, us_per_char });
        effects
    }

    /// The client says how much of the cut reply it played.
    pub(super) fn audio_played(&mut self, played_ms: u64) -> Vec<Effect> {
        self.record_cut(Some(played_ms))
    }

    /// Records what was heard of the cut reply, if there is one: `played_ms` of it (at most
    /// what was sent), or all that was sent.
    pub(super) fn record_cut(&mut self, played_ms: Option<u64>) -> Vec<Effect> {
        let Some(cut) = self.cut.take() else { return Vec::new() };
        let played = played_ms.map_or(cut.sent_ms, |ms| ms.min(cut.sent_ms));
        let heard = heard_part(&cut.text, played, cut.us_per_char);
        if heard.is_empty() {
            return Vec::new();
        }
        let block = ContentBlock::Text(heard.to_owned());
        match self.messages.last_mut() {
            Some(last) if last.role == Role::Assistant => last.content.push(block),
            _ => self.messages.push(Message { role: Role::Assistant, content: vec![block] }),
        }
        let entry = serde_json::json!({ "text": heard, "interrupted": true, "audio_played_ms": played });
        vec![self.transcript("assistant", entry)]
    }
}

#[cfg(test)]
mod tests {
    use super::heard_part;

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
}
