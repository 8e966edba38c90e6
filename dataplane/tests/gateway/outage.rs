//! Outage mode ([`switchboard_gateway::outage`]) with real runtimes on the simulator:
//!
//! - The simulator's injected failures (its first model requests answer
//!   `ServiceUnavailableException`) fail triage's turns; past the threshold the breaker
//!   trips and a new session gets `bidi_session_fallback` (the person, the message, a retry
//!   hint) and close 4513 — never a silent socket. Once the open time is over, a share of new
//!   sessions is served; their good turns ramp it back until every session is served again.
//!   A session under way all along goes on and is told of the trip and of the recovery
//!   (`bidi_session_outage`, cause `breaker`), once each.
//! - The switch (`active`): every new session goes to the fallback at once, told the cause
//!   `switch`; turned off, sessions are served again. A session under way goes on — the turn
//!   it is in ends as it would — and is told (`bidi_session_outage`, on, then off again).
//! - The namespace's switch (`namespaceOutages`, from its `switchboard-outage` ConfigMap):
//!   every Agent of the namespace falls back — one without outage mode with the namespace's
//!   message — and another namespace's are not touched.

use std::time::{Duration, Instant};

use switchboard_core::protocol::{ErrorCode, ServerMessage};
use switchboard_crds::agent::{Breaker, Person};
use switchboard_crds::routing::RouteOutage;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::service_error::ErrorKind;
use switchboard_sim::{Script, banking_script};

use crate::client::{Client, metric_sum};
use crate::fleet::Fleet;

/// How many model requests fail before the simulator answers again: two turns (the runtime
/// tries each model call three times).
const FAILING_REQUESTS: u64 = 6;

fn outage(active: bool) -> RouteOutage {
    RouteOutage {
        active,
        person: Some(Person {
            name: "advisor".into(),
            address: "+442079460001".into(),
            description: String::new(),
            transfer: Default::default(),
        }),
        message: Some("Our assistant is unavailable; putting you through to an advisor.".into()),
        breaker: Breaker {
            error_percent: 50,
            min_turns: 2,
            window_seconds: 60,
            first_audio_seconds: 10,
            open_seconds: 2,
            ramp_percent: vec![50],
            probe_turns: 2,
            ..Breaker::default()
        },
        text: false,
    }
}

/// Gives triage outage mode `outage` in the fleet's table.
fn set_outage(fleet: &mut Fleet, outage: RouteOutage) {
    let mut table = fleet.directory.borrow().table().clone();
    table.outages.insert("bank/triage".into(), outage);
    fleet.publish(table);
}

/// A session's first outcome: `Ok` with what it read up to its greeting's end (or its
/// failure), or `Err` with the fallback and the close.
async fn session(fleet: &Fleet) -> Result<(Client, Vec<ServerMessage>), (ServerMessage, u16)> {
    let mut client = Client::start(&fleet.url, Some("triage")).await;
    match client.next().await {
        Some(Ok(fallback @ ServerMessage::BidiSessionFallback { .. })) => {
            let (code, _) = client.closed().await;
            Err((fallback, code))
        }
        Some(Ok(first @ ServerMessage::BidiConnectionStart { .. })) => Ok((client, vec![first])),
        other => panic!("a session start or a fallback first: {other:?}"),
    }
}

/// Asks something and reads to the end of the turn, or to the model's failure.
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

/// Reads `client` on a task of its own (so it answers the gateway's pings while the test
/// drives other sessions) and sends each outage notice it is told; it must not end.
fn watch_notices(mut client: Client) -> tokio::sync::mpsc::UnboundedReceiver<ServerMessage> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            match client.next_within(Duration::from_secs(600)).await {
                Some(Some(Ok(notice @ ServerMessage::BidiSessionOutage { .. }))) => {
                    let _ = tx.send(notice);
                }
                Some(Some(Ok(_))) => {}
                other => panic!("the session under way goes on: {other:?} after {:?}", client.seen),
            }
        }
    });
    rx
}

/// The next outage notice the watched session is told, within a few seconds.
async fn notice(notices: &mut tokio::sync::mpsc::UnboundedReceiver<ServerMessage>) -> ServerMessage {
    tokio::time::timeout(Duration::from_secs(5), notices.recv())
        .await
        .expect("told within seconds")
        .expect("the watcher runs")
}

/// Reads `client` until its turn has ended and it was told its Agent's outage switch is
/// `active`: what it was told, and everything read.
async fn turn_and_notice(client: &mut Client, active: bool) -> (ServerMessage, Vec<ServerMessage>) {
    let (mut notice, mut ended, mut got) = (None, false, Vec::new());
    while notice.is_none() || !ended {
        match client.next().await {
            Some(Ok(message)) => {
                ended |= matches!(message, ServerMessage::BidiResponseComplete { .. });
                if matches!(&message, ServerMessage::BidiSessionOutage { active: a, .. } if *a == active) {
                    notice = Some(message.clone());
                }
                assert!(!matches!(message, ServerMessage::BidiError { recoverable: false, .. }), "{message:?}");
                got.push(message);
            }
            other => panic!("the session under way goes on: {other:?} after {got:?}"),
        }
    }
    (notice.expect("told"), got)
}

fn metrics(fleet: &Fleet) -> String {
    fleet.gateway.outages.observe(&fleet.directory.borrow().table().outages);
    fleet.gateway.outages.metrics.render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_trip_outage_mode_the_fallback_answers_and_recovery_ramps_back() {
    let mut script: Script = banking_script().expect("script");
    script.faults.error = Some(switchboard_sim::script::ErrorFault {
        kind: ErrorKind::ServiceUnavailable,
        first: Some(FAILING_REQUESTS),
        message: None,
    });
    let mut fleet = Fleet::with_script(&[], Auth::default(), GatewayConfig::default(), Store::default(), script).await;
    set_outage(&mut fleet, outage(false));
    // A session under way through it all, idle: it only listens.
    let (under_way, _) = session(&fleet).await.expect("served before the failures");
    let mut notices = watch_notices(under_way);

    // The model service fails: the sessions' turns fail, until the breaker trips.
    let mut failed_sessions = 0;
    let tripped = loop {
        match session(&fleet).await {
            Ok((mut client, mut seen)) => {
                seen.extend(ask(&mut client).await);
                println!("served while failing: {seen:?}");
                failed_sessions += 1;
                assert!(failed_sessions <= 4, "the breaker trips after 2 failed turns: {seen:?}");
            }
            Err(fallback) => break fallback,
        }
    };
    let (fallback, code) = tripped;
    println!("tripped after {failed_sessions} failing sessions: {fallback:?}");
    assert_eq!(code, 4513, "the fallback's close");
    let ServerMessage::BidiSessionFallback { agent, cause, message, person, retry_after_seconds } = fallback else {
        unreachable!()
    };
    assert_eq!((agent.as_str(), cause.as_str()), ("bank/triage", "breaker"));
    assert!(message.contains("advisor"), "{message}");
    assert_eq!(person.map(|p| p.address).as_deref(), Some("+442079460001"));
    assert!(retry_after_seconds.is_some_and(|s| (1..=2).contains(&s)), "{retry_after_seconds:?}");
    let text = metrics(&fleet);
    assert_eq!(metric_sum(&text, "switchboard_gateway_outage_state", &[("agent", "bank/triage")]), 2.0, "{text}");
    assert_eq!(metric_sum(&text, "switchboard_gateway_outage_trips_total", &[("cause", "errors")]), 1.0);
    // Other Agents are not touched: idv has no outage mode.
    assert_eq!(metric_sum(&text, "switchboard_gateway_outage_state", &[("agent", "bank/idv")]), 0.0);
    // The session under way is told, with the fallback new sessions get, and goes on.
    let ServerMessage::BidiSessionOutage { agent, active, cause, message, person, text_only } =
        notice(&mut notices).await
    else {
        unreachable!()
    };
    assert_eq!((agent.as_str(), active, cause.as_str(), text_only), ("bank/triage", true, "breaker", false));
    assert!(message.contains("advisor"), "{message}");
    assert_eq!(person.map(|p| p.address).as_deref(), Some("+442079460001"));

    // The service is healthy again (the simulator's failures are spent); after the open
    // time, half the new sessions are served, and their good turns ramp it back.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (mut served, mut diverted) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "recovered within a minute: served {served}, diverted {diverted}");
        match session(&fleet).await {
            Ok((mut client, _)) => {
                served += 1;
                let turn = ask(&mut client).await;
                assert!(
                    turn.iter().any(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })),
                    "served and answered: {turn:?}"
                );
                client.close().await;
            }
            Err((ServerMessage::BidiSessionFallback { cause, .. }, 4513)) => {
                assert_eq!(cause, "breaker");
                diverted += 1;
            }
            Err(other) => panic!("{other:?}"),
        }
        let text = metrics(&fleet);
        if metric_sum(&text, "switchboard_gateway_outage_recoveries_total", &[("agent", "bank/triage")]) >= 1.0 {
            break;
        }
    }
    println!("ramped back: {served} sessions served, {diverted} diverted on the way");
    assert!(served >= 2, "two good turns in a row close it");
    // Recovered: the session under way is told so, once; the ramp's steps told it nothing.
    let recovered = notice(&mut notices).await;
    assert!(
        matches!(&recovered, ServerMessage::BidiSessionOutage { active: false, cause, message, person: None, .. }
            if cause == "breaker" && message.is_empty()),
        "{recovered:?}"
    );
    // Recovered: every new session is served.
    for _ in 0..5 {
        let (client, _) = session(&fleet).await.expect("served after recovery");
        client.close().await;
    }
    let text = metrics(&fleet);
    assert_eq!(metric_sum(&text, "switchboard_gateway_outage_state", &[("agent", "bank/triage")]), 0.0);
    assert!(metric_sum(&text, "switchboard_gateway_outage_turns_total", &[("outcome", "good")]) >= 2.0);
    assert!(metric_sum(&text, "switchboard_gateway_outage_fallbacks_total", &[("cause", "breaker")]) >= 1.0);
    assert!(notices.try_recv().is_err(), "told once each way");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_switch_sends_new_sessions_to_the_fallback_and_back() {
    let mut fleet = Fleet::start(&[]).await;
    // A session under way before the switch, in a turn when it flips.
    let (mut under_way, _) = session(&fleet).await.expect("served");
    under_way.say("What are your opening hours?").await;
    set_outage(&mut fleet, outage(true));
    // Its turn ends as it would, and it is told, with the fallback new sessions get.
    let (told, _) = turn_and_notice(&mut under_way, true).await;
    let ServerMessage::BidiSessionOutage { agent, cause, message, person, .. } = told else { unreachable!() };
    assert_eq!((agent.as_str(), cause.as_str()), ("bank/triage", "switch"));
    assert_eq!(message, "Our assistant is unavailable; putting you through to an advisor.");
    assert_eq!(person.map(|p| p.address).as_deref(), Some("+442079460001"));
    match session(&fleet).await {
        Err((ServerMessage::BidiSessionFallback { cause, person, retry_after_seconds, .. }, 4513)) => {
            assert_eq!(cause, "switch");
            assert_eq!(person.map(|p| p.name).as_deref(), Some("advisor"));
            assert_eq!(retry_after_seconds, None, "no estimate while the switch is on");
        }
        other => panic!("the fallback while switched on: {:?}", other.map(|(_, seen)| seen)),
    }
    let text = metrics(&fleet);
    assert_eq!(metric_sum(&text, "switchboard_gateway_outage_state", &[("agent", "bank/triage")]), 3.0);
    assert_eq!(metric_sum(&text, "switchboard_gateway_outage_fallbacks_total", &[("cause", "switch")]), 1.0);
    // The session under way goes on.
    let turn = ask(&mut under_way).await;
    assert!(turn.iter().any(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })), "{turn:?}");
    assert!(
        !turn.iter().any(|m| matches!(m, ServerMessage::BidiError { code: ErrorCode::ModelServiceUnavailable, .. }))
    );

    set_outage(&mut fleet, outage(false));
    // Told it is off again, and served on.
    under_way.say("And on Saturdays?").await;
    let (told, _) = turn_and_notice(&mut under_way, false).await;
    assert!(matches!(&told, ServerMessage::BidiSessionOutage { message, person: None, .. } if message.is_empty()));
    let (client, _) = session(&fleet).await.expect("served once switched off");
    client.close().await;
    assert_eq!(metric_sum(&metrics(&fleet), "switchboard_gateway_outage_state", &[("agent", "bank/triage")]), 0.0);
    // Told once each way: a later turn hears nothing more of it.
    let turn = ask(&mut under_way).await;
    assert!(!turn.iter().any(|m| matches!(m, ServerMessage::BidiSessionOutage { .. })), "{turn:?}");
    let notices = under_way.seen.iter().filter(|m| matches!(m, ServerMessage::BidiSessionOutage { .. })).count();
    assert_eq!(notices, 2, "{:?}", under_way.seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namespace_switch_sends_every_agents_new_sessions_to_the_fallback() {
    let mut fleet = Fleet::start(&[]).await;
    let (mut under_way, _) = session(&fleet).await.expect("served");
    // Triage has no outage mode of its own: the namespace's message is what it falls back to.
    let mut table = fleet.directory.borrow().table().clone();
    assert!(table.outage("bank", "triage").is_none());
    table.namespace_outages.insert(
        "bank".into(),
        switchboard_crds::routing::NamespaceOutage { message: Some("The bank's assistants are closed today.".into()) },
    );
    // Another namespace's switch touches nobody here.
    table.namespace_outages.insert("retail".into(), switchboard_crds::routing::NamespaceOutage::default());
    fleet.publish(table.clone());
    match session(&fleet).await {
        Err((ServerMessage::BidiSessionFallback { agent, cause, message, person, retry_after_seconds }, 4513)) => {
            assert_eq!((agent.as_str(), cause.as_str()), ("bank/triage", "switch"));
            assert_eq!(message, "The bank's assistants are closed today.");
            assert_eq!((person, retry_after_seconds), (None, None));
        }
        other => panic!("the fallback while the namespace is switched on: {:?}", other.map(|(_, seen)| seen)),
    }
    let in_effect = fleet.directory.borrow().table().outages_in_effect();
    fleet.gateway.outages.observe(in_effect.iter().map(|(agent, outage)| (agent, outage)));
    let text = fleet.gateway.outages.metrics.render();
    for agent in ["bank/triage", "bank/idv", "bank/banking", "bank/disputes"] {
        assert_eq!(metric_sum(&text, "switchboard_gateway_outage_state", &[("agent", agent)]), 3.0, "{agent}: {text}");
    }
    // The session under way goes on, told with the namespace's message.
    under_way.say("What are your opening hours?").await;
    let (told, _) = turn_and_notice(&mut under_way, true).await;
    assert!(
        matches!(&told, ServerMessage::BidiSessionOutage { message, .. } if message == "The bank's assistants are closed today."),
        "{told:?}"
    );

    // Switched off: served again.
    table.namespace_outages.clear();
    fleet.publish(table);
    let (client, _) = session(&fleet).await.expect("served once the namespace is switched off");
    client.close().await;
}
