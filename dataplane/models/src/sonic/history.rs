//! The conversation history a new stream replays: only what was really said — the user's
//! transcripts and typed text, and the assistant's FINAL (not interrupted) text — trimmed
//! to the service's caps (1 KB per message, 40 KB in all), starting with a USER message
//! and strictly alternating.

/// Largest replayed message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Largest replayed history, in bytes.
pub const MAX_TOTAL_BYTES: usize = 40 * 1024;

/// How far a forgotten message may go past the bytes to forget (the spaces that join a
/// speaker's consecutive messages here, where the count was made of them apart).
pub const FORGET_SLACK: usize = 16;

/// Who said it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

impl Speaker {
    /// The role on the wire.
    pub fn role(self) -> &'static str {
        match self {
            Self::User => "USER",
            Self::Assistant => "ASSISTANT",
        }
    }
}

/// One message of history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Who said it.
    pub speaker: Speaker,
    /// What was said.
    pub text: String,
}

impl HistoryEntry {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self { speaker: Speaker::User, text: text.into() }
    }

    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self { speaker: Speaker::Assistant, text: text.into() }
    }
}

/// The session's history (kept within a bound; the replay is trimmed further).
#[derive(Clone, Debug, Default)]
pub struct History {
    entries: Vec<HistoryEntry>,
    /// Counts the times old messages were dropped (which moves every [`Mark`]).
    epoch: u64,
}

/// A point in a [`History`] to go back to ([`History::rewind`]): valid while no old
/// messages are dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    entries: usize,
    last_len: usize,
    epoch: u64,
}

impl History {
    /// History starting with `entries`.
    pub fn new(entries: Vec<HistoryEntry>) -> Self {
        let mut history = Self::default();
        for entry in entries {
            history.push(entry);
        }
        history
    }

    /// Adds a message; consecutive messages of one speaker are joined.
    pub fn push(&mut self, entry: HistoryEntry) {
        if entry.text.trim().is_empty() {
            return;
        }
        match self.entries.last_mut() {
            Some(last) if last.speaker == entry.speaker => {
                last.text.push(' ');
                last.text.push_str(&entry.text);
            }
            _ => self.entries.push(entry),
        }
        // Keep memory bounded: far more than a replay can use.
        if self.entries.len() > 4 * MAX_TOTAL_BYTES / 64 {
            self.entries.drain(..self.entries.len() / 2);
            self.epoch += 1;
        }
    }

    /// Where the history ends now.
    pub fn mark(&self) -> Mark {
        let last_len = self.entries.last().map_or(0, |e| e.text.len());
        Mark { entries: self.entries.len(), last_len, epoch: self.epoch }
    }

    /// Drops everything added since `mark`; false (and nothing dropped) when the mark no
    /// longer holds (old messages were dropped since) or lies past the end.
    pub fn rewind(&mut self, mark: &Mark) -> bool {
        if mark.epoch != self.epoch || mark.entries > self.entries.len() {
            return false;
        }
        self.entries.truncate(mark.entries);
        if let Some(last) = self.entries.last_mut() {
            if mark.last_len > last.text.len() || !last.text.is_char_boundary(mark.last_len) {
                return false;
            }
            last.text.truncate(mark.last_len);
        }
        true
    }

    /// Drops the oldest messages whose text adds up to about `bytes` (each within
    /// [`FORGET_SLACK`] of what is left to drop): whole messages only, so what the caller's
    /// count and this history's joins disagree on is kept rather than lost.
    pub fn forget_oldest(&mut self, bytes: usize) {
        let mut left = bytes;
        let mut count = 0;
        for entry in &self.entries {
            if left == 0 || entry.text.len() > left + FORGET_SLACK {
                break;
            }
            left = left.saturating_sub(entry.text.len());
            count += 1;
        }
        self.entries.drain(..count);
        if count > 0 {
            self.epoch += 1;
        }
    }

    /// Everything kept.
    pub fn entries(&self) -> &[HistoryEntry] {
        &self.entries
    }

    /// The messages to replay: [`replayable`] of the history.
    pub fn replay(&self) -> Vec<HistoryEntry> {
        replayable(&self.entries, MAX_TOTAL_BYTES, MAX_MESSAGE_BYTES)
    }

    /// [`History::replay`] without the user's last words `tail` (asked again as input
    /// instead): taken off the end of the last message when it is the user's and ends with
    /// them.
    pub fn replay_without(&self, tail: &str) -> Vec<HistoryEntry> {
        let tail = tail.trim();
        let mut entries = self.entries.clone();
        if let Some(last) = entries.last_mut().filter(|e| e.speaker == Speaker::User && !tail.is_empty()) {
            let text = last.text.trim_end();
            if let Some(head) = text.strip_suffix(tail).filter(|h| h.is_empty() || h.ends_with(char::is_whitespace)) {
                last.text = head.trim_end().to_owned();
            }
        }
        replayable(&entries, MAX_TOTAL_BYTES, MAX_MESSAGE_BYTES)
    }
}

/// The most recent part of `entries` that fits the caps: each message cut to
/// `max_message` bytes (at a character boundary, keeping its start), as many of the newest
/// messages as fit in `max_total`, starting with a user message; same-speaker neighbours
/// are joined so the result alternates.
pub fn replayable(entries: &[HistoryEntry], max_total: usize, max_message: usize) -> Vec<HistoryEntry> {
    let mut merged: Vec<HistoryEntry> = Vec::new();
    for entry in entries.iter().filter(|e| !e.text.trim().is_empty()) {
        match merged.last_mut() {
            Some(last) if last.speaker == entry.speaker => {
                last.text.push(' ');
                last.text.push_str(&entry.text);
            }
            _ => merged.push(entry.clone()),
        }
    }
    let mut kept = Vec::new();
    let mut total = 0;
    for entry in merged.into_iter().rev() {
        let text = truncate(&entry.text, max_message);
        if total + text.len() > max_total {
            break;
        }
        total += text.len();
        kept.push(HistoryEntry { speaker: entry.speaker, text: text.to_owned() });
    }
    kept.reverse();
    while kept.first().is_some_and(|e| e.speaker != Speaker::User) {
        kept.remove(0);
    }
    kept
}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_starts_with_the_user_and_alternates() {
        let entries = vec![
            HistoryEntry::assistant("Hello, how can I help?"),
            HistoryEntry::user("balance"),
            HistoryEntry::user("please"),
            HistoryEntry::assistant("It is 5."),
        ];
        let replay = replayable(&entries, MAX_TOTAL_BYTES, MAX_MESSAGE_BYTES);
        assert_eq!(replay, vec![HistoryEntry::user("balance please"), HistoryEntry::assistant("It is 5.")]);
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let replay = replayable(&[HistoryEntry::user(long)], MAX_TOTAL_BYTES, MAX_MESSAGE_BYTES);
        assert_eq!(replay[0].text.len(), MAX_MESSAGE_BYTES);
        assert!(replay[0].text.chars().all(|c| c == 'é'));
    }

    #[test]
    fn the_oldest_messages_go_first_to_fit_the_total() {
        let entries: Vec<HistoryEntry> = (0..100)
            .map(|i| {
                let text = format!("{i:04}{}", "x".repeat(996));
                if i % 2 == 0 { HistoryEntry::user(text) } else { HistoryEntry::assistant(text) }
            })
            .collect();
        let replay = replayable(&entries, MAX_TOTAL_BYTES, MAX_MESSAGE_BYTES);
        let total: usize = replay.iter().map(|e| e.text.len()).sum();
        assert!(total <= MAX_TOTAL_BYTES, "{total}");
        assert_eq!(replay.first().map(|e| e.speaker), Some(Speaker::User));
        assert!(replay.last().is_some_and(|e| e.text.starts_with("0099")));
        assert!(replay.windows(2).all(|w| w[0].speaker != w[1].speaker));
        // 40 messages of 1,000 bytes fit; the oldest kept one is a user message.
        assert_eq!(replay.len(), 40);
    }

    #[test]
    fn forgetting_drops_whole_oldest_messages_and_keeps_one_it_would_cut() {
        let mut history = History::default();
        for (i, text) in ["aaaa", "bbbb", "cccccccc", "dd"].iter().enumerate() {
            history.push(if i % 2 == 0 { HistoryEntry::user(*text) } else { HistoryEntry::assistant(*text) });
        }
        history.forget_oldest(8);
        assert_eq!(history.entries(), &[HistoryEntry::user("cccccccc"), HistoryEntry::assistant("dd")]);
        let mut long = History::new(vec![HistoryEntry::user("x".repeat(100)), HistoryEntry::assistant("y")]);
        long.forget_oldest(50);
        assert_eq!(long.entries().len(), 2, "a message far past the count is kept");
        long.forget_oldest(1000);
        assert!(long.entries().is_empty());
    }

    #[test]
    fn a_rewind_drops_what_came_after_the_mark_unless_old_messages_went_since() {
        let mut history = History::new(vec![HistoryEntry::user("hi"), HistoryEntry::assistant("hello")]);
        history.push(HistoryEntry::user("one"));
        let mark = history.mark();
        history.push(HistoryEntry::user("two"));
        history.push(HistoryEntry::assistant("It is"));
        assert!(history.rewind(&mark));
        assert_eq!(history.entries().last(), Some(&HistoryEntry::user("one")));
        assert!(history.rewind(&mark), "rewinding to where it is changes nothing");
        history.push(HistoryEntry::assistant("yes"));
        history.forget_oldest(2);
        assert!(!history.rewind(&mark), "the mark moved with the forgotten messages");
        assert_eq!(history.entries().last(), Some(&HistoryEntry::assistant("yes")));
    }

    #[test]
    fn the_replay_without_the_users_last_words_ends_before_them() {
        let history = History::new(vec![
            HistoryEntry::user("hi"),
            HistoryEntry::assistant("hello"),
            HistoryEntry::user("one two"),
        ]);
        let before = |tail: &str| history.replay_without(tail).last().map(|e| e.text.clone());
        assert_eq!(before("two"), Some("one".into()));
        assert_eq!(before("one two"), Some("hello".into()));
        assert_eq!(before("wo"), Some("one two".into()), "whole words only");
        assert_eq!(before("hello"), Some("one two".into()), "only the user's last words");
        assert_eq!(history.replay_without("").len(), 3);
    }

    #[test]
    fn history_joins_same_speaker_messages_and_skips_empty_ones() {
        let mut history = History::default();
        history.push(HistoryEntry::user("a"));
        history.push(HistoryEntry::user(" "));
        history.push(HistoryEntry::user("b"));
        assert_eq!(history.entries(), &[HistoryEntry::user("a b")]);
    }
}
