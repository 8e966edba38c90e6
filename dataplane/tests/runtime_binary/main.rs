//! The `switchboard runtime` binary as a runtime pod runs it: a RuntimeSpec file, the
//! operator's environment variables, the simulator as Bedrock, a real WebSocket client,
//! and SIGTERM: readiness goes false at once, the live session finishes, the process exits.
//! Its AWS credentials from a mounted Secret's files: a rotation reaches it without a restart.
//! Its gateway public keys: during a rotation of the gateway's key it trusts the old and the
//! new, and serves grants signed by either.

use std::process::{Child, Command};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::grant::{GatewaySigner, SessionContext};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use switchboard_crds::{Catalog, contract};
use switchboard_sim::{SimConfig, Simulator, banking_script};
use tokio_tungstenite::tungstenite::Message;

#[path = "../support/served.rs"]
#[allow(dead_code)]
mod served;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn get(addr: &str, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("writes");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The banking agent's RuntimeSpec in a fresh folder; returns the folder.
fn banking_spec() -> std::path::PathBuf {
    let examples = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let catalog = Catalog::load_paths(&[examples]).expect("examples");
    let agent = catalog.agents().find(|a| a.metadata.name.as_deref() == Some("banking")).expect("banking agent");
    let spec = catalog.resolve_agent(agent).expect("resolves");
    let dir = std::env::temp_dir().join(format!("switchboard-runtime-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("runtime.json"), spec.to_canonical_json()).expect("writes the spec");
    dir
}

/// `switchboard runtime` for the spec in `dir` against `sim`, with the operator's variables
/// and `env`; returns the process and its address once it serves.
fn spawn_runtime(dir: &std::path::Path, sim: &switchboard_sim::SimHandle, env: &[(&str, &str)]) -> (Child, String) {
    // MODE as the operator sets it: from the spec's Agent (the runtime refuses a mismatch).
    let spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("runtime.json")).expect("the spec")).expect("spec JSON");
    let mode = spec["mode"].as_str().expect("the spec names its mode").to_owned();
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command
        .arg("runtime")
        .env(contract::env::RUNTIME_SPEC, dir.join("runtime.json"))
        .env(contract::env::MODE, mode)
        // Port 0: the runtime binds a free port itself and logs it (no port to race for).
        .env(contract::env::LISTEN, "127.0.0.1:0")
        .env("SWITCHBOARD_BEDROCK_ENDPOINT", sim.endpoint_url())
        .env("SWITCHBOARD_BEDROCK_CA_FILE", sim.ca_cert_path().expect("cert"))
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env("SWITCHBOARD_LOG", "info")
        .env_remove("SWITCHBOARD_LOG_FORMAT")
        .env("NO_COLOR", "1");
    for (name, value) in env {
        command.env(name, value);
    }
    let (child, addr) = served::spawn_serving(command, "runtime serving", Duration::from_secs(30), |_| {});
    (child, addr.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_binary_serves_a_spec_and_drains_on_sigterm() {
    let sim = Simulator::start(SimConfig::new(banking_script().expect("script"))).await.expect("simulator");
    let dir = banking_spec();
    let (mut child, addr) =
        spawn_runtime(&dir, &sim, &[("AWS_ACCESS_KEY_ID", "AKIDTEST"), ("AWS_SECRET_ACCESS_KEY", "not-a-secret")]);
    assert_eq!(get(&addr, "/healthz").await, 200);
    assert_eq!(get(&addr, "/readyz").await, 200);

    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/v1/session")).await.expect("connects");
    let send = |m: ClientMessage| Message::text(serde_json::to_string(&m).expect("json"));
    ws.send(send(ClientMessage::SessionStart(SessionStart::default()))).await.expect("sends");
    let mut next = async || loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("in time") {
            Some(Ok(Message::Text(t))) => {
                return Ok(serde_json::from_str::<ServerMessage>(t.as_str()).expect("protocol"));
            }
            Some(Ok(Message::Close(f))) => return Err(f.map(|f| u16::from(f.code)).unwrap_or(1005)),
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    };
    assert!(matches!(next().await, Ok(ServerMessage::BidiConnectionStart { agent, .. }) if agent == "banking"));

    // SIGTERM: readiness false at once, the live session still answers.
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill runs");
    assert!(status.success());
    let mut ready = 200;
    for _ in 0..100 {
        ready = get(&addr, "/readyz").await;
        if ready == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ready, 503, "not ready while draining");
    ws.send(send(ClientMessage::BidiTextInput { text: "hello".into(), id: None })).await.expect("sends");
    assert!(reply(&mut ws).await.starts_with("Hello!"));
    ws.send(send(ClientMessage::Close {})).await.expect("sends");
    while let Some(Ok(frame)) = ws.next().await {
        if frame.is_close() {
            break;
        }
    }
    let exit = tokio::task::spawn_blocking(move || child.wait()).await.expect("joins").expect("waits");
    assert!(exit.success(), "the runtime exits cleanly after the drain: {exit:?}");
    let _ = std::fs::remove_dir_all(dir);
    sim.shutdown().await;
}

/// Reads one turn: the assistant's last final line before `bidi_response_complete`.
async fn reply(ws: &mut Ws) -> String {
    let mut reply = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("in time") {
            Some(Ok(Message::Text(t))) => match serde_json::from_str::<ServerMessage>(t.as_str()).expect("protocol") {
                ServerMessage::BidiTranscriptStream {
                    role: TranscriptRole::Assistant, text, is_final: true, ..
                } => reply = Some(text),
                ServerMessage::BidiResponseComplete { .. } => return reply.expect("a reply"),
                ServerMessage::BidiError { message, .. } => panic!("error: {message}"),
                _ => {}
            },
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// One text turn on a fresh session: the assistant's final reply.
async fn hello(addr: &str) -> String {
    hello_with(addr, SessionStart::default()).await
}

/// One text turn on a fresh session opened with `start`: the assistant's final reply.
async fn hello_with(addr: &str, start: SessionStart) -> String {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/v1/session")).await.expect("connects");
    let send = |m: ClientMessage| Message::text(serde_json::to_string(&m).expect("json"));
    ws.send(send(ClientMessage::SessionStart(start))).await.expect("sends");
    ws.send(send(ClientMessage::BidiTextInput { text: "hello".into(), id: None })).await.expect("sends");
    let said = reply(&mut ws).await;
    let _ = ws.send(send(ClientMessage::Close {})).await;
    said
}

/// Writes a credential file as the kubelet updates a mounted Secret: a new file swapped in.
fn put(dir: &std::path::Path, name: &str, value: &str) {
    let staged = dir.join(format!(".{name}.new"));
    std::fs::write(&staged, value).expect("writes");
    std::fs::rename(staged, dir.join(name)).expect("swaps in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_from_a_mounted_secret_are_read_again_after_a_rotation() {
    let sim = Simulator::start(SimConfig::new(banking_script().expect("script"))).await.expect("simulator");
    let dir = banking_spec();
    let secret = dir.join("credentials");
    std::fs::create_dir_all(&secret).expect("dir");
    let dir_env = secret.to_str().expect("utf-8 path").to_owned();
    let env = [(contract::env::CREDENTIALS_DIR, dir_env.as_str()), ("SWITCHBOARD_CREDENTIALS_MAX_AGE_SECONDS", "1")];

    // A Secret without the keys: the runtime refuses to start and says which key is missing.
    let output = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("runtime")
        .env(contract::env::RUNTIME_SPEC, dir.join("runtime.json"))
        .env(env[0].0, env[0].1)
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && said.contains("AWS_ACCESS_KEY_ID"), "{said}");

    put(&secret, "AWS_ACCESS_KEY_ID", "AKIDFIRST");
    put(&secret, "AWS_SECRET_ACCESS_KEY", "first-secret-value");
    let (mut child, addr) = spawn_runtime(&dir, &sim, &env);
    assert!(hello(&addr).await.starts_with("Hello!"));
    assert!(sim.stats().access_keys.contains_key("AKIDFIRST"), "{:?}", sim.stats().access_keys);

    // Rotated: the next calls are signed with the new key, with no restart.
    put(&secret, "AWS_ACCESS_KEY_ID", "AKIDSECOND");
    put(&secret, "AWS_SECRET_ACCESS_KEY", "second-secret-value");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(hello(&addr).await.starts_with("Hello!"));
    let keys = sim.stats().access_keys;
    assert!(keys.contains_key("AKIDSECOND"), "{keys:?}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
    sim.shutdown().await;
}

/// A fresh `session_start` for the banking agent whose grant `key` signed, as a gateway makes it.
fn granted(key: &GatewaySigner) -> SessionStart {
    granted_for(key, None)
}

/// [`granted`], for the pod at `pod` when given (the address the gateway dialed).
fn granted_for(key: &GatewaySigner, pod: Option<&str>) -> SessionStart {
    let context = SessionContext {
        session_id: format!("gw-{}", uuid::Uuid::new_v4()),
        namespace: "default".into(),
        agent: "banking".into(),
        issued_at_ms: switchboard_runtime::grants::now_ms(),
        nonce: uuid::Uuid::new_v4().to_string(),
        pod: pod.map(str::to_owned),
        ..Default::default()
    };
    SessionStart { agent: Some("banking".into()), context: Some(key.sign(&context)), ..Default::default() }
}

/// A runtime pod given its address (`SWITCHBOARD_POD_IP`, as the operator sets it) serves a
/// grant made for it and refuses one the gateway made for another pod of the Agent: a grant
/// captured on its way to one pod cannot open a session on another while it is fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_made_for_another_pod_is_refused() {
    let sim = Simulator::start(SimConfig::new(banking_script().expect("script"))).await.expect("simulator");
    let dir = banking_spec();
    let key = GatewaySigner::from_seed(&[34; 32]);
    let public = key.public().to_string();
    let (mut child, addr) = spawn_runtime(
        &dir,
        &sim,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
            ("AWS_SECRET_ACCESS_KEY", "not-a-secret"),
            (contract::env::GATEWAY_PUBLIC_KEY, public.as_str()),
            (contract::env::POD_IP, "127.0.0.1"),
        ],
    );
    let said = hello_with(&addr, granted_for(&key, Some("127.0.0.1"))).await;
    assert!(said.starts_with("Hello!"), "a grant for this pod is served: {said}");
    let (message, code) = refused(&addr, granted_for(&key, Some("10.1.2.3"))).await;
    assert_eq!(code, 4400);
    assert!(message.contains("made for the pod at 10.1.2.3"), "{message}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
    sim.shutdown().await;
}

/// Opens a session with `start` and expects it refused: the `context_refused` message and
/// the close code.
async fn refused(addr: &str, start: SessionStart) -> (String, u16) {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/v1/session")).await.expect("connects");
    let send = |m: ClientMessage| Message::text(serde_json::to_string(&m).expect("json"));
    ws.send(send(ClientMessage::SessionStart(start))).await.expect("sends");
    let mut message = String::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("in time") {
            Some(Ok(Message::Text(t))) => match serde_json::from_str::<ServerMessage>(t.as_str()).expect("protocol") {
                ServerMessage::BidiError { code, message: m, .. } if code == "context_refused" => message = m,
                ServerMessage::BidiConnectionClose { .. } => {}
                other => panic!("no session may start: {other:?}"),
            },
            Some(Ok(Message::Close(f))) => return (message, f.map_or(1005, |f| u16::from(f.code))),
            Some(Ok(_)) => continue,
            other => panic!("connection ended without a close: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_gateway_key_rotation_grants_signed_with_the_old_or_the_new_key_are_served() {
    let sim = Simulator::start(SimConfig::new(banking_script().expect("script"))).await.expect("simulator");
    let dir = banking_spec();
    let (old, new, other) =
        (GatewaySigner::from_seed(&[31; 32]), GatewaySigner::from_seed(&[32; 32]), GatewaySigner::from_seed(&[33; 32]));
    // One a line, as a chart value may list them (the operator writes them comma-separated).
    let keys = format!("{}\n{}\n", old.public(), new.public());
    let (mut child, addr) = spawn_runtime(
        &dir,
        &sim,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
            ("AWS_SECRET_ACCESS_KEY", "not-a-secret"),
            (contract::env::GATEWAY_PUBLIC_KEY, keys.as_str()),
        ],
    );
    for (which, key) in [("old", &old), ("new", &new)] {
        let said = hello_with(&addr, granted(key)).await;
        assert!(said.starts_with("Hello!"), "a grant signed with the {which} key is served: {said}");
    }
    // Any other key's grant, and a session without one, are refused.
    let (message, code) = refused(&addr, granted(&other)).await;
    assert_eq!(code, 4400);
    assert!(message.contains("signature is not valid"), "{message}");
    let (message, code) = refused(&addr, SessionStart::default()).await;
    assert_eq!(code, 4400);
    assert!(message.contains("only through the Switchboard gateway"), "{message}");
    let _ = child.kill();
    let _ = child.wait();

    // A malformed key in the list stops the runtime at start, saying which.
    let output = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("runtime")
        .env(contract::env::RUNTIME_SPEC, dir.join("runtime.json"))
        .env(contract::env::GATEWAY_PUBLIC_KEY, format!("{},abcd", old.public()))
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && said.contains("key 2 of 2"), "{said}");
    let _ = std::fs::remove_dir_all(dir);
    sim.shutdown().await;
}
