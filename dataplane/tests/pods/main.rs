//! Conversations with Switchboard on real pods: the chart's gateway and operator, the
//! Example Bank's runtime pods and its demo tool server, all running on the test node, and
//! a Bedrock simulator on this machine that the pods reach on the node's address with a
//! certificate issued for it (the chart's `runtime.bedrock.endpoint` and `caBundle`).
//!
//! They need that cluster, so they are ignored in the plain test run;
//! `tests/cluster/e2e-smoke.sh` sets it up and runs them one at a time:
//! `cargo nextest run -p switchboard-dataplane --test pods --run-ignored only -j 1`, with
//!
//! - `SWITCHBOARD_E2E_GATEWAY`: the gateway Service's `ws://host:port`;
//! - `SWITCHBOARD_E2E_NAMESPACE`: the namespace with examples/banking and its tools;
//! - `SWITCHBOARD_E2E_RELEASE_NAMESPACE`: the chart's namespace (the gateway pods);
//! - `SWITCHBOARD_E2E_SIM_LISTEN`, `SWITCHBOARD_E2E_SIM_CERT`, `SWITCHBOARD_E2E_SIM_KEY`:
//!   where the simulator listens (the chart's endpoint) and its certificate and key;
//! - `SWITCHBOARD_E2E_KUBECTL` and `KUBECONFIG`.

mod agent_test;
#[path = "../runtime/common.rs"]
#[allow(dead_code)]
mod client;
mod quota;
#[path = "../voice/common.rs"]
#[allow(dead_code)]
mod voice_common;

use std::process::Command;

use switchboard_core::HandoffKind;
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use switchboard_sim::{Script, SimConfig, SimHandle, Simulator};

use client::{Client, replies};
use voice_common::{Call, Encoding, audio_bytes, finals, is_final_reply};

/// The cluster these tests run against.
struct Cluster {
    gateway: String,
    namespace: String,
    release_namespace: String,
    kubectl: String,
}

fn var(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set: run these tests through tests/cluster/e2e-smoke.sh"))
}

impl Cluster {
    fn from_env() -> Self {
        Self {
            gateway: var("SWITCHBOARD_E2E_GATEWAY"),
            namespace: var("SWITCHBOARD_E2E_NAMESPACE"),
            release_namespace: var("SWITCHBOARD_E2E_RELEASE_NAMESPACE"),
            kubectl: var("SWITCHBOARD_E2E_KUBECTL"),
        }
    }

    /// The session URL through the gateway's Service.
    fn url(&self) -> String {
        format!("{}/v1/session", self.gateway)
    }

    /// `<namespace>/<name>`, as the gateway names this namespace's Agents.
    fn agent(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }

    /// Runs kubectl in `namespace`; panics with its output when it fails.
    fn kubectl_in(&self, namespace: &str, args: &[&str]) -> String {
        let output = Command::new(&self.kubectl).arg("-n").arg(namespace).args(args).output().expect("kubectl runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_in(&self.namespace, args)
    }

    /// Names of the pods in `namespace` matching `selector` that run and are not terminating.
    fn running(&self, namespace: &str, selector: &str) -> Vec<String> {
        let template = "{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{\"\\n\"}{end}";
        let terminating: Vec<String> = self
            .kubectl_in(namespace, &["get", "pods", "-l", selector, "-o", &format!("jsonpath={template}")])
            .lines()
            .map(str::to_owned)
            .collect();
        // Running only: a pod evicted or failed earlier (an object that stays, with no
        // address) is not one.
        let names = "jsonpath={.items[*].metadata.name}";
        self.kubectl_in(
            namespace,
            &["get", "pods", "-l", selector, "--field-selector=status.phase=Running", "-o", names],
        )
        .split_whitespace()
        .filter(|name| !terminating.iter().any(|t| t == name))
        .map(str::to_owned)
        .collect()
    }

    /// Names of the running (not terminating) pods of `agent`.
    fn pods_of(&self, agent: &str) -> Vec<String> {
        self.running(&self.namespace, &format!("switchboard.dev/agent={agent}"))
    }
}

/// The simulator the runtime pods call, with the voice phrases of the voice tests.
async fn simulator() -> SimHandle {
    simulator_with("").await
}

/// The simulator the runtime pods call, with the voice phrases of the voice tests and
/// `rules` (YAML list items) before the script's own.
async fn simulator_with(rules: &str) -> SimHandle {
    let read = |name: &str| {
        let path = var(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}={path}: {e}"))
    };
    let script = voice_common::script("", "");
    assert!(script.contains("\nrules:\n"), "the voice script has a rules: list");
    let script = Script::parse(&script.replacen("\nrules:\n", &format!("\nrules:\n{rules}"), 1)).expect("the script");
    let mut config = SimConfig::new(script);
    config.listen = var("SWITCHBOARD_E2E_SIM_LISTEN").parse().expect("SWITCHBOARD_E2E_SIM_LISTEN is host:port");
    config.identity = Some((read("SWITCHBOARD_E2E_SIM_CERT"), read("SWITCHBOARD_E2E_SIM_KEY")));
    Simulator::start(config).await.expect("the simulator starts on the node's address")
}

fn no_close(seen: &[ServerMessage]) {
    assert!(
        !seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionClose { .. })),
        "the client's socket stayed open throughout: {:?}",
        voice_common::summary(seen)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn a_caller_goes_from_triage_to_idv_by_voice_to_banking_and_back_on_one_socket() {
    let cluster = Cluster::from_env();
    let sim = simulator().await;
    let mut call = Call::start(&cluster.url(), &cluster.agent("triage"), &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    assert!(
        matches!(&hello[0], ServerMessage::BidiConnectionStart { agent, mode, resume_token: Some(_), .. }
            if agent == "triage" && mode == "hybrid"),
        "{hello:?}"
    );

    call.say(voice_common::BALANCE_REQUEST, 700);
    let to_idv = call.until(|m| is_final_reply(m, "To verify your identity")).await;
    assert_eq!(finals(&to_idv, TranscriptRole::User).first().map(String::as_str), Some("I'd like to check my balance"));
    assert!(
        to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { from, to, kind: HandoffKind::Transfer, .. } if from == "triage" && to == "idv")),
        "{:?}",
        voice_common::summary(&to_idv)
    );
    let idv_start = to_idv
        .iter()
        .position(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, mode, .. } if agent == "idv" && mode == "voice"))
        .expect("idv's pod takes over, as a voice session");
    assert!(audio_bytes(&to_idv[..idv_start]) > 0, "triage's pod spoke");
    assert!(audio_bytes(&to_idv[idv_start..]) > 0, "idv's pod spoke");

    // idv's pod calls the demo tool server's pod to check the caller.
    call.say(voice_common::IDV_DETAILS, 900);
    let verified = call.until(|m| is_final_reply(m, "you're verified")).await;
    let check = verified.iter().find_map(|m| match m {
        ServerMessage::ToolComplete { name, result, .. } if name == "perform_idv_check" => Some(result.clone()),
        _ => None,
    });
    assert_eq!(check.expect("the identity check ran on the tool server's pod")["verified"], true);

    call.say(voice_common::MY_BALANCE, 700);
    let balance = call.until(|m| is_final_reply(m, "1234.56")).await;
    assert!(
        balance.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")),
        "banking's pod took over with the verified caller: {:?}",
        voice_common::summary(&balance)
    );

    // Done with banking, by text: back to triage, which still speaks.
    call.send(&ClientMessage::BidiTextInput { text: "That's all, thanks".into(), id: None });
    let back = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;
    assert!(
        back.iter().any(|m| matches!(m, ServerMessage::Handoff { from, to, kind: HandoffKind::Return, .. } if from == "banking" && to == "triage")),
        "{:?}",
        voice_common::summary(&back)
    );
    call.say(voice_common::HOURS, 700);
    let hours = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert!(audio_bytes(&hours) > 0, "triage's pod speaks again: {:?}", voice_common::summary(&hours));
    no_close(&call.seen);
    call.hang_up().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn a_runtime_pod_deleted_mid_session_hands_the_session_to_its_replacement() {
    let cluster = Cluster::from_env();
    let sim = simulator().await;
    let mut client = Client::start(&cluster.url(), Some(&cluster.agent("triage"))).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let pods = cluster.pods_of("triage");
    assert_eq!(pods.len(), 1, "triage runs one replica: {pods:?}");

    // The only pod is deleted: it drains, still serving the session, until its
    // replacement is ready; then the session moves there at a turn boundary.
    cluster.kubectl(&["delete", "pod", &pods[0], "--wait=false"]);
    client.say("Hello").await;
    let turn = client.turn().await;
    assert!(replies(&turn).iter().any(|r| r.starts_with("Hello! I can help")), "served while draining: {turn:?}");
    client
        .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_draining"))
        .await;
    let now = cluster.pods_of("triage");
    assert!(now.len() == 1 && now[0] != pods[0], "a replacement pod serves: {now:?}");
    client.say("I'd like to check my balance").await;
    let to_idv =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert!(to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { to, .. } if to == "idv")), "{to_idv:?}");
    no_close(&client.seen);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn a_persona_edit_rolls_the_pods_under_a_live_voice_call_without_cutting_it() {
    let cluster = Cluster::from_env();
    let sim = simulator().await;
    let mut call = Call::start(&cluster.url(), &cluster.agent("triage"), &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;
    call.say(voice_common::HOURS, 700);
    let first = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert!(audio_bytes(&first) > 0, "{:?}", voice_common::summary(&first));
    let before = cluster.pods_of("triage");

    // A Persona edit changes the RuntimeSpec: the operator rolls triage's Deployment.
    let patch = format!(r#"{{"spec":{{"displayName":"Rollout {}"}}}}"#, std::process::id());
    cluster.kubectl(&["patch", "persona", "triage", "--type", "merge", "-p", &patch]);
    // The new pod comes up Ready, the old one drains and the call moves to the new one
    // between turns.
    let moved = call
        .until(|m| matches!(m, ServerMessage::BidiConnectionRestart { reason, .. } if reason == "runtime_draining"))
        .await;
    assert!(!moved.iter().any(|m| matches!(m, ServerMessage::BidiError { .. })), "{:?}", voice_common::summary(&moved));
    cluster.kubectl(&["rollout", "status", "deployment/triage", "--timeout=180s"]);
    let after = cluster.pods_of("triage");
    assert!(after.iter().all(|p| !before.contains(p)), "new pods: {before:?} -> {after:?}");
    call.say(voice_common::HOURS, 700);
    let again = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert!(audio_bytes(&again) > 0, "the new pod speaks: {:?}", voice_common::summary(&again));
    no_close(&call.seen);
    call.hang_up().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn a_gateway_replica_deleted_its_client_resumes_on_another_with_its_token() {
    let cluster = Cluster::from_env();
    let sim = simulator().await;
    // Straight to one gateway pod (pod addresses are reachable from the node), so the
    // test knows which replica it deletes.
    let ns = &cluster.release_namespace;
    let selector = "app.kubernetes.io/name=switchboard-gateway";
    let pods = cluster.running(ns, selector);
    let pods: Vec<&str> = pods.iter().map(String::as_str).collect();
    assert!(pods.len() >= 2, "the chart runs two gateway replicas: {pods:?}");
    let ip = cluster.kubectl_in(ns, &["get", "pod", pods[0], "-o", "jsonpath={.status.podIP}"]);
    let port = cluster.kubectl_in(
        ns,
        &["get", "pod", pods[0], "-o", "jsonpath={.spec.containers[0].ports[?(@.name==\"http\")].containerPort}"],
    );
    let direct = format!("ws://{ip}:{port}/v1/session");
    let mut client = Client::start(&direct, Some(&cluster.agent("triage"))).await;
    client.verify_at_idv().await;

    // Its replica is deleted: with Redis it parks the session and tells the client to
    // resume elsewhere.
    cluster.kubectl_in(ns, &["delete", "pod", pods[0], "--wait=false"]);
    let (code, reason) = client.closed().await;
    assert_eq!(code, 1001, "going away, to resume: {reason}");
    let at = client
        .seen
        .iter()
        .rposition(|m| matches!(m, ServerMessage::BidiConnectionStart { .. }))
        .expect("a bidi_connection_start");
    let ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(seq), .. } = &client.seen[at] else {
        panic!("a resume token and number: {:?}", client.seen[at]);
    };
    let last_seq = seq + (client.seen.len() - at - 1) as u64;

    // Through the Service, with the token. Until kube-proxy drops the draining replica,
    // a connection may still reach it and be told to try again later (1013): a client
    // retries that, as it says.
    let mut attempt = 0;
    let (mut back, resumed) = loop {
        attempt += 1;
        let mut back = Client::connect(&cluster.url()).await;
        back.send(&ClientMessage::SessionStart(SessionStart {
            resume_token: Some(token.clone()),
            last_seq: Some(last_seq),
            ..Default::default()
        }))
        .await;
        let mut got = Vec::new();
        let outcome = loop {
            match back.next().await {
                Some(Ok(message)) => {
                    let started = matches!(message, ServerMessage::BidiConnectionStart { .. });
                    got.push(message);
                    if started {
                        break None;
                    }
                }
                other => break Some(other),
            }
        };
        match outcome {
            None => break (back, got),
            Some(Some(Err((1013, _)))) if attempt < 20 => {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            Some(other) => panic!("the resume failed: {other:?}; got {got:?}"),
        }
    };
    assert!(
        matches!(resumed.last(), Some(ServerMessage::BidiConnectionStart { agent, .. }) if agent == "idv"),
        "the session resumes where it was: {resumed:?}"
    );
    back.say("My balance please").await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = back.turn().await;
    assert!(
        replies(&balance).iter().any(|r| r.contains("1234.56 GBP")),
        "the verified caller, kept in Redis across replicas: {balance:?}"
    );
    sim.shutdown().await;
}
