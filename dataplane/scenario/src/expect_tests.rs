//! Unit tests of the expectation matching, on turns built from protocol JSON.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::file::{ConsentAnswer, Expect};
use crate::observe::{ConsentSeen, Event, SessionView, Turn, TurnEnd};

/// A turn of `messages` (protocol JSON), the n-th arriving at n * 100 ms, ended by the last.
fn turn(messages: &[serde_json::Value]) -> Turn {
    let mut turn = Turn::new("hello");
    for (i, message) in messages.iter().enumerate() {
        let message = serde_json::from_value(message.clone()).expect("a protocol message");
        turn.events.push(Event { at: Duration::from_millis(100 * (i as u64 + 1)), message: Some(message), raw: None });
    }
    turn.ended_at = turn.events.last().map(|e| e.at);
    turn
}

fn view_after(turn: &Turn) -> SessionView {
    let mut view = SessionView::new([("banking".to_owned(), "serve".to_owned())].into(), Default::default());
    for message in turn.messages() {
        view.observe(message);
    }
    view
}

fn expect(yaml: &str) -> Expect {
    serde_yaml::from_str(yaml).expect("an expect block")
}

fn divergences(yaml: &str, turn: &Turn) -> Vec<Divergence> {
    check(&expect(yaml), turn, &view_after(turn)).expect("checks")
}

/// idv hands a verified caller to banking, which checks the balance.
fn balance_turn() -> Turn {
    turn(&[
        json!({"type": "bidi_response_start", "turn": 3}),
        json!({"type": "bidi_transcript_stream", "role": "assistant", "text": "I'll pass", "delta": true, "is_final": false}),
        json!({"type": "bidi_transcript_stream", "role": "assistant", "text": "I'll pass you to our banking team.", "delta": false, "is_final": true}),
        json!({"type": "tool_start", "tool_use_id": "t1", "name": "transfer_to_banking", "input": {"reason": "My balance please"}}),
        json!({"type": "tool_complete", "tool_use_id": "t1", "name": "transfer_to_banking", "result": {}, "cached": false}),
        json!({"type": "bidi_response_complete", "turn": 3, "stop_reason": "handoff"}),
        json!({"type": "handoff", "from": "idv", "to": "banking", "kind": "transfer", "context": {
            "from_agent": "idv", "kind": "transfer", "reason": "balance",
            "workflow_state": {"agent": "idv", "node": "to_banking", "visited": []}
        }}),
        json!({"type": "bidi_connection_start", "session_id": "s", "agent": "banking", "mode": "text", "model": "m"}),
        json!({"type": "memory_update", "key": "verifiedUser", "value": {"name": "Ada Lovelace", "accountNumber": "12345678"}}),
        json!({"type": "tool_start", "tool_use_id": "t2", "name": "check_balance", "input": {}}),
        json!({"type": "tool_complete", "tool_use_id": "t2", "name": "check_balance", "result": {"balance": 1234.56}, "cached": false}),
        json!({"type": "bidi_transcript_stream", "role": "assistant", "text": "Your balance is 1234.56 GBP.", "delta": false, "is_final": true}),
        json!({"type": "bidi_response_complete", "turn": 1, "stop_reason": "end_turn"}),
    ])
}

#[test]
fn a_turn_that_does_what_the_step_expects_passes() {
    let yaml = r#"
agent: banking
tools: [{name: transfer_to_banking, args: {reason: My balance please}}, {name: check_balance, argsExact: {}, outcome: ok}]
handoffs: [{to: banking, from: idv, kind: transfer}]
memory: [{key: verifiedUser, value: {name: Ada Lovelace}}]
transcript: {contains: [banking team, "1234.56 GBP"], matches: "(?i)your BALANCE is \\d+", notContains: sorry}
workflow: serve
noError: true
latency: {firstTokenMs: 200, firstTextMs: 300, turnMs: 1300}
"#;
    assert_eq!(divergences(yaml, &balance_turn()), []);
}

#[test]
fn each_expectation_that_does_not_hold_is_a_divergence_naming_what_happened() {
    let turn = balance_turn();
    let one = |yaml: &str| {
        let found = divergences(yaml, &turn);
        assert_eq!(found.len(), 1, "{yaml}: {found:?}");
        found[0].to_string()
    };
    let wrong_arg = one("tools: [{name: transfer_to_banking, args: {reason: something else}}]");
    assert!(
        wrong_arg.starts_with("tools[0]: expected a call of transfer_to_banking with arguments including"),
        "{wrong_arg}"
    );
    assert!(
        wrong_arg.contains(
            r#"got tool calls: transfer_to_banking {"reason":"My balance please"} (ok), check_balance {} (ok)"#
        ),
        "{wrong_arg}"
    );
    // Order counts: check_balance came after the transfer.
    let order = one("tools: [{name: check_balance}, {name: transfer_to_banking}]");
    assert!(order.starts_with("tools[1]:") && order.contains("after the calls matched before it"), "{order}");
    assert!(one("tools: []").starts_with("tools: expected no tool calls; got tool calls:"));
    assert!(one("tools: [{name: check_balance, outcome: error}]").contains("that fails"));
    let handoff = one("handoffs: [{to: disputes}]");
    assert_eq!(handoff, "handoffs[0]: expected a handoff to disputes; got handoffs: idv -> banking (transfer)");
    assert!(one("handoffs: [{to: banking, kind: return}]").contains("(return)"));
    assert_eq!(one("agent: idv"), "agent: expected idv; got banking");
    assert_eq!(one("memory: [{key: other}]"), "memory[0]: expected other set; got other is not set");
    assert!(
        one("memory: [{key: verifiedUser, absent: true}]").starts_with("memory[0]: expected verifiedUser not set; got")
    );
    assert_eq!(divergences("memory: [{key: other, absent: true}]", &turn), []);
    assert!(one("memory: [{key: verifiedUser, value: {name: Alan}}]").contains(r#"got verifiedUser = {"#));
    let missing = one("transcript: {contains: Goodbye}");
    assert!(
        missing.starts_with(r#"transcript.contains: expected text containing "Goodbye"; got "I'll pass you"#),
        "{missing}"
    );
    assert!(
        one("transcript: {matches: '^Goodbye'}").starts_with("transcript.matches: expected text matching /^Goodbye/")
    );
    assert!(one("transcript: {notContains: balance}").starts_with("transcript.notContains:"));
    assert_eq!(one("workflow: done"), "workflow: expected node done; got node serve");
    assert_eq!(
        one("latency: {firstTokenMs: 1}"),
        "latency.firstTokenMs: expected the first streamed text within 1 ms; got the first streamed text after 200 ms"
    );
    assert!(one("latency: {turnMs: 1}").contains("the end of the turn after 1300 ms"));
}

#[test]
fn values_match_partially_or_exactly_and_numbers_by_value() {
    let actual = json!({"a": 1, "b": {"c": [1, 2.5], "d": "x"}});
    assert!(json_matches(&json!({"a": 1.0}), &actual, false));
    assert!(json_matches(&json!({"b": {"c": [1, 2.5]}}), &actual, false));
    assert!(!json_matches(&json!({"b": {"c": [1]}}), &actual, false), "lists match whole");
    assert!(!json_matches(&json!({"a": 1}), &actual, true), "exact wants every key");
    assert!(json_matches(&actual.clone(), &actual, true));
    assert!(!json_matches(&json!({"a": "1"}), &actual, false), "no coercion between strings and numbers");
    assert!(!json_matches(&json!({"z": null}), &actual, false), "a key given must be present");
}

#[test]
fn consent_requests_follow_the_list_and_extra_ones_fail() {
    let mut turn = balance_turn();
    turn.consents.push(ConsentSeen { tool: "open_dispute".into(), answer: ConsentAnswer::Allow });
    assert_eq!(divergences("consent: [{tool: open_dispute, answer: allow}]", &turn), []);
    let extra = divergences("{}", &turn);
    assert_eq!(extra.len(), 1);
    assert!(extra[0].to_string().contains("a consent request for open_dispute (the runner denied it)"), "{extra:?}");
    let missing =
        divergences("consent: [{tool: open_dispute, answer: allow}, {tool: open_dispute, answer: deny}]", &turn);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].expectation, "consent[1]");
}

#[test]
fn errors_and_timeouts_are_divergences() {
    let mut turn = turn(&[
        json!({"type": "tool_start", "tool_use_id": "t1", "name": "open_dispute", "input": {}}),
        json!({"type": "tool_error", "tool_use_id": "t1", "name": "open_dispute", "kind": "consent_declined", "message": "no"}),
        json!({"type": "bidi_error", "code": "model_error", "message": "throttled", "recoverable": true}),
    ]);
    let found = divergences("noError: true", &turn);
    assert_eq!(found.len(), 1);
    assert!(found[0].actual.contains("tool_error open_dispute (consent_declined)"), "{found:?}");
    assert!(found[0].actual.contains("bidi_error model_error: throttled"), "{found:?}");
    assert_eq!(divergences("tools: [{name: open_dispute, outcome: error}]", &turn), []);
    turn.end = TurnEnd::TimedOut(Duration::from_secs(30));
    let found = divergences("{}", &turn);
    assert_eq!(found[0].to_string(), "turn: expected an answer; got the turn did not end within 30000 ms");
}
