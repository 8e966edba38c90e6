//! Calls on their own: each rule of the pipeline that needs no session around it.

use std::time::{Duration, Instant};

use super::*;
use crate::events::VoiceEffect;
use crate::model::ToolResultStatus;
use crate::session::common::Common;
use crate::session::drive::Drive;
use crate::session::test_agents::{client_core, core, init};

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

/// Runs `f` with calls and a context of a session of [`client_core`].
fn with_client_calls(timeout_seconds: u32, f: impl FnOnce(&mut Calls, &mut Cx<'_>)) {
    let (mut common, conversation) = Common::new(client_core(timeout_seconds), init());
    let mut drive = Drive::new(false);
    let mut calls = Calls::default();
    let mut cx = Cx { common: &mut common, conversation: &conversation, drive: &mut drive };
    f(&mut calls, &mut cx);
}

fn client_call(effects: &[Effect]) -> Option<(String, u64)> {
    effects.iter().find_map(|e| match e {
        Effect::Send(ServerMessage::ClientToolCall { tool_use_id, timeout_ms, .. }) => {
            Some((tool_use_id.clone(), *timeout_ms))
        }
        _ => None,
    })
}

#[test]
fn a_client_tool_goes_to_the_client_and_its_valid_result_to_the_model() {
    with_client_calls(10, |calls, cx| {
        let now = Instant::now();
        let input = serde_json::json!({ "question": "which account?" });
        let effects = calls.start(vec![use_of("c1", "pick_account", input)], cx, now);
        assert_eq!(client_call(&effects), Some(("c1".into(), 10_000)), "{effects:?}");
        assert!(!effects.iter().any(|e| matches!(e, Effect::ExecuteTool { .. })), "the runtime runs nothing");
        assert!(calls.awaits_client() && calls.running() && !calls.all_answered());
        let wrong = calls.client_answered("c9", Ok(serde_json::json!({})), cx, now);
        assert!(
            matches!(&wrong[..], [Effect::Send(ServerMessage::BidiError { code, .. })] if code == "no_client_tool_pending")
        );
        let done = calls.client_answered("c1", Ok(serde_json::json!({ "account": "12345678" })), cx, now);
        assert_eq!(results(&done), ["ok pick_account"]);
        assert!(calls.all_answered() && !calls.awaits_client() && calls.next_deadline().is_none());
        let again = calls.client_answered("c1", Ok(serde_json::json!({ "account": "12345678" })), cx, now);
        assert!(matches!(&again[..], [Effect::Send(ServerMessage::BidiError { .. })]), "answered once only");
        let answered = calls.take_results();
        assert_eq!(answered[0].status, ToolResultStatus::Success);
        assert_eq!(answered[0].content["account"], "12345678");
    });
}

#[test]
fn a_client_result_off_the_schema_and_a_client_error_reach_the_model_as_typed_errors() {
    with_client_calls(10, |calls, cx| {
        let now = Instant::now();
        let uses = vec![
            use_of("c1", "pick_account", serde_json::json!({})),
            use_of("c2", "pick_account", serde_json::json!({})),
        ];
        calls.start(uses, cx, now);
        let bad = calls.client_answered("c1", Ok(serde_json::json!({ "account": "x" })), cx, now);
        assert_eq!(results(&bad), ["client_bad_result"]);
        let refused = calls.client_answered("c2", Err("e".repeat(5000)), cx, now);
        assert_eq!(results(&refused), ["client_error"]);
        let answered = calls.take_results();
        assert!(answered.iter().all(|r| r.status == ToolResultStatus::Error));
        assert_eq!(answered[0].content["error"]["kind"], "client_bad_result");
        let message = answered[1].content["error"]["message"].as_str().unwrap_or_default();
        assert!(message.len() < 1100, "the client's error is bounded: {} chars", message.len());
    });
}

#[test]
fn an_unanswered_client_call_times_out_and_a_late_answer_is_refused() {
    with_client_calls(3, |calls, cx| {
        let now = Instant::now();
        calls.start(vec![use_of("c1", "pick_account", serde_json::json!({}))], cx, now);
        let due = calls.next_deadline().expect("a deadline");
        assert_eq!(due, now + Duration::from_secs(3));
        assert!(calls.tick(cx, due - Duration::from_millis(1)).is_empty(), "not yet");
        assert_eq!(results(&calls.tick(cx, due)), ["client_timeout"]);
        let late = calls.client_answered("c1", Ok(serde_json::json!({ "account": "12345678" })), cx, due);
        assert!(matches!(&late[..], [Effect::Send(ServerMessage::BidiError { .. })]));
        assert_eq!(calls.take_results()[0].content["error"]["kind"], "client_timeout");
    });
}

fn cards(effects: &[Effect]) -> Vec<crate::protocol::Card> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(ServerMessage::DisplayCard { card, .. }) => Some(card.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn show_card_sends_the_card_and_tells_the_model_it_was_shown() {
    with_calls("banking", false, |calls, cx| {
        let card = serde_json::json!({
            "title": "Recent transactions",
            "fields": [{ "label": "Corner Cafe", "value": -3.4 }],
            "link": { "url": "https://bank.example/transactions" }
        });
        let effects = calls.start(vec![use_of("s1", "show_card", card)], cx, Instant::now());
        let shown = cards(&effects);
        assert_eq!(shown.len(), 1, "{effects:?}");
        assert_eq!((shown[0].title.as_str(), shown[0].fields[0].value.as_str()), ("Recent transactions", "-3.4"));
        assert!(!effects.iter().any(|e| matches!(e, Effect::ExecuteTool { .. })), "nothing runs elsewhere");
        assert_eq!(results(&effects), ["ok show_card"]);
        assert_eq!(calls.take_results()[0].content, serde_json::json!({ "shown": true }));
    });
}

#[test]
fn a_card_off_its_bounds_is_not_shown_and_the_model_is_told_why() {
    with_calls("banking", false, |calls, cx| {
        let bad = serde_json::json!({ "title": "x", "link": { "url": "javascript:alert(1)" } });
        let long = serde_json::json!({ "title": "t".repeat(500) });
        let uses = vec![use_of("s1", "show_card", bad), use_of("s2", "show_card", long)];
        let effects = calls.start(uses, cx, Instant::now());
        assert!(cards(&effects).is_empty(), "{effects:?}");
        assert_eq!(results(&effects), ["invalid_input", "invalid_input"]);
    });
}
