//! Each rule of the session machine, driven through its events; and random event
//! sequences against a model of the task and the runtimes ([`props`]).

mod identity;
mod inputs;
mod limits;
mod long;
mod outage;
mod park;
mod phone;
mod props;
mod snapshot;
mod variants;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, SessionState, close_code, decode_client};
use switchboard_crds::Mode;
use switchboard_crds::routing::{RUNTIME_PORT, Route, RoutingTable, SESSION_PATH};
use tokio_tungstenite::tungstenite::Message as UpMessage;

use super::machine::{ClientFrame, Cx, Effect, Ending, Event, Limits, Machine, Note, OpenError, Phase, RuntimeFrame};
use super::moves::MAX_RECOVERIES;
use crate::directory::Directory;
use crate::resume::Frame;

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 8080))
}

/// The pod `last` refused the session.
fn refused(last: u8) -> OpenError {
    OpenError::Connect(crate::upstream::ConnectError { addr: addr(last), message: "refused".into() })
}

fn route(name: &str, expose: bool) -> Route {
    Route {
        name: name.into(),
        namespace: "bank".into(),
        mode: Mode::Text,
        service: format!("{name}.bank.svc"),
        port: RUNTIME_PORT,
        path: SESSION_PATH.into(),
        handoffs: if name == "triage" { vec!["idv".into(), "banking".into(), "nobody".into()] } else { vec![] },
        expose,
        default: name == "triage",
        ready: true,
        ready_replicas: 1,
        redact: Vec::new(),
        identity_keys: switchboard_crds::agent::default_identity_keys(),
        capacity: Default::default(),
        numbers: vec![],
        analysis: None,
        answering_machine: None,
        app_context: Default::default(),
    }
}

/// triage on pods .1 and .2, idv on .3, banking listed with no ready pod.
pub(super) fn directory() -> Directory {
    directory_with(&[("triage", &[1, 2]), ("idv", &[3]), ("banking", &[])])
}

fn directory_with(agents: &[(&str, &[u8])]) -> Directory {
    let table = RoutingTable::new(agents.iter().map(|(name, _)| route(name, *name != "idv")).collect());
    let endpoints: HashMap<_, _> = agents
        .iter()
        .map(|(name, pods)| (("bank".to_owned(), (*name).to_owned()), pods.iter().map(|p| addr(*p)).collect()))
        .collect();
    Directory::new(Arc::new(table), Arc::new(endpoints), None)
}

fn limits() -> Limits {
    Limits {
        replay_messages: 100,
        replay_bytes: 64 * 1024,
        session_rate: 1000,
        idle_timeout: Duration::from_secs(60),
        max_message_bytes: 1024,
        park_grace: Duration::from_secs(10),
        movable: true,
        ping_interval: Duration::from_secs(5),
        ping_timeout: Duration::from_secs(15),
        record: true,
    }
}

/// A machine and the effects it produced, as a test drives it.
pub(super) struct Drive {
    pub machine: Machine,
    pub directory: Directory,
    pub now: Instant,
    /// The breakers tripped (the gateway's [`switchboard_outage::notice::Switches`]).
    pub outages: switchboard_outage::notice::Switches,
}

impl Drive {
    /// A session on triage, opened on pod .1.
    pub fn live() -> Self {
        let mut drive = Self::starting(None);
        let effects = drive.on(Event::Opened(Ok(addr(1))));
        assert_eq!(effects.iter().filter(|e| matches!(e, Effect::Note(Note::Routed))).count(), 1);
        drive
    }

    pub fn starting(pending: Option<String>) -> Self {
        let directory = directory();
        let target = directory.for_client(None, crate::directory::Reach::Live).expect("triage");
        let now = Instant::now();
        let machine = Machine::start(limits(), "gw-1".into(), "key".into(), target, None, vec![], pending, now, 1_000);
        Self { machine, directory, now, outages: Default::default() }
    }

    pub fn on(&mut self, event: Event) -> Vec<Effect> {
        self.machine.handle(event, &Cx { now: self.now, directory: &self.directory, outages: &self.outages });
        std::iter::from_fn(|| self.machine.next_effect()).collect()
    }

    pub fn client(&mut self, frame: ClientFrame) -> Vec<Effect> {
        self.on(Event::Client(frame, Ok(())))
    }

    pub fn typed(&mut self, text: &str) -> Vec<Effect> {
        self.client(ClientFrame::Text(json!({"type": "bidi_text_input", "text": text}).to_string().into()))
    }

    pub fn runtime(&mut self, message: serde_json::Value) -> Vec<Effect> {
        self.on(Event::Runtime(RuntimeFrame::Text(wire(message).into())))
    }

    pub fn closed(&mut self, code: u16) -> Vec<Effect> {
        self.on(Event::Runtime(RuntimeFrame::Closed { code, reason: String::new() }))
    }

    pub fn opening(&self) -> Option<(String, Option<SocketAddr>, bool)> {
        match self.machine.phase() {
            Phase::Opening(request) => Some((request.target.key(), request.avoid, request.carried.handoff.is_some())),
            _ => None,
        }
    }

    pub fn ending(&self) -> Option<&Ending> {
        match self.machine.phase() {
            Phase::Done(ending) => Some(ending),
            _ => None,
        }
    }
}

/// A server message as runtimes write it (`type` first).
fn wire(message: serde_json::Value) -> String {
    serde_json::from_value::<ServerMessage>(message).expect("a server message").to_json()
}

fn say(role: &str, text: &str) -> serde_json::Value {
    json!({"type": "bidi_transcript_stream", "role": role, "text": text, "delta": false, "is_final": true})
}

fn complete() -> serde_json::Value {
    json!({"type": "bidi_response_complete", "turn": 1, "stop_reason": "end_turn"})
}

/// The messages the effects send the client, decoded.
fn to_client(effects: &[Effect]) -> Vec<ServerMessage> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Client(Frame::Text(text)) => serde_json::from_str(text.as_str()).ok(),
            _ => None,
        })
        .collect()
}

/// The messages the effects send the runtime, decoded.
fn to_runtime(effects: &[Effect]) -> Vec<ClientMessage> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Runtime { message: UpMessage::Text(text), .. } => decode_client(text.as_str()).ok(),
            _ => None,
        })
        .collect()
}

/// A typed input as the gateway sends it a runtime: with the gateway's `id` for it.
fn typed(text: &str, id: &str) -> ClientMessage {
    ClientMessage::BidiTextInput { text: text.into(), id: Some(id.into()) }
}

fn error_codes(effects: &[Effect]) -> Vec<ErrorCode> {
    to_client(effects)
        .into_iter()
        .filter_map(|m| match m {
            ServerMessage::BidiError { code, .. } => Some(code),
            _ => None,
        })
        .collect()
}

fn handoff(to: &str) -> serde_json::Value {
    json!({"type": "handoff", "from": "triage", "to": to, "kind": "transfer", "context": {
        "from_agent": "triage", "kind": "transfer", "reason": "balance",
        "workflow_state": {"agent": "triage", "node": "greet", "visited": ["greet"]},
        "return_to": "triage",
        "memory": {"intent": "balance"},
        "history": [{"role": "user", "text": "my balance"}]
    }})
}

#[test]
fn a_new_session_opens_on_its_agent_and_sends_what_came_first() {
    let pending = json!({"type": "bidi_text_input", "text": "hello"}).to_string();
    let mut drive = Drive::starting(Some(pending.clone()));
    assert_eq!(drive.opening(), Some(("bank/triage".into(), None, false)));
    let effects = drive.on(Event::Opened(Ok(addr(1))));
    assert!(matches!(effects[0], Effect::Note(Note::Routed)));
    assert_eq!(to_runtime(&effects), [typed("hello", "1")], "the first message that was not session_start");
    assert!(matches!(drive.machine.phase(), Phase::Live));
}

#[test]
fn a_session_no_pod_takes_is_refused_with_try_again() {
    let mut drive = Drive::starting(None);
    let effects = drive.on(Event::Opened(Err(OpenError::NoReadyPod { agent: "triage".into() })));
    assert_eq!(error_codes(&effects), ["no_runtime"]);
    assert!(matches!(drive.ending(), Some(Ending::Close((close_code::TRY_AGAIN_LATER, _)))));
}

#[test]
fn every_start_gets_a_fresh_token_and_number_and_frames_are_numbered_once() {
    let mut drive = Drive::live();
    let start =
        json!({"type": "bidi_connection_start", "session_id": "s", "agent": "triage", "mode": "text", "model": "m"});
    let effects = drive.runtime(start.clone());
    let Some(Effect::Hold { key, previous: None }) = effects.first() else { panic!("held first: {effects:?}") };
    let first_key = key.clone();
    let [ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(1), .. }] = &to_client(&effects)[..]
    else {
        panic!("stamped: {effects:?}")
    };
    assert_eq!(token.len(), 64);
    drive.runtime(say("assistant", "Hello"));
    let effects = drive.runtime(start);
    let Some(Effect::Hold { previous: Some(previous), .. }) = effects.first() else { panic!("{effects:?}") };
    assert_eq!(previous, &first_key, "the older key is released");
    assert!(matches!(&to_client(&effects)[..], [ServerMessage::BidiConnectionStart { seq: Some(3), .. }]));
    // Only the transcript line is kept: a resumed client gets a new start.
    let missed = drive.machine.replay().since(Some(0));
    assert_eq!(missed.frames.len(), 1);
}

#[test]
fn a_lost_runtime_reopens_elsewhere_and_gets_the_typed_inputs_it_had_not_taken_up() {
    let mut drive = Drive::live();
    drive.typed("one");
    drive.typed("two");
    drive.runtime(say("user", "one"));
    let effects = drive.on(Event::Runtime(RuntimeFrame::Lost));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Note(Note::Migrated { reason, from: Some(_) }) if reason == "runtime_lost"))
    );
    assert_eq!(
        to_client(&effects),
        [ServerMessage::BidiSessionState { state: SessionState::Reconnecting }],
        "the client can show it at once"
    );
    assert_eq!(drive.opening(), Some(("bank/triage".into(), Some(addr(1)), false)), "another pod than the lost one");
    let effects = drive.on(Event::Opened(Ok(addr(2))));
    let resent = to_runtime(&effects);
    assert_eq!(resent, [typed("two", "2")], "only the input not taken up");
    assert!(matches!(
        &to_client(&effects)[..],
        [ServerMessage::BidiConnectionRestart { reason, generation: 1 }] if reason == "runtime_lost"
    ));
}

#[test]
fn reopening_gives_up_after_the_attempts_with_pauses_between() {
    let mut drive = Drive::live();
    drive.on(Event::Runtime(RuntimeFrame::Lost));
    let mut attempts = 0;
    loop {
        assert!(drive.opening().is_some(), "attempt {attempts}");
        attempts += 1;
        let effects = drive.on(Event::Opened(Err(refused(2))));
        if let Some(ending) = drive.ending() {
            assert_eq!(ending, &Ending::Close((close_code::INTERNAL, "no runtime pod could take the session".into())));
            assert_eq!(error_codes(&effects), ["no_runtime"]);
            break;
        }
        assert!(matches!(drive.machine.phase(), Phase::Backoff(_)));
        drive.on(Event::RetryDue);
    }
    assert_eq!(attempts, MAX_RECOVERIES);
}

#[test]
fn a_handoff_opens_the_target_with_the_context_and_counts_the_gap() {
    let mut drive = Drive::live();
    drive.runtime(handoff("idv"));
    drive.closed(close_code::HANDOFF);
    assert_eq!(drive.opening(), Some(("bank/idv".into(), None, true)), "not exposed, reached by handoff");
    let effects = drive.on(Event::Opened(Ok(addr(3))));
    assert!(effects.contains_or(&Note::Handoff { from: "bank/triage".into(), to: "bank/idv".into() }));
    assert_eq!(drive.machine.kept().return_to.as_deref(), Some("triage"));
    assert_eq!(drive.machine.kept().memory["intent"], "balance", "the context's memory is the session's");
    let effects = drive.runtime(say("assistant", "I'll verify you."));
    assert!(effects.iter().any(|e| matches!(e, Effect::Note(Note::HandoffGap { .. }))));
}

trait Contains {
    fn contains_or(&self, note: &Note) -> bool;
}

impl Contains for Vec<Effect> {
    fn contains_or(&self, note: &Note) -> bool {
        self.iter().any(|e| matches!(e, Effect::Note(n) if n == note))
    }
}

#[test]
fn a_handoff_that_cannot_happen_keeps_the_caller_with_the_source_and_tells_it() {
    for (to, open_result) in [("banking", None), ("nobody", None), ("idv", Some(Err(refused(3))))] {
        let mut drive = Drive::live();
        drive.runtime(handoff(to));
        let mut effects = drive.closed(close_code::HANDOFF);
        if let Some(result) = open_result {
            effects = drive.on(Event::Opened(result.map(|()| addr(3))));
        }
        assert_eq!(error_codes(&effects), ["handoff_failed"], "to {to}");
        assert!(effects.contains_or(&Note::Refused("handoff_failed")));
        assert_eq!(drive.opening(), Some(("bank/triage".into(), None, false)), "back with the source");
        let last = drive.machine.kept().history.last().expect("a line");
        assert!(last.text.contains(&format!("transfer to {to} did not happen")), "{}", last.text);
        let effects = drive.on(Event::Opened(Ok(addr(2))));
        assert!(matches!(
            &to_client(&effects)[..],
            [ServerMessage::BidiConnectionRestart { reason, .. }] if reason == "handoff_failed"
        ));
    }
}

/// The message of a refused handoff: the caller is told why, then that the session is
/// reconnecting (to the agent it stays with); nothing else.
fn refused_then_reconnecting(effects: &[Effect]) -> String {
    let [
        ServerMessage::BidiError { message, .. },
        ServerMessage::BidiSessionState { state: SessionState::Reconnecting },
    ] = &to_client(effects)[..]
    else {
        panic!("{effects:?}")
    };
    message.clone()
}

#[test]
fn handoffs_go_only_to_declared_agents_or_back_and_a_loop_is_stopped() {
    // idv declares no handoff: only the return to the agent that transferred the session.
    let mut drive = Drive::live();
    drive.runtime(handoff("idv"));
    drive.closed(close_code::HANDOFF);
    drive.on(Event::Opened(Ok(addr(3))));
    drive.runtime(json!({"type": "handoff", "from": "idv", "to": "banking", "kind": "transfer", "context": {
        "from_agent": "idv", "kind": "transfer", "reason": "verified",
        "workflow_state": {"agent": "idv", "node": "verify", "visited": ["verify"]}, "return_to": "idv"
    }}));
    let effects = drive.closed(close_code::HANDOFF);
    assert_eq!(error_codes(&effects), ["handoff_failed"]);
    let message = refused_then_reconnecting(&effects);
    assert!(message.contains("may not hand off to \"banking\""), "{message}");
    assert_eq!(drive.opening(), Some(("bank/idv".into(), None, false)), "the caller stays with idv");
    drive.on(Event::Opened(Ok(addr(3))));
    drive.runtime(json!({"type": "handoff", "from": "idv", "to": "triage", "kind": "return", "context": {
        "from_agent": "idv", "kind": "return", "reason": "done",
        "workflow_state": {"agent": "idv", "node": "done", "visited": ["done"]}
    }}));
    drive.closed(close_code::HANDOFF);
    assert_eq!(drive.opening(), Some(("bank/triage".into(), None, true)), "back where it came from");

    // Another namespace is never reached, whatever the name.
    let mut drive = Drive::live();
    drive.runtime(handoff("shop/idv"));
    let effects = drive.closed(close_code::HANDOFF);
    assert_eq!(error_codes(&effects), ["handoff_failed"]);

    // triage and idv passing the caller back and forth within one turn.
    let mut drive = Drive::live();
    let mut failed = None;
    for hop in 0..10 {
        let back = hop % 2 == 1;
        let (from, to, kind) = if back { ("idv", "triage", "return") } else { ("triage", "idv", "transfer") };
        drive.runtime(json!({"type": "handoff", "from": from, "to": to, "kind": kind, "context": {
            "from_agent": from, "kind": kind, "reason": "loop", "return_to": from,
            "workflow_state": {"agent": from, "node": "n", "visited": ["n"]}
        }}));
        let effects = drive.closed(close_code::HANDOFF);
        if !error_codes(&effects).is_empty() {
            failed = Some((hop, refused_then_reconnecting(&effects)));
            break;
        }
        drive.on(Event::Opened(Ok(addr(if back { 1 } else { 3 }))));
    }
    let (hop, message) = failed.expect("the loop was stopped");
    assert_eq!(hop, super::handoff::MAX_HANDOFFS_PER_TURN as usize, "{message}");
    assert!(message.contains("handoffs in one turn"), "{message}");
    // A new user turn starts a new count.
    drive.on(Event::Opened(Ok(addr(3))));
    drive.runtime(say("user", "next question"));
    drive.runtime(handoff("idv"));
    drive.closed(close_code::HANDOFF);
    assert!(drive.opening().is_some_and(|(target, _, handoff)| handoff && target == "bank/idv"));
}

#[test]
fn a_draining_pod_moves_the_session_between_turns_only_and_waits_for_another_pod() {
    let mut drive = Drive::live();
    drive.typed("hello");
    drive.runtime(say("user", "hello"));
    drive.runtime(json!({"type": "bidi_connection_draining", "seconds": 30}));
    assert!(matches!(drive.machine.phase(), Phase::Live), "a turn is under way");
    drive.runtime(complete());
    assert_eq!(drive.opening(), Some(("bank/triage".into(), Some(addr(1)), false)), "moved at the turn's end");

    // The only pod drains: the session stays until the directory shows another.
    let mut drive = Drive::live();
    drive.directory = directory_with(&[("triage", &[1]), ("idv", &[3])]);
    let effects = drive.runtime(json!({"type": "bidi_connection_draining", "seconds": 30}));
    assert!(effects.contains_or(&Note::WaitingForPod));
    assert!(matches!(drive.machine.phase(), Phase::Live));
    drive.directory = directory_with(&[("triage", &[1, 4]), ("idv", &[3])]);
    drive.on(Event::DirectoryChanged);
    assert_eq!(drive.opening(), Some(("bank/triage".into(), Some(addr(1)), false)));
    let effects = drive.on(Event::Opened(Ok(addr(4))));
    assert!(matches!(
        &to_client(&effects)[..],
        [ServerMessage::BidiConnectionRestart { reason, .. }] if reason == "runtime_draining"
    ));
}

#[test]
fn a_blank_typed_input_does_not_hold_a_draining_session() {
    let mut drive = Drive::live();
    drive.typed("   ");
    drive.runtime(json!({"type": "bidi_error", "code": "empty_text", "message": "m", "recoverable": true}));
    drive.runtime(json!({"type": "bidi_connection_draining", "seconds": 30}));
    assert!(drive.opening().is_some(), "nothing is in flight: the session moves");
}

#[test]
fn a_session_whose_agent_was_removed_ends_with_4404() {
    let mut drive = Drive::live();
    drive.directory = directory_with(&[("idv", &[3])]);
    let effects = drive.runtime(json!({"type": "bidi_connection_draining", "seconds": 30}));
    assert_eq!(error_codes(&effects), ["agent_removed"]);
    assert!(matches!(drive.ending(), Some(Ending::Close((close_code::UNKNOWN_AGENT, _)))));
}

#[test]
fn a_runtime_that_closes_for_a_drain_moves_the_session_and_any_other_close_ends_it() {
    for code in [close_code::GOING_AWAY, close_code::TRY_AGAIN_LATER] {
        let mut drive = Drive::live();
        drive.closed(code);
        assert!(drive.opening().is_some(), "{code}");
    }
    let mut drive = Drive::live();
    let goodbye = json!({"type": "bidi_connection_close", "reason": "done"});
    assert!(drive.runtime(goodbye.clone()).is_empty(), "held until the close says what it means");
    let effects = drive.closed(close_code::NORMAL);
    assert_eq!(to_client(&effects), [serde_json::from_value::<ServerMessage>(goodbye).expect("a message")]);
    assert_eq!(drive.ending(), Some(&Ending::Close((close_code::NORMAL, String::new()))));
    let mut drive = Drive::live();
    drive.closed(1005);
    assert_eq!(drive.ending(), Some(&Ending::Close((close_code::NORMAL, String::new()))), "no code: normal");
}

#[test]
fn messages_for_a_runtime_that_refused_them_go_to_the_next() {
    let mut drive = Drive::live();
    let audio = UpMessage::Binary(vec![1, 2, 3].into());
    let effects = drive.client(ClientFrame::Binary(vec![1, 2, 3].into()));
    assert!(matches!(&effects[..], [Effect::Runtime { keep: true, .. }]));
    drive.on(Event::RuntimeSendFailed(audio.clone()));
    drive.on(Event::Runtime(RuntimeFrame::Lost));
    let effects = drive.on(Event::Opened(Ok(addr(2))));
    assert!(effects.iter().any(|e| matches!(e, Effect::Runtime { message, keep: false } if *message == audio)));
}
