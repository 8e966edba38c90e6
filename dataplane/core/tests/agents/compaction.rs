//! Compaction's rules: the model summary asked for beside the conversation and replacing
//! the extractive one when (and only when) the latest one arrives, bounded; a context-length
//! refusal answered by compacting harder and calling once more; voice sessions compacting
//! at the end of a turn and telling the stream to forget what was cut.

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::prelude::*;
use switchboard_core::context::{estimate_tokens, is_turn_start, message_len};
use switchboard_core::model::{ContentBlock, ModelRequest};
use switchboard_core::protocol::{ErrorCode, ServerMessage, StopReason};
use switchboard_core::{Effect, Input, Session, VoiceEffect, VoiceInput, summary};

use crate::common::{self, model_calls, says};

const SUMMARY_HEADING: &str = "Summary of the earlier conversation:\n";

fn session(tokens: u32, voice: bool) -> Session {
    let mut spec = common::spec("triage");
    spec.model.context_tokens = Some(tokens);
    let core = std::sync::Arc::new(switchboard_core::AgentCore::new(spec).expect("runnable"));
    let init = common::init(BTreeMap::new());
    if voice { Session::start_voice(core, init).0 } else { Session::start(core, init).0 }
}

fn summaries(effects: &[Effect]) -> Vec<(u64, &ModelRequest)> {
    effects
        .iter()
        .filter_map(|e| if let Effect::Summarize { id, request } = e { Some((*id, request)) } else { None })
        .collect()
}

/// Turns of `size` bytes each way until a compaction asks for a summary; its effects.
fn until_compacted(session: &mut Session, size: usize, now: Instant) -> Vec<Effect> {
    for i in 0..50 {
        let effects = session.handle(Input::user_text(format!("turn {i} {}", "w".repeat(size))), now);
        if !summaries(&effects).is_empty() {
            return effects;
        }
        says(session, &format!("reply {i} {}", "r".repeat(size)), now);
    }
    panic!("no compaction in 50 turns");
}

fn system_of(effects: &[Effect]) -> String {
    model_calls(effects).last().expect("a model call").system.clone()
}

#[test]
fn a_compaction_asks_the_sessions_model_for_a_summary_and_the_next_call_carries_it() {
    let now = Instant::now();
    let mut session = session(1024, false);
    let compacted = until_compacted(&mut session, 600, now);
    let [(id, request)] = summaries(&compacted)[..] else { panic!("one summary request: {compacted:?}") };
    assert_eq!((request.model_id.as_str(), request.system.as_str()), (session.model_id(), summary::INSTRUCTIONS));
    let ContentBlock::Text(transcript) = &request.messages[0].content[0] else { panic!("text") };
    assert!(transcript.starts_with("The conversation:\nCaller: turn 0 "), "{transcript}");
    // Until the summary arrives the extractive one stands: the call goes out at once.
    let extractive = system_of(&compacted);
    // (Where the cut falls, and so whether the summary opens with a caller's or the agent's
    // line, depends on the prompt's size: the example's triage is the agent here.)
    let (_, extract) = extractive.split_once(SUMMARY_HEADING).unwrap_or_else(|| panic!("{extractive}"));
    assert!(extract.contains("agent: reply "), "{extractive}");
    says(&mut session, "ok", now);
    let written = session.handle(Input::Summary { id, outcome: Ok("  The caller counted turns.  ".into()) }, now);
    assert!(written.iter().any(|e| matches!(e, Effect::Transcript(t) if t.event == "summary")));
    assert_eq!(session.summary(), "The caller counted turns.");
    let next = session.handle(Input::user_text("and now?".into()), now);
    // (This call may compact again: the extractive summary of what it cuts follows.)
    assert!(system_of(&next).contains(&format!("{SUMMARY_HEADING}The caller counted turns.")), "{}", system_of(&next));
}

#[test]
fn a_failed_stale_or_empty_summary_leaves_the_summary_as_it_is() {
    let now = Instant::now();
    let mut session = session(1024, false);
    let first = until_compacted(&mut session, 600, now);
    let first_id = summaries(&first)[0].0;
    says(&mut session, "ok", now);
    let second = until_compacted(&mut session, 600, now);
    let (second_id, request) = summaries(&second)[0];
    assert!(second_id > first_id);
    let ContentBlock::Text(transcript) = &request.messages[0].content[0] else { panic!("text") };
    let so_far = format!(
        "Summary of what came before:\n{}\n\nThe conversation after it:\n",
        session.summary().lines().next().unwrap_or_default()
    );
    assert!(
        transcript.starts_with(so_far.trim_end()) || transcript.contains("The conversation after it:"),
        "it covers the summary so far: {transcript}"
    );
    let before = session.summary().to_owned();
    for input in [
        Input::Summary { id: first_id, outcome: Ok("an older compaction's summary".into()) },
        Input::Summary { id: second_id, outcome: Err("the model failed".into()) },
        Input::Summary { id: second_id, outcome: Ok(" \n ".into()) },
    ] {
        assert!(session.handle(input, now).is_empty());
        assert_eq!(session.summary(), before);
    }
}

#[test]
fn a_context_length_refusal_compacts_harder_and_calls_once_more_then_fails_the_turn() {
    let now = Instant::now();
    let mut session = session(100_000, false);
    for i in 0..6 {
        session.handle(Input::user_text(format!("turn {i} {}", "w".repeat(2000))), now);
        says(&mut session, "noted", now);
    }
    session.handle(Input::user_text("the question".into()), now);
    let before = session.messages().len();
    let retried =
        session.handle(Input::ContextTooLong { message: "Input is too long for requested model.".into() }, now);
    let request = model_calls(&retried)[0];
    assert!(
        request.messages.len() < before && is_turn_start(&request.messages[0]),
        "compacted: {}",
        request.messages.len()
    );
    assert!(!summaries(&retried).is_empty(), "the cut turns are summarised");
    assert!(request.system.contains(SUMMARY_HEADING));
    let failed = session.handle(Input::ContextTooLong { message: "still too long".into() }, now);
    assert!(model_calls(&failed).is_empty(), "once per call");
    let error = failed.iter().find_map(|e| match e {
        Effect::Send(ServerMessage::BidiError { code, message, .. }) => Some((code.clone(), message.clone())),
        _ => None,
    });
    assert!(matches!(&error, Some((ErrorCode::ModelError, m)) if m.contains("too long")), "{error:?}");
    assert!(failed.iter().any(|e| matches!(
        e,
        Effect::Send(ServerMessage::BidiResponseComplete { stop_reason: StopReason::Error, .. })
    )));
    // The next turn's call may be refused and retried again.
    session.handle(Input::user_text(format!("another {}", "w".repeat(2000))), now);
    says(&mut session, "noted", now);
    session.handle(Input::user_text("again".into()), now);
    let again = session.handle(Input::ContextTooLong { message: "too long".into() }, now);
    assert_eq!(model_calls(&again).len(), 1, "{again:?}");
}

#[test]
fn a_refusal_with_nothing_left_to_cut_fails_the_turn() {
    let now = Instant::now();
    let mut session = session(100_000, false);
    session.handle(Input::user_text("the only turn".into()), now);
    let failed = session.handle(Input::ContextTooLong { message: "too long".into() }, now);
    assert!(model_calls(&failed).is_empty());
    assert!(
        failed.iter().any(|e| matches!(e, Effect::Send(ServerMessage::BidiError { code: ErrorCode::ModelError, .. })))
    );
    assert!(session.handle(Input::ContextTooLong { message: "late".into() }, now).is_empty(), "no call in flight");
}

#[test]
fn a_voice_session_compacts_at_the_end_of_a_turn_and_the_stream_forgets_what_was_cut() {
    let now = Instant::now();
    let mut session = session(1024, true);
    let mut forgotten = None;
    for i in 0..30 {
        session.handle(Input::Voice(VoiceInput::UserFinal(format!("turn {i} {}", "w".repeat(400)))), now);
        session.handle(Input::Voice(VoiceInput::AssistantFinal(format!("reply {i} {}", "r".repeat(400)))), now);
        let ended = session.handle(Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::EndTurn }), now);
        assert!(model_calls(&ended).is_empty());
        if let Some(bytes) = ended
            .iter()
            .find_map(|e| if let Effect::Voice(VoiceEffect::ForgetHistory { bytes }) = e { Some(*bytes) } else { None })
        {
            assert_eq!(summaries(&ended).len(), 1);
            forgotten = Some(bytes);
            break;
        }
    }
    let bytes = forgotten.expect("a long voice conversation is compacted");
    assert!(bytes >= 800, "at least the first turn's words: {bytes}");
    assert!(session.system_prompt().contains(SUMMARY_HEADING));
    assert!(is_turn_start(&session.messages()[0]));
}

proptest! {
    /// Whatever the turns' sizes, a summary the model writes — of any length — is kept
    /// within the summary's share of the budget, and calls stay under the budget.
    #[test]
    fn a_model_summary_is_bounded(sizes in prop::collection::vec(200usize..1500, 8..24), written in 0usize..20_000) {
        let now = Instant::now();
        let mut session = session(1024, false);
        for (i, size) in sizes.iter().enumerate() {
            let effects = session.handle(Input::user_text(format!("turn {i} {}", "w".repeat(*size))), now);
            if let Some((id, _)) = summaries(&effects).first() {
                session.handle(Input::Summary { id: *id, outcome: Ok("é".repeat(written)) }, now);
                prop_assert!(session.summary().len() <= switchboard_core::context::summary_bytes(1024));
            }
            let request = model_calls(&effects)[0];
            let total = request.system.len() + request.messages.iter().map(message_len).sum::<usize>();
            prop_assert!(estimate_tokens(total) <= 1024 + estimate_tokens(*size) + 64 + estimate_tokens(summary_bytes_max()));
            says(&mut session, &"r".repeat(size / 2), now);
        }
    }
}

fn summary_bytes_max() -> usize {
    switchboard_core::context::summary_bytes(1024)
}

/// One step of a random conversation.
#[derive(Clone, Debug)]
enum Step {
    Say(usize),
    Reply(usize),
    TooLong,
    Summary { back: u64, len: usize },
    Failed,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            (50usize..2000).prop_map(Step::Say),
            (1usize..800).prop_map(Step::Reply),
            Just(Step::TooLong),
            (0u64..3, 0usize..3000).prop_map(|(back, len)| Step::Summary { back, len }),
            Just(Step::Failed),
        ],
        1..60,
    )
}

proptest! {
    /// Whatever happens in whatever order — replies, refusals as too long, summaries late,
    /// stale or huge, failures — every model call starts with a user turn, a call refused
    /// as too long is made again at most once, and the summary stays within its share.
    #[test]
    fn compaction_rules_hold_in_any_order(steps in steps()) {
        let now = Instant::now();
        let mut session = session(1024, false);
        let mut latest = 0u64;
        let mut refused_in_a_row = 0;
        for (i, step) in steps.into_iter().enumerate() {
            let input = match step {
                Step::Say(n) => Input::user_text(format!("say {i} {}", "w".repeat(n))),
                Step::Reply(n) => Input::ModelReply(switchboard_core::ModelReply { text: "r".repeat(n), ..Default::default() }),
                Step::TooLong => Input::ContextTooLong { message: "Input is too long for requested model.".into() },
                Step::Summary { back, len } => Input::Summary { id: latest.saturating_sub(back), outcome: Ok("s".repeat(len)) },
                Step::Failed => Input::ModelFailed { code: "throttled".into(), message: "busy".into() },
            };
            let too_long = matches!(input, Input::ContextTooLong { .. });
            // A reply ends the call (a tool round would be a new call).
            let answered = matches!(input, Input::ModelReply(_));
            let effects = session.handle(input, now);
            latest = summaries(&effects).last().map_or(latest, |(id, _)| *id);
            for request in model_calls(&effects) {
                prop_assert!(is_turn_start(&request.messages[0]), "{:?}", request.messages[0]);
            }
            // (A refusal that fails its turn may start the next queued one: a new turn's call.)
            let new_turn = effects.iter().any(|e| matches!(e, Effect::Send(ServerMessage::BidiResponseStart { .. })));
            if too_long && !new_turn && !model_calls(&effects).is_empty() {
                refused_in_a_row += 1;
                prop_assert!(refused_in_a_row <= 1, "a refused call is made again once");
            } else if answered || new_turn {
                refused_in_a_row = 0;
            }
            prop_assert!(session.summary().len() <= switchboard_core::context::summary_bytes(1024));
        }
    }
}
