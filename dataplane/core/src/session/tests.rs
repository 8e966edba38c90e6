//! The coordinator under random inputs: whatever arrives in whatever order, every phase
//! transition comes from a phase it may come from (the turn asserts it), the client is told
//! the state only on a change, the queue stays bounded, and an ended session stays ended.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::test_agents::{core, init};
use super::*;
use crate::events::Activity;
use crate::model::ToolUse;
use crate::protocol::StopReason;

fn dispute() -> serde_json::Value {
    serde_json::json!({ "transactionId": "tx-1003", "reason": "not me" })
}

/// One input of a random session, with the tool call ids drawn from a few.
fn input() -> impl Strategy<Value = Input> {
    let id = prop_oneof![Just("t1"), Just("t2"), Just("t3")].prop_map(str::to_owned);
    let tool = prop_oneof![Just("open_dispute"), Just("get_transactions"), Just("no_such_tool"), Just("workflow_goto")];
    let tool_use = (id.clone(), tool).prop_map(|(id, name)| ToolUse { id, name: name.into(), input: dispute() });
    let words =
        prop_oneof![Just("yes"), Just("no"), Just("hmm"), Just("dispute payment tx-1003")].prop_map(str::to_owned);
    prop_oneof![
        words.clone().prop_map(Input::user_text),
        "[a-z ]{0,12}".prop_map(|text| Input::ModelReply(ModelReply { text, ..ModelReply::default() })),
        prop::collection::vec(tool_use.clone(), 1..3)
            .prop_map(|tool_uses| Input::ModelReply(ModelReply { tool_uses, ..ModelReply::default() })),
        Just(Input::ModelFailed { code: "throttled".into(), message: "busy".into() }),
        Just(Input::ContextTooLong { message: "too long".into() }),
        id.clone().prop_map(|tool_use_id| Input::ToolFinished { tool_use_id, outcome: Ok(serde_json::json!({})) }),
        (id.clone(), any::<bool>()).prop_map(|(tool_use_id, approved)| Input::Consent { tool_use_id, approved }),
        (id, any::<bool>(), any::<bool>()).prop_map(|(tool_use_id, result, error)| Input::ClientToolResult {
            tool_use_id,
            result: result.then(|| serde_json::json!({})),
            error: error.then(|| "no handler".to_owned()),
        }),
        Just(Input::Cancel),
        Just(Input::Tick),
        "[0-9#*x]{0,4}".prop_map(|digits| Input::Dtmf { digits }),
        words.clone().prop_map(|x| Input::Voice(VoiceInput::UserFinal(x))),
        words.prop_map(|x| Input::Voice(VoiceInput::AssistantFinal(x))),
        tool_use.prop_map(|x| Input::Voice(VoiceInput::ToolUse(x))),
        Just(Input::Voice(VoiceInput::Interrupted)),
        Just(Input::Voice(VoiceInput::ReplyCut { text: "Once upon a time".into(), sent_ms: 100, us_per_char: 10_000 })),
        Just(Input::Voice(VoiceInput::AudioPlayed { ms: 50 })),
        Just(Input::Voice(VoiceInput::Activity(Activity::SpeechStarted))),
        Just(Input::Voice(VoiceInput::Activity(Activity::ReplyAudioStarted))),
        prop_oneof![Just(StopReason::EndTurn), Just(StopReason::ToolUse), Just(StopReason::Interrupted)]
            .prop_map(|stop_reason| Input::Voice(VoiceInput::CompletionEnd { stop_reason })),
        Just(Input::End),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_inputs_keep_the_session_consistent(voice in any::<bool>(), inputs in prop::collection::vec(input(), 1..40)) {
        let mut now = Instant::now();
        let start = if voice { Session::start_voice } else { Session::start };
        let (mut session, first) = start(core("disputes"), init());
        let mut shown = states(&first).last().copied();
        for input in inputs {
            now += Duration::from_secs(7);
            let ending = input == Input::End;
            let effects = session.handle(input, now);
            for state in states(&effects) {
                prop_assert_ne!(Some(state), shown, "a state is sent only when it changes");
                shown = Some(state);
            }
            prop_assert_eq!(session.state_now().or(shown), shown, "the client knows the state");
            prop_assert!(session.queued() <= MAX_QUEUED_INPUTS);
            if !voice {
                prop_assert_eq!(session.is_busy(), session.turn.is_busy());
                prop_assert!(!session.drive.turn_open(), "a text session opens no voice turn");
            }
            if ending {
                prop_assert!(session.is_over());
                prop_assert!(session.handle(Input::user_text("hello".into()), now).len() == 1, "refused: it is over");
            }
        }
    }
}

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
fn a_client_answer_with_neither_or_both_parts_is_refused_as_malformed() {
    let (mut session, _) = Session::start(core("disputes"), init());
    let now = Instant::now();
    for (result, error) in [(None, None), (Some(serde_json::json!({})), Some("e".to_owned()))] {
        let effects = session.handle(Input::ClientToolResult { tool_use_id: "t1".into(), result, error }, now);
        assert!(
            matches!(&effects[..], [Effect::Send(ServerMessage::BidiError { code, recoverable: true, .. })] if code == "malformed_message"),
            "{effects:?}"
        );
    }
    let stray = Input::ClientToolResult { tool_use_id: "t1".into(), result: Some(serde_json::json!(1)), error: None };
    let effects = session.handle(stray, now);
    assert!(
        matches!(&effects[..], [Effect::Send(ServerMessage::BidiError { code, .. })] if code == "no_client_tool_pending"),
        "{effects:?}"
    );
}

#[test]
fn a_voice_models_client_tool_call_goes_to_the_client_and_its_result_into_the_stream() {
    let (mut session, _) = Session::start_voice(super::test_agents::client_core(10), init());
    let now = Instant::now();
    let call = ToolUse { id: "v1".into(), name: "pick_account".into(), input: serde_json::json!({}) };
    let effects = session.handle(Input::Voice(VoiceInput::ToolUse(call)), now);
    assert!(
        effects.iter().any(
            |e| matches!(e, Effect::Send(ServerMessage::ClientToolCall { tool_use_id, .. }) if tool_use_id == "v1")
        ),
        "{effects:?}"
    );
    assert!(session.awaits_client() && session.next_deadline().is_some());
    let answer = Input::ClientToolResult {
        tool_use_id: "v1".into(),
        result: Some(serde_json::json!({ "account": "12345678" })),
        error: None,
    };
    let effects = session.handle(answer, now);
    let streamed = effects.iter().find_map(|e| match e {
        Effect::Voice(crate::events::VoiceEffect::SendToolResult(result)) => Some(result.clone()),
        _ => None,
    });
    let streamed = streamed.expect("the result goes into the voice stream");
    assert_eq!((streamed.tool_use_id.as_str(), &streamed.content["account"]), ("v1", &serde_json::json!("12345678")));
    assert!(!session.awaits_client());
}
