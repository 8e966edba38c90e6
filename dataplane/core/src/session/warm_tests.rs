//! Warm transfers in the session: the person answering is a tool result telling the agent
//! to brief them, and the session ends when that reply is over (not when the person speaks
//! over it); a person who leaves during the brief brings the caller back to the agent.

use std::sync::Arc;
use std::time::Instant;

use switchboard_crds::agent::{Person, TransferMode};

use super::Session;
use super::test_agents::{core, init};
use crate::agent::AgentCore;
use crate::events::{Effect, Input, VoiceEffect, VoiceInput};
use crate::model::{ToolResultStatus, ToolUse};
use crate::protocol::{ServerMessage, StopReason, TransferOutcome};

/// Triage with `advisor`, put through `mode`.
fn triage(mode: TransferMode) -> Arc<AgentCore> {
    let mut spec = core("triage").spec().clone();
    spec.telephony.people = vec![Person {
        name: "advisor".into(),
        address: "sip:advisor@127.0.0.1:5070".into(),
        description: "Account questions".into(),
        transfer: mode,
    }];
    Arc::new(AgentCore::new(spec).expect("runnable"))
}

/// A voice session on triage whose model asked to put the caller through to the advisor:
/// the request the client got.
fn asked(mode: TransferMode, now: Instant) -> (Session, ServerMessage) {
    let (mut session, _) = Session::start_voice(triage(mode), init());
    session.handle(Input::Voice(VoiceInput::UserFinal("Put me through to the advisor please".into())), now);
    let tool_use = ToolUse {
        id: "t1".into(),
        name: "transfer_to_person".into(),
        input: serde_json::json!({ "person": "advisor", "reason": "the caller asked" }),
    };
    let effects = session.handle(Input::Voice(VoiceInput::ToolUse(tool_use)), now);
    let request = effects
        .into_iter()
        .find_map(|e| match e {
            Effect::Send(request @ ServerMessage::TransferRequest { .. }) => Some(request),
            _ => None,
        })
        .expect("a transfer_request");
    (session, request)
}

fn result(outcome: TransferOutcome, message: &str) -> Input {
    Input::TransferResult { tool_use_id: "t1".into(), outcome, message: message.into() }
}

fn closed(effects: &[Effect]) -> Option<&str> {
    effects.iter().find_map(|e| match e {
        Effect::Close { reason } => Some(reason.as_str()),
        _ => None,
    })
}

#[test]
fn a_warm_persons_answer_asks_for_a_brief_and_the_session_ends_after_it() {
    let now = Instant::now();
    let (mut session, request) = asked(TransferMode::Warm, now);
    assert!(matches!(request, ServerMessage::TransferRequest { warm: true, .. }), "{request:?}");
    let answered = session.handle(result(TransferOutcome::Transferred, "OK"), now);
    assert_eq!(closed(&answered), None, "the session goes on for the brief: {answered:?}");
    let told = answered
        .iter()
        .find_map(|e| match e {
            Effect::Voice(VoiceEffect::SendToolResult(r)) => Some(r.clone()),
            _ => None,
        })
        .expect("the result into the stream");
    assert_eq!(told.status, ToolResultStatus::Success);
    assert!(told.content.to_string().contains("who is calling and why"), "{told:?}");
    // The person says hello over the brief: the agent answers them, the session goes on.
    session.handle(Input::Voice(VoiceInput::AssistantFinal("A caller".into())), now);
    let spoken_over = session.handle(Input::Voice(VoiceInput::UserFinal("Hello, who is this?".into())), now);
    assert_eq!(closed(&spoken_over), None, "{spoken_over:?}");
    session.handle(Input::Voice(VoiceInput::AssistantFinal("Ada Lovelace asks about a payment.".into())), now);
    let over = session.handle(Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::EndTurn }), now);
    let reason = closed(&over).expect("the session ends after the brief");
    assert!(reason.contains("transferred to advisor") && reason.contains("warm"), "{reason}");
}

#[test]
fn a_cold_persons_answer_ends_the_session_at_once() {
    let now = Instant::now();
    let (mut session, request) = asked(TransferMode::Cold, now);
    assert!(matches!(request, ServerMessage::TransferRequest { warm: false, .. }), "{request:?}");
    let answered = session.handle(result(TransferOutcome::Transferred, "OK"), now);
    assert_eq!(closed(&answered), Some("transferred to advisor"));
}

#[test]
fn a_person_who_leaves_during_the_brief_brings_the_caller_back_to_the_agent() {
    let now = Instant::now();
    let (mut session, _) = asked(TransferMode::Warm, now);
    session.handle(result(TransferOutcome::Transferred, "OK"), now);
    let left = session.handle(result(TransferOutcome::Failed, "the person hung up while the agent briefed them"), now);
    let told = left
        .iter()
        .find_map(|e| match e {
            Effect::Voice(VoiceEffect::SendText(text)) => Some(text.clone()),
            _ => None,
        })
        .expect("the agent is told");
    assert!(told.contains("advisor hung up") && told.contains("caller is back"), "{told}");
    let over = session.handle(Input::Voice(VoiceInput::CompletionEnd { stop_reason: StopReason::EndTurn }), now);
    assert_eq!(closed(&over), None, "the agent still has the caller: {over:?}");
    // A second report for a transfer no longer under way is refused as ever.
    let again = session.handle(result(TransferOutcome::Failed, "again"), now);
    assert!(
        matches!(&again[..], [Effect::Send(ServerMessage::BidiError { code, .. })] if code == "no_transfer_pending"),
        "{again:?}"
    );
}
