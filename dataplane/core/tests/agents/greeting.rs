//! The greeting a session opens with: a new session's, and — on arrival by transfer — the
//! receiving agent's when its Persona speaks first (before it answers the carried request,
//! text and voice); never on a return, nor without `speakFirst`.

use std::collections::BTreeMap;
use std::sync::Arc;

use switchboard_core::model::{ContentBlock, Role};
use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_core::{
    AgentCore, Effect, HandoffContext, HandoffKind, HistoryTurn, Session, VoiceEffect, WorkflowSnapshot,
};

use crate::common;

const MAX: &str = "Hi, I'm Max from Example Bank's security team.";
const ASK: &str = "I'd like to check my balance";

/// idv with its Persona's `greeting` and `speakFirst` set.
fn idv(greeting: Option<&str>, speak_first: bool) -> Arc<AgentCore> {
    let mut spec = common::spec("idv");
    spec.persona.spec.greeting = greeting.map(str::to_owned);
    spec.persona.spec.speak_first = speak_first;
    Arc::new(AgentCore::new(spec).expect("idv runs"))
}

fn arrival(kind: HandoffKind, history: Vec<HistoryTurn>) -> switchboard_core::SessionInit {
    let mut init = common::init(BTreeMap::new());
    init.carried.handoff = Some(HandoffContext {
        from_agent: "triage".into(),
        kind,
        reason: "balance".into(),
        last_user_message: Some(ASK.into()),
        intent: None,
        verified_user: None,
        workflow_state: WorkflowSnapshot::default(),
        return_to: Some("triage".into()),
        status: None,
        summary: None,
        memory: BTreeMap::new(),
        history,
    });
    init
}

fn asked() -> Vec<HistoryTurn> {
    vec![
        HistoryTurn { role: TranscriptRole::User, text: ASK.into() },
        HistoryTurn { role: TranscriptRole::Assistant, text: "Let me pass you to security.".into() },
    ]
}

/// The effects, named: `greeting` (the final assistant line of `MAX`), `entry` (its record
/// entry), `start` (`bidi_response_start`), `model` (a model call), `text` (text sent into
/// a voice stream); others are left out.
fn names(effects: &[Effect]) -> Vec<&'static str> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Send(ServerMessage::BidiTranscriptStream {
                role: TranscriptRole::Assistant,
                is_final: true,
                text,
                ..
            }) if text == MAX => Some("greeting"),
            Effect::Transcript(entry) if entry.event == "assistant" && entry.data["text"] == MAX => Some("entry"),
            Effect::Send(ServerMessage::BidiResponseStart { .. }) => Some("start"),
            Effect::CallModel(_) => Some("model"),
            Effect::Voice(VoiceEffect::SendText(_)) => Some("text"),
            _ => None,
        })
        .collect()
}

#[test]
fn a_transfer_to_a_persona_that_speaks_first_greets_then_answers_the_carried_request() {
    let (session, effects) = Session::start(idv(Some(MAX), true), arrival(HandoffKind::Transfer, asked()));
    assert_eq!(names(&effects), ["greeting", "entry", "start", "model"]);
    // The model answers the caller's request, not its own greeting.
    let request = common::model_calls(&effects)[0];
    let last = request.messages.last().expect("a conversation");
    assert_eq!(last.role, Role::User);
    assert_eq!(last.content, vec![ContentBlock::Text(ASK.into())]);
    assert_eq!(session.messages().len(), 1, "the greeting is not part of the conversation");

    let (voice, effects) = Session::start_voice(idv(Some(MAX), true), arrival(HandoffKind::Transfer, asked()));
    assert_eq!(names(&effects), ["greeting", "entry", "start", "text"], "voice: the line, then the request");
    assert!(effects.contains(&Effect::Voice(VoiceEffect::SendText(ASK.into()))));
    assert!(voice.voice_history().is_empty(), "the request is sent as text, not replayed");
}

#[test]
fn a_transfer_with_no_carried_request_is_only_greeted() {
    let (_, effects) = Session::start(idv(Some(MAX), true), arrival(HandoffKind::Transfer, Vec::new()));
    assert_eq!(names(&effects), ["greeting", "entry"]);
    let (_, effects) = Session::start_voice(idv(Some(MAX), true), arrival(HandoffKind::Transfer, Vec::new()));
    assert_eq!(names(&effects), ["greeting", "entry"]);
}

#[test]
fn no_greeting_after_a_handoff_without_speak_first_nor_on_a_return() {
    for (greeting, speak_first, kind) in [
        (Some(MAX), false, HandoffKind::Transfer),
        (None, true, HandoffKind::Transfer),
        (Some("   "), true, HandoffKind::Transfer),
        (Some(MAX), true, HandoffKind::Return),
    ] {
        let (_, effects) = Session::start(idv(greeting, speak_first), arrival(kind, asked()));
        assert_eq!(names(&effects), ["start", "model"], "{greeting:?} {speak_first} {kind:?}");
        let (_, effects) = Session::start_voice(idv(greeting, speak_first), arrival(kind, asked()));
        assert_eq!(names(&effects), ["start", "text"], "{greeting:?} {speak_first} {kind:?}");
    }
}

#[test]
fn a_new_session_is_greeted_whether_or_not_its_persona_speaks_first() {
    for speak_first in [false, true] {
        let (_, effects) = Session::start(idv(Some(MAX), speak_first), common::init(BTreeMap::new()));
        assert_eq!(names(&effects), ["greeting", "entry"], "{speak_first}");
    }
    let mut resumed = common::init(BTreeMap::new());
    resumed.carried.history = asked();
    let (_, effects) = Session::start(idv(Some(MAX), true), resumed);
    assert!(names(&effects).is_empty(), "a resumed session is not greeted again");
}
