//! What [`Kept`] keeps of a runtime's messages, rule by rule.

use serde_json::json;

use super::*;

fn say(role: &str, text: &str) -> String {
    json!({"type": "bidi_transcript_stream", "role": role, "text": text, "delta": false, "is_final": true}).to_string()
}

#[test]
fn memory_and_history_follow_the_runtime_within_bounds() {
    let mut kept = Kept::default();
    kept.observe(&json!({"type": "memory_update", "key": "verifiedUser", "value": {"name": "Ada"}}).to_string());
    assert_eq!(kept.memory["verifiedUser"]["name"], "Ada");
    kept.observe(&json!({"type": "memory_update", "key": "verifiedUser", "value": null}).to_string());
    assert!(kept.memory.is_empty(), "null removes");
    for i in 0..=MAX_HISTORY {
        kept.observe(&say("assistant", &format!("line {i}")));
    }
    assert_eq!(kept.history.len(), MAX_HISTORY);
    assert_eq!(kept.history[0].text, "line 1", "the oldest went first");
    // Streamed pieces and reply audio are not history.
    let piece =
        json!({"type": "bidi_transcript_stream", "role": "assistant", "text": "x", "delta": true, "is_final": false});
    kept.observe(&piece.to_string());
    kept.observe(r#"{"type":"bidi_audio_stream","audio":"AAAA"}"#);
    assert_eq!(kept.history.len(), MAX_HISTORY);
    // A turn is open from its start to its completion.
    kept.observe(&json!({"type": "bidi_response_start", "turn": 1}).to_string());
    assert!(kept.turn_open);
    kept.observe(&json!({"type": "bidi_response_complete", "turn": 1, "stop_reason": "end_turn"}).to_string());
    assert!(!kept.turn_open);
}

#[test]
fn the_workflow_position_follows_the_transitions_of_the_agent_serving() {
    let mut kept = Kept { agent: "idv".into(), ..Kept::default() };
    let step = |from: &str, to: &str| {
        json!({"type": "workflow_transition", "from": from, "to": to, "by": "model"}).to_string()
    };
    kept.observe(&step("collect", "verify"));
    kept.observe(&step("verify", "choose"));
    let position = kept.workflow.clone().expect("a position");
    assert_eq!((position.agent.as_str(), position.node.as_str()), ("idv", "choose"));
    assert_eq!(position.visited, ["collect", "verify", "choose"]);
    for i in 0..2 * MAX_VISITED {
        kept.observe(&step("a", &format!("n{i}")));
    }
    assert_eq!(kept.workflow.as_ref().map(|w| w.visited.len()), Some(MAX_VISITED), "bounded");
}

#[test]
fn a_failed_handoff_is_the_last_line_the_source_agent_reads() {
    let mut kept = Kept::default();
    kept.observe(&say("assistant", "I'll transfer you to identity verification."));
    kept.handoff_failed("idv", "agent idv has no ready pod");
    let last = kept.history.last().expect("a line");
    assert_eq!(last.role, TranscriptRole::Assistant);
    assert!(
        last.text.contains("transfer to idv did not happen") && last.text.contains("no ready pod"),
        "{}",
        last.text
    );
}

#[test]
fn what_is_kept_is_carried_to_the_next_runtime_and_a_handoff_carries_its_own() {
    let mut kept = Kept { agent: "idv".into(), return_to: Some("triage".into()), ..Kept::default() };
    kept.observe(&json!({"type": "memory_update", "key": "intent", "value": "balance"}).to_string());
    kept.observe(&say("user", "my balance please"));
    kept.workflow = Some(WorkflowSnapshot { agent: "idv".into(), node: "verify".into(), ..Default::default() });
    kept.summary = "user: an earlier visit".into();
    let carried = kept.carried();
    assert_eq!(carried.memory, *kept.memory);
    assert_eq!(carried.history, vec![HistoryTurn { role: TranscriptRole::User, text: "my balance please".into() }]);
    assert_eq!((carried.return_to.as_deref(), carried.workflow.as_ref()), (Some("triage"), kept.workflow.as_ref()));
    assert_eq!((carried.summary.as_str(), carried.handoff.as_ref()), ("user: an earlier visit", None));

    let context: HandoffContext = serde_json::from_value(json!({
        "from_agent": "idv", "kind": "transfer", "reason": "balance",
        "workflow_state": {"agent": "idv", "node": "verify", "visited": []},
        "memory": {"intent": "balance"}, "history": [{"role": "user", "text": "my balance please"}]
    }))
    .expect("a handoff context");
    kept.call_started_at_ms = Some(1_700_000_000_000);
    let handed = kept.carried_by(context.clone());
    let expected = Carried {
        handoff: Some(context),
        summary: kept.summary.clone(),
        call_started_at_ms: Some(1_700_000_000_000),
        ..Carried::default()
    };
    assert_eq!(kept.carried().call_started_at_ms, Some(1_700_000_000_000), "the call's clock goes to a new pod too");
    assert_eq!(handed, expected, "memory, history, position and return target come with the handoff");
}

fn texts(kept: &Kept) -> Vec<&str> {
    kept.in_flight.iter().map(|t| t.text.as_str()).collect()
}

#[test]
fn typed_inputs_stay_in_flight_until_echoed_or_refused() {
    let mut kept = Kept::default();
    let typed = |text: &str| json!({"type": "bidi_text_input", "text": text}).to_string();
    assert!(kept.track(&typed("one")).is_some_and(|(_, tracked)| tracked));
    assert!(kept.track(&typed("two")).is_some());
    assert!(kept.track(&typed("three")).is_some());
    assert_eq!(kept.track(r#"{"type":"close"}"#), None, "only typed inputs are tracked");
    // A runtime that echoes no id: matched by text.
    assert_eq!(kept.observe(&say("user", "one")), None, "relayed as it is");
    kept.observe(&say("assistant", "two"));
    assert_eq!(kept.turn, 1, "one user input taken up: turn 1");
    assert_eq!(texts(&kept), ["two", "three"], "only the user's echo takes an input up");
    kept.observe(&json!({"type": "bidi_error", "code": "busy", "message": "m", "recoverable": true}).to_string());
    assert_eq!(texts(&kept), ["two"], "the refused newest input is not in flight");
    let frames: Vec<ClientMessage> = kept.replay().map(|f| decode_client(&f).expect("a client frame")).collect();
    assert_eq!(frames, [ClientMessage::BidiTextInput { text: "two".into(), id: Some("2".into()) }]);
}

/// The runtime's echo of a typed input, naming it by `id`.
fn echo(text: &str, id: &str) -> String {
    json!({"type": "bidi_transcript_stream", "role": "user", "text": text, "delta": false, "is_final": true, "input_id": id})
        .to_string()
}

#[test]
fn identical_typed_inputs_are_told_apart_by_id_and_clients_get_their_own_ids_back() {
    let mut kept = Kept::default();
    let typed = |id: Option<&str>| json!({"type": "bidi_text_input", "text": "yes", "id": id}).to_string();
    let sent: Vec<ClientMessage> = [Some("a"), None, Some("a"), Some("x:y")]
        .into_iter()
        .map(|id| decode_client(&kept.track(&typed(id)).expect("typed").0).expect("a frame"))
        .collect();
    let ids: Vec<_> =
        sent.iter().map(|m| if let ClientMessage::BidiTextInput { id, .. } = m { id.clone() } else { None }).collect();
    let gateway = |id: &str| Some(id.to_owned());
    assert_eq!(
        ids,
        [gateway("1:a"), gateway("2"), gateway("3:a"), gateway("4:x:y")],
        "unique, whatever the client sent"
    );

    // The runtime takes up the third: that one, not the first of the same text.
    let Some(ServerMessage::BidiTranscriptStream { input_id, text, .. }) = kept.observe(&echo("yes", "3:a")) else {
        panic!("an echo for the client")
    };
    assert_eq!((text.as_str(), input_id.as_deref()), ("yes", Some("a")), "the client's own id back");
    let in_flight: Vec<&str> = kept.in_flight.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(in_flight, ["1:a", "2", "4:x:y"]);
    assert!(
        matches!(kept.observe(&echo("yes", "2")), Some(ServerMessage::BidiTranscriptStream { input_id: None, .. })),
        "no id given, none back"
    );
    // A refusal names the input it refused.
    let busy = json!({"type": "bidi_error", "code": "busy", "message": "m", "recoverable": true, "input_id": "1:a"});
    let refused = kept.observe(&busy.to_string());
    assert!(matches!(&refused, Some(ServerMessage::BidiError { input_id: Some(id), .. }) if id == "a"), "{refused:?}");
    let in_flight: Vec<&str> = kept.in_flight.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(in_flight, ["4:x:y"]);
    // An echo of an input no longer tracked still gives the client its id.
    assert!(
        matches!(kept.observe(&echo("yes", "1:a")), Some(ServerMessage::BidiTranscriptStream { input_id: Some(id), .. }) if id == "a")
    );
    assert_eq!(kept.turn, 3);
}

#[test]
fn a_blank_input_gets_an_id_but_is_not_waited_for() {
    let mut kept = Kept::default();
    let (frame, tracked) =
        kept.track(&json!({"type": "bidi_text_input", "text": "  ", "id": "b"}).to_string()).expect("typed");
    assert!(!tracked && kept.in_flight.is_empty());
    assert_eq!(
        decode_client(&frame).ok(),
        Some(ClientMessage::BidiTextInput { text: "  ".into(), id: Some("1:b".into()) })
    );
    let empty =
        json!({"type": "bidi_error", "code": "empty_text", "message": "m", "recoverable": true, "input_id": "1:b"});
    assert!(
        matches!(kept.observe(&empty.to_string()), Some(ServerMessage::BidiError { input_id: Some(id), .. }) if id == "b")
    );
}

#[test]
fn a_session_parked_before_ids_resumes_with_its_inputs_in_flight() {
    let earlier = json!({"agent": "triage", "memory": {}, "history": [], "return_to": null, "turn": 2, "workflow": null,
        "in_flight": ["one", "one"]});
    let mut kept: Kept = serde_json::from_value(earlier).expect("an earlier gateway's session");
    assert_eq!(texts(&kept), ["one", "one"]);
    assert_ne!(kept.in_flight[0].id, kept.in_flight[1].id, "each its own id");
    let (frame, _) = kept.track(&json!({"type": "bidi_text_input", "text": "two"}).to_string()).expect("typed");
    assert!(frame.contains(r#""id":"1""#), "{frame}");
    let again: Kept = serde_json::from_str(&serde_json::to_string(&kept).expect("JSON")).expect("read back");
    assert_eq!((again.in_flight, again.inputs), (kept.in_flight, 1));
}

#[test]
fn history_memory_and_typed_inputs_are_bounded_in_bytes() {
    let mut kept = Kept::default();
    let long = "x".repeat(40 * 1024);
    for i in 0..10 {
        kept.observe(&say("assistant", &format!("{i}{long}")));
    }
    assert_eq!(kept.history.len(), 3, "128 KiB of 40 KiB lines: the newest three");
    assert!(kept.history[2].text.starts_with('9'));
    let huge = "y".repeat(MAX_HISTORY_BYTES + 1);
    kept.observe(&say("user", &huge));
    assert_eq!(kept.history.len(), 1, "one line past the budget stays alone: the newest is never dropped");

    let update =
        |key: &str, size: usize| json!({"type": "memory_update", "key": key, "value": "z".repeat(size)}).to_string();
    kept.observe(&update("a", 40 * 1024));
    kept.observe(&update("b", 40 * 1024));
    assert!(kept.memory.contains_key("a") && !kept.memory.contains_key("b"), "past 64 KiB, not kept");
    kept.observe(&update("a", 10));
    kept.observe(&update("b", 40 * 1024));
    assert!(kept.memory.contains_key("b"), "a smaller value made room");

    let typed = |text: &str| json!({"type": "bidi_text_input", "text": text}).to_string();
    for i in 0..8 {
        assert!(kept.track(&typed(&format!("{i}{}", "t".repeat(30 * 1024)))).is_some_and(|(_, tracked)| tracked));
    }
    assert_eq!(kept.in_flight.len(), 4, "128 KiB of 30 KiB inputs");
    assert!(kept.in_flight[0].text.starts_with('4'), "the oldest went first");
    assert!(kept.bytes() <= MAX_KEPT_BYTES + huge.len(), "{}", kept.bytes());
}

/// The messages a core session sends in `effects`, as the gateway reads them.
fn observe_all(kept: &mut Kept, effects: &[switchboard_core::Effect]) {
    for effect in effects {
        if let switchboard_core::Effect::Send(message) = effect {
            kept.observe(&message.to_json());
        }
    }
}

/// A skill used before the session moves (another pod, a resume) is in use after it: the
/// real banking agent's core uses its fees skill, the gateway keeps what the runtime said,
/// and a session opened from that keeps the fee schedule in its prompt until the next step.
#[test]
fn skills_in_use_survive_a_resume_and_a_new_step_puts_them_down() {
    use std::sync::Arc;
    use std::time::Instant;
    use switchboard_core::grant::Carried;
    use switchboard_core::model::ToolUse;
    use switchboard_core::{AgentCore, Effect, Input, ModelReply, Session, SessionInit};
    const FEE: &str = "International transfer: 15.00 GBP per transfer";

    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/banking");
    let catalog = switchboard_crds::Catalog::load_paths(&[dir]).expect("the examples load");
    let agent = catalog.agents().find(|a| a.metadata.name.as_deref() == Some("banking")).expect("banking");
    let core = Arc::new(AgentCore::new(catalog.resolve_agent(agent).expect("resolves")).expect("runnable"));
    let init = || SessionInit { session_id: "s".into(), today: "2026-11-26".into(), ..SessionInit::default() };
    let prompt = |effects: &[Effect]| {
        effects.iter().find_map(|e| if let Effect::CallModel(r) = e { Some(r.system.clone()) } else { None })
    };
    let now = Instant::now();
    let mut kept = Kept { agent: "banking".into(), ..Kept::default() };
    let (mut first, opening) = Session::start(core.clone(), init());
    observe_all(&mut kept, &opening);
    observe_all(&mut kept, &first.handle(Input::user_text("What does an international transfer cost?".into()), now));
    let use_skill = ToolUse { id: "u1".into(), name: "use_skill".into(), input: json!({ "skill": "fees" }) };
    let reply = ModelReply { tool_uses: vec![use_skill], ..Default::default() };
    let effects = first.handle(Input::ModelReply(reply), now);
    assert!(prompt(&effects).is_some_and(|p| p.contains(FEE)), "the skill is in use");
    observe_all(&mut kept, &effects);
    let position = kept.workflow.clone().expect("the gateway keeps the skills in use");
    assert_eq!((position.agent.as_str(), position.skills.as_slice()), ("banking", ["fees".to_owned()].as_slice()));

    // Opened again from what the gateway kept: the fee schedule is still in the prompt.
    let init_again =
        SessionInit { carried: Carried { workflow: Some(position.clone()), ..Carried::default() }, ..init() };
    let (mut resumed, _) = Session::start(core.clone(), init_again);
    let effects = resumed.handle(Input::user_text("And the ATM limit?".into()), now);
    assert!(prompt(&effects).is_some_and(|p| p.contains(FEE)), "{:?}", prompt(&effects));
    // Without the kept skills (as before this was kept), it is not.
    let forgotten = WorkflowSnapshot { skills: Vec::new(), ..position };
    let carried = Carried { workflow: Some(forgotten), ..Carried::default() };
    let (mut plain, _) = Session::start(core, SessionInit { carried, ..init() });
    assert!(
        !prompt(&plain.handle(Input::user_text("And the ATM limit?".into()), now)).unwrap_or_default().contains(FEE)
    );

    // A step puts the skills down, here as in the core.
    let step = json!({"type": "workflow_transition", "from": "help", "to": "done", "by": "model"}).to_string();
    kept.observe(&step);
    let position = kept.workflow.clone().expect("a position");
    assert!(position.skills.is_empty() && position.node == "done", "{position:?}");
    // A refused use_skill (no inUse) changes nothing; a list that is not names is ignored.
    for result in [json!({"error": {"message": "no"}}), json!({"inUse": [1, 2]})] {
        let done = json!({"type": "tool_complete", "tool_use_id": "u", "name": "use_skill", "result": result, "cached": false});
        kept.observe(&done.to_string());
        assert!(kept.workflow.as_ref().is_some_and(|w| w.skills.is_empty()));
    }
}
