//! What a client can show and control (issue 26): `bidi_session_state` only on a change,
//! the caller's speech, consent answered in words and timing out, and `bidi_cancel`.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use switchboard_core::model::{ContentBlock, Role, ToolResultStatus};
use switchboard_core::protocol::{ErrorCode, ServerMessage, SessionState, StopReason};
use switchboard_core::{Activity, Effect, Input, Session, VoiceEffect, VoiceInput};

use crate::common::{self, call, calls, executions, model_calls, says};

fn sent(effects: &[Effect]) -> Vec<&ServerMessage> {
    effects.iter().filter_map(|e| if let Effect::Send(m) = e { Some(m) } else { None }).collect()
}

fn states(effects: &[Effect]) -> Vec<SessionState> {
    sent(effects)
        .into_iter()
        .filter_map(|m| if let ServerMessage::BidiSessionState { state } = m { Some(*state) } else { None })
        .collect()
}

fn errors(effects: &[Effect]) -> Vec<(ErrorCode, Option<String>)> {
    sent(effects)
        .into_iter()
        .filter_map(|m| match m {
            ServerMessage::BidiError { code, input_id, .. } => Some((code.clone(), input_id.clone())),
            _ => None,
        })
        .collect()
}

fn tool_errors(effects: &[Effect]) -> Vec<String> {
    sent(effects)
        .into_iter()
        .filter_map(|m| if let ServerMessage::ToolError { kind, .. } = m { Some(kind.clone()) } else { None })
        .collect()
}

fn consent_requests(effects: &[Effect]) -> usize {
    sent(effects).into_iter().filter(|m| matches!(m, ServerMessage::ConsentRequest { .. })).count()
}

fn completions(effects: &[Effect]) -> Vec<StopReason> {
    sent(effects)
        .into_iter()
        .filter_map(|m| match m {
            ServerMessage::BidiResponseComplete { stop_reason, .. } => Some(stop_reason.clone()),
            _ => None,
        })
        .collect()
}

fn dispute() -> serde_json::Value {
    serde_json::json!({ "transactionId": "tx-1003", "reason": "not me" })
}

/// A text disputes session whose model asked to open a dispute (consent pending).
fn asking(now: Instant) -> (Session, Vec<Effect>) {
    let (mut session, _) = common::start("disputes", common::verified_memory("12345678"));
    session.handle(Input::user_text("dispute payment tx-1003".into()), now);
    let effects = calls(&mut session, vec![call("t1", "open_dispute", dispute())], now);
    (session, effects)
}

fn voice(agent: &str) -> (Session, Vec<Effect>) {
    Session::start_voice(common::core(agent), common::init(common::verified_memory("12345678")))
}

#[test]
fn a_text_turn_shows_each_state_once_as_it_changes() {
    let now = Instant::now();
    let (mut session, first) = common::start("banking", common::verified_memory("12345678"));
    assert_eq!(states(&first), [SessionState::Ready]);
    let asked = session.handle(Input::user_text("what is my balance".into()), now);
    assert_eq!(states(&asked), [SessionState::Processing]);
    let tool = calls(&mut session, vec![call("t1", "check_balance", serde_json::json!({}))], now);
    assert_eq!(states(&tool), [SessionState::ExecutingTool]);
    let done =
        session.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(serde_json::json!({})) }, now);
    assert_eq!(states(&done), [SessionState::Processing]);
    let answered = says(&mut session, "You have 10 pounds.", now);
    assert_eq!(states(&answered), [SessionState::Ready]);
    let closed = session.handle(Input::End, now);
    assert_eq!(states(&closed), [SessionState::Ended]);
    let at = closed.iter().position(|e| matches!(e, Effect::Close { .. })).expect("closes");
    assert!(matches!(&closed[at - 1], Effect::Send(ServerMessage::BidiSessionState { .. })), "ended comes first");
}

#[test]
fn a_typed_clear_yes_runs_the_tool_and_a_no_declines_it() {
    let now = Instant::now();
    let (mut session, asked) = asking(now);
    assert_eq!(consent_requests(&asked), 1);
    assert_eq!(states(&asked), [SessionState::Ready], "the user's turn: answer the request");
    let yes = session.handle(Input::UserText { text: "Yes, go ahead".into(), id: Some("c-1".into()) }, now);
    assert_eq!(executions(&yes).len(), 1, "{yes:?}");
    assert!(
        sent(&yes)
            .iter()
            .any(|m| matches!(m, ServerMessage::BidiTranscriptStream { input_id: Some(id), .. } if id == "c-1"))
    );
    assert_eq!(states(&yes), [SessionState::ExecutingTool]);

    let (mut session, _) = asking(now);
    let no = session.handle(Input::user_text("no thanks".into()), now);
    assert!(executions(&no).is_empty());
    assert_eq!(tool_errors(&no), ["consent_declined"]);
    assert_eq!(model_calls(&no).len(), 1, "the model hears the refusal");
}

#[test]
fn an_unclear_answer_leaves_the_request_waiting_and_asks_again() {
    let now = Instant::now();
    let (mut session, _) = asking(now);
    let unclear = session.handle(Input::UserText { text: "what would that do?".into(), id: Some("c-2".into()) }, now);
    assert!(executions(&unclear).is_empty() && model_calls(&unclear).is_empty());
    assert_eq!(errors(&unclear), [(ErrorCode::ConsentUnclear, Some("c-2".to_owned()))]);
    assert_eq!(consent_requests(&unclear), 1, "asked again");
    assert!(session.awaits_consent());
    let yes = session.handle(Input::user_text("yes".into()), now);
    assert_eq!(executions(&yes).len(), 1);
    // tool_consent still works, and names the request it answers.
    let (mut session, _) = asking(now);
    let answered = session.handle(Input::Consent { tool_use_id: "t1".into(), approved: true }, now);
    assert_eq!(executions(&answered).len(), 1);
    let again = session.handle(Input::Consent { tool_use_id: "t1".into(), approved: true }, now);
    assert_eq!(errors(&again), [(ErrorCode::NoConsentPending, None)]);
}

#[test]
fn an_unanswered_request_times_out_with_a_result_the_model_can_explain() {
    let now = Instant::now();
    let (mut session, _) = asking(now);
    let deadline = session.next_deadline().expect("a deadline");
    assert_eq!(deadline, now + Duration::from_secs(60), "the default consentTimeoutSeconds");
    assert!(session.handle(Input::Tick, now + Duration::from_secs(59)).is_empty(), "not yet");
    let expired = session.handle(Input::Tick, deadline);
    assert_eq!(tool_errors(&expired), ["consent_timeout"]);
    assert!(executions(&expired).is_empty());
    let requests = model_calls(&expired);
    let last = requests[0].messages.last().expect("results");
    let result = last.content.iter().find_map(|b| if let ContentBlock::ToolResult(r) = b { Some(r) } else { None });
    let result = result.expect("the timed-out call is answered");
    assert_eq!(result.status, ToolResultStatus::Error);
    assert!(result.content.to_string().contains("did not answer"), "{:?}", result.content);
    assert_eq!(session.next_deadline(), None);
}

#[test]
fn cancel_stops_the_reply_or_the_tool_wait_and_the_conversation_stays_well_formed() {
    let now = Instant::now();
    let (mut session, _) = common::start("banking", common::verified_memory("12345678"));
    let nothing = session.handle(Input::Cancel, now);
    assert_eq!(errors(&nothing), [(ErrorCode::NothingToCancel, None)]);
    session.handle(Input::user_text("what is my balance".into()), now);
    let cancelled = session.handle(Input::Cancel, now);
    assert!(cancelled.contains(&Effect::Cancel));
    assert_eq!(completions(&cancelled), [StopReason::Cancelled]);
    assert_eq!(states(&cancelled), [SessionState::Ready]);
    assert!(says(&mut session, "late", now).is_empty(), "a late reply is ignored");

    let (mut session, _) = asking(now);
    let cancelled = session.handle(Input::Cancel, now);
    assert_eq!(tool_errors(&cancelled), ["cancelled"]);
    assert!(model_calls(&cancelled).is_empty() && executions(&cancelled).is_empty());
    assert_eq!(session.next_deadline(), None);
    let next = session.handle(Input::user_text("thanks".into()), now);
    let request = model_calls(&next)[0];
    let last = request.messages.last().expect("the new turn");
    assert_eq!(last.role, Role::User);
    assert!(last.content.iter().any(|b| matches!(b, ContentBlock::ToolResult(r) if r.tool_use_id == "t1")));
    assert!(last.content.iter().any(|b| matches!(b, ContentBlock::Text(t) if t == "thanks")));
}

#[test]
fn a_voice_session_shows_the_callers_speech_and_what_is_audible() {
    let now = Instant::now();
    let (mut session, first) = voice("idv");
    assert_eq!(states(&first), [SessionState::Ready]);
    let started = session.handle(Input::Voice(VoiceInput::Activity(Activity::SpeechStarted)), now);
    assert!(matches!(
        sent(&started)[..],
        [ServerMessage::BidiSpeechStarted {}, ServerMessage::BidiSessionState { state: SessionState::Listening }]
    ));
    assert!(
        session.handle(Input::Voice(VoiceInput::Activity(Activity::SpeechStarted)), now).is_empty(),
        "only on a change"
    );
    let faded = session.handle(Input::Voice(VoiceInput::Activity(Activity::SpeechFaded)), now);
    assert!(
        matches!(
            sent(&faded)[..],
            [ServerMessage::BidiSpeechStopped {}, ServerMessage::BidiSessionState { state: SessionState::Ready }]
        ),
        "noise: no turn for the model"
    );
    session.handle(Input::Voice(VoiceInput::Activity(Activity::SpeechStarted)), now);
    let stopped = session.handle(Input::Voice(VoiceInput::Activity(Activity::SpeechStopped)), now);
    assert!(
        matches!(
            sent(&stopped)[..],
            [ServerMessage::BidiSpeechStopped {}, ServerMessage::BidiSessionState { state: SessionState::Processing }]
        ),
        "the model works on the turn"
    );
    let heard = session.handle(Input::Voice(VoiceInput::UserFinal("hello".into())), now);
    assert!(states(&heard).is_empty(), "still processing");
    let speaking = session.handle(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioStarted)), now);
    assert_eq!(states(&speaking), [SessionState::Speaking]);
    let barge = session.handle(Input::Voice(VoiceInput::Interrupted), now);
    assert!(
        sent(&barge).iter().any(|m| matches!(m, ServerMessage::BidiSpeechStarted {})),
        "the model heard the caller"
    );
    assert_eq!(states(&barge), [SessionState::Listening]);
    let heard = session.handle(Input::Voice(VoiceInput::UserFinal("wait".into())), now);
    assert!(sent(&heard).iter().any(|m| matches!(m, ServerMessage::BidiSpeechStopped {})));
    assert_eq!(states(&heard), [SessionState::Processing]);
    session.handle(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioStarted)), now);
    let ended = session.handle(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioEnded)), now);
    assert_eq!(states(&ended), [SessionState::Ready]);
    assert!(
        states(&session.handle(Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::EndTurn }), now))
            .is_empty()
    );
}

#[test]
fn a_spoken_yes_answers_the_consent_the_model_was_asked_to_put_in_words() {
    let now = Instant::now();
    let (mut session, _) = voice("disputes");
    session.handle(Input::Voice(VoiceInput::UserFinal("dispute payment tx-1003".into())), now);
    let asked = session.handle(Input::Voice(VoiceInput::ToolUse(call("t1", "open_dispute", dispute()))), now);
    assert_eq!(consent_requests(&asked), 1);
    let ask =
        asked.iter().find_map(|e| if let Effect::Voice(VoiceEffect::SendText(t)) = e { Some(t.clone()) } else { None });
    let ask = ask.expect("the model is asked to put the question to the caller");
    assert!(ask.contains("open_dispute"), "{ask}");
    assert!(
        session.handle(Input::Voice(VoiceInput::UserFinal(ask)), now).is_empty(),
        "its echo is not the caller's answer"
    );
    let unclear = session.handle(Input::Voice(VoiceInput::UserFinal("hmm, what is that".into())), now);
    assert!(executions(&unclear).is_empty());
    assert_eq!(consent_requests(&unclear), 1, "shown again");
    let yes = session.handle(Input::Voice(VoiceInput::UserFinal("yes please".into())), now);
    assert_eq!(executions(&yes).len(), 1);
    assert_eq!(states(&yes), [SessionState::ExecutingTool]);
}

#[test]
fn a_cancelled_voice_reply_is_silenced_until_the_caller_speaks_again() {
    let now = Instant::now();
    let (mut session, _) = voice("idv");
    assert_eq!(errors(&session.handle(Input::Cancel, now)), [(ErrorCode::NothingToCancel, None)]);
    session.handle(Input::Voice(VoiceInput::UserFinal("tell me a story".into())), now);
    session.handle(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioStarted)), now);
    let cancelled = session.handle(Input::Cancel, now);
    assert!(cancelled.contains(&Effect::Cancel));
    assert!(sent(&cancelled).iter().any(|m| matches!(m, ServerMessage::BidiInterruption {})));
    assert_eq!(completions(&cancelled), [StopReason::Cancelled]);
    assert_eq!(states(&cancelled), [SessionState::Ready]);
    assert!(session.output_muted());
    let before = session.messages().len();
    assert!(session.handle(Input::Voice(VoiceInput::AssistantFinal("and then".into())), now).is_empty(), "not heard");
    assert!(session.handle(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioStarted)), now).is_empty());
    assert_eq!(session.messages().len(), before);
    session.handle(Input::Voice(VoiceInput::Activity(Activity::SpeechStarted)), now);
    assert!(session.output_muted(), "what the model says over the caller is still the cancelled reply");
    session.handle(Input::Voice(VoiceInput::UserFinal("what are your hours".into())), now);
    assert!(!session.output_muted(), "the caller's words reached the model");
}

#[test]
fn a_voice_cancel_answers_the_calls_under_way() {
    let now = Instant::now();
    let (mut session, _) = voice("disputes");
    session.handle(Input::Voice(VoiceInput::UserFinal("dispute payment tx-1003".into())), now);
    session.handle(Input::Voice(VoiceInput::ToolUse(call("t1", "open_dispute", dispute()))), now);
    let cancelled = session.handle(Input::Cancel, now);
    assert_eq!(tool_errors(&cancelled), ["cancelled"]);
    let results: Vec<_> = cancelled
        .iter()
        .filter_map(|e| if let Effect::Voice(VoiceEffect::SendToolResult(r)) = e { Some(r.status) } else { None })
        .collect();
    assert_eq!(results, [ToolResultStatus::Error], "the model does not wait for the result");
    assert!(!session.awaits_consent() && session.next_deadline().is_none());
}

/// A random input of a voice session, the new ones included.
fn voice_input() -> impl Strategy<Value = Input> {
    prop_oneof![
        "[a-z ]{1,12}".prop_map(|x| Input::Voice(VoiceInput::UserFinal(x))),
        prop_oneof![Just("yes"), Just("no"), Just("maybe")].prop_map(|t| Input::Voice(VoiceInput::UserFinal(t.into()))),
        "[a-z ]{1,12}".prop_map(|x| Input::Voice(VoiceInput::AssistantFinal(x))),
        "[a-z ]{1,12}".prop_map(Input::user_text),
        Just(Input::Voice(VoiceInput::Interrupted)),
        Just(Input::Cancel),
        Just(Input::Tick),
        prop_oneof![
            Just(Activity::SpeechStarted),
            Just(Activity::SpeechStopped),
            Just(Activity::SpeechFaded),
            Just(Activity::ReplyAudioStarted),
            Just(Activity::ReplyAudioEnded)
        ]
        .prop_map(|x| Input::Voice(VoiceInput::Activity(x))),
        prop_oneof![Just("end_turn"), Just("tool_use")]
            .prop_map(|s| Input::Voice(VoiceInput::CompletionEnd { stop_reason: s.into() })),
        (0u8..3).prop_map(|n| Input::Voice(VoiceInput::ToolUse(call(&format!("t{n}"), "open_dispute", dispute())))),
        (0u8..3).prop_map(|n| Input::Voice(VoiceInput::ToolUse(call(
            &format!("t{n}"),
            "get_transactions",
            serde_json::json!({})
        )))),
        (0u8..3, any::<bool>()).prop_map(|(n, approved)| Input::Consent { tool_use_id: format!("t{n}"), approved }),
        (0u8..3).prop_map(|n| Input::ToolFinished { tool_use_id: format!("t{n}"), outcome: Ok(serde_json::json!({})) }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever happens, the state is sent only when it changes, speech starts and stops
    /// alternate, a consent tool never runs without an approval (a `tool_consent` or a
    /// clear yes), and no call is answered into the stream more than once.
    #[test]
    fn what_a_client_sees_stays_consistent(inputs in proptest::collection::vec(voice_input(), 1..40), step in 0u64..90) {
        let mut now = Instant::now();
        let (mut session, first) = voice("disputes");
        let mut last = states(&first).last().copied();
        let mut speaking = false;
        let (mut approvals, mut disputes_run) = (0usize, 0usize);
        let (mut calls_seen, mut answered) = (0usize, 0usize);
        for input in inputs {
            now += Duration::from_secs(step);
            match &input {
                Input::Consent { approved: true, .. } => approvals += 1,
                Input::Voice(VoiceInput::UserFinal(t)) | Input::UserText { text: t, .. }
                    if switchboard_core::consent::classify(t) == switchboard_core::consent::Answer::Yes => approvals += 1,
                Input::Voice(VoiceInput::ToolUse(_)) => calls_seen += 1,
                _ => {}
            }
            let effects = session.handle(input, now);
            for message in sent(&effects) {
                match message {
                    ServerMessage::BidiSessionState { state } => {
                        prop_assert_ne!(Some(*state), last, "a state is sent only when it changes");
                        last = Some(*state);
                    }
                    ServerMessage::BidiSpeechStarted {} => { prop_assert!(!speaking); speaking = true; }
                    ServerMessage::BidiSpeechStopped {} => { prop_assert!(speaking); speaking = false; }
                    _ => {}
                }
            }
            disputes_run += executions(&effects).iter().filter(|(_, tool, _)| tool == "open_dispute").count();
            answered += effects.iter().filter(|e| matches!(e, Effect::Voice(VoiceEffect::SendToolResult(_)))).count();
            prop_assert!(disputes_run <= approvals, "{disputes_run} disputes opened on {approvals} approvals");
            prop_assert!(answered <= calls_seen, "{answered} results for {calls_seen} calls");
            prop_assert_eq!(session.state_now(), last, "the client knows the state");
        }
    }
}
