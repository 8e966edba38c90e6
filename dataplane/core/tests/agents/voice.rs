//! The core driven by a streaming voice model: FINAL texts in, tool calls from the stream
//! through the same pipeline, results back as `SendToolResult` (never a model call),
//! handoffs, memory, typed text in hybrid sessions, arrival by handoff.

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::prelude::*;
use switchboard_core::model::{ContentBlock, Role, ToolResultStatus};
use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_core::{
    Effect, HandoffContext, HandoffKind, Input, Session, VoiceEffect, VoiceInput, WorkflowSnapshot,
};

use crate::common::{self, call};

fn voice(agent: &str, memory: BTreeMap<String, serde_json::Value>) -> (Session, Vec<Effect>) {
    Session::start_voice(common::core(agent), common::init(memory))
}

fn tool_results(effects: &[Effect]) -> Vec<(String, ToolResultStatus, serde_json::Value)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Voice(VoiceEffect::SendToolResult(r)) => Some((r.tool_use_id.clone(), r.status, r.content.clone())),
            _ => None,
        })
        .collect()
}

fn sent(effects: &[Effect]) -> Vec<&ServerMessage> {
    effects.iter().filter_map(|e| if let Effect::Send(m) = e { Some(m) } else { None }).collect()
}

fn idv_details(account: &str) -> serde_json::Value {
    serde_json::json!({ "name": "Ada Lovelace", "accountNumber": account, "sortCode": "12-34-56" })
}

#[test]
fn a_voice_identity_check_runs_the_tool_pipeline_and_answers_into_the_stream() {
    let now = Instant::now();
    let (mut idv, first) = voice("idv", BTreeMap::new());
    assert!(common::model_calls(&first).is_empty(), "a voice session never asks for model calls");
    assert!(
        matches!(sent(&first)[0], ServerMessage::BidiConnectionStart { model, .. } if model == "amazon.nova-2-sonic-v1:0")
    );
    let heard = idv.handle(Input::Voice(VoiceInput::UserFinal("My name is Ada Lovelace".into())), now);
    assert!(sent(&heard).iter().any(|m| matches!(m, ServerMessage::BidiResponseStart { turn: 1 })));
    idv.handle(Input::Voice(VoiceInput::AssistantFinal("Thanks Ada, let me check.".into())), now);
    let planned =
        idv.handle(Input::Voice(VoiceInput::ToolUse(call("t1", "perform_idv_check", idv_details("12345678")))), now);
    assert_eq!(common::executions(&planned).len(), 1);
    let result =
        serde_json::json!({ "verified": true, "user": { "name": "Ada Lovelace", "accountNumber": "12345678" } });
    let done = idv.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(result.clone()) }, now);
    assert!(common::model_calls(&done).is_empty());
    assert_eq!(tool_results(&done), vec![("t1".to_owned(), ToolResultStatus::Success, result)]);
    assert!(sent(&done).iter().any(|m| matches!(m, ServerMessage::MemoryUpdate { key, .. } if key == "verifiedUser")));
    assert!(
        sent(&done).iter().any(|m| matches!(m, ServerMessage::WorkflowTransition { to, .. } if to == "choose")),
        "the memorySet condition moves the workflow on: {done:?}"
    );
    assert_eq!(idv.memory().get("verifiedUser").map(|u| u["accountNumber"].clone()), Some("12345678".into()));
    idv.handle(Input::Voice(VoiceInput::AssistantFinal("You're verified.".into())), now);
    let end = idv.handle(Input::Voice(VoiceInput::CompletionEnd { stop_reason: "end_turn".into() }), now);
    assert!(sent(&end).iter().any(|m| matches!(m, ServerMessage::BidiResponseComplete { turn: 1, .. })));
    // The conversation: the user's words, the assistant's final text with its call, the
    // result, the final reply.
    let roles: Vec<Role> = idv.messages().iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant, Role::User, Role::Assistant]);
    assert!(matches!(&idv.messages()[1].content[1], ContentBlock::ToolUse(u) if u.id == "t1"));
}

#[test]
fn a_voice_transfer_hands_off_instead_of_answering_the_stream() {
    let now = Instant::now();
    let (mut idv, _) = voice("idv", BTreeMap::new());
    idv.handle(Input::Voice(VoiceInput::ToolUse(call("t0", "perform_idv_check", idv_details("12345678")))), now);
    let result =
        serde_json::json!({ "verified": true, "user": { "name": "Ada Lovelace", "accountNumber": "12345678" } });
    idv.handle(Input::ToolFinished { tool_use_id: "t0".into(), outcome: Ok(result) }, now);
    idv.handle(Input::Voice(VoiceInput::UserFinal("My balance please".into())), now);
    let effects = idv.handle(
        Input::Voice(VoiceInput::ToolUse(call(
            "t1",
            "transfer_to_banking",
            serde_json::json!({ "reason": "balance" }),
        ))),
        now,
    );
    let request = effects.iter().find_map(|e| if let Effect::Handoff(r) = e { Some(r.clone()) } else { None });
    let request = request.expect("a handoff");
    assert_eq!(request.target, "banking");
    assert_eq!(request.context.last_user_message.as_deref(), Some("My balance please"));
    assert!(tool_results(&effects).is_empty());
    assert!(idv.is_over());
}

#[test]
fn typed_text_in_a_voice_session_goes_into_the_stream_once() {
    let now = Instant::now();
    let (mut triage, _) = voice("triage", BTreeMap::new());
    let typed = triage.handle(Input::user_text("What are your opening hours?".into()), now);
    assert!(typed.contains(&Effect::Voice(VoiceEffect::SendText("What are your opening hours?".into()))));
    assert!(common::model_calls(&typed).is_empty());
    // The model's echo of the typed text is not a second user message.
    let echo = triage.handle(Input::Voice(VoiceInput::UserFinal("What are your opening hours?".into())), now);
    assert!(echo.is_empty(), "{echo:?}");
    assert_eq!(triage.messages().len(), 1);
}

#[test]
fn typed_text_in_a_voice_session_is_acknowledged_by_its_id() {
    let now = Instant::now();
    let (mut triage, _) = voice("triage", BTreeMap::new());
    let typed = |text: &str, id: &str| Input::UserText { text: text.into(), id: Some(id.into()) };
    let taken = triage.handle(typed("Hello", "a"), now);
    assert!(
        sent(&taken).iter().any(|m| matches!(m, ServerMessage::BidiTranscriptStream {
            role: TranscriptRole::User, text, input_id: Some(id), ..
        } if text == "Hello" && id == "a")),
        "{taken:?}"
    );
    let blank = triage.handle(typed("  ", "b"), now);
    assert!(
        matches!(sent(&blank)[..], [ServerMessage::BidiError { code, input_id: Some(id), .. }] if code == "empty_text" && id == "b"),
        "{blank:?}"
    );
}

#[test]
fn arriving_by_handoff_sends_the_carried_request_as_text_after_the_history() {
    let mut init = common::init(BTreeMap::new());
    init.carried.handoff = Some(HandoffContext {
        from_agent: "triage".into(),
        kind: HandoffKind::Transfer,
        reason: "balance".into(),
        last_user_message: Some("I'd like to check my balance".into()),
        intent: None,
        verified_user: None,
        workflow_state: WorkflowSnapshot::default(),
        return_to: Some("triage".into()),
        status: None,
        summary: None,
        memory: BTreeMap::new(),
        history: vec![
            switchboard_core::HistoryTurn { role: TranscriptRole::User, text: "Hello".into() },
            switchboard_core::HistoryTurn { role: TranscriptRole::Assistant, text: "Hi, how can I help?".into() },
            switchboard_core::HistoryTurn { role: TranscriptRole::User, text: "I'd like to check my balance".into() },
        ],
    });
    let (idv, first) = Session::start_voice(common::core("idv"), init);
    assert!(first.contains(&Effect::Voice(VoiceEffect::SendText("I'd like to check my balance".into()))), "{first:?}");
    assert!(common::model_calls(&first).is_empty());
    let history = idv.voice_history();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[1].text, "Hi, how can I help?");
    let tools: Vec<String> = idv.voice_tools().into_iter().map(|t| t.name).collect();
    for name in ["perform_idv_check", "transfer_to_banking", "transfer_to_disputes", "return_to_triage"] {
        assert!(tools.iter().any(|t| t == name), "{name} offered to the stream: {tools:?}");
    }
}

#[test]
fn a_consent_tool_waits_for_the_user_and_a_refused_one_answers_the_stream_with_an_error() {
    let now = Instant::now();
    let (mut disputes, _) = voice("disputes", common::verified_memory("12345678"));
    disputes.handle(Input::Voice(VoiceInput::UserFinal("dispute payment tx-1".into())), now);
    let input = serde_json::json!({ "transactionId": "tx-1", "reason": "not me" });
    let asked = disputes.handle(Input::Voice(VoiceInput::ToolUse(call("t1", "open_dispute", input))), now);
    assert!(
        sent(&asked)
            .iter()
            .any(|m| matches!(m, ServerMessage::ConsentRequest { tool_use_id, .. } if tool_use_id == "t1")),
        "{asked:?}"
    );
    assert!(common::executions(&asked).is_empty());
    let declined = disputes.handle(Input::Consent { tool_use_id: "t1".into(), approved: false }, now);
    let results = tool_results(&declined);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1, ToolResultStatus::Error);
}

/// A random voice input.
fn voice_input() -> impl Strategy<Value = Input> {
    prop_oneof![
        "[a-z ]{1,20}".prop_map(|x| Input::Voice(VoiceInput::UserFinal(x))),
        "[a-z ]{1,20}".prop_map(|x| Input::Voice(VoiceInput::AssistantFinal(x))),
        "[a-z ]{1,20}".prop_map(Input::user_text),
        Just(Input::Voice(VoiceInput::Interrupted)),
        prop_oneof![Just("end_turn"), Just("interrupted"), Just("tool_use")]
            .prop_map(|s| Input::Voice(VoiceInput::CompletionEnd { stop_reason: s.into() })),
        (0u8..4, "[0-9]{8}").prop_map(|(n, account)| Input::Voice(VoiceInput::ToolUse(call(
            &format!("t{n}"),
            "perform_idv_check",
            idv_details(&account)
        )))),
        (0u8..4).prop_map(|n| Input::Voice(VoiceInput::ToolUse(call(
            &format!("t{n}"),
            "check_balance",
            serde_json::json!({})
        )))),
        (0u8..4).prop_map(|n| Input::ToolFinished {
            tool_use_id: format!("t{n}"),
            outcome: Ok(serde_json::json!({ "verified": false }))
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the stream reports, a voice session never asks for a text model call,
    /// sends no more tool results than it saw calls, only records text it was told was
    /// FINAL (or typed), and keeps bidi_response_start/complete paired.
    #[test]
    fn voice_sessions_stay_consistent(inputs in proptest::collection::vec(voice_input(), 1..40)) {
        let now = Instant::now();
        let (mut session, _) = voice("idv", BTreeMap::new());
        let mut said: Vec<String> = Vec::new();
        let (mut calls_seen, mut answered) = (0usize, 0usize);
        let (mut started, mut completed) = (0u64, 0u64);
        for input in inputs {
            match &input {
                Input::Voice(VoiceInput::UserFinal(t)) | Input::Voice(VoiceInput::AssistantFinal(t)) | Input::UserText { text: t, .. } => said.push(t.clone()),
                Input::Voice(VoiceInput::ToolUse(_)) => calls_seen += 1,
                _ => {}
            }
            let effects = session.handle(input, now);
            prop_assert!(common::model_calls(&effects).is_empty());
            answered += tool_results(&effects).len();
            prop_assert!(answered <= calls_seen, "{answered} results for {calls_seen} calls");
            for message in sent(&effects) {
                match message {
                    ServerMessage::BidiResponseStart { .. } => started += 1,
                    ServerMessage::BidiResponseComplete { .. } => completed += 1,
                    _ => {}
                }
            }
            prop_assert!(completed <= started && started <= completed + 1, "{started} started, {completed} completed");
        }
        for message in session.messages() {
            for block in &message.content {
                if let ContentBlock::Text(text) = block {
                    prop_assert!(said.iter().any(|s| s == text), "{text:?} was never said");
                }
            }
        }
    }
}

#[test]
fn a_state_change_is_told_to_the_live_stream_before_the_tool_result_and_a_text_session_is_not_told() {
    let now = Instant::now();
    let result =
        serde_json::json!({ "verified": true, "user": { "name": "Ada Lovelace", "accountNumber": "12345678" } });
    let notices = |effects: &[Effect]| -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Voice(VoiceEffect::StateChanged(text)) => Some(text.clone()),
                _ => None,
            })
            .collect()
    };
    let (mut idv, first) = voice("idv", BTreeMap::new());
    assert!(notices(&first).is_empty(), "a new stream opens with the state in its prompt");
    idv.handle(Input::Voice(VoiceInput::UserFinal("My name is Ada Lovelace".into())), now);
    let planned =
        idv.handle(Input::Voice(VoiceInput::ToolUse(call("t1", "perform_idv_check", idv_details("12345678")))), now);
    // The call moves the workflow to the step that allows it: told too.
    assert!(notices(&planned).iter().all(|n| !n.contains("verifiedUser")), "{planned:?}");
    let done = idv.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(result.clone()) }, now);
    let told = notices(&done);
    assert_eq!(told.len(), 1, "one notice for the input's changes: {done:?}");
    assert!(told[0].starts_with(switchboard_core::NOTICE_PREFIX), "{}", told[0]);
    assert!(told[0].contains("verifiedUser") && told[0].contains("Ada Lovelace"), "{}", told[0]);
    assert!(told[0].contains("The workflow is now at step \"choose\""), "{}", told[0]);
    let notice_at = done.iter().position(|e| matches!(e, Effect::Voice(VoiceEffect::StateChanged(_))));
    let result_at = done.iter().position(|e| matches!(e, Effect::Voice(VoiceEffect::SendToolResult(_))));
    assert!(notice_at < result_at, "told before the tool result: {done:?}");
    // Should the model echo the notice as the caller's words, it is not taken as theirs.
    let echo = idv.handle(Input::Voice(VoiceInput::UserFinal(told[0].clone())), now);
    assert!(!sent(&echo).iter().any(|m| matches!(m, ServerMessage::BidiTranscriptStream { .. })), "{echo:?}");

    let (mut text, _) = Session::start(common::core("idv"), common::init(BTreeMap::new()));
    text.handle(Input::user_text("My name is Ada Lovelace".into()), now);
    let reply = switchboard_core::ModelReply {
        tool_uses: vec![call("t1", "perform_idv_check", idv_details("12345678"))],
        ..Default::default()
    };
    text.handle(Input::ModelReply(reply), now);
    let done = text.handle(Input::ToolFinished { tool_use_id: "t1".into(), outcome: Ok(result) }, now);
    assert!(sent(&done).iter().any(|m| matches!(m, ServerMessage::MemoryUpdate { .. })));
    assert!(notices(&done).is_empty(), "a text model call reads the new prompt: no notice");
}
