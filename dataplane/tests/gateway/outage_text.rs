//! Outage mode's text-only reply (`spec.outage.fallback.text`) with real runtimes on the
//! simulator: once the simulator's failures have tripped triage's breaker, a new session
//! whose client reads text — a text client, or a web client asking for audio and text — is
//! served in text through triage's text model instead of sent away: its
//! `bidi_connection_start` names the text model, `bidi_session_outage` says `text_only`
//! and why, its audio is dropped, its typed question is answered; a phone-like client
//! (audio only) still gets the fallback and 4513. The text sessions' turns do not feed the
//! breaker, the metric counts them, and the record notes it.

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart};
use switchboard_crds::agent::{Breaker, Person};
use switchboard_crds::routing::RouteOutage;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_record::Store;
use switchboard_sim::banking_script;
use switchboard_sim::service_error::ErrorKind;

use crate::client::{Client, metric_sum};
use crate::fleet::Fleet;
use crate::record::{ended, kinds, recorder, session_id};

/// Two turns' model requests fail (the runtime tries each call three times).
const FAILING_REQUESTS: u64 = 6;

fn outage() -> RouteOutage {
    RouteOutage {
        active: false,
        person: Some(Person {
            name: "advisor".into(),
            address: "+442079460001".into(),
            description: String::new(),
            transfer: Default::default(),
        }),
        message: Some("Our voice assistant is unavailable; we can carry on in writing.".into()),
        // Open long enough that no new session of this test is served by the ramp.
        breaker: Breaker { min_turns: 2, open_seconds: 120, ..Breaker::default() },
        text: true,
    }
}

/// A new session of triage asking for `modalities`.
async fn start(fleet: &Fleet, modalities: &[&str]) -> Client {
    let mut client = Client::connect(&fleet.url).await;
    let modalities = modalities.iter().map(|m| (*m).to_owned()).collect();
    let start = SessionStart { agent: Some("triage".into()), modalities, ..Default::default() };
    client.send(&ClientMessage::SessionStart(start)).await;
    client
}

/// Asks a question and reads to the end of the turn, or to the model's failure.
async fn ask(client: &mut Client) -> Vec<ServerMessage> {
    client.say("What are your opening hours?").await;
    let mut got = Vec::new();
    loop {
        match client.next().await {
            Some(Ok(message)) => {
                let done = matches!(
                    &message,
                    ServerMessage::BidiResponseComplete { .. } | ServerMessage::BidiError { recoverable: false, .. }
                );
                got.push(message);
                if done {
                    return got;
                }
            }
            Some(Err(_)) | None => return got,
        }
    }
}

/// The outage notices among `messages`: `(active, cause, text_only)`.
fn notices(messages: &[ServerMessage]) -> Vec<(bool, String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiSessionOutage { active, cause, text_only, .. } => {
                Some((*active, cause.clone(), *text_only))
            }
            _ => None,
        })
        .collect()
}

fn answered(turn: &[ServerMessage]) -> bool {
    turn.iter().any(|m| matches!(m, ServerMessage::BidiResponseComplete { .. }))
        && !turn.iter().any(|m| matches!(m, ServerMessage::BidiError { .. }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_outage_mode_clients_that_read_text_are_served_in_text_and_a_phone_gets_the_fallback() {
    let dir = std::env::temp_dir().join(format!("switchboard-outage-text-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (recorder, _writer) = recorder(store.clone(), None);
    let mut script = banking_script().expect("script");
    script.faults.error = Some(switchboard_sim::script::ErrorFault {
        kind: ErrorKind::ServiceUnavailable,
        first: Some(FAILING_REQUESTS),
        message: None,
    });
    let mut fleet = Fleet::recording(
        &[],
        Auth::default(),
        GatewayConfig::default(),
        ResumeStore::default(),
        script,
        Some(recorder),
    )
    .await;
    let mut table = fleet.directory.borrow().table().clone();
    table.outages.insert("bank/triage".into(), outage());
    fleet.publish(table);

    // The model service fails: text sessions' turns fail until the breaker trips; the
    // first text client after the trip is served in text, and told so.
    let mut failing = 0;
    let (text_client, told) = loop {
        let mut client = start(&fleet, &[]).await;
        let mut seen = client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
        seen.extend(ask(&mut client).await);
        // The session whose failed turn trips the breaker is told of it as a session under
        // way (not text-only: it started before); the next one starts in text.
        if notices(&seen).iter().any(|(_, _, text_only)| *text_only) {
            break (client, seen);
        }
        println!("served while failing: {seen:?}");
        failing += 1;
        assert!(failing <= 4, "the breaker trips after 2 failed turns: {seen:?}");
        client.close().await;
    };
    assert_eq!(notices(&told), [(true, "breaker".to_owned(), true)], "{told:?}");
    assert!(answered(&told), "the text model answers: {told:?}");

    // A web client asking for audio and text: served in text, on the text model.
    let mut web = start(&fleet, &["audio", "text"]).await;
    let first = web.until(|m| matches!(m, ServerMessage::BidiSessionOutage { .. })).await;
    let Some(ServerMessage::BidiConnectionStart { model, .. }) = first.first() else { panic!("{first:?}") };
    assert!(!model.contains("sonic"), "the text model, not the voice model: {model}");
    let Some(ServerMessage::BidiSessionOutage { agent, active, cause, message, person, text_only }) = first.last()
    else {
        unreachable!()
    };
    assert_eq!((agent.as_str(), *active, cause.as_str(), *text_only), ("bank/triage", true, "breaker", true));
    assert!(message.contains("in writing"), "{message}");
    assert_eq!(person.as_ref().map(|p| p.name.as_str()), Some("advisor"));
    // Its microphone's audio goes nowhere (a text session would refuse it); typing works.
    web.send_raw(r#"{"type":"bidi_audio_input","audio":"AAAAAAAAAAAAAAAAAAAAAA=="}"#).await;
    web.send_raw(r#"{"type":"bidi_audio_input_end"}"#).await;
    let turn = ask(&mut web).await;
    assert!(answered(&turn), "{turn:?}");
    assert!(!turn.iter().any(|m| matches!(m, ServerMessage::BidiAudioStream { .. })), "no audio: {turn:?}");
    let web_id = session_id(&first);

    // A phone-like client (audio only) cannot read text: the fallback, then 4513.
    let mut phone = start(&fleet, &["audio"]).await;
    match phone.next().await {
        Some(Ok(ServerMessage::BidiSessionFallback { cause, person, .. })) => {
            assert_eq!(cause, "breaker");
            assert_eq!(person.map(|p| p.address).as_deref(), Some("+442079460001"));
        }
        other => panic!("the fallback for audio only: {other:?}"),
    }
    assert_eq!(phone.closed().await.0, 4513);

    // Counted; and the text sessions' good turns are not the breaker's (it stays tripped).
    fleet.gateway.outages.observe(&fleet.directory.borrow().table().outages);
    let metrics = fleet.gateway.outages.metrics.render();
    let triage = [("agent", "bank/triage"), ("cause", "breaker")];
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_outage_text_sessions_total", &triage), 2.0, "{metrics}");
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_outage_fallbacks_total", &triage), 3.0, "{metrics}");
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_outage_turns_total", &[("outcome", "good")]), 0.0);
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_outage_state", &[("agent", "bank/triage")]), 2.0);

    // The record says the session was served in text, and why.
    web.close().await;
    text_client.close().await;
    let record = ended(&store, &web_id).await;
    assert!(kinds(&record).contains(&"outage_text_only"), "{:?}", kinds(&record));
    let noted = record.events.iter().find(|e| e.kind == "outage_text_only").expect("noted");
    assert_eq!(noted.data, serde_json::json!({"cause": "breaker"}));
    let started = record.events.iter().find(|e| e.kind == "session_start").expect("started");
    assert_eq!(started.data["modalities"], serde_json::json!(["text"]), "its runtime sessions open without audio");
    let _ = std::fs::remove_dir_all(&dir);
}
