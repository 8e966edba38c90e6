//! The message an outbound call leaves on a machine: a session whose call a machine
//! answered (`outboundCall.answeredBy: machine`) on an Agent that declares
//! `spec.telephony.answeringMachine.message` opens with that message, said aloud whether or
//! not the Persona speaks first; a person, or an Agent without a message, gets the greeting.

use std::collections::BTreeMap;
use std::sync::Arc;

use switchboard_crds::agent::{AnsweringMachine, OnMachine};

use super::Session;
use super::test_agents::core;
use crate::agent::AgentCore;
use crate::events::{Effect, SessionInit};
use crate::grant::Carried;
use crate::protocol::{ServerMessage, TranscriptRole};

const MESSAGE: &str = "This is Example Bank about your card. Please call us back on 020 7946 0000.";
const GREETING: &str = "Hello, you're through to Example Bank. I'm Ava. How can I help you today?";

/// Triage, with `message` left on machines by `on_machine`, its Persona speaking first or not.
fn triage(message: Option<&str>, on_machine: OnMachine, speak_first: bool) -> Arc<AgentCore> {
    let mut spec = core("triage").spec().clone();
    spec.persona.spec.speak_first = speak_first;
    spec.telephony.answering_machine =
        Some(AnsweringMachine { on_machine, message: message.map(str::to_owned), ..AnsweringMachine::default() });
    Arc::new(AgentCore::new(spec).expect("runnable"))
}

/// A new session of an outbound call answered by `by` (none: not a call).
fn call(by: Option<&str>) -> SessionInit {
    let mut memory = BTreeMap::new();
    if let Some(by) = by {
        let call = serde_json::json!({ "id": "c-1", "to": "+442079460018", "variables": {}, "answeredBy": by });
        memory.insert(crate::outbound::MEMORY_KEY.to_owned(), call);
    }
    SessionInit {
        session_id: "s-1".into(),
        carried: Carried { memory, ..Carried::default() },
        ..SessionInit::default()
    }
}

/// The assistant line the session opened with, and what the voice model is to say first.
fn opened(agent: Arc<AgentCore>, init: SessionInit) -> (Option<String>, Option<String>) {
    let (session, effects) = Session::start_voice(agent, init);
    let line = effects.iter().find_map(|effect| match effect {
        Effect::Send(ServerMessage::BidiTranscriptStream {
            role: TranscriptRole::Assistant,
            is_final: true,
            text,
            ..
        }) => Some(text.clone()),
        _ => None,
    });
    (line, session.spoken_opening().map(str::to_owned))
}

#[test]
fn a_machine_is_left_the_declared_message_said_aloud_even_without_speak_first() {
    for speak_first in [true, false] {
        let agent = triage(Some(MESSAGE), OnMachine::LeaveMessage, speak_first);
        let (line, spoken) = opened(agent, call(Some("machine")));
        assert_eq!(line.as_deref(), Some(MESSAGE), "speakFirst {speak_first}");
        assert_eq!(spoken.as_deref(), Some(MESSAGE), "the message is said aloud (speakFirst {speak_first})");
    }
}

#[test]
fn a_person_or_an_agent_without_a_message_gets_the_greeting() {
    for by in [Some("human"), Some("unknown"), None] {
        let (line, spoken) = opened(triage(Some(MESSAGE), OnMachine::LeaveMessage, true), call(by));
        assert_eq!((line.as_deref(), spoken.as_deref()), (Some(GREETING), Some(GREETING)), "answered by {by:?}");
    }
    let (line, spoken) = opened(triage(None, OnMachine::LeaveMessage, true), call(Some("machine")));
    assert_eq!((line.as_deref(), spoken.as_deref()), (Some(GREETING), Some(GREETING)), "no message: the greeting");
    let (line, spoken) = opened(triage(None, OnMachine::LeaveMessage, false), call(Some("machine")));
    assert_eq!((line.as_deref(), spoken), (Some(GREETING), None), "a greeting not spoken first is only a line");
    let (line, _) = opened(triage(Some(MESSAGE), OnMachine::HangUp, true), call(Some("machine")));
    assert_eq!(line.as_deref(), Some(GREETING), "hangUp leaves no message");
}
