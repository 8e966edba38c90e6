//! Shared by the data-plane benchmarks: the real release binaries as child processes — the
//! Bedrock simulator (`switchboard sim`) and one runtime pod (`switchboard runtime` with
//! one agent of examples/banking) — so the runtime's CPU and memory can be read on their
//! own from /proc, each with `BENCH_WORKERS` async worker threads (default 1, as the
//! operator sizes a pod with the default CPU request); WebSocket sessions that ask for
//! audio; percentiles. `BENCH_BIN` names another `switchboard` binary to run instead of
//! this build's (e.g. an older build), and `BENCH_EXAMPLES` the Example Bank folder it runs with.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, SessionStart};
use switchboard_crds::{Catalog, contract};
use tokio_tungstenite::tungstenite::Message;

#[path = "../measure/mod.rs"]
mod measure;
pub use measure::*;
mod scripts;
// Not every benchmark runs the simulator with these scripts.
#[allow(unused_imports)]
pub use scripts::*;

pub type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// 20 ms of 16 kHz PCM16 mono, and the audio frame period: a caller's, as the load
/// generator sends them.
pub use switchboard_load::caller::{FRAME, FRAME_BYTES};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// The seed of the benchmark gateway's signing key; every runtime trusts its public key.
pub const GATEWAY_SEED: [u8; 32] = [42; 32];

/// The namespace of the benchmarks' Agents (their routes and grants name it).
pub const NAMESPACE: &str = "bench";

/// The runtimes started here, by session URL, with their agent: a client that talks to one
/// directly brings the grant a gateway would (runtimes with a gateway key serve nothing
/// else).
static RUNTIMES: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// The `session_start` for `url`: to a runtime directly, with a grant signed by
/// [`GATEWAY_SEED`]'s key for its agent (as the gateway signs one); to a gateway, without.
pub fn session_start(url: &str, start: SessionStart) -> ClientMessage {
    let runtimes = RUNTIMES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some((_, agent)) = runtimes.iter().find(|(u, _)| url.starts_with(u.as_str())) else {
        return ClientMessage::SessionStart(start);
    };
    let context = switchboard_core::grant::SessionContext {
        session_id: format!("bench-{}", uuid::Uuid::new_v4()),
        namespace: NAMESPACE.to_owned(),
        agent: agent.clone(),
        issued_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        nonce: uuid::Uuid::new_v4().to_string(),
        ..Default::default()
    };
    let signer = switchboard_core::grant::GatewaySigner::from_seed(&GATEWAY_SEED);
    ClientMessage::SessionStart(SessionStart {
        agent: Some(agent.clone()),
        context: Some(signer.sign(&context)),
        ..start
    })
}

/// A helper server: this benchmark's own executable started again in another role (the
/// floor server, a floor relay), killed on drop.
pub struct HelperServer {
    child: Child,
    /// Its session URL.
    pub url: String,
    /// Its process id.
    pub pid: u32,
}

impl HelperServer {
    /// Its `host:port`.
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("ws://").split('/').next().unwrap_or_default().to_owned()
    }
}

impl Drop for HelperServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts this benchmark's own executable again as a helper server, with `env` set to
/// `value`; its session URL is on the port its first line of output names after `banner`.
pub fn spawn_self(env: &str, value: &str, banner: &str) -> HelperServer {
    let mut child = Command::new(std::env::current_exe().expect("the benchmark's executable"))
        .env(env, value)
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts the helper server");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("the helper server prints its port");
    let port = line.trim().strip_prefix(banner).expect("the helper server's first line").trim().to_owned();
    let pid = child.id();
    HelperServer { child, url: format!("ws://127.0.0.1:{port}/v1/session"), pid }
}

/// Says that `relay` (a URL prefix) passes its connections on to the runtime at `runtime`
/// (its session URL) unchanged: clients that talk to it bring that runtime's grant.
pub fn relays_to(relay: &str, runtime: &str) {
    let mut runtimes = RUNTIMES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let agent = runtimes.iter().find(|(u, _)| runtime.starts_with(u.as_str())).map(|(_, agent)| agent.clone());
    runtimes.push((relay.to_owned(), agent.expect("a runtime started here")));
}

/// The simulator and a runtime (and any runtimes and gateway added), killed on drop.
pub struct Stack {
    sim: Child,
    runtime: Child,
    /// Runtimes and gateways started after the first.
    extra: Vec<Child>,
    bin: String,
    endpoint: String,
    cert: PathBuf,
    /// The runtime's session URL.
    pub url: String,
    /// The runtime's address.
    pub addr: String,
    /// The runtime's process id.
    pub runtime_pid: u32,
    /// The simulator's process id.
    pub sim_pid: u32,
    dir: PathBuf,
}

impl Drop for Stack {
    fn drop(&mut self) {
        for child in &mut self.extra {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = self.runtime.kill();
        let _ = self.sim.kill();
        let _ = self.runtime.wait();
        let _ = self.sim.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Stack {
    /// Starts the simulator with `script` (YAML) and a runtime of agent `agent` allowing
    /// `max_sessions` sessions.
    pub async fn start(script: &str, agent: &str, max_sessions: u32) -> Self {
        let dir = std::env::temp_dir().join(format!("switchboard-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let script_path = dir.join("script.yaml");
        std::fs::write(&script_path, script).expect("writes the script");
        let cert = dir.join("sim-ca.pem");
        // The agent's spec first: a catalog this tree cannot resolve stops the benchmark
        // before any child process exists (a simulator left running would hold the
        // caller's pipe open: `benchmarks/ab.sh` would wait for it for ever).
        let spec_path = runtime_spec(&dir, agent, max_sessions);
        let sim_port = free_port();
        let bin = std::env::var("BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_switchboard").to_owned());
        let mut sim = Command::new(&bin)
            .args(["sim", "--listen", &format!("127.0.0.1:{sim_port}"), "--max-connections", "4096"])
            .arg("--script")
            .arg(&script_path)
            .arg("--cert-out")
            .arg(&cert)
            .env("SWITCHBOARD_LOG", "warn")
            .env("SWITCHBOARD_WORKER_THREADS", workers().to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starts switchboard sim");
        let stdout = sim.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let endpoint = loop {
            let line = lines.next().expect("the simulator prints its endpoint").expect("reads");
            if let Some(rest) = line.strip_prefix("Bedrock simulator on ") {
                break rest.split_whitespace().next().expect("endpoint").to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});

        let (runtime, addr) = spawn_runtime(&bin, &spec_path, &endpoint, &cert, agent, &[]);
        let runtime_pid = runtime.id();
        let sim_pid = sim.id();
        let stack = Self {
            sim,
            runtime,
            extra: Vec::new(),
            bin,
            endpoint,
            cert,
            url: format!("ws://{addr}/v1/session"),
            addr,
            runtime_pid,
            sim_pid,
            dir,
        };
        wait_listening(&stack.addr).await;
        stack
    }

    /// Starts another runtime, of `agent`, against the same simulator: (address, pid).
    pub async fn add_runtime(&mut self, agent: &str, max_sessions: u32) -> (String, u32) {
        self.add_runtime_with(agent, max_sessions, &[]).await
    }

    /// [`Stack::add_runtime`] with more environment variables (e.g. `OTEL_*`).
    pub async fn add_runtime_with(&mut self, agent: &str, max_sessions: u32, env: &[(&str, &str)]) -> (String, u32) {
        let spec_path = runtime_spec(&self.dir, agent, max_sessions);
        let (child, addr) = spawn_runtime(&self.bin, &spec_path, &self.endpoint, &self.cert, agent, env);
        let pid = child.id();
        self.extra.push(child);
        wait_listening(&addr).await;
        (addr, pid)
    }

    /// Starts `switchboard gateway` routing by a table file to `routes` (agent, runtime
    /// address; the first is the default), signing with [`GATEWAY_SEED`]'s key: (session
    /// URL, pid).
    pub async fn add_gateway(&mut self, routes: &[(&str, &str)], max_sessions: usize) -> (String, u32) {
        self.add_gateway_with(routes, max_sessions, &[]).await
    }

    /// [`Stack::add_gateway`] with more command-line arguments (e.g. the conversation record's).
    pub async fn add_gateway_with(
        &mut self,
        routes: &[(&str, &str)],
        max_sessions: usize,
        more: &[&str],
    ) -> (String, u32) {
        let table = serde_json::json!({
            "apiVersion": "switchboard.dev/v1alpha1",
            "kind": "RoutingTable",
            "routes": routes.iter().enumerate().map(|(i, (agent, addr))| {
                let (host, port) = addr.rsplit_once(':').expect("host:port");
                serde_json::json!({
                    "name": agent, "namespace": "bench", "mode": "hybrid", "service": host,
                    "port": port.parse::<u16>().expect("port"), "path": "/v1/session",
                    "handoffs": routes.iter().map(|(a, _)| *a).filter(|a| a != agent).collect::<Vec<_>>(),
                    "expose": true, "default": i == 0, "ready": true, "readyReplicas": 1
                })
            }).collect::<Vec<_>>()
        });
        let routes_path = self.dir.join("routes.json");
        std::fs::write(&routes_path, table.to_string()).expect("writes the routes");
        let key_path = self.dir.join("gateway-key.pem");
        let pem = switchboard_core::grant::GatewaySigner::from_seed(&GATEWAY_SEED).to_pem().expect("pem");
        std::fs::write(&key_path, pem).expect("writes the key");
        let addr = format!("127.0.0.1:{}", free_port());
        let child = Command::new(&self.bin)
            .arg("gateway")
            .arg("--routes-file")
            .arg(&routes_path)
            .arg("--gateway-key-file")
            .arg(&key_path)
            .args(["--listen", &addr, "--max-sessions", &max_sessions.to_string()])
            .args(more)
            // BENCH_GATEWAY_LOG: the gateway's log filter (e.g. the WebRTC edge's latency
            // trace, `warn,switchboard_webrtc::latency=trace`), on the benchmark's stderr.
            .env("SWITCHBOARD_LOG", std::env::var("BENCH_GATEWAY_LOG").unwrap_or_else(|_| "warn".to_owned()))
            .env("SWITCHBOARD_WORKER_THREADS", workers().to_string())
            .stdout(Stdio::null())
            .spawn()
            .expect("starts switchboard gateway");
        let pid = child.id();
        self.extra.push(child);
        wait_listening(&addr).await;
        (format!("ws://{addr}/v1/session"), pid)
    }
}

/// Resolves agent `agent` of the Example Bank allowing `max_sessions` sessions, and writes
/// its runtime spec into `dir`.
fn runtime_spec(dir: &std::path::Path, agent: &str, max_sessions: u32) -> PathBuf {
    // A baseline binary (`BENCH_BIN`, benchmarks/ab.sh) may predate this tree's examples:
    // it runs with its own tree's (`BENCH_EXAMPLES`, the banking folder).
    let examples = std::env::var_os("BENCH_EXAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking"));
    let catalog = Catalog::load_paths(std::slice::from_ref(&examples)).expect("examples load");
    let resource = catalog.agents().find(|a| a.metadata.name.as_deref() == Some(agent)).expect("the agent");
    let mut spec = catalog.resolve_agent(resource).unwrap_or_else(|problems| {
        panic!(
            "this tree cannot resolve agent {agent} of {} (with benchmarks/ab.sh: a baseline's own examples \
             this tree's checks refuse; AB_BASE_EXAMPLES=<this tree>/examples/banking runs it with this tree's): \
             {problems:?}",
            examples.display()
        )
    });
    spec.sessions.max_concurrent = max_sessions;
    spec.agent.namespace = NAMESPACE.into();
    let spec_path = dir.join(format!("runtime-{agent}.json"));
    std::fs::write(&spec_path, spec.to_canonical_json()).expect("writes the spec");
    spec_path
}

fn spawn_runtime(
    bin: &str,
    spec_path: &std::path::Path,
    endpoint: &str,
    cert: &std::path::Path,
    agent: &str,
    env: &[(&str, &str)],
) -> (Child, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    RUNTIMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((format!("ws://{addr}/"), agent.to_owned()));
    let public_key = switchboard_core::grant::GatewaySigner::from_seed(&GATEWAY_SEED).public().to_string();
    let runtime = Command::new(bin)
        .arg("runtime")
        .env(contract::env::RUNTIME_SPEC, spec_path)
        .env(contract::env::LISTEN, &addr)
        .env(contract::env::GATEWAY_PUBLIC_KEY, public_key)
        .env("SWITCHBOARD_BEDROCK_ENDPOINT", endpoint)
        .env("SWITCHBOARD_BEDROCK_CA_FILE", cert)
        .env("AWS_ACCESS_KEY_ID", "AKIDBENCH")
        .env("AWS_SECRET_ACCESS_KEY", "not-a-secret")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("SWITCHBOARD_LOG", "warn")
        .env("SWITCHBOARD_WORKER_THREADS", workers().to_string())
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .spawn()
        .expect("starts switchboard runtime");
    (runtime, addr)
}

async fn wait_listening(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "{addr} did not start listening");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Connects a benchmark client with a small read buffer, as the runtime uses: tungstenite
/// zero-fills the whole buffer (128 KiB by default) before every read, which would make
/// the clients, who share the machine with the runtime, far more expensive than they need
/// to be (a quarter of the text clients' CPU, measured, and 128 KiB of cache written per
/// message).
pub async fn connect(url: &str) -> Ws {
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(8 * 1024);
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true).await.expect("connects");
    ws
}

/// Opens a session that asks for audio; returns once `bidi_connection_start` arrived.
pub async fn open(url: &str) -> Ws {
    let mut ws = connect(url).await;
    let start = session_start(url, SessionStart { modalities: vec!["audio".into()], ..SessionStart::default() });
    ws.send(Message::text(serde_json::to_string(&start).expect("json"))).await.expect("sends");
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) if text.contains("\"bidi_connection_start\"") => return ws,
            Some(Ok(Message::Text(text))) if text.contains("\"bidi_error\"") => panic!("session failed: {text}"),
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

/// The message type of a server frame, read without parsing the whole JSON (audio frames
/// are most of them).
pub fn kind(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("{\"type\":\"") else { return "" };
    rest.split('"').next().unwrap_or("")
}

/// `id`'s phrase tone for `ms`, cut into 20 ms frames.
pub fn phrase_frames(id: u32, ms: u64) -> Vec<Vec<u8>> {
    let pcm = switchboard_sim::sonic::phrase_tone(id, ms, 8000);
    pcm.chunks(FRAME_BYTES)
        .map(|c| {
            let mut frame = c.to_vec();
            frame.resize(FRAME_BYTES, 0);
            frame
        })
        .collect()
}

/// One spoken turn: a 300 ms phrase, then silence in real time until the reply is complete.
/// Returns the time from sending the frame that completes the end-of-utterance silence to
/// the first reply audio, and the frames sent and messages received.
pub async fn spoken_turn(ws: &mut Ws, silence_frames: usize) -> (Duration, u64) {
    spoken_turn_of(ws, 300, silence_frames).await
}

/// [`spoken_turn`] with a phrase of `phrase_ms` (its last frame padded with silence).
pub async fn spoken_turn_of(ws: &mut Ws, phrase_ms: u64, silence_frames: usize) -> (Duration, u64) {
    let mut frames = phrase_frames(1, phrase_ms);
    let speech = frames.len();
    frames.extend(std::iter::repeat_n(vec![0u8; FRAME_BYTES], silence_frames));
    let mut ticker = tokio::time::interval(FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (mut sent, mut relayed) = (0usize, 0u64);
    let mut end_of_speech: Option<Instant> = None;
    let mut first_audio = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let frame = frames.get(sent).cloned().unwrap_or_else(|| vec![0u8; FRAME_BYTES]);
                ws.send(Message::binary(frame)).await.expect("sends audio");
                sent += 1;
                relayed += 1;
                if sent == speech + silence_frames {
                    end_of_speech = Some(Instant::now());
                }
            }
            message = ws.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    relayed += 1;
                    match kind(text.as_str()) {
                        "bidi_audio_stream" if first_audio.is_none() => {
                            first_audio = Some(end_of_speech.expect("reply after the end of speech").elapsed());
                        }
                        "bidi_response_complete" => return (first_audio.expect("a spoken reply"), relayed),
                        "bidi_error" => panic!("turn failed: {text}"),
                        _ => {}
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("connection ended: {other:?}"),
            },
        }
    }
}

/// An OTLP/HTTP trace receiver that takes every export and answers at once: what a
/// collector costs the exporting process without the collector's own work.
pub struct OtlpSink {
    /// The base URL for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    /// Exports received.
    pub requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Their bytes.
    pub bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl OtlpSink {
    /// Waits for the last batch of spans (they leave in batches, OTEL_BSP_SCHEDULE_DELAY
    /// after they end: 5 s by default), then prints what arrived.
    pub async fn report(&self) {
        use std::sync::atomic::Ordering;
        tokio::time::sleep(std::time::Duration::from_secs(6)).await;
        println!(
            "traced runtime: {} OTLP exports, {:.1} KiB",
            self.requests.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed) as f64 / 1024.0
        );
    }
}

/// Starts an [`OtlpSink`] on a free port of this process.
pub async fn otlp_sink() -> OtlpSink {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let (requests, bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (r, b) = (requests.clone(), bytes.clone());
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            r.fetch_add(1, Ordering::Relaxed);
            b.fetch_add(body.len() as u64, Ordering::Relaxed);
            // An empty ExportTraceServiceResponse.
            async { ([("content-type", "application/x-protobuf")], Vec::<u8>::new()) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    OtlpSink { endpoint, requests, bytes }
}
