//! The cross-namespace handoff refused with the real parts: a `switchboard gateway` process
//! following the routing table and the Agents' Endpoints on the real control plane,
//! `switchboard runtime` processes behind it (the simulator as Bedrock, the gateway's public
//! key as the operator gives it), and a WebSocket client.
//!
//! Tenant `evil` has an Agent `triage` whose handoffs list `idv`, and no `idv` of its own;
//! the bank's `idv` (not exposed) lives in namespace `bank`. The routing table is the one a
//! gateway sees in that case (applied here, as the operator would publish it): a caller at
//! `evil/triage` asking for a balance — the simulator's banking script answers that with
//! `transfer_to_idv` — must not reach `bank/idv`: the handoff fails (`handoff_failed`), the
//! caller stays at `evil/triage`, and `bank/idv`'s runtime never sees a session. The same
//! words at the bank's own `triage` do reach `bank/idv` (so the refusal is the namespace
//! rule, not an unreachable pod), and a client that reaches `bank/idv`'s runtime directly,
//! without the gateway's grant, is refused (4400).
//!
//! No kubelet is needed: the runtimes are processes on this machine, listening on its
//! non-loopback address (the API server refuses loopback addresses in Endpoints).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use switchboard_crds::contract::{self, MANAGED_BY, RUNTIME_PORT, SESSION_PATH};
use switchboard_crds::routing::{Route, RoutingTable};
use switchboard_crds::{Catalog, Mode};
use switchboard_tests::cluster::{TestNamespace, cluster};
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::metric_value;
use switchboard_tests::switchboard::{Process, http_get, node_ip, switchboard_binary};
use switchboard_tests::wait::until;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// The gateway's private key (made with `openssl genpkey -algorithm ed25519`; a test key)
/// and its public key as the operator hands it to runtime pods.
const GATEWAY_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIBBK5UyYk00FD9JpvktXLCh348DN1Am+CxGQbJ+h0CLg\n-----END PRIVATE KEY-----\n";
const GATEWAY_PUBLIC_KEY: &str = "94dfa2f4c6a2e74d78f5793a91be7ad919965a8cffa99cd95ea7f77943765950";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_never_leaves_its_namespace_and_a_runtime_serves_no_session_without_a_grant() {
    let cluster = cluster().await.expect("control plane");
    let system = TestNamespace::new(&cluster, "xns-system").await.expect("namespace");
    let evil = TestNamespace::new(&cluster, "xns-evil").await.expect("namespace");
    let bank = TestNamespace::new(&cluster, "xns-bank").await.expect("namespace");
    let client = cluster.client.clone();
    let ip = node_ip().expect("this machine has a non-loopback address");
    assert!(!ip.is_loopback());
    let bin = tokio::task::spawn_blocking(switchboard_binary).await.expect("joins").expect("switchboard builds");
    let dir = std::env::temp_dir().join(format!("switchboard-xns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");

    let sim = Simulator::start(&bin, &dir);
    let runtimes = Runtimes { bin: &bin, dir: &dir, ip, sim: &sim };
    let evil_triage = runtimes.start(&evil.name, "triage");
    let bank_triage = runtimes.start(&bank.name, "triage");
    let bank_idv = runtimes.start(&bank.name, "idv");

    // The routing table as the gateway sees it: evil/triage may hand off to `idv`, there is
    // no evil/idv; the bank's triage and idv (not exposed). The Agents' Endpoints point at
    // the runtimes, as the endpoints controller would at their pods.
    let table = RoutingTable::new(vec![
        route(&evil.name, &evil_triage, &["idv"], true),
        route(&bank.name, &bank_triage, &["idv"], true),
        route(&bank.name, &bank_idv, &["banking", "disputes"], false),
    ]);
    apply_yaml(&client, &system.name, &routes_yaml(&table.to_json())).await.expect("routing table");
    apply_yaml(&client, &evil.name, &endpoints_yaml("triage", evil_triage.addr)).await.expect("endpoints");
    apply_yaml(&client, &bank.name, &endpoints_yaml("triage", bank_triage.addr)).await.expect("endpoints");
    apply_yaml(&client, &bank.name, &endpoints_yaml("idv", bank_idv.addr)).await.expect("endpoints");

    let key_file = dir.join("gateway-key.pem");
    std::fs::write(&key_file, GATEWAY_KEY).expect("key file");
    // Port 0: the gateway binds a free port itself and logs it (no port to race for).
    let listen = "127.0.0.1:0";
    let kubeconfig = cluster.kubeconfig.to_str().expect("utf-8 path").to_owned();
    let gateway = tokio::task::block_in_place(|| {
        Process::start(
            &bin,
            "gateway",
            &[
                "gateway",
                "--listen",
                listen,
                "--gateway-key-file",
                key_file.to_str().expect("utf-8 path"),
                "--routes-namespace",
                &system.name,
                "--routes-name",
                "switchboard-routes",
                "--shutdown-delay-seconds",
                "0",
            ],
            &[("KUBECONFIG", kubeconfig.as_str())],
            "gateway serving",
        )
    })
    .expect("the gateway starts");
    assert!(gateway.log_text().contains(GATEWAY_PUBLIC_KEY), "the runtimes trust this gateway's key");
    let gateway_addr = gateway.served_addr("gateway serving").expect("where the gateway serves");
    let url = format!("ws://{gateway_addr}{SESSION_PATH}");

    // The attack: a caller at evil/triage asks for a balance; triage hands off to `idv`.
    let mut caller = Client::start_at(&url, &format!("{}/triage", evil.name)).await;
    caller.until(is_final_reply).await;
    caller.say("I'd like to check my balance").await;
    let failed = caller.until(|m| m["type"] == "bidi_connection_restart" && m["reason"] == "handoff_failed").await;
    let error = failed
        .iter()
        .find(|m| m["type"] == "bidi_error" && m["code"] == "handoff_failed")
        .unwrap_or_else(|| panic!("a handoff_failed error: {failed:#?}"));
    assert_eq!(error["recoverable"], true, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("idv") && message.contains("still talking to triage"), "{message}");
    caller.until(|m| m["type"] == "bidi_connection_start" && m["agent"] == "triage").await;
    // The conversation goes on with evil/triage.
    caller.say("That's all, thanks").await;
    let reply = caller.until(|m| m["type"] == "bidi_response_complete").await;
    assert!(reply.iter().any(is_final_reply), "triage answers: {reply:#?}");
    assert!(
        !caller.seen.iter().any(|m| m["type"] == "bidi_connection_start" && m["agent"] == "idv"),
        "the caller never reached idv: {:#?}",
        caller.seen
    );
    assert!(!caller.seen.iter().any(|m| m["type"] == "bidi_connection_close"), "{:#?}", caller.seen);
    let idv_metrics = || http_get(bank_idv.addr, "/metrics").expect("bank/idv's metrics").1;
    let sessions = |text: &str| metric_sum(text, "switchboard_sessions_total", &[("agent", "idv")]);
    let refused =
        |text: &str| metric_sum(text, "switchboard_errors_total", &[("agent", "idv"), ("type", "context_refused")]);
    let seen = idv_metrics();
    assert_eq!((sessions(&seen), refused(&seen)), (0.0, 0.0), "bank/idv saw no session, not even a refused one");
    let gateway_metrics = http_get(gateway_addr, "/metrics").expect("the gateway's metrics").1;
    assert_eq!(
        metric_value(&gateway_metrics, "switchboard_gateway_sessions_refused_total", r#"reason="handoff_failed""#),
        1.0,
        "{gateway_metrics}"
    );

    // The control: the bank's own triage hands the same words to bank/idv, whose runtime
    // the gateway reaches.
    let mut customer = Client::start_at(&url, &format!("{}/triage", bank.name)).await;
    customer.until(is_final_reply).await;
    customer.say("I'd like to check my balance").await;
    customer.until(|m| m["type"] == "bidi_connection_start" && m["agent"] == "idv").await;
    customer.until(|m| m["type"] == "bidi_response_complete").await;
    assert_eq!(sessions(&idv_metrics()), 1.0, "the handoff within the bank reached bank/idv");

    // bank/idv is not exposed: no client starts there through the gateway.
    let (code, reason) = Client::refused_at(&url, &format!("{}/idv", bank.name)).await;
    assert_eq!(code, 4403, "{reason}");

    // Straight at bank/idv's runtime, without the gateway's grant: refused, whatever the
    // client claims.
    let direct = format!("ws://{}{SESSION_PATH}", bank_idv.addr);
    for start in [
        json!({"type": "session_start", "agent": "idv"}),
        json!({"type": "session_start", "agent": "idv", "memory": {"verifiedUser": {"name": "Ada Lovelace", "accountNumber": "12345678"}}}),
    ] {
        let mut intruder = Client::connect(&direct).await;
        intruder.send(start).await;
        let (code, reason) = intruder.closed().await;
        assert_eq!(code, 4400, "{reason}: {:#?}", intruder.seen);
        assert!(intruder.seen.iter().any(|m| m["type"] == "bidi_error" && m["code"] == "context_refused"));
        assert!(!intruder.seen.iter().any(|m| m["type"] == "bidi_connection_start"), "{:#?}", intruder.seen);
    }
    let seen = idv_metrics();
    assert_eq!((sessions(&seen), refused(&seen)), (1.0, 2.0), "both refused, no session opened");
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

fn route(ns: &str, runtime: &Runtime, handoffs: &[&str], expose: bool) -> Route {
    let name = &runtime.agent;
    Route {
        name: name.clone(),
        namespace: ns.into(),
        mode: runtime.mode,
        service: format!("{name}.{ns}.svc"),
        port: RUNTIME_PORT,
        path: SESSION_PATH.into(),
        handoffs: handoffs.iter().map(|h| (*h).to_owned()).collect(),
        expose,
        default: false,
        ready: true,
        ready_replicas: 1,
        redact: Vec::new(),
        identity_keys: switchboard_crds::agent::default_identity_keys(),
        capacity: Default::default(),
        numbers: vec![],
        analysis: None,
        answering_machine: None,
        app_context: Default::default(),
    }
}

fn routes_yaml(json: &str) -> String {
    let indented: String = json.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: switchboard-routes\ndata:\n  routes.json: |\n{indented}"
    )
}

fn endpoints_yaml(name: &str, addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: {name}\n  labels: {{app.kubernetes.io/managed-by: {MANAGED_BY}}}\n\
         subsets:\n- addresses: [{{ip: \"{}\"}}]\n  ports: [{{name: {}, port: {}}}]\n",
        addr.ip(),
        contract::PORT_NAME,
        addr.port()
    )
}

/// `switchboard sim` with the bundled banking script, over TLS with a certificate it makes.
struct Simulator {
    endpoint: String,
    cert: String,
    _process: Process,
}

impl Simulator {
    fn start(bin: &Path, dir: &Path) -> Self {
        let cert = dir.join("sim.pem").to_str().expect("utf-8 path").to_owned();
        let process = tokio::task::block_in_place(|| {
            Process::start(
                bin,
                "sim",
                &["sim", "--listen", "127.0.0.1:0", "--cert-out", &cert],
                &[],
                "Bedrock simulator on",
            )
        })
        .expect("the simulator starts");
        let log = process.log_text();
        let endpoint = log
            .split("Bedrock simulator on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("the simulator says where it listens: {log}"))
            .to_owned();
        Self { endpoint, cert, _process: process }
    }
}

/// Starts runtime processes for Example Bank agents placed in a namespace.
struct Runtimes<'a> {
    bin: &'a Path,
    dir: &'a Path,
    ip: IpAddr,
    sim: &'a Simulator,
}

/// A runtime process, its Agent and where it listens.
struct Runtime {
    agent: String,
    mode: Mode,
    addr: SocketAddr,
    _process: Process,
}

impl Runtimes<'_> {
    /// `switchboard runtime` for the Example Bank's `agent` as an Agent of namespace `ns`,
    /// with the environment the operator gives its pods (the gateway's public key included).
    fn start(&self, ns: &str, agent: &str) -> Runtime {
        let examples = switchboard_tests::repo_root().join("examples/banking");
        let catalog = Catalog::load_paths(&[examples]).expect("examples");
        let found = catalog.agents().find(|a| a.metadata.name.as_deref() == Some(agent)).expect("the agent");
        let mut spec = catalog.resolve_agent(found).expect("resolves");
        spec.agent.namespace = ns.to_owned();
        let path = self.dir.join(format!("{ns}-{agent}.json"));
        std::fs::write(&path, spec.to_canonical_json()).expect("spec");
        // Port 0: the runtime binds a free port itself and logs it (no port to race for).
        let listen = SocketAddr::new(self.ip, 0).to_string();
        let env = [
            (contract::env::RUNTIME_SPEC, path.to_str().expect("utf-8 path")),
            (contract::env::MODE, spec.mode.as_str()),
            (contract::env::LISTEN, listen.as_str()),
            (contract::env::GATEWAY_PUBLIC_KEY, GATEWAY_PUBLIC_KEY),
            (contract::env::BEDROCK_ENDPOINT, self.sim.endpoint.as_str()),
            (contract::env::BEDROCK_CA_FILE, self.sim.cert.as_str()),
            ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
            ("AWS_SECRET_ACCESS_KEY", "not-a-secret"),
        ];
        let name = format!("{agent}-{ns}");
        let process =
            tokio::task::block_in_place(|| Process::start(self.bin, &name, &["runtime"], &env, "runtime serving"))
                .expect("the runtime starts");
        let addr = process.served_addr("runtime serving").expect("where the runtime serves");
        Runtime { agent: agent.to_owned(), mode: spec.mode, addr, _process: process }
    }
}

/// The sum of the samples of metric `name` whose labels include every `labels` pair.
fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

fn is_final_reply(m: &Value) -> bool {
    m["type"] == "bidi_transcript_stream" && m["role"] == "assistant" && m["is_final"] == true
}

/// A WebSocket client speaking the session protocol as JSON.
struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    seen: Vec<Value>,
}

impl Client {
    async fn connect(url: &str) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.expect("websocket connects");
        Self { ws, seen: Vec::new() }
    }

    /// A session at `agent` through the gateway, once the gateway routes there (its watches
    /// may not have delivered the table and Endpoints yet).
    async fn start_at(url: &str, agent: &str) -> Self {
        until(&format!("the gateway starts a session at {agent}"), PATIENCE, || async move {
            let mut client = Self::connect(url).await;
            client.send(json!({"type": "session_start", "agent": agent})).await;
            Ok::<_, anyhow::Error>(match client.next().await {
                Ok(m)
                    if m["type"] == "bidi_connection_start" && m["agent"] == agent.rsplit('/').next().unwrap_or("") =>
                {
                    Some(client)
                }
                _ => None,
            })
        })
        .await
        .expect("the session starts")
    }

    /// Starts a session at `agent` through the gateway, which must refuse it: the close.
    async fn refused_at(url: &str, agent: &str) -> (u16, String) {
        let mut client = Self::connect(url).await;
        client.send(json!({"type": "session_start", "agent": agent})).await;
        let close = client.closed().await;
        assert!(!client.seen.iter().any(|m| m["type"] == "bidi_connection_start"), "{:#?}", client.seen);
        close
    }

    async fn send(&mut self, message: Value) {
        self.ws.send(Message::text(message.to_string())).await.expect("frame sent");
    }

    async fn say(&mut self, text: &str) {
        self.send(json!({"type": "bidi_text_input", "text": text})).await;
    }

    /// The next message, or the close (code, reason).
    async fn next(&mut self) -> Result<Value, (u16, String)> {
        loop {
            let frame = tokio::time::timeout(PATIENCE, self.ws.next()).await.expect("a frame arrives in time");
            match frame {
                Some(Ok(Message::Text(text))) => {
                    let message: Value = serde_json::from_str(text.as_str()).expect("JSON");
                    self.seen.push(message.clone());
                    return Ok(message);
                }
                Some(Ok(Message::Close(frame))) => {
                    return Err(frame.map_or((1005, String::new()), |f| (u16::from(f.code), f.reason.to_string())));
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Err((1006, String::new())),
            }
        }
    }

    /// Reads until `pred` holds; returns everything read (the match last).
    async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            match self.next().await {
                Ok(message) => {
                    let done = pred(&message);
                    got.push(message);
                    if done {
                        return got;
                    }
                }
                Err(close) => panic!("the connection closed {close:?} before the expected message; got {got:#?}"),
            }
        }
    }

    /// Reads until the server closes: the code and reason.
    async fn closed(&mut self) -> (u16, String) {
        loop {
            if let Err(close) = self.next().await {
                return close;
            }
        }
    }
}
