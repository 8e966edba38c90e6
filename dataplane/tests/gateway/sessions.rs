//! Sessions through the gateway: one client socket across handoffs between pods, a pod
//! lost mid-session, and the gateway's refusals.

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code};

use crate::client::{Client, replies};
use crate::fleet::Fleet;

fn started(messages: &[ServerMessage], agent: &str) -> bool {
    messages.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { agent: a, .. } if a == agent))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_socket_from_triage_to_idv_to_banking_and_back_across_pods() {
    let mut fleet = Fleet::start(&[("banking", 2)]).await;
    let mut client = Client::start(&fleet.url, None).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    assert!(started(&hello, "triage"), "the default agent answers: {hello:?}");

    client.say("I'd like to check my balance").await;
    let to_idv =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert!(to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { to, .. } if to == "idv")), "{to_idv:?}");
    let ask = client.turn().await;
    assert!(replies(&ask).iter().any(|r| r.contains("eight-digit account number")), "{ask:?}");

    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");

    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = client.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "the verified caller's balance: {balance:?}");

    // The banking pod serving the session dies: the session moves to the other one, with
    // the verified caller and the conversation.
    let balancer = fleet.gateway.balancer.clone();
    let serving: Vec<_> = fleet.pods_of("banking").map(|p| p.addr).filter(|a| balancer.live(*a) == 1).collect();
    assert_eq!(serving.len(), 1, "one banking pod holds the session");
    fleet.pods_of("banking").find(|p| p.addr == serving[0]).expect("the pod").kill();
    client
        .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_lost"))
        .await;
    client.say("What is my balance now?").await;
    let again = client.turn().await;
    assert!(replies(&again).iter().any(|r| r.contains("1234.56")), "still verified on the other pod: {again:?}");

    client.say("That's all, thanks").await;
    let back =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;
    assert!(back.iter().any(|m| matches!(m, ServerMessage::Handoff { to, .. } if to == "triage")), "{back:?}");
    let welcome = client.turn().await;
    assert!(replies(&welcome).iter().any(|r| r.starts_with("Welcome back")), "{welcome:?}");
    assert!(
        !client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionClose { .. })),
        "the client's socket stayed open throughout"
    );
    let metrics = fleet.gateway.metrics.render();
    for needle in [
        r#"switchboard_gateway_handoffs_total{from="bank/triage",to="bank/idv"} 1"#,
        r#"switchboard_gateway_handoffs_total{from="bank/idv",to="bank/banking"} 1"#,
        r#"switchboard_gateway_handoffs_total{from="bank/banking",to="bank/triage"} 1"#,
        r#"switchboard_gateway_sessions_migrated_total{agent="bank/banking",reason="runtime_lost"} 1"#,
    ] {
        assert!(metrics.contains(needle), "{needle} in\n{metrics}");
    }
}

/// Sends `start` (or nothing) on `query` and expects the close `code` with a `bidi_error`.
async fn refused(fleet: &Fleet, query: &str, start: SessionStart, code: u16) -> String {
    let mut client = Client::connect(&format!("{}{query}", fleet.url)).await;
    client.send(&ClientMessage::SessionStart(start)).await;
    let (got, _) = client.closed().await;
    assert_eq!(got, code, "{:?}", client.seen);
    assert!(!client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })), "{:?}", client.seen);
    client
        .seen
        .iter()
        .find_map(|m| match m {
            ServerMessage::BidiError { message, recoverable: false, .. } => Some(message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a bidi_error: {:?}", client.seen))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_context_unknown_unexposed_and_unready_agents_are_refused_with_their_codes() {
    let fleet = Fleet::start(&[]).await;
    let forged = SessionStart { memory: crate::client::ada(), ..Default::default() };
    let message = refused(&fleet, "", forged, close_code::BAD_START).await;
    assert!(message.contains("session_start.memory"), "{message}");
    let key = switchboard_core::grant::GatewaySigner::from_seed(&crate::fleet::KEY);
    // Even a correctly signed context is the gateway's to send, never a client's.
    let signed = crate::client::signed_start(&key, "triage", crate::client::ada());
    let message = refused(&fleet, "", signed, close_code::BAD_START).await;
    assert!(message.contains("session_start.context"), "{message}");

    let message = refused(&fleet, "?agent=nobody", SessionStart::default(), close_code::UNKNOWN_AGENT).await;
    assert!(message.contains("unknown agent \"nobody\""), "{message}");
    let message = refused(&fleet, "?agent=bank/banking", SessionStart::default(), close_code::NOT_EXPOSED).await;
    assert!(message.contains("not exposed"), "{message}");

    // triage loses its endpoints (its pods became unready).
    fleet.directory.send_modify(|d| {
        let mut endpoints = std::collections::HashMap::new();
        endpoints.insert(("bank".to_owned(), "idv".to_owned()), vec![]);
        *d = d.with_endpoints(std::sync::Arc::new(endpoints));
    });
    let message = refused(&fleet, "", SessionStart::default(), close_code::NO_READY_POD).await;
    assert!(message.contains("no ready pod"), "{message}");
    let metrics = fleet.gateway.metrics.render();
    for reason in ["context_refused", "unknown_agent", "not_exposed", "no_ready_pod"] {
        assert!(
            metrics.contains(&format!("switchboard_gateway_sessions_refused_total{{reason=\"{reason}\"}}")),
            "{reason}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_origins_and_per_key_limits_each_refuse_with_their_code() {
    use sha2::Digest;
    let digest = |key: &str| hex_digest(&sha2::Sha256::digest(key.as_bytes()));
    let keys = format!("web {} 1\nbatch {}\n", digest("web-key"), digest("batch-key"));
    let auth = switchboard_gateway::auth::Auth::new(Some(&keys), vec!["https://bank.example".into()]).expect("auth");
    let fleet = Fleet::with_auth(&[], auth).await;
    let start = ClientMessage::SessionStart(SessionStart::default());
    let refused_with = |headers: Vec<(&'static str, &'static str)>, code: u16, reason: &'static str| {
        let url = fleet.url.clone();
        let start = start.clone();
        async move {
            let mut client = Client::connect_with(&url, &headers).await;
            client.send(&start).await;
            let (got, _) = client.closed().await;
            assert_eq!(got, code, "{headers:?}: {:?}", client.seen);
            assert!(
                client.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == reason)),
                "{:?}",
                client.seen
            );
        }
    };
    refused_with(vec![], close_code::UNAUTHORIZED, "missing_key").await;
    refused_with(vec![("authorization", "Bearer guessed")], close_code::UNAUTHORIZED, "unknown_key").await;
    refused_with(
        vec![("x-api-key", "batch-key"), ("origin", "https://evil.example")],
        close_code::ORIGIN_NOT_ALLOWED,
        "origin",
    )
    .await;

    // The web key may hold one session: a second is refused while the first goes on.
    let mut first =
        Client::connect_with(&fleet.url, &[("authorization", "Bearer web-key"), ("origin", "https://bank.example")])
            .await;
    first.send(&start).await;
    first.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    refused_with(vec![("x-api-key", "web-key")], close_code::TOO_MANY_SESSIONS, "key_sessions").await;
    first.say("I'd like to check my balance").await;
    first.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    first.send(&ClientMessage::Close {}).await;
    first.closed().await;
    // Its slot is free again; another key was never limited by it.
    let mut again = Client::connect_with(&fleet.url, &[("x-api-key", "web-key")]).await;
    again.send(&start).await;
    again.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let mut batch = Client::connect_with(&fleet.url, &[("x-api-key", "batch-key")]).await;
    batch.send(&start).await;
    batch.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let metrics = fleet.gateway.metrics.render();
    for reason in ["missing_key", "unknown_key", "origin", "key_sessions"] {
        assert!(
            metrics.contains(&format!("switchboard_gateway_sessions_refused_total{{reason=\"{reason}\"}} 1")),
            "{reason}"
        );
    }
}

fn hex_digest(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_to_an_agent_without_ready_pods_keeps_the_caller_with_the_source() {
    let fleet = Fleet::start(&[]).await;
    // idv's pods all become unready.
    fleet.directory.send_modify(|d| {
        let endpoints: std::collections::HashMap<(String, String), Vec<std::net::SocketAddr>> = fleet
            .pods
            .iter()
            .filter(|p| p.agent != "idv")
            .map(|p| (("bank".to_owned(), p.agent.clone()), vec![p.addr]))
            .collect();
        *d = d.with_endpoints(std::sync::Arc::new(endpoints));
    });
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("I'd like to check my balance").await;
    let failed = client
        .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "handoff_failed"))
        .await;
    let message = failed.iter().find_map(|m| match m {
        ServerMessage::BidiError { code, message, recoverable: true, .. } if code == "handoff_failed" => Some(message),
        _ => None,
    });
    let message = message.unwrap_or_else(|| panic!("a recoverable handoff_failed error: {failed:?}"));
    assert!(message.contains("idv") && message.contains("still talking to triage"), "{message}");
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;
    // The conversation goes on with triage, which still has it.
    client.say("That's all, thanks").await;
    let reply = client.turn().await;
    assert!(!replies(&reply).is_empty(), "triage answers: {reply:?}");
    assert!(!client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionClose { .. })), "{:?}", client.seen);
    assert!(
        fleet
            .gateway
            .metrics
            .render()
            .contains(r#"switchboard_gateway_sessions_refused_total{reason="handoff_failed"} 1"#)
    );
    // What the no-ready-pod alert reads, scraped as Prometheus does.
    let addr = fleet.url.trim_start_matches("ws://").split('/').next().and_then(|a| a.parse().ok()).expect("addr");
    let metrics = crate::client::get(addr, "/metrics").await.1;
    assert!(metrics.contains(r#"switchboard_gateway_agent_ready_pods{agent="bank/idv"} 0"#), "{metrics}");
    assert!(metrics.contains(r#"switchboard_gateway_agent_ready_pods{agent="bank/triage"} 1"#), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_sent_during_a_handoff_reach_the_next_agents_pod() {
    let fleet = Fleet::start(&[]).await;
    let mut client = Client::start(&fleet.url, None).await;
    // Both lines at once: the second waits in triage's queue while it hands off, and its
    // pod closes with it; the gateway gives it to idv.
    client.say("I'd like to check my balance").await;
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let got = client.until(|m| matches!(m, ServerMessage::MemoryUpdate { key, .. } if key == "verifiedUser")).await;
    assert!(started(&got, "idv"), "{got:?}");
    assert!(got.iter().any(|m| matches!(m, ServerMessage::ToolStart { name, .. } if name == "perform_idv_check")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_pod_hands_its_session_to_another_at_the_turn_boundary() {
    let mut fleet = Fleet::start(&[("triage", 2)]).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let balancer = fleet.gateway.balancer.clone();
    let serving = fleet.pods_of("triage").map(|p| p.addr).find(|a| balancer.live(*a) == 1).expect("a serving pod");

    // The pod is told to stop while it answers: the answer is not cut.
    client.say("Hello").await;
    fleet.pods_of("triage").find(|p| p.addr == serving).expect("the pod").terminate();
    let turn = client.turn().await;
    assert!(replies(&turn).iter().any(|r| r.starts_with("Hello! I can help")), "the whole answer: {turn:?}");
    assert!(
        !turn.iter().any(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })),
        "no move mid-turn: {turn:?}"
    );
    // Then the session moves, and the next turn is served by the other pod.
    client
        .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_draining"))
        .await;
    assert_eq!(balancer.live(serving), 0, "the draining pod holds no session");
    client.say("I'd like to check my balance").await;
    let to_idv =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert!(to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { to, .. } if to == "idv")), "{to_idv:?}");
    // With its last session gone, the pod exits long before its 300 s drain timeout.
    let pod = fleet.pods_of("triage").find(|p| p.addr == serving).expect("the pod");
    let status = pod.exited_within(std::time::Duration::from_secs(30)).await.expect("the drained pod exits");
    assert!(status.success(), "{status:?}");
    assert!(!client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionClose { .. })), "{:?}", client.seen);
    let metrics = fleet.gateway.metrics.render();
    let needle = r#"switchboard_gateway_sessions_migrated_total{agent="bank/triage",reason="runtime_draining"} 1"#;
    assert!(metrics.contains(needle), "{needle} in\n{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_idle_clients_oversized_frames_and_a_spent_key_budget_each_close_with_their_code() {
    use std::time::Duration;

    use sha2::Digest;
    let digest = |key: &str| hex_digest(&sha2::Sha256::digest(key.as_bytes()));
    // The `slow` key may send 5 messages a second across its sessions.
    let keys = format!("slow {} - 5\nfree {}\n", digest("slow-key"), digest("free-key"));
    let auth = switchboard_gateway::auth::Auth::new(Some(&keys), vec![]).expect("auth");
    let config = switchboard_gateway::GatewayConfig {
        session_rate: 20,
        idle_timeout: Duration::from_secs(6),
        max_message_bytes: 4096,
        ..Default::default()
    };
    let fleet = Fleet::with(&[], auth, config, switchboard_gateway::resume::Store::default()).await;
    let start = ClientMessage::SessionStart(SessionStart::default());
    let open = |key: &'static str| {
        let (url, start) = (fleet.url.clone(), start.clone());
        async move {
            let mut client = Client::connect_with(&url, &[("x-api-key", key)]).await;
            client.send(&start).await;
            client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
            client
        }
    };
    let mut bystander = open("free-key").await;
    bystander.say("Hello").await;
    // A flood on one session: 1008, its own reason.
    let mut flood = open("free-key").await;
    for _ in 0..100 {
        if !flood.try_send_raw(r#"{"type":"bidi_text_input","text":"hi"}"#).await {
            break;
        }
    }
    assert_eq!(flood.closed().await.0, close_code::RATE_LIMITED);
    assert!(flood.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "session_rate")));
    // An oversized frame: 1009.
    let mut big = open("free-key").await;
    let _ = big.try_send_raw(&format!(r#"{{"type":"bidi_text_input","text":"{}"}}"#, "x".repeat(8192))).await;
    assert_eq!(big.closed().await.0, close_code::TOO_BIG);
    // The slow key: its budget is shared, so two sessions together run out.
    let mut a = open("slow-key").await;
    let mut b = open("slow-key").await;
    for _ in 0..6 {
        let _ = a.try_send_raw(r#"{"type":"bidi_text_input","text":"Hello"}"#).await;
        let _ = b.try_send_raw(r#"{"type":"bidi_text_input","text":"Hello"}"#).await;
    }
    // The first of them to close is closed for the key's budget (the other goes on).
    let (code, seen) = tokio::select! {
        (code, _) = a.closed() => (code, a.seen.clone()),
        (code, _) = b.closed() => (code, b.seen.clone()),
    };
    assert_eq!(code, close_code::RATE_LIMITED, "{seen:?}");
    assert!(seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "key_rate")), "{seen:?}");
    drop((a, b));
    // The bystander was not touched: answered during the floods and after them (and then
    // it idles out with 4408).
    for again in [true, false] {
        let turn = bystander.turn().await;
        assert!(replies(&turn).iter().any(|r| r.starts_with("Hello! I can help")), "{turn:?}");
        if again {
            bystander.say("Hello").await;
        }
    }
    let started = std::time::Instant::now();
    assert_eq!(bystander.closed().await.0, close_code::IDLE_TIMEOUT);
    assert!(started.elapsed() >= Duration::from_secs(4), "closed for idling, not before");
    assert!(
        bystander.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "idle_timeout"))
    );
    let metrics = fleet.gateway.metrics.render();
    for reason in ["session_rate", "key_rate", "idle_timeout"] {
        assert!(
            metrics.contains(&format!("switchboard_gateway_sessions_refused_total{{reason=\"{reason}\"}}")),
            "{reason}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_pod_keeps_its_session_until_another_pod_is_ready() {
    use std::collections::HashMap;
    use std::net::SocketAddr;
    let mut fleet = Fleet::start(&[("triage", 2)]).await;
    let triage: Vec<SocketAddr> = fleet.pods_of("triage").map(|p| p.addr).collect();
    let others: Vec<(String, SocketAddr)> =
        fleet.pods.iter().filter(|p| p.agent != "triage").map(|p| (p.agent.clone(), p.addr)).collect();
    let endpoints = |triage_ready: &[SocketAddr]| -> HashMap<(String, String), Vec<SocketAddr>> {
        let mut map: HashMap<(String, String), Vec<SocketAddr>> = HashMap::new();
        for (agent, addr) in &others {
            map.entry(("bank".to_owned(), agent.clone())).or_default().push(*addr);
        }
        map.insert(("bank".to_owned(), "triage".to_owned()), triage_ready.to_vec());
        map
    };
    // One replica, as far as the gateway knows: the second pod is still starting.
    let only_first = endpoints(&triage[..1]);
    fleet.directory.send_modify(|d| *d = d.with_endpoints(std::sync::Arc::new(only_first)));
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    assert_eq!(fleet.gateway.balancer.live(triage[0]), 1);

    // The pod is deleted (SIGTERM): with nowhere to go, the session stays and is served.
    fleet.pods_of("triage").find(|p| p.addr == triage[0]).expect("the pod").terminate();
    client.say("Hello").await;
    let turn = client.turn().await;
    assert!(replies(&turn).iter().any(|r| r.starts_with("Hello! I can help")), "served while draining: {turn:?}");
    assert!(!turn.iter().any(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })), "{turn:?}");

    // The replacement becomes ready: the session moves to it, and goes on there.
    let both = endpoints(&triage);
    fleet.directory.send_modify(|d| *d = d.with_endpoints(std::sync::Arc::new(both)));
    client
        .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_draining"))
        .await;
    assert_eq!(fleet.gateway.balancer.live(triage[1]), 1, "on the new pod");
    client.say("I'd like to check my balance").await;
    let to_idv =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert!(to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { to, .. } if to == "idv")), "{to_idv:?}");
    let status = fleet
        .pods_of("triage")
        .find(|p| p.addr == triage[0])
        .expect("the pod")
        .exited_within(std::time::Duration::from_secs(30))
        .await
        .expect("the drained pod exits once its session left");
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_agents_live_session_ends_cleanly_after_its_turn_and_new_ones_are_refused() {
    let mut fleet = Fleet::start(&[]).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    // The Agent is deleted: the operator drops its route, and its pod is told to stop
    // while it answers.
    fleet.directory.send_modify(|d| {
        let mut table = d.table().clone();
        table.routes.retain(|r| r.name != "triage");
        *d = d.with_table(std::sync::Arc::new(table));
    });
    client.say("Hello").await;
    fleet.pods_of("triage").next().expect("triage's pod").terminate();
    let turn = client.turn().await;
    assert!(replies(&turn).iter().any(|r| r.starts_with("Hello! I can help")), "the turn is finished: {turn:?}");
    let (code, _) = client.closed().await;
    assert_eq!(code, close_code::UNKNOWN_AGENT, "{:?}", client.seen);
    assert!(
        client.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, message, recoverable: false, .. } if code == "agent_removed" && message.contains("triage was removed"))),
        "{:?}",
        client.seen
    );
    let message = refused(&fleet, "?agent=triage", SessionStart::default(), close_code::UNKNOWN_AGENT).await;
    assert!(message.contains("triage"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_drains_while_it_hands_off_lets_the_handoff_happen_and_the_target_stays_put() {
    let mut fleet = Fleet::start(&[("triage", 2), ("idv", 2)]).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let balancer = fleet.gateway.balancer.clone();
    let serving = fleet.pods_of("triage").map(|p| p.addr).find(|a| balancer.live(*a) == 1).expect("a serving pod");
    // The pod is told to stop (a rollout) while it answers with a transfer.
    client.say("I'd like to check my balance").await;
    fleet.pods_of("triage").find(|p| p.addr == serving).expect("the pod").terminate();
    let to_idv =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert!(to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { to, .. } if to == "idv")), "{to_idv:?}");
    let ask = client.turn().await;
    assert!(replies(&ask).iter().any(|r| r.contains("eight-digit account number")), "idv asks: {ask:?}");
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    assert!(
        !client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })),
        "neither the handoff nor idv's pod was moved: {:?}",
        client.seen
    );
}

/// Chaos: the source pod is SIGKILLed mid-handoff — after it handed the session over, while
/// the target (frozen) has not answered yet. The gateway holds the session, so the handoff
/// completes once the target answers, and the caller goes on there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_pod_killed_mid_handoff_still_hands_the_session_over() {
    let mut fleet = Fleet::start(&[]).await;
    let mut client = Client::start(&fleet.url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    fleet.pods_of("idv").for_each(|p| p.freeze());
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::Handoff { to, .. } if to == "idv")).await;
    fleet.pods_of("triage").for_each(|p| p.kill());
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    fleet.pods_of("idv").for_each(|p| p.thaw());
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    let ask = client.turn().await;
    assert!(replies(&ask).iter().any(|r| r.contains("eight-digit account number")), "idv asks: {ask:?}");
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    assert!(!client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionClose { .. })), "{:?}", client.seen);
}
