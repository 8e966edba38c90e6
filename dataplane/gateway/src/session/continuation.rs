//! What comes back of a session that is continued after it ended
//! (`session_start.continue_from`). Pure, so each rule is unit-tested.
//!
//! Its memory comes back whole. Of its conversation, the last [`CONTINUE_TURNS`] user
//! turns come back word for word (with the agent's answers), and a summary of the whole:
//! the conversation record's summary of the session when a model wrote one (it read the
//! whole redacted record), else an extractive one of the turns not restored (the agent
//! core's, as the context-window guard makes), after the summary the session already
//! carried when it was itself continued. The summary reaches the agent's system prompt
//! through the signed session context, at every Agent the session visits from then on.

use switchboard_core::context::summarize;
use switchboard_core::handoff::HistoryTurn;
use switchboard_core::messages_from_history;
use switchboard_core::protocol::TranscriptRole;

use super::kept::{Kept, MAX_SUMMARY_BYTES};
use crate::resume::Parked;

/// User turns restored word for word.
pub const CONTINUE_TURNS: usize = 10;

/// Restores `kept` for its continuation: the last `turns` user turns of its history stay,
/// the older ones go into its summary; `recorded` is the record's summary, when written.
pub fn restore(kept: &mut Kept, recorded: Option<&str>, turns: usize) {
    let cut = first_of_last_turns(&kept.history, turns);
    let older: Vec<HistoryTurn> = kept.history.drain(..cut).map(|line| (*line).clone()).collect();
    let summary = match recorded.map(str::trim).filter(|s| !s.is_empty()) {
        Some(recorded) => recorded.to_owned(),
        None if older.is_empty() => return,
        None => {
            let lines = summarize(&messages_from_history(&older), MAX_SUMMARY_BYTES);
            if kept.summary.is_empty() { lines } else { format!("{}\n{lines}", kept.summary) }
        }
    };
    kept.summary = most_recent(summary, MAX_SUMMARY_BYTES);
}

/// Takes who the caller is out of a continued session: each of `keys` (the identity keys
/// of its namespace's Agents) from its memory, and from the context of a handoff it was
/// in the middle of (its memory and `verified_user`). Continuing needs the session's
/// newest resume token, but that is a secret of a device, not of a person — a shared
/// browser, a leaked token — so the caller proves who they are again, through the Agent's
/// identity provider, as in any new session. Returns the keys that were set.
pub fn forget_identity<'a>(parked: &mut Parked, keys: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut forgotten = Vec::new();
    for key in keys {
        let mut set = parked.kept.memory.contains_key(key);
        if set {
            std::sync::Arc::make_mut(&mut parked.kept.memory).remove(key);
        }
        if let Some((_, context)) = &mut parked.handoff {
            set |= context.memory.remove(key).is_some();
        }
        if set {
            forgotten.push(key.to_owned());
        }
    }
    if let Some((_, context)) = &mut parked.handoff {
        context.verified_user = None;
    }
    forgotten
}

/// Where the last `turns` user turns of `history` begin (0 when it holds no more).
fn first_of_last_turns(history: &[std::sync::Arc<HistoryTurn>], turns: usize) -> usize {
    if turns == 0 {
        return history.len();
    }
    let mut seen = 0;
    for (i, line) in history.iter().enumerate().rev() {
        if line.role == TranscriptRole::User {
            seen += 1;
            if seen == turns {
                return i;
            }
        }
    }
    0
}

/// `text`, cut to its last `max` bytes at a line start (a char boundary when one line is
/// longer).
fn most_recent(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = &text[start..];
    match tail.find('\n') {
        Some(newline) if newline + 1 < tail.len() => tail[newline + 1..].to_owned(),
        _ => tail.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(role: TranscriptRole, text: &str) -> HistoryTurn {
        HistoryTurn { role, text: text.to_owned() }
    }

    fn conversation(turns: usize) -> Vec<HistoryTurn> {
        (1..=turns)
            .flat_map(|n| {
                [
                    line(TranscriptRole::User, &format!("question {n}")),
                    line(TranscriptRole::Assistant, &format!("answer {n}")),
                ]
            })
            .collect()
    }

    fn kept(turns: usize) -> Kept {
        Kept { history: conversation(turns).into_iter().map(Into::into).collect(), ..Kept::default() }
    }

    #[test]
    fn the_last_turns_stay_word_for_word_and_the_older_ones_are_summarised() {
        let mut session = kept(5);
        restore(&mut session, None, 2);
        let texts: Vec<&str> = session.history.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["question 4", "answer 4", "question 5", "answer 5"]);
        assert_eq!(
            session.summary,
            "user: question 1\nagent: answer 1\nuser: question 2\nagent: answer 2\nuser: question 3\nagent: answer 3"
        );
    }

    #[test]
    fn a_short_conversation_comes_back_whole_without_a_summary() {
        let mut session = kept(2);
        restore(&mut session, None, 2);
        assert_eq!(session.history.iter().map(|l| (**l).clone()).collect::<Vec<_>>(), conversation(2));
        assert_eq!(session.summary, "");
    }

    #[test]
    fn the_records_summary_covers_the_whole_session_and_replaces_the_older_one() {
        let mut session = Kept { summary: "user: hello".into(), ..kept(3) };
        restore(&mut session, Some("  The caller asked for a balance.\n"), 1);
        assert_eq!(session.summary, "The caller asked for a balance.");
        assert_eq!(session.history.len(), 2, "the last turn stays: {:?}", session.history);
        // A blank summary is none.
        let mut blank = kept(3);
        restore(&mut blank, Some(" "), 1);
        assert!(blank.summary.starts_with("user: question 1"), "{}", blank.summary);
    }

    #[test]
    fn a_session_continued_again_keeps_what_it_summarised_before() {
        let mut session = Kept { summary: "user: the first visit".into(), ..kept(3) };
        restore(&mut session, None, 1);
        assert!(session.summary.starts_with("user: the first visit\nuser: question 1"), "{}", session.summary);
    }

    #[test]
    fn who_the_caller_is_does_not_come_back() {
        let mut kept = kept(1);
        let memory = std::sync::Arc::make_mut(&mut kept.memory);
        memory.insert("verifiedUser".into(), serde_json::json!({"name": "Ada"}));
        memory.insert("customer".into(), serde_json::json!("c-1"));
        memory.insert("language".into(), serde_json::json!("en"));
        let context = switchboard_core::handoff::HandoffContext {
            from_agent: "idv".into(),
            kind: switchboard_core::handoff::HandoffKind::Transfer,
            reason: "balance".into(),
            last_user_message: None,
            intent: None,
            verified_user: Some(serde_json::json!({"name": "Ada"})),
            workflow_state: switchboard_core::handoff::WorkflowSnapshot::default(),
            return_to: None,
            status: None,
            summary: None,
            memory: (*kept.memory).clone(),
            history: Vec::new(),
        };
        let mut parked = Parked {
            session_id: "gw-1".into(),
            namespace: "bank".into(),
            agent: "idv".into(),
            voice: None,
            modalities: Vec::new(),
            model: None,
            audio: None,
            kept,
            handoff: Some(("banking".into(), context)),
            generation: 0,
            replay: crate::resume::Replay::default(),
            traceparent: None,
            reach: crate::directory::Reach::Live,
            variants: Default::default(),
            text_only: None,
            placed: None,
        };
        let forgotten = forget_identity(&mut parked, ["customer", "verifiedUser", "unset"]);
        assert_eq!(forgotten, ["customer", "verifiedUser"]);
        assert_eq!(parked.kept.memory.keys().collect::<Vec<_>>(), ["language"], "other memory stays");
        let (_, context) = parked.handoff.expect("the handoff stays");
        assert_eq!(context.memory.keys().collect::<Vec<_>>(), ["language"]);
        assert_eq!(context.verified_user, None);
    }

    #[test]
    fn the_summary_is_bounded_keeping_its_most_recent_lines() {
        let long = (0..2000).map(|n| format!("line {n}")).collect::<Vec<_>>().join("\n");
        let mut session = kept(1);
        restore(&mut session, Some(&long), 1);
        assert!(session.summary.len() <= MAX_SUMMARY_BYTES);
        assert!(session.summary.ends_with("line 1999") && session.summary.starts_with("line "), "whole lines");
        assert_eq!(most_recent("éé".repeat(10), 5).len(), 4, "cut on a char boundary");
        // Nothing to restore word for word.
        let mut none = kept(2);
        restore(&mut none, None, 0);
        assert!(none.history.is_empty() && none.summary.contains("answer 2"));
    }
}
