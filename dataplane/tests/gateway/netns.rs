//! Chaos with a network that drops packets silently, as a cut cable or a firewall does:
//! no FIN, no RST, nothing acknowledged. Each test runs again as its own process inside a
//! network namespace of its own (`unshare --net`): the gateway, the runtime processes, the
//! simulator, the tool server and the client all live on that namespace's loopback, so
//! iptables DROP rules there silence one leg without touching the machine, and vanish
//! with the process.
//!
//! - Gateway <-> runtime: every packet to and from the serving pod's port is dropped. The
//!   gateway's pings find the runtime silent and move the session to the Agent's other
//!   pod; a line typed into the black hole is answered there, once.
//! - Client <-> gateway: every packet to and from the gateway's port is dropped while a
//!   reply streams. The gateway's pings find the client silent and park the session; once
//!   the network is back the client resumes with its token and the last sequence number it
//!   got, and the rest of the reply arrives: every part once, nothing lost.

use std::future::Future;
use std::process::Command;
use std::time::{Duration, Instant};

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::banking_script;
use switchboard_sim::script::Rule;

use crate::client::{Client, replies};
use crate::fleet::Fleet;

/// Set in the test's second run, inside its own network namespace.
const INSIDE: &str = "SWITCHBOARD_TEST_OWN_NETWORK";

/// Runs `body` in a network namespace of its own: this test binary again, under
/// `unshare --net`, running only the test `name` (which calls this again and, inside,
/// runs `body`). Needs root, as the real node's tests do.
fn in_own_network<F: Future<Output = ()>>(name: &str, body: impl FnOnce() -> F) {
    if std::env::var_os(INSIDE).is_some() {
        sh("ip", &["link", "set", "lo", "up"]);
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
        runtime.expect("a runtime").block_on(body());
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new("unshare")
        .args(["--net", "--"])
        .arg(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .output()
        .expect("unshare runs (util-linux)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(out.status.success(), "the test in its own network namespace failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("test result: ok. 1 passed"), "the test ran inside: {stdout}");
}

fn sh(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program} runs: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Drops (`-A`) or stops dropping (`-D`) every packet to and from `port` on the loopback.
fn drop_port(action: &str, port: u16) {
    let port = port.to_string();
    for direction in ["--dport", "--sport"] {
        sh("iptables", &[action, "INPUT", "-i", "lo", "-p", "tcp", direction, &port, "-j", "DROP"]);
    }
}

/// Pings every 200 ms, silence for 1 s is death.
fn quick_pings() -> GatewayConfig {
    GatewayConfig {
        ping_interval: Duration::from_millis(200),
        ping_timeout: Duration::from_secs(1),
        ..GatewayConfig::default()
    }
}

fn port(url: &str) -> u16 {
    let authority = url.trim_start_matches("ws://").split('/').next().expect("host:port");
    authority.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port")
}

#[test]
fn a_runtime_behind_a_network_that_drops_every_packet_is_left_for_another_pod() {
    in_own_network("netns::a_runtime_behind_a_network_that_drops_every_packet_is_left_for_another_pod", || async {
        let mut fleet = Fleet::with(&[("triage", 2)], Auth::default(), quick_pings(), Store::default()).await;
        let mut client = Client::start(&fleet.url, None).await;
        client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
        let serving = fleet.pods.iter().position(|p| p.agent == "triage" && fleet.gateway.balancer.live(p.addr) == 1);
        let serving = serving.expect("a triage pod serves the session");

        drop_port("-A", fleet.pods[serving].addr.port());
        let cut_at = Instant::now();
        // A line typed into the black hole: the pod never gets it.
        client.send(&ClientMessage::BidiTextInput { text: "Hello".into(), id: Some("lost?".into()) }).await;
        client
            .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_unresponsive"))
            .await;
        let moved = cut_at.elapsed();
        eprintln!("a runtime behind dropped packets was found and its session moved in {moved:?}");
        let other = fleet.pods.iter().position(|p| p.agent == "triage" && fleet.gateway.balancer.live(p.addr) == 1);
        assert!(other.is_some_and(|o| o != serving), "the session is on the other pod now");

        // The line is taken up and answered there, once, with the client's id.
        let answer = client.turn().await;
        assert!(!replies(&answer).is_empty(), "the other pod answers: {answer:?}");
        let taken: Vec<_> = client
            .seen
            .iter()
            .filter(|m| matches!(m, ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, input_id: Some(id), .. } if id == "lost?"))
            .collect();
        assert_eq!(taken.len(), 1, "taken up once: {:?}", client.seen);
        drop_port("-D", fleet.pods[serving].addr.port());
        for pod in fleet.pods_of("triage") {
            pod.kill();
        }
    });
}

/// A reply that streams for about three seconds (60 words at 20 a second).
const STORY: &str = "Once upon a time a bank opened a branch by the sea, and every morning the tide brought \
                     in a customer who asked for the same thing: the balance of an account that held \
                     nothing but sand, shells and the promise of a quiet afternoon, which the teller \
                     counted twice, smiled at, and wrote down in the ledger as the richest deposit of the day.";

fn story_rule() -> Rule {
    let yaml = format!(
        "name: story\nwhen: {{userText: '(?i)tell me a story'}}\nreply: {{text: '{STORY}'}}\n\
         timing: {{timeToFirstTokenMs: 100, tokensPerSecond: 20}}\n"
    );
    serde_yaml::from_str(&yaml).expect("rule")
}

#[test]
fn a_client_behind_a_network_that_drops_every_packet_is_parked_and_loses_nothing() {
    in_own_network("netns::a_client_behind_a_network_that_drops_every_packet_is_parked_and_loses_nothing", || async {
        let mut script = banking_script().expect("script");
        script.rules.insert(0, story_rule());
        let fleet = Fleet::with_script(&[], Auth::default(), quick_pings(), Store::default(), script).await;
        let mut client = Client::start(&fleet.url, None).await;
        client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
        let at = client.seen.iter().rposition(|m| matches!(m, ServerMessage::BidiConnectionStart { .. }));
        let ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(seq), .. } =
            client.seen[at.expect("a start")].clone()
        else {
            panic!("a token and a sequence number: {:?}", client.seen)
        };
        let counted_from = at.expect("a start");

        // The story starts streaming; the network then drops everything, both ways.
        let story_from = client.seen.len();
        client.say("Tell me a story").await;
        client
            .until(|m| {
                matches!(
                    m,
                    ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, is_final: false, .. }
                )
            })
            .await;
        drop_port("-A", port(&fleet.url));
        let cut_at = Instant::now();
        let parked = || fleet.gateway.metrics.parked.with_label_values(&["bank/triage"]).get();
        while parked() < 1.0 {
            assert!(cut_at.elapsed() < Duration::from_secs(15), "the silent client's session is parked");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!("a client behind dropped packets was found and its session parked in {:?}", cut_at.elapsed());
        // What reached the client before the cut (the rest is dropped in the network).
        while let Some(Some(Ok(_))) = client.next_within(Duration::from_millis(300)).await {}
        let before: Vec<ServerMessage> = client.seen[story_from..].to_vec();
        assert!(replies(&before).is_empty(), "the cut came while the story streamed: {before:?}");
        let last_seq = seq + (client.seen.len() - counted_from - 1) as u64;
        drop(client);

        // The network is back: the client resumes from the last message it got.
        drop_port("-D", port(&fleet.url));
        let back_at = Instant::now();
        let mut back = Client::connect(&fleet.url).await;
        let resume = SessionStart { resume_token: Some(token), last_seq: Some(last_seq), ..Default::default() };
        back.send(&ClientMessage::SessionStart(resume)).await;
        let rest = back.turn().await;
        eprintln!(
            "the client resumed and had the rest of the reply {:?} after the network came back",
            back_at.elapsed()
        );
        // The reply, whole and once: its final line in the replay, and its streamed parts
        // before and after the cut add up to it exactly.
        assert_eq!(replies(&rest), [STORY], "{rest:?}");
        let parts: String = before
            .iter()
            .chain(&rest)
            .filter_map(|m| match m {
                ServerMessage::BidiTranscriptStream {
                    role: TranscriptRole::Assistant, is_final: false, text, ..
                } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(parts, STORY, "every streamed part once, in order");
    });
}
