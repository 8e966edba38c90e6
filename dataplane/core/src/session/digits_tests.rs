//! Keys the agent presses (`send_digits`): offered on phone calls of an Agent that allows
//! it and nowhere else; a call of it is checked (bad keys are a clear error for the model),
//! becomes a `digits_request`, and the client's `digits_result` — or its silence past the
//! deadline — is the call's typed result.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Session;
use super::test_agents::{core, init};
use crate::agent::AgentCore;
use crate::events::{Effect, Input, VoiceEffect, VoiceInput};
use crate::memory::Memory;
use crate::model::{ToolResult, ToolResultStatus, ToolUse};
use crate::protocol::{DigitsOutcome, ServerMessage};
use crate::workflow::WorkflowState;

/// Triage, allowed to press keys or not.
fn triage(send_digits: bool) -> Arc<AgentCore> {
    let mut spec = core("triage").spec().clone();
    spec.telephony.send_digits = send_digits;
    Arc::new(AgentCore::new(spec).expect("runnable"))
}

/// A session's memory: a phone call's (no number to tell, as from a softphone) or not.
fn memory(phone: bool) -> BTreeMap<String, serde_json::Value> {
    let mut memory = init().carried.memory;
    if phone {
        memory.insert(crate::phone::MEMORY_KEY.to_owned(), serde_json::json!({}));
    }
    memory
}

fn offers(core: &AgentCore, phone: bool) -> bool {
    let memory = Memory::from_map(memory(phone));
    let all = core.all_tools(None, &memory).iter().any(|t| t.name == "send_digits");
    let state = WorkflowState::new(&core.spec().workflow.spec);
    let here = core.offered_tools(&state, None, &memory).iter().any(|t| t.name == "send_digits");
    assert_eq!(all, here, "offered for the stream and at the step alike");
    all
}

#[test]
fn the_tool_is_offered_only_on_phone_calls_of_an_agent_that_allows_it() {
    assert!(offers(&triage(true), true), "a phone call, allowed");
    assert!(!offers(&triage(true), false), "a WebSocket or WebRTC session has no keypad");
    assert!(!offers(&triage(false), true), "not allowed by the Agent");
    let mut outbound = Memory::default();
    outbound.set(crate::outbound::MEMORY_KEY, serde_json::json!({ "id": "call-1" }));
    assert!(triage(true).all_tools(None, &outbound).iter().any(|t| t.name == "send_digits"), "an outbound call");
    assert_eq!(triage(true).definition_of("send_digits").name, "send_digits", "known to the history");
}

/// A voice session on triage (allowed to press keys), a phone call or not, whose model
/// called `send_digits` with `digits`: the session and what the call did.
fn called(phone: bool, digits: serde_json::Value, now: Instant) -> (Session, Vec<Effect>) {
    let mut start = init();
    start.carried.memory = memory(phone);
    let (mut session, _) = Session::start_voice(triage(true), start);
    session.handle(Input::Voice(VoiceInput::UserFinal("Call the card company and choose lost cards".into())), now);
    let tool_use =
        ToolUse { id: "t1".into(), name: "send_digits".into(), input: serde_json::json!({ "digits": digits }) };
    let effects = session.handle(Input::Voice(VoiceInput::ToolUse(tool_use)), now);
    (session, effects)
}

fn tool_result(effects: &[Effect]) -> Option<ToolResult> {
    effects.iter().find_map(|e| match e {
        Effect::Voice(VoiceEffect::SendToolResult(r)) => Some(r.clone()),
        _ => None,
    })
}

fn request(effects: &[Effect]) -> Option<&str> {
    effects.iter().find_map(|e| match e {
        Effect::Send(ServerMessage::DigitsRequest { tool_use_id, digits }) if tool_use_id == "t1" => {
            Some(digits.as_str())
        }
        _ => None,
    })
}

fn error_kind(effects: &[Effect]) -> Option<&str> {
    effects.iter().find_map(|e| match e {
        Effect::Send(ServerMessage::ToolError { kind, .. }) => Some(kind.as_str()),
        _ => None,
    })
}

fn answer(outcome: DigitsOutcome, sent: u32, message: &str) -> Input {
    Input::DigitsResult { tool_use_id: "t1".into(), outcome, sent, message: message.into() }
}

#[test]
fn keys_go_to_the_client_and_its_answer_is_the_tools_result() {
    let now = Instant::now();
    let (mut session, effects) = called(true, serde_json::json!("1 2#"), now);
    assert_eq!(request(&effects), Some("12#"), "checked, spaces dropped: {effects:?}");
    assert!(tool_result(&effects).is_none(), "the call waits for the client");
    let start = effects.iter().find_map(|e| match e {
        Effect::Send(ServerMessage::ToolStart { name, input, .. }) if name == "send_digits" => Some(input.clone()),
        _ => None,
    });
    assert_eq!(start, Some(serde_json::json!({ "digits": "1 2#" })), "the call is told as any tool's: {effects:?}");
    let done = session.handle(answer(DigitsOutcome::Sent, 3, ""), now);
    let result = tool_result(&done).expect("the result into the stream");
    assert_eq!(result.status, ToolResultStatus::Success);
    assert_eq!(result.content, serde_json::json!({ "pressed": "12#", "keys": 3 }));
    // A second answer for the same call finds nothing waiting.
    let again = session.handle(answer(DigitsOutcome::Sent, 3, ""), now);
    assert!(
        matches!(&again[..], [Effect::Send(ServerMessage::BidiError { code, .. })] if code == "no_digits_pending"),
        "{again:?}"
    );
}

#[test]
fn keys_that_could_not_all_go_come_back_as_typed_errors() {
    let now = Instant::now();
    for (outcome, sent, kind, says) in [
        (DigitsOutcome::Unsupported, 0, "digits_unsupported", "takes no keypad tones"),
        (DigitsOutcome::Interrupted, 1, "digits_interrupted", "only 1 of the 3"),
        (DigitsOutcome::Rejected, 0, "digits_rejected", "could not send keys"),
    ] {
        let (mut session, _) = called(true, serde_json::json!("1w23"), now);
        let done = session.handle(answer(outcome, sent, "the call was put on hold"), now);
        assert_eq!(error_kind(&done), Some(kind), "{done:?}");
        let result = tool_result(&done).expect("the error into the stream");
        assert_eq!(result.status, ToolResultStatus::Error);
        let text = result.content.to_string();
        assert!(text.contains(says) && text.contains(kind), "{text}");
    }
}

#[test]
fn bad_keys_are_a_clear_error_and_nothing_goes_to_the_client() {
    let now = Instant::now();
    let (_, effects) = called(true, serde_json::json!("12x"), now);
    assert_eq!(request(&effects), None);
    assert_eq!(error_kind(&effects), Some("invalid_input"));
    let text = tool_result(&effects).expect("the error").content.to_string();
    assert!(text.contains("'x' is no key") && text.contains("0-9, *, #, A-D"), "{text}");
    let (_, long) = called(true, serde_json::json!("1".repeat(33)), now);
    assert!(tool_result(&long).expect("the error").content.to_string().contains("more than 32"));
}

#[test]
fn a_session_that_is_no_phone_call_presses_nothing() {
    let now = Instant::now();
    let (_, effects) = called(false, serde_json::json!("1"), now);
    assert_eq!(request(&effects), None);
    assert_eq!(error_kind(&effects), Some("not_allowed"));
    assert!(tool_result(&effects).expect("the error").content.to_string().contains("only on a phone call"));
}

#[test]
fn a_client_that_never_answers_ends_the_call_as_a_timeout() {
    let now = Instant::now();
    let (mut session, effects) = called(true, serde_json::json!("123"), now);
    assert!(request(&effects).is_some());
    let early = session.handle(Input::Tick, now + Duration::from_secs(10));
    assert!(tool_result(&early).is_none(), "1.5 s of keys and 15 s of grace: {early:?}");
    let late = session.handle(Input::Tick, now + Duration::from_secs(17));
    assert_eq!(error_kind(&late), Some("timeout"), "{late:?}");
    let text = tool_result(&late).expect("the error").content.to_string();
    assert!(text.contains("did not say") && text.contains("17 s"), "{text}");
}
