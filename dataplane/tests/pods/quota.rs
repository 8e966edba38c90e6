//! The model quota shared by the chart's two gateway replicas on the real node, through the
//! Redis they already share (issue 43's "on the real node: a quota shared by two gateway
//! replicas").
//!
//! `tests/cluster/e2e-smoke.sh` installs the chart with one live stream allowed in the pool
//! `SWITCHBOARD_E2E_QUOTA_POOL` (`<account>/<region>`). The test moves triage into that pool
//! (`spec.capacity.account`, which rolls no pod), opens a session at one gateway pod and
//! then another at the other pod: the second waits, told its place and triage's hold
//! message, and is served when the first leaves. Triage is put back as it was at the end,
//! failed or not.

use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart};

use crate::client::Client;
use crate::{Cluster, simulator, var};

/// What triage tells a caller waiting for the quota in this test.
const HOLD: &str = "Every line is busy; please hold for the next adviser.";

/// Puts triage's `spec.capacity` back as it was when dropped (the test's failure included).
struct Restore<'a> {
    cluster: &'a Cluster,
    capacity: String,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let capacity = if self.capacity.trim().is_empty() { "null".to_owned() } else { self.capacity.clone() };
        let patch = format!("{{\"spec\":{{\"capacity\":{capacity}}}}}");
        let status = std::process::Command::new(&self.cluster.kubectl)
            .args(["-n", &self.cluster.namespace, "patch", "agent", "triage", "--type", "merge", "-p", &patch])
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("could not put triage's spec.capacity back ({patch}): {status:?}");
        }
    }
}

/// The `ws://` session URL of each running gateway pod, straight to the pod.
fn gateway_pods(cluster: &Cluster) -> Vec<String> {
    let ns = &cluster.release_namespace;
    let pods = cluster.running(ns, "app.kubernetes.io/name=switchboard-gateway");
    assert!(pods.len() >= 2, "the chart runs two gateway replicas: {pods:?}");
    pods.iter()
        .map(|pod| {
            let ip = cluster.kubectl_in(ns, &["get", "pod", pod, "-o", "jsonpath={.status.podIP}"]);
            let port = cluster.kubectl_in(
                ns,
                &["get", "pod", pod, "-o", "jsonpath={.spec.containers[0].ports[?(@.name==\"http\")].containerPort}"],
            );
            format!("ws://{ip}:{port}/v1/session")
        })
        .collect()
}

/// triage's pool as the routing table the operator writes says it (`None` before the
/// table names triage).
fn triage_pool(cluster: &Cluster) -> Option<String> {
    let names = cluster.kubectl_in(&cluster.release_namespace, &["get", "configmap", "-o", "name"]);
    let routes = names.lines().find_map(|n| n.strip_prefix("configmap/").filter(|n| n.ends_with("routes")))?;
    let json = cluster
        .kubectl_in(&cluster.release_namespace, &["get", "configmap", routes, "-o", "jsonpath={.data.routes\\.json}"]);
    let table: serde_json::Value = serde_json::from_str(&json).ok()?;
    table["routes"].as_array()?.iter().find_map(|route| {
        (route["namespace"] == cluster.namespace.as_str() && route["name"] == "triage")
            .then(|| route["capacity"]["pool"].as_str().map(str::to_owned))
            .flatten()
    })
}

/// Opens a session with triage at `url`: `Some(place)` when it waits, `None` when it starts.
async fn open(url: &str, agent: &str) -> (Client, Option<(u32, String)>) {
    let mut client = Client::connect(url).await;
    client
        .send(&ClientMessage::SessionStart(SessionStart { agent: Some(agent.to_owned()), ..Default::default() }))
        .await;
    let place = match client.next().await {
        Some(Ok(ServerMessage::BidiSessionQueued { position, message, estimated_wait_seconds, .. })) => {
            assert!(estimated_wait_seconds > 0, "an estimate comes with the place");
            Some((position, message))
        }
        Some(Ok(ServerMessage::BidiConnectionStart { .. })) => None,
        other => panic!("expected a place in the queue or the start at {url}: {other:?}"),
    };
    (client, place)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn the_two_gateway_replicas_share_one_quota_a_second_caller_waits_at_the_other_until_the_first_leaves() {
    let cluster = Cluster::from_env();
    let pool = var("SWITCHBOARD_E2E_QUOTA_POOL");
    let account = pool.split('/').next().expect("<account>/<region>").to_owned();
    let sim = simulator().await;
    let before = cluster.kubectl(&["get", "agent", "triage", "-o", "jsonpath={.spec.capacity}"]);
    let _restore = Restore { cluster: &cluster, capacity: before };
    let patch = serde_json::json!({"spec": {"capacity": {"account": account, "holdMessage": HOLD}}});
    cluster.kubectl(&["patch", "agent", "triage", "--type", "merge", "-p", &patch.to_string()]);
    // The operator writes the routing table; each replica reads it from its watch.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let now = triage_pool(&cluster);
        if now.as_deref() == Some(pool.as_str()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "triage's route names pool {now:?}, not {pool} (its region?)");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let pods = gateway_pods(&cluster);
    let agent = cluster.agent("triage");
    // Until both replicas have read the new table, a second session may still start: both
    // are closed and tried again (the first replica may lag too).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (mut first, mut second, place) = loop {
        let (first, started) = open(&pods[0], &agent).await;
        assert!(started.is_none(), "the first session in an empty pool starts: {started:?}");
        let (second, place) = open(&pods[1], &agent).await;
        if let Some(place) = place {
            break (first, second, place);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a second session at the other replica started beside the first in a pool of one stream ({pool})"
        );
        second.close().await;
        first.close().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(place, (1, HOLD.to_owned()), "first in line, told triage's hold message");

    // The first caller is served while the second waits; then leaves, and the slot goes
    // to the waiting caller at the other replica.
    first.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    // Two seconds of the slot held: the waiting caller hears at most where it stands.
    while let Some(next) = second.next_within(Duration::from_secs(2)).await {
        assert!(
            matches!(next, Some(Ok(ServerMessage::BidiSessionQueued { .. }))),
            "the waiting caller stays waiting while the slot is held: {next:?}"
        );
    }
    first.close().await;
    second.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;
    let greeting = second.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    second.say("I'd like to check my balance").await;
    let turn = second.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert!(!greeting.is_empty() && !turn.is_empty(), "the served caller is greeted and handed to idv");
    second.close().await;
    sim.shutdown().await;
}
