//! The Example Bank as processes, each told where to send traces by the standard variables:
//! one `switchboard runtime` per agent and a `switchboard gateway` routing to them by a
//! routes file, against the simulator, with the demo tool server behind a recording proxy
//! that keeps the `traceparent` of every tool request. Each process's log lines (JSON)
//! are kept too.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use switchboard_crds::routing::{Route, RoutingTable, SESSION_PATH};
use switchboard_crds::{Catalog, contract};
use switchboard_demo_tools::{Accounts, Callers, DemoTools, Trusted};
use switchboard_sim::{SimConfig, SimHandle, Simulator, banking_script};

use crate::served;

/// The seed of the gateway's signing key.
const KEY: [u8; 32] = [24; 32];

/// Log lines of every process, as `[name] line`.
pub type Logs = Arc<Mutex<Vec<String>>>;

/// A child process, killed when dropped.
pub struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Tool requests as the tool server got them: (path, `traceparent` header).
pub type ToolRequests = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// The running bank.
pub struct Bank {
    /// The gateway's session URL.
    pub url: String,
    /// The second gateway replica's, when they share a store.
    pub second_url: Option<String>,
    pub logs: Logs,
    pub tool_requests: ToolRequests,
    _processes: Vec<Process>,
    _sim: SimHandle,
    _tools: DemoTools,
}

impl Bank {
    /// Starts the bank with every process exporting traces to `endpoint`.
    pub async fn start(endpoint: &str) -> Self {
        Self::start_with(endpoint, None).await
    }

    /// [`Bank::start`]; with `redis`, two gateway replicas sharing that store (the second's
    /// session URL in `second_url`).
    pub async fn start_with(endpoint: &str, redis: Option<&str>) -> Self {
        let otel = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_EXPORTER_OTLP_HEADERS", crate::receiver::HEADERS),
            // Spans go out 100 ms after they end, not 5 s.
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ];
        let sim = Simulator::start(SimConfig::new(banking_script().expect("script"))).await.expect("simulator");
        let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
        let accounts = Accounts::load(&examples.join("tools/accounts.yaml")).expect("accounts");
        let key = switchboard_core::grant::GatewaySigner::from_seed(&KEY);
        let local = SocketAddr::from(([127, 0, 0, 1], 0));
        // The tool server takes the gateway's public key as the runtimes do: as text.
        let verifying = key.public().to_string().parse().expect("the key as text");
        let trusted = Trusted::new(verifying, ["bank"]).expect("trusted");
        let tools = DemoTools::start(accounts, local, Callers::Verified(trusted)).await.expect("tool server");
        let tool_requests = ToolRequests::default();
        let proxy = proxy(tools.addr, tool_requests.clone()).await;
        let dir = std::env::temp_dir().join(format!("switchboard-traces-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let logs = Logs::default();
        let mut processes = Vec::new();
        let mut routes = Vec::new();
        let catalog = Catalog::load_paths(&[examples]).expect("examples");
        for agent in catalog.agents() {
            let mut spec = catalog.resolve_agent(agent).expect("resolves");
            spec.agent.namespace = "bank".into();
            let name = spec.agent.name.clone();
            let json = spec.to_canonical_json().replace("banking-tools:8080", &proxy.to_string());
            let spec_path = dir.join(format!("{name}.json"));
            std::fs::write(&spec_path, json).expect("spec");
            let command = runtime_command(&spec_path, spec.mode.as_str(), &key.public().to_string(), &sim);
            let (process, addr) = spawn(command, &otel, &name, &logs, "runtime serving");
            processes.push(process);
            routes.push(Route {
                name: name.clone(),
                namespace: "bank".into(),
                mode: spec.mode,
                service: addr.ip().to_string(),
                port: addr.port(),
                path: SESSION_PATH.into(),
                handoffs: spec.handoffs.iter().map(|h| h.agent.clone()).collect(),
                expose: spec.gateway.expose,
                default: spec.gateway.default,
                ready: true,
                ready_replicas: 1,
                redact: Vec::new(),
                identity_keys: switchboard_crds::agent::default_identity_keys(),
                capacity: Default::default(),
                numbers: vec![],
                analysis: None,
                answering_machine: None,
                app_context: Default::default(),
            });
        }
        std::fs::write(dir.join("routes.json"), RoutingTable::new(routes).to_json()).expect("routes");
        std::fs::write(dir.join("gateway.pem"), key.to_pem().expect("pem")).expect("key");
        let mut urls = Vec::new();
        for name in if redis.is_some() { &["gateway", "gateway-2"][..] } else { &["gateway"][..] } {
            let mut gateway = Command::new(env!("CARGO_BIN_EXE_switchboard"));
            gateway
                .args(["gateway", "--listen", "127.0.0.1:0"])
                .arg("--gateway-key-file")
                .arg(dir.join("gateway.pem"))
                .arg("--routes-file")
                .arg(dir.join("routes.json"));
            if let Some(redis) = redis {
                gateway.args(["--redis-url", redis]);
            }
            let (process, addr) = spawn(gateway, &otel, name, &logs, "gateway serving");
            processes.push(process);
            urls.push(format!("ws://{addr}{SESSION_PATH}"));
        }
        let (url, second_url) = (urls[0].clone(), urls.get(1).cloned());
        Self { url, second_url, logs, tool_requests, _processes: processes, _sim: sim, _tools: tools }
    }

    /// The JSON log lines of process `name` (an agent, or `gateway`).
    pub fn json_logs(&self, name: &str) -> Vec<serde_json::Value> {
        let prefix = format!("[{name}] ");
        let logs = self.logs.lock().expect("lock");
        logs.iter().filter_map(|l| l.strip_prefix(&prefix)).filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

/// `switchboard runtime` for `spec`, on a port it binds itself (0) and logs.
fn runtime_command(spec: &Path, mode: &str, public_key: &str, sim: &SimHandle) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command
        .arg("runtime")
        .env(contract::env::RUNTIME_SPEC, spec)
        .env(contract::env::MODE, mode)
        .env(contract::env::LISTEN, "127.0.0.1:0")
        .env(contract::env::GATEWAY_PUBLIC_KEY, public_key)
        .env("SWITCHBOARD_BEDROCK_ENDPOINT", sim.endpoint_url())
        .env("SWITCHBOARD_BEDROCK_CA_FILE", sim.ca_cert_path().expect("cert"))
        .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "not-a-secret");
    command
}

/// Starts `command` (a server told to listen on port 0) with the trace variables `otel`
/// and JSON logs kept in `logs` under `name`; returns it and the address its line
/// containing `ready` names (the port it bound: ours, no other process's).
fn spawn(mut command: Command, otel: &[(&str, &str)], name: &str, logs: &Logs, ready: &str) -> (Process, SocketAddr) {
    command.envs(otel.iter().copied()).env("SWITCHBOARD_LOG", "info").env("SWITCHBOARD_LOG_FORMAT", "json");
    command.stdout(Stdio::null());
    let (name, logs) = (name.to_owned(), logs.clone());
    let (child, addr) = served::spawn_serving(command, ready, Duration::from_secs(60), move |line| {
        if std::env::var_os("TRACES_DEBUG").is_some() {
            eprintln!("[{name}] {line}");
        }
        logs.lock().expect("lock").push(format!("[{name}] {line}"));
    });
    (Process(child), addr)
}

/// A proxy in front of the tool server at `upstream` that records each request's path and
/// `traceparent` header.
async fn proxy(upstream: SocketAddr, seen: ToolRequests) -> SocketAddr {
    let client: Client<HttpConnector, Full<axum::body::Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let app = axum::Router::new().fallback(forward).with_state((upstream, client, seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

type ProxyState = (SocketAddr, Client<HttpConnector, Full<axum::body::Bytes>>, ToolRequests);

async fn forward(State((upstream, client, seen)): State<ProxyState>, request: Request) -> axum::response::Response {
    let (mut parts, body) = request.into_parts();
    let traceparent = parts.headers.get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_owned);
    seen.lock().expect("lock").push((parts.uri.path().to_owned(), traceparent));
    parts.uri = format!("http://{upstream}{}", parts.uri.path()).parse().expect("uri");
    let body = body.collect().await.expect("body").to_bytes();
    let response = client.request(http::Request::from_parts(parts, Full::new(body))).await.expect("tool server");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("answer").to_bytes();
    axum::response::Response::from_parts(parts, Body::from(body))
}

/// `switchboard local examples/banking` exporting traces to `endpoint`: the process (killed
/// when dropped) and its gateway's session URL.
pub fn local(endpoint: &str) -> (Process, String) {
    local_with(endpoint, &[], None)
}

/// [`local`] with more variables, its log (JSON lines, everything from `info`) written to
/// `log` when given.
pub fn local_with(endpoint: &str, env: &[(&str, &str)], log: Option<&std::path::Path>) -> (Process, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let stderr = match log {
        Some(path) => Stdio::from(std::fs::File::create(path).expect("a log file")),
        None => Stdio::null(),
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["local", "examples/banking", "--port", "0", "--record-database-url", "off"])
        .current_dir(root)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_HEADERS", crate::receiver::HEADERS)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("SWITCHBOARD_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("switchboard local starts");
    let stdout = child.stdout.take().expect("stdout");
    // "Agent triage (default): ws://127.0.0.1:PORT/v1/session?agent=triage"; the rest is
    // read too, so that its prints never meet a closed pipe.
    let (found, url) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some((_, rest)) = line.split_once(": ws://") {
                let _ = found.send(format!("ws://{rest}"));
            }
        }
    });
    let url = url.recv_timeout(Duration::from_secs(60)).expect("local mode prints its URL");
    let gateway = url.split('?').next().expect("a URL").to_owned();
    (Process(child), gateway)
}
