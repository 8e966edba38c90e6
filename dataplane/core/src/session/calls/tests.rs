//! Calls on their own: each rule of the pipeline that needs no session around it.

use std::time::{Duration, Instant};

use super::*;
use crate::events::VoiceEffect;
use crate::model::ToolResultStatus;
use crate::session::common::Common;
use crate::session::drive::Drive;
use crate::session::test_agents::{core, init};

fn use_of(id: &str, name: &str, input: serde_json::Value) -> ToolUse {
    ToolUse { id: id.into(), name: name.into(), input }
}

fn dispute() -> serde_json::Value {
    serde_json::json!({ "transactionId": "tx-1003", "reason": "not me" })
}

/// Runs `f` with calls and a context of agent `agent`'s new session.
fn with_calls(agent: &str, voice: bool, f: impl FnOnce(&mut Calls, &mut Cx<'_>)) {
    let (mut common, conversation) = Common::new(core(agent), init());
    let mut drive = Drive::new(voice);
    let mut calls = Calls::default();
    let mut cx = Cx { common: &mut common, conversation: &conversation, drive: &mut drive };
    f(&mut calls, &mut cx);
}

fn results(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(ServerMessage::ToolError { kind, .. }) => Some(kind.clone()),
            Effect::Send(ServerMessage::ToolComplete { name, .. }) => Some(format!("ok {name}")),
            _ => None,
        })
        .collect()
}

#[test]
fn an_unknown_tool_is_answered_at_once_with_an_error() {
    with_calls("triage", false, |calls, cx| {
        let effects = calls.start(vec![use_of("t1", "no_such_tool", serde_json::json!({}))], cx, Instant::now());
        assert_eq!(results(&effects), ["unknown_tool"]);
        assert!(calls.all_answered() && !calls.is_empty() && !calls.running());
        let answered = calls.take_results();
        assert_eq!(answered[0].status, ToolResultStatus::Error);
        assert!(calls.is_empty());
    });
}

#[test]
fn a_consent_tool_waits_then_times_out() {
    with_calls("disputes", false, |calls, cx| {
        let now = Instant::now();
        let effects = calls.start(vec![use_of("t1", "open_dispute", dispute())], cx, now);
        assert!(effects.iter().any(|e| matches!(e, Effect::Send(ServerMessage::ConsentRequest { .. }))));
        assert!(calls.awaits_consent() && calls.any_open() && !calls.all_answered());
        let due = calls.next_deadline().expect("a deadline");
        assert!(calls.tick(cx, due - Duration::from_millis(1)).is_empty(), "not yet");
        assert_eq!(results(&calls.tick(cx, due)), ["consent_timeout"]);
        assert!(calls.all_answered() && calls.next_deadline().is_none());
    });
}

#[test]
fn an_approved_call_runs_and_its_result_is_recorded() {
    with_calls("disputes", false, |calls, cx| {
        let now = Instant::now();
        calls.start(vec![use_of("t1", "open_dispute", dispute())], cx, now);
        let run = calls.consent("t1", true, cx, now);
        assert!(matches!(run.as_slice(), [Effect::ExecuteTool { .. }]));
        assert!(calls.running());
        assert!(calls.finished("other", Ok(serde_json::json!({})), cx, now).is_none(), "no such call");
        let done = calls.finished("t1", Ok(serde_json::json!({ "disputeId": "d-1" })), cx, now).expect("running");
        assert_eq!(results(&done), ["ok open_dispute"]);
        assert!(calls.all_answered());
        let unknown = calls.consent("t1", true, cx, now);
        assert!(matches!(&unknown[0], Effect::Send(ServerMessage::BidiError { .. })), "no consent pending");
    });
}

#[test]
fn words_answer_the_earliest_request_and_a_voice_model_is_asked_in_words() {
    with_calls("disputes", true, |calls, cx| {
        let now = Instant::now();
        let asked = calls.start(vec![use_of("t1", "open_dispute", dispute())], cx, now);
        assert!(asked.iter().any(|e| matches!(e, Effect::Voice(VoiceEffect::SendText(_)))), "voice: asked in words");
        let unclear = calls.spoken_consent("hmm, what is that", cx, now);
        assert!(calls.awaits_consent(), "still waiting: {unclear:?}");
        let no = calls.spoken_consent("no thanks", cx, now);
        assert_eq!(results(&no), ["consent_declined"]);
        assert!(calls.typed_consent("yes", None, cx, now).is_none(), "nothing waits now");
    });
}

#[test]
fn cancel_answers_every_open_call_and_drops_the_planned_handoff() {
    with_calls("triage", false, |calls, cx| {
        let now = Instant::now();
        let transfer = use_of("t1", "transfer_to_idv", serde_json::json!({ "reason": "verify" }));
        calls.start(vec![transfer], cx, now);
        assert!(calls.pending_handoff.is_some(), "the transfer is planned");
        let second = use_of("t2", "transfer_to_idv", serde_json::json!({ "reason": "again" }));
        assert!(!calls.has("t2"));
        let refused = calls.join(second, cx, now);
        assert_eq!(results(&refused), ["not_allowed"], "one handoff a reply");
        calls.cancel(cx, now);
        assert!(calls.take_handoff().is_none() && !calls.ending());
    });
}
