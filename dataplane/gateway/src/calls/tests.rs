//! The table of outbound calls, without HTTP or an edge's socket.

use super::*;

fn calls(config: CallsConfig) -> (Calls, prometheus::CounterVec) {
    let outcomes = prometheus::CounterVec::new(prometheus::Opts::new("o", "o"), &["outcome"]).expect("metric");
    let answered_by = prometheus::CounterVec::new(prometheus::Opts::new("a", "a"), &["answered_by"]).expect("metric");
    (Calls::new(config, outcomes.clone(), answered_by), outcomes)
}

fn request(to: &str) -> PlaceRequest {
    let variables = BTreeMap::from([("customer".to_owned(), "Ada".to_owned())]);
    PlaceRequest { to: to.into(), agent: "triage".into(), variables, trunk: None, status_callback: None }
}

fn report(id: &str, state: CallState, status: Option<u16>) -> FromEdge {
    FromEdge::Progress { id: id.into(), state, status, reason: None, session_id: None, hung_up_by: None }
}

#[test]
fn a_call_goes_to_a_connected_edge_and_moves_with_its_reports() {
    let (calls, outcomes) = calls(CallsConfig::default());
    let now = Instant::now();
    assert_eq!(calls.place("k", ("bank", "triage"), request("+442079460018"), now), Err(CallError::NoEdge));
    let (edge, mut to_edge) = calls.attach();
    let placed = calls.place("k", ("bank", "triage"), request("+442079460018"), now).expect("placed");
    assert_eq!((placed.state, placed.agent.as_str()), (CallState::Queued, "bank/triage"));
    let Ok(ToEdge::Place { id, to, agent, ticket, trunk: None, answering_machine: None }) = to_edge.try_recv() else {
        panic!("nothing sent to the edge (without detection)")
    };
    assert_eq!((id.as_str(), to.as_str(), agent.as_str()), (placed.id.as_str(), "+442079460018", "bank/triage"));
    calls.report(edge, report(&id, CallState::Ringing, Some(180)), now);
    assert_eq!(calls.status("k", &id).expect("status").state, CallState::Ringing);
    assert_eq!(calls.status("someone-else", &id), None, "only its credential reads it");
    // The session the edge opens takes the ticket once, with the variables.
    let (agent, memory) = calls.redeem(&ticket, None).expect("the ticket");
    assert_eq!(agent, "bank/triage");
    assert_eq!(memory["variables"]["customer"], "Ada");
    assert_eq!(memory["to"], "+442079460018");
    assert_eq!(memory.get("answeredBy"), None, "no detection, no answeredBy");
    assert_eq!(calls.redeem(&ticket, None), None, "once");
    let answered = FromEdge::Progress {
        id: id.clone(),
        state: CallState::Answered,
        status: Some(200),
        reason: None,
        session_id: Some("gw-1".into()),
        hung_up_by: None,
    };
    calls.report(edge, answered, now);
    calls.report(edge + 1, report(&id, CallState::Failed, None), now);
    assert_eq!(calls.status("k", &id).expect("status").state, CallState::Answered, "another edge's report is ignored");
    calls.report(edge, report(&id, CallState::Completed, None), now);
    let done = calls.status("k", &id).expect("status");
    assert_eq!(
        (done.state, done.session_id.as_deref(), done.sip_status),
        (CallState::Completed, Some("gw-1"), Some(200))
    );
    assert_eq!(outcomes.with_label_values(&["completed"]).get(), 1.0);
}

#[test]
fn busy_no_answer_and_failed_are_final_and_counted() {
    let (calls, outcomes) = calls(CallsConfig::default());
    let now = Instant::now();
    let (edge, mut to_edge) = calls.attach();
    for (state, status) in [(CallState::Busy, Some(486)), (CallState::NoAnswer, None), (CallState::Failed, Some(503))] {
        let placed = calls.place("k", ("bank", "triage"), request("sip:callee@127.0.0.1:5090"), now).expect("placed");
        let Ok(ToEdge::Place { ticket, .. }) = to_edge.try_recv() else { panic!() };
        calls.report(edge, report(&placed.id, state, status), now);
        calls.report(edge, report(&placed.id, CallState::Answered, Some(200)), now);
        let read = calls.status("k", &placed.id).expect("status");
        assert_eq!((read.state, read.sip_status), (state, status), "a final state stays");
        assert_eq!(calls.redeem(&ticket, None), None, "a finished call's ticket opens nothing");
        assert_eq!(outcomes.with_label_values(&[state.as_str()]).get(), 1.0);
    }
}

#[test]
fn calls_are_bounded_by_rate_capacity_destination_and_variables() {
    let now = Instant::now();
    let (calls, _) = calls(CallsConfig { max_live: 100, per_minute: 2 });
    let (_edge, _to_edge) = calls.attach();
    assert!(calls.place("k", ("b", "t"), request("+4420"), now).is_ok());
    assert!(calls.place("k", ("b", "t"), request("+4420"), now).is_ok());
    assert_eq!(calls.place("k", ("b", "t"), request("+4420"), now), Err(CallError::Rate(2)));
    assert!(calls.place("other", ("b", "t"), request("+4420"), now).is_ok(), "per credential");
    assert!(calls.place("k", ("b", "t"), request("+4420"), now + Duration::from_secs(31)).is_ok(), "refilled");

    let (calls, _) = super::tests::calls(CallsConfig { max_live: 1, per_minute: 100 });
    let (edge, mut to_edge) = calls.attach();
    let first = calls.place("k", ("b", "t"), request("+4420"), now).expect("placed");
    assert_eq!(calls.place("k", ("b", "t"), request("+4420"), now), Err(CallError::AtCapacity(1)));
    calls.report(edge, report(&first.id, CallState::Busy, Some(486)), now);
    assert!(calls.place("k", ("b", "t"), request("+4420"), now).is_ok(), "a finished call frees its place");
    let _ = to_edge.try_recv();

    for bad in ["", "0044", "+44 20", "sip:nobody", "sip:a@b;transport=tcp", "tel:+4420"] {
        let error = calls.place("k", ("b", "t"), request(bad), now).expect_err(bad);
        assert_eq!(error.status(), 400, "{bad}");
    }
    let mut many = request("+4420");
    many.variables = (0..40).map(|i| (format!("v{i}"), "x".to_owned())).collect();
    assert_eq!(calls.place("k", ("b", "t"), many, now).map_err(|e| e.status()), Err(400));
    for (name, value) in [("bad name", "x".to_owned()), ("", "x".to_owned()), ("big", "x".repeat(2000))] {
        let mut bad = request("+4420");
        bad.variables = BTreeMap::from([(name.to_owned(), value)]);
        assert_eq!(calls.place("k", ("b", "t"), bad, now).map_err(|e| e.status()), Err(400), "{name}");
    }
}

#[test]
fn calls_of_an_edge_that_goes_away_fail_unless_answered() {
    let (calls, outcomes) = calls(CallsConfig::default());
    let now = Instant::now();
    let (edge, _to_edge) = calls.attach();
    let ringing = calls.place("k", ("b", "t"), request("+4420"), now).expect("placed");
    let answered = calls.place("k", ("b", "t"), request("+4421"), now).expect("placed");
    calls.report(edge, report(&answered.id, CallState::Answered, Some(200)), now);
    calls.detach(edge, now);
    assert_eq!(calls.status("k", &ringing.id).expect("status").state, CallState::Failed);
    assert_eq!(calls.status("k", &answered.id).expect("status").state, CallState::Answered, "its session goes on");
    assert_eq!(outcomes.with_label_values(&["failed"]).get(), 1.0);
    assert_eq!(calls.place("k", ("b", "t"), request("+4420"), now), Err(CallError::NoEdge));
}

#[test]
fn the_agents_detection_goes_to_the_edge_and_who_answered_comes_back_into_the_status() {
    let (calls, _) = calls(CallsConfig::default());
    let now = Instant::now();
    let (edge, mut to_edge) = calls.attach();
    let amd = AnsweringMachine { on_machine: switchboard_core::outbound::OnMachine::HangUp, ..Default::default() };
    let placed =
        calls.place_with("k", ("bank", "triage"), Some(amd.clone()), request("+442079460018"), now).expect("placed");
    let Ok(ToEdge::Place { answering_machine, .. }) = to_edge.try_recv() else { panic!("nothing sent to the edge") };
    assert_eq!(answering_machine, Some(amd), "the edge is told the Agent's detection");
    let read = calls.status("k", &placed.id).expect("status");
    assert_eq!((read.answered_by, read.agent_heard_after_ms), (None, None));
    let detected = FromEdge::Detected { id: placed.id.clone(), answered_by: AnsweredBy::Human, after_ms: 2840 };
    calls.report(edge + 1, detected.clone(), now);
    assert_eq!(calls.status("k", &placed.id).expect("status").answered_by, None, "another edge's report is ignored");
    calls.report(edge, detected, now);
    calls.report(edge, FromEdge::Heard { id: placed.id.clone(), after_ms: 3900 }, now);
    calls.report(edge, FromEdge::Heard { id: placed.id.clone(), after_ms: 9000 }, now);
    let read = calls.status("k", &placed.id).expect("status");
    assert_eq!(
        (read.answered_by, read.detected_after_ms, read.agent_heard_after_ms),
        (Some(AnsweredBy::Human), Some(2840), Some(3900)),
        "the first time the callee heard the agent is kept"
    );
    let json = serde_json::to_value(&read).expect("json");
    assert_eq!((json["answered_by"].as_str(), json["agent_heard_after_ms"].as_u64()), (Some("human"), Some(3900)));
}

#[test]
fn who_answered_enters_the_calls_memory_with_its_ticket() {
    let (calls, _) = calls(CallsConfig::default());
    let now = Instant::now();
    let (_edge, mut to_edge) = calls.attach();
    calls.place("k", ("bank", "triage"), request("+442079460018"), now).expect("placed");
    let Ok(ToEdge::Place { ticket, .. }) = to_edge.try_recv() else { panic!("nothing sent to the edge") };
    let (_, memory) = calls.redeem(&ticket, Some(AnsweredBy::Machine)).expect("the ticket");
    assert_eq!(memory["answeredBy"], "machine", "{memory}");
    assert_eq!(memory["variables"]["customer"], "Ada");
    for by in [AnsweredBy::Human, AnsweredBy::Machine, AnsweredBy::Unknown] {
        assert_eq!(AnsweredBy::parse(by.as_str()), Some(by));
    }
    assert_eq!(AnsweredBy::parse("Machine"), None, "only the exact words");
}

#[test]
fn a_call_naming_a_trunk_goes_to_an_edge_that_has_it_and_an_unknown_trunk_is_refused() {
    let (calls, _) = calls(CallsConfig::default());
    let now = Instant::now();
    let (first, mut to_first) = calls.attach();
    let (second, mut to_second) = calls.attach();
    let names = |names: &[&str]| FromEdge::Trunks { names: names.iter().map(|n| (*n).to_owned()).collect() };
    calls.report(first, names(&["default"]), now);
    calls.report(second, names(&["carrier", "pbx", "Not A Name"]), now);
    for _ in 0..2 {
        let pbx = PlaceRequest { trunk: Some("pbx".into()), ..request("+442079460018") };
        let placed = calls.place("k", ("bank", "triage"), pbx, now).expect("placed");
        assert_eq!(placed.trunk.as_deref(), Some("pbx"));
        let Ok(ToEdge::Place { trunk, .. }) = to_second.try_recv() else { panic!("the pbx's edge has it") };
        assert_eq!(trunk.as_deref(), Some("pbx"));
        assert!(to_first.try_recv().is_err(), "never to the edge without the trunk");
    }
    let unknown = PlaceRequest { trunk: Some("other".into()), ..request("+442079460018") };
    let refused = calls.place("k", ("bank", "triage"), unknown, now).expect_err("no such trunk");
    assert_eq!((refused.status(), refused.code()), (404, "unknown_trunk"));
    assert!(refused.to_string().contains("carrier, default, pbx"), "names the trunks there are: {refused}");
    let bad = PlaceRequest { trunk: Some("Not A Name".into()), ..request("+442079460018") };
    let refused = calls.place("k", ("bank", "triage"), bad, now).expect_err("not a name");
    assert_eq!(refused.code(), "invalid_call");
    // No trunk named: any edge's default, in turn.
    calls.place("k", ("bank", "triage"), request("+442079460018"), now).expect("placed");
    calls.place("k", ("bank", "triage"), request("+442079460018"), now).expect("placed");
    assert!(to_first.try_recv().is_ok() && to_second.try_recv().is_ok(), "both edges have a default");
}
