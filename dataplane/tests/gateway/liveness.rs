//! Sessions that survive a silent network: the gateway pings both legs, so a client that
//! answers nothing is found in seconds and its session parked for resume (not ended), and a
//! runtime that answers nothing (a frozen process: its socket open, nothing read or
//! written) is found in seconds and the session moved to another pod of its Agent.

use std::time::{Duration, Instant};

use switchboard_core::protocol::{ServerMessage, SessionStart};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;

use crate::client::{Client, replies};
use crate::fleet::Fleet;

/// Pings every 200 ms, silence for 1 s is death.
fn quick_pings() -> GatewayConfig {
    GatewayConfig {
        ping_interval: Duration::from_millis(200),
        ping_timeout: Duration::from_secs(1),
        ..GatewayConfig::default()
    }
}

async fn wait_for(what: &str, patience: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < patience, "{what}: not within {patience:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_answers_nothing_is_parked_in_seconds_and_resumes() {
    let fleet = Fleet::with(&[], Auth::default(), quick_pings(), Store::default()).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let at = client.seen.iter().rposition(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).expect("start");
    let ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(seq), .. } = client.seen[at].clone()
    else {
        panic!("a token: {:?}", client.seen[at])
    };
    let last_seq = seq + (client.seen.len() - at - 1) as u64;

    // The client stops reading: its socket stays open, no pong goes back (as behind a
    // network that drops everything).
    let parked = || fleet.gateway.metrics.parked.with_label_values(&["bank/triage"]).get();
    let found = wait_for("the silent client's session parked", Duration::from_secs(10), || parked() >= 1.0).await;
    eprintln!("a silent client was found and its session parked in {found:?}");
    assert_eq!(fleet.gateway.metrics.live.with_label_values(&["bank/triage"]).get(), 0.0, "parked, not live");

    // It comes back on a new socket with its token: the session goes on where it was.
    let mut back = Client::connect(&fleet.url).await;
    back.send(&switchboard_core::protocol::ClientMessage::SessionStart(SessionStart {
        resume_token: Some(token),
        last_seq: Some(last_seq),
        ..Default::default()
    }))
    .await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;
    back.say("hello").await;
    let answer = back.turn().await;
    assert!(!replies(&answer).is_empty(), "the resumed session answers: {answer:?}");
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_runtime_is_left_for_another_pod_in_seconds() {
    let mut fleet = Fleet::with(&[("triage", 2)], Auth::default(), quick_pings(), Store::default()).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let serving: Vec<usize> = fleet
        .pods
        .iter()
        .enumerate()
        .filter(|(_, pod)| pod.agent == "triage" && fleet.gateway.balancer.live(pod.addr) == 1)
        .map(|(i, _)| i)
        .collect();
    let [serving] = serving[..] else { panic!("one triage pod serves the session: {serving:?}") };

    // The serving pod freezes: its socket stays open and answers nothing, not even pings.
    fleet.pods[serving].freeze();
    let frozen_at = Instant::now();
    let restart = client
        .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_unresponsive"))
        .await;
    let moved = frozen_at.elapsed();
    eprintln!("a frozen runtime was found and its session moved in {moved:?}");
    assert!(matches!(restart.last(), Some(ServerMessage::BidiConnectionRestart { .. })));
    // The client could show it: reconnecting as the move began, the new pod's state after.
    let reconnecting = restart.iter().position(|m| {
        matches!(m, ServerMessage::BidiSessionState { state: switchboard_core::protocol::SessionState::Reconnecting })
    });
    assert!(reconnecting.is_some_and(|at| at + 1 < restart.len()), "reconnecting before the restart: {restart:?}");
    let after = client.until(|m| matches!(m, ServerMessage::BidiSessionState { .. })).await;
    assert!(
        matches!(after.last(), Some(ServerMessage::BidiSessionState { state }) if *state != switchboard_core::protocol::SessionState::Reconnecting),
        "the new pod says its state: {after:?}"
    );
    let other = fleet.pods.iter().position(|p| p.agent == "triage" && fleet.gateway.balancer.live(p.addr) == 1);
    assert!(other.is_some_and(|o| o != serving), "the session is on the other pod now");

    // The conversation goes on there, memory and all.
    client.say("hello").await;
    let answer = client.turn().await;
    assert!(!replies(&answer).is_empty(), "the other pod answers: {answer:?}");
    fleet.pods[serving].thaw();
    for pod in fleet.pods_of("triage") {
        pod.kill();
    }
}

/// Two identical typed lines in flight on a runtime that freezes: the session moves, the
/// gateway sends both to the next pod by id, and each is taken up and answered once, the
/// client getting its own id back on each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_typed_lines_in_flight_across_a_move_are_each_answered_once() {
    use switchboard_core::protocol::{ClientMessage, TranscriptRole};

    let mut fleet = Fleet::with(&[("triage", 2)], Auth::default(), quick_pings(), Store::default()).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let serving = fleet.pods.iter().position(|p| p.agent == "triage" && fleet.gateway.balancer.live(p.addr) == 1);
    let serving = serving.expect("a triage pod serves the session");

    fleet.pods[serving].freeze();
    let typed = |id: &str| ClientMessage::BidiTextInput { text: "Hello".into(), id: Some(id.into()) };
    client.send(&typed("a")).await;
    client.send(&typed("b")).await;
    let moved = client
        .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_unresponsive"))
        .await;
    assert!(
        !moved.iter().any(|m| matches!(m, ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, .. })),
        "the frozen pod took nothing up: {moved:?}"
    );
    for _ in 0..2 {
        let turn = client.turn().await;
        assert!(!replies(&turn).is_empty(), "answered: {turn:?}");
    }
    // A third line after them: nothing of the first two comes again before its answer.
    client.send(&typed("c")).await;
    client.turn().await;
    let echoes: Vec<Option<String>> = client
        .seen
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, input_id, .. } => Some(input_id.clone()),
            _ => None,
        })
        .collect();
    let mine = |id: &str| Some(id.to_owned());
    assert_eq!(echoes, [mine("a"), mine("b"), mine("c")], "each taken up once, with the client's own id");
    let answers = client.seen.iter().filter(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).count();
    assert_eq!(answers, 3, "one answer each: {:?}", client.seen);
    fleet.pods[serving].thaw();
    for pod in fleet.pods_of("triage") {
        pod.kill();
    }
}
