//! Unit tests of the gateway side's refusal mapping and queue wording.

use super::*;

#[test]
fn refusals_become_the_sip_answers_a_caller_understands() {
    let status = |code, message: &str| refusal("triage", code, message.into()).admission().refusal().map(|r| r.0);
    assert_eq!(status(4404, "no agent"), Some(404));
    assert_eq!(status(4403, "not exposed"), Some(403));
    assert_eq!(status(4401, "bad key"), Some(503), "the edge's own credential: another edge may do");
    assert_eq!(status(1013, "full"), Some(503));
    assert_eq!(status(4503, "no pod"), Some(503));
    assert_eq!(status(4400, "bad start"), Some(500));
    let text = Refused::TextOnly { agent: "disputes".into() };
    assert_eq!(text.admission(), Admission::NotAcceptable("agent disputes is text-only and takes no calls".into()));
}

#[test]
fn an_outage_is_refused_503_with_the_agents_message_unless_a_person_takes_the_call() {
    let person = FallbackPerson { name: "advisor".into(), address: "+442079460001".into() };
    let said = Fallback {
        agent: "bank/triage".into(),
        cause: "switch".into(),
        message: "Please call back later.".into(),
        person: Some(person.clone()),
        retry_after_seconds: None,
    };
    let refused = outage("triage", Some(said.clone()), "outage: see bidi_session_fallback".into());
    assert_eq!(refused, Refused::Outage(Box::new(said)), "the fallback as the gateway sent it");
    assert_eq!(refused.label(), "outage");
    assert_eq!(
        refused.admission(),
        Admission::Unavailable { reason: "Please call back later.".into(), retry_after: None }
    );
    let hinted = Fallback { retry_after_seconds: Some(120), person: None, ..said_without_person() };
    let admission = Refused::Outage(Box::new(hinted)).admission();
    assert_eq!((admission.refusal().map(|r| r.0), admission.retry_after()), (Some(503), Some(120)));
    let Refused::Outage(bare) = outage("triage", None, String::new()) else { panic!("an outage") };
    assert_eq!((bare.cause.as_str(), bare.person), ("unknown", None), "a 4513 that said nothing more");
    assert!(!bare.message.is_empty(), "the caller is told something");
}

fn said_without_person() -> Fallback {
    Fallback {
        agent: "bank/triage".into(),
        cause: "breaker".into(),
        message: "Please call back later.".into(),
        person: None,
        retry_after_seconds: None,
    }
}

#[test]
fn a_capacity_refusal_is_503_with_the_retry_hint() {
    let full = Refused::CapacityFull {
        message: "the model quota of default/us-east-1 is full".into(),
        retry_after_seconds: Some(40),
    };
    assert_eq!(full.label(), "capacity_full");
    let admission = full.admission();
    assert_eq!(admission.refusal(), Some((503, "the model quota of default/us-east-1 is full")));
    assert_eq!(admission.retry_after(), Some(40));
    let unhinted = Refused::CapacityFull { message: "full".into(), retry_after_seconds: None }.admission();
    assert_eq!(unhinted.retry_after(), None);
}

#[test]
fn the_182_says_the_hold_message_or_else_the_place_and_the_wait() {
    let queued = Queued {
        position: 2,
        estimated_wait_seconds: 40,
        message: "Please stay on the line.".into(),
        agent: "bank/triage".into(),
    };
    assert_eq!(queued.phrase(), "Please stay on the line.");
    let older = Queued { message: String::new(), ..queued };
    assert_eq!(older.phrase(), "Queued: number 2 in line, about 40 s");
}

#[test]
fn the_hold_recording_is_the_agents_the_gateway_names_or_else_the_dialled_ones() {
    let json = r#"{"type":"bidi_session_queued","position":1,"estimated_wait_seconds":9,"agent":"bank/triage"}"#;
    let Ok(ServerMessage::BidiSessionQueued { position, estimated_wait_seconds, message, agent }) =
        serde_json::from_str::<ServerMessage>(json)
    else {
        panic!("a queued message")
    };
    let queued = Queued { position, estimated_wait_seconds, message, agent };
    assert_eq!(queued.agent_or("+442079460000"), "bank/triage", "a number dialled: the Agent that claims it");
    let older = r#"{"type":"bidi_session_queued","position":1,"estimated_wait_seconds":9}"#;
    let Ok(ServerMessage::BidiSessionQueued { agent, .. }) = serde_json::from_str::<ServerMessage>(older) else {
        panic!("an older gateway's queued message")
    };
    let older = Queued { agent, ..queued };
    assert_eq!(older.agent_or("triage"), "triage", "an older gateway names none: what was dialled");
}

#[test]
fn the_session_start_asks_for_the_calls_format_both_ways_as_binary_frames() {
    use switchboard_sip::media::g711::Law;
    let json = serde_json::to_value(ClientMessage::SessionStart(session_start("triage", Format::G711(Law::Alaw))))
        .expect("json");
    assert_eq!(json["agent"], "triage");
    assert_eq!(json["modalities"], serde_json::json!(["audio"]));
    assert_eq!(json["audio"]["input"], serde_json::json!({"encoding": "alaw", "sample_rate": 8000}));
    assert_eq!(json["audio"]["output"], serde_json::json!({"encoding": "alaw", "sample_rate": 8000}));
    assert_eq!(json["audio"]["binary_output"], true);
    // A G.722 call's session is wideband: the agent hears 16 kHz and answers in it.
    let json =
        serde_json::to_value(ClientMessage::SessionStart(session_start("triage", Format::Wideband))).expect("json");
    assert_eq!(json["audio"]["input"], serde_json::json!({"encoding": "pcm16", "sample_rate": 16000}));
    assert_eq!(json["audio"]["output"], serde_json::json!({"encoding": "pcm16", "sample_rate": 16000}));
}
