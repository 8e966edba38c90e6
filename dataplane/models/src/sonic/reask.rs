//! Re-asking: the user's words that a lost stream owed a reply for.
//!
//! The service may end a stream, or fail it, while the model is about to answer or in the
//! middle of its answer. The user was heard (their FINAL transcript came, or their typed
//! text was sent), the reply never finished — and a replacement stream never answers
//! replayed history. So the session keeps the user's words since the last complete reply
//! ([`Unanswered`]), and when a stream is lost reactively it asks the replacement to
//! answer them ([`Unanswered::take`]): the history is rewound to before them (what the cut
//! reply had said goes with it), they go back in as the user's, are left out of the
//! replay, and are sent again as interactive USER text after it. A reply's end settles
//! the words heard before it started (words heard while it was under way wait for the
//! next one); a tool call or a barge-in settles all of them (asked again, a tool would run
//! twice; a barge-in brings new words).
//!
//! Bounds: each utterance is asked again at most once (a replacement that is lost
//! mid-reply too moves on: its words stay in the history, unanswered); words whose reply
//! showed no sign of coming for [`STALE_AFTER`] are not asked again (the model chose not
//! to answer them). Should the replacement show the re-asked text as a USER transcript,
//! [`EchoGuard`] holds that echo back: the user's words are not reported twice.

use std::time::Duration;

use tokio::time::Instant;

use super::events::{ContentKind, Role, SonicEvent};
use super::history::Mark;

/// How long after the last sign of a reply (the user's words, then the reply's output) its
/// words are still asked again.
pub const STALE_AFTER: Duration = Duration::from_secs(15);

/// Most events [`EchoGuard`] holds back while it reads a USER transcript.
const MAX_HELD: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Utterance {
    text: String,
    reasked: bool,
}

/// The user's words since the last complete reply.
#[derive(Debug, Default)]
pub struct Unanswered {
    utterances: Vec<Utterance>,
    /// The history before the first of them.
    mark: Option<Mark>,
    /// The last sign the reply was coming.
    progress: Option<Instant>,
    /// How many of them the reply under way answers (those heard before it started).
    answering: Option<usize>,
}

/// The words a replacement stream is asked to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reask {
    /// Every unanswered utterance, joined: the user's part of the history again.
    pub said: String,
    /// Those not asked again before: sent as interactive USER text.
    pub ask: String,
    /// The history before them.
    pub mark: Option<Mark>,
}

impl Unanswered {
    /// The user said (or typed) `text`; `mark` is the history before it.
    pub fn heard(&mut self, text: &str, mark: Mark, now: Instant) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if self.utterances.is_empty() {
            self.mark = Some(mark);
        }
        self.utterances.push(Utterance { text: text.to_owned(), reasked: false });
        self.progress = Some(now);
    }

    /// The reply is under way (its output came at `now`): it answers the words heard so
    /// far.
    pub fn progress(&mut self, now: Instant) {
        if !self.utterances.is_empty() {
            self.progress = Some(now);
            self.answering.get_or_insert(self.utterances.len());
        }
    }

    /// A reply ended: the words heard before it started are settled; words heard while it
    /// was under way wait for the next reply, from `mark` (the history now) on.
    pub fn replied(&mut self, mark: Mark) {
        let answered = self.answering.take().unwrap_or(self.utterances.len());
        self.utterances.drain(..answered.min(self.utterances.len()));
        if self.utterances.is_empty() {
            self.settled();
        } else {
            self.mark = Some(mark);
        }
    }

    /// Whether words wait for a reply.
    pub fn is_pending(&self) -> bool {
        !self.utterances.is_empty()
    }

    /// The reply came (or the words were settled otherwise).
    pub fn settled(&mut self) {
        *self = Self::default();
    }

    /// The stream was lost at `now`: the words to ask the replacement, if any. Each
    /// utterance is asked again once; words already asked again, or whose reply showed no
    /// sign for [`STALE_AFTER`], are let go.
    pub fn take(&mut self, now: Instant) -> Option<Reask> {
        let fresh = self.progress.is_some_and(|at| now.saturating_duration_since(at) <= STALE_AFTER);
        let ask = join(self.utterances.iter().filter(|u| !u.reasked));
        if !fresh || ask.is_empty() {
            self.settled();
            return None;
        }
        let said = join(self.utterances.iter());
        for utterance in &mut self.utterances {
            utterance.reasked = true;
        }
        // The replacement's reply to them counts from when it is asked, and answers them all.
        self.progress = Some(now);
        self.answering = None;
        Some(Reask { said, ask, mark: self.mark.clone() })
    }
}

fn join<'a>(utterances: impl Iterator<Item = &'a Utterance>) -> String {
    utterances.map(|u| u.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// Holds back a stream's echo of re-asked text as a USER transcript, until the reply
/// starts. A USER transcript with other words passes, in order, once it ended.
#[derive(Debug, Default)]
pub struct EchoGuard {
    expected: Option<String>,
    /// The USER text content being read, its text, and the events held meanwhile.
    content: Option<String>,
    text: String,
    held: Vec<SonicEvent>,
}

impl EchoGuard {
    /// The stream was asked `text` again.
    pub fn expect(&mut self, text: &str) {
        *self = Self { expected: Some(text.trim().to_owned()), ..Self::default() };
    }

    /// A new stream that was asked nothing again.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Passes `event` on to `out`, holds it, or drops it (with the echo it belongs to).
    pub fn filter(&mut self, event: SonicEvent, out: &mut Vec<SonicEvent>) {
        let Some(expected) = &self.expected else {
            out.push(event);
            return;
        };
        let Some(reading) = &self.content else {
            match &event {
                SonicEvent::ContentStart { content_id, kind: ContentKind::Text, role: Role::User, .. } => {
                    self.content = Some(content_id.clone());
                    self.held.push(event);
                }
                SonicEvent::ContentStart { role: Role::Assistant | Role::Tool, .. } => {
                    // The reply starts: an echo would have come before it.
                    self.reset();
                    out.push(event);
                }
                _ => out.push(event),
            }
            return;
        };
        let ended = matches!(&event, SonicEvent::ContentEnd { content_id, .. } if content_id == reading);
        if let SonicEvent::Text { content_id, text, .. } = &event
            && content_id == reading
        {
            self.text.push_str(text);
        }
        if ended && self.text.trim() == expected {
            self.reset();
            return;
        }
        self.held.push(event);
        if ended || self.held.len() > MAX_HELD {
            out.append(&mut self.held);
            self.content = None;
            self.text.clear();
            if !ended {
                self.expected = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sonic::events::StopReason;
    use crate::sonic::history::{History, HistoryEntry};

    fn mark() -> Mark {
        History::new(vec![HistoryEntry::user("earlier")]).mark()
    }

    #[test]
    fn unanswered_words_are_asked_again_once_then_let_go() {
        let (mut words, now) = (Unanswered::default(), Instant::now());
        assert_eq!(words.take(now), None, "nothing said, nothing asked");
        words.heard("What are your hours?", mark(), now);
        let reask = words.take(now + Duration::from_secs(1)).expect("asked again");
        assert_eq!((reask.said.as_str(), reask.ask.as_str()), ("What are your hours?", "What are your hours?"));
        assert_eq!(reask.mark, Some(mark()));
        assert!(words.is_pending(), "still owed a reply");
        assert_eq!(words.take(now + Duration::from_secs(2)), None, "the replacement was lost too: let go");
        assert!(!words.is_pending());
    }

    #[test]
    fn new_words_after_a_reask_are_asked_and_the_reasked_ones_are_not_asked_twice() {
        let (mut words, now) = (Unanswered::default(), Instant::now());
        words.heard("one", mark(), now);
        words.take(now).expect("asked again");
        words.heard("two", History::default().mark(), now);
        let reask = words.take(now).expect("the new words");
        assert_eq!((reask.said.as_str(), reask.ask.as_str()), ("one two", "two"));
        assert_eq!(reask.mark, Some(mark()), "the history before the first of them");
    }

    #[test]
    fn words_heard_while_a_reply_was_under_way_wait_for_the_next_one() {
        let (mut words, now) = (Unanswered::default(), Instant::now());
        words.heard("one", mark(), now);
        words.progress(now);
        words.heard("two", mark(), now);
        words.progress(now);
        let after = History::new(vec![HistoryEntry::user("one two"), HistoryEntry::assistant("You said one.")]).mark();
        words.replied(after.clone());
        let reask = words.take(now).expect("two is still owed");
        assert_eq!((reask.said.as_str(), reask.ask.as_str(), reask.mark), ("two", "two", Some(after)));
        words.replied(History::default().mark());
        assert!(!words.is_pending(), "no reply started: all it could answer is settled");
    }

    #[test]
    fn a_settled_reply_or_a_stale_one_asks_nothing() {
        let (mut words, now) = (Unanswered::default(), Instant::now());
        words.heard("one", mark(), now);
        words.settled();
        assert_eq!(words.take(now), None);
        words.heard("  ", mark(), now);
        assert!(!words.is_pending(), "no words");
        words.heard("uh-huh", mark(), now);
        assert_eq!(words.take(now + STALE_AFTER + Duration::from_millis(1)), None, "the model chose not to answer");
        words.heard("a story please", mark(), now);
        words.progress(now + STALE_AFTER);
        assert!(words.take(now + STALE_AFTER * 2).is_some(), "a long reply was still coming");
    }

    fn start(id: &str, role: Role) -> SonicEvent {
        SonicEvent::ContentStart { content_id: id.into(), kind: ContentKind::Text, role, stage: None }
    }

    fn text(id: &str, text: &str) -> SonicEvent {
        SonicEvent::Text { content_id: id.into(), role: Role::User, stage: None, text: text.into() }
    }

    fn end(id: &str) -> SonicEvent {
        SonicEvent::ContentEnd { content_id: id.into(), kind: ContentKind::Text, stop_reason: StopReason::EndTurn }
    }

    fn run(guard: &mut EchoGuard, events: Vec<SonicEvent>) -> Vec<String> {
        let mut out = Vec::new();
        for event in events {
            guard.filter(event, &mut out);
        }
        out.iter().map(|e| format!("{e:?}")).collect()
    }

    #[test]
    fn the_echo_of_reasked_words_is_dropped_and_other_words_pass_in_order() {
        let mut guard = EchoGuard::default();
        guard.expect(" hours? ");
        let passed = run(&mut guard, vec![start("u1", Role::User), text("u1", "stop"), end("u1")]);
        assert_eq!(passed.len(), 3, "other words pass once their transcript ended: {passed:?}");
        assert!(passed[1].contains("stop"));
        let passed = run(&mut guard, vec![start("u2", Role::User), text("u2", "hours?"), end("u2")]);
        assert!(passed.is_empty(), "the echo: {passed:?}");
        let passed = run(&mut guard, vec![start("u3", Role::User), text("u3", "hours?"), end("u3")]);
        assert_eq!(passed.len(), 3, "one echo only");
    }

    #[test]
    fn the_reply_ends_the_wait_for_an_echo_and_a_guard_that_expects_nothing_passes_all() {
        let mut guard = EchoGuard::default();
        assert_eq!(run(&mut guard, vec![start("u", Role::User), text("u", "x"), end("u")]).len(), 3);
        guard.expect("x");
        assert_eq!(run(&mut guard, vec![start("a", Role::Assistant), end("a")]).len(), 2);
        assert_eq!(run(&mut guard, vec![start("u", Role::User), text("u", "x"), end("u")]).len(), 3, "after it");
        guard.expect("x");
        let mut events = vec![start("u", Role::User)];
        events.extend((0..MAX_HELD).map(|_| text("u", "y")));
        assert_eq!(run(&mut guard, events).len(), MAX_HELD + 1, "released when too much is held");
        assert_eq!(run(&mut guard, vec![end("u")]).len(), 1, "and the guard no longer waits");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Heard,
        Progress,
        Replied,
        Settled,
        Lost,
        Wait(u64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            3 => Just(Op::Heard),
            2 => Just(Op::Progress),
            1 => Just(Op::Replied),
            1 => Just(Op::Settled),
            2 => Just(Op::Lost),
            1 => (0..20_000u64).prop_map(Op::Wait),
        ]
    }

    proptest::proptest! {
        #[test]
        fn each_utterance_is_asked_again_at_most_once_and_only_if_heard(ops in proptest::collection::vec(op(), 0..60)) {
            let (mut words, mut now) = (Unanswered::default(), Instant::now());
            let (mut said, mut asked) = (0, std::collections::BTreeSet::new());
            for op in ops {
                match op {
                    Op::Heard => {
                        said += 1;
                        words.heard(&format!("u{said}"), mark(), now);
                    }
                    Op::Progress => words.progress(now),
                    Op::Replied => words.replied(mark()),
                    Op::Settled => words.settled(),
                    Op::Wait(ms) => now += Duration::from_millis(ms),
                    Op::Lost => match words.take(now) {
                        Some(reask) => {
                            proptest::prop_assert!(words.is_pending());
                            proptest::prop_assert!(reask.said.ends_with(&reask.ask), "{reask:?}");
                            for text in reask.ask.split(' ') {
                                let n: u32 = text[1..].parse().expect("u<n>");
                                proptest::prop_assert!(n >= 1 && n <= said, "{text} was heard");
                                proptest::prop_assert!(asked.insert(n), "{text} asked twice");
                            }
                        }
                        None => proptest::prop_assert!(!words.is_pending()),
                    },
                }
            }
        }
    }
}
