//! The `switchboard runtime` binary as a runtime pod runs it: a RuntimeSpec file, the
//! operator's environment variables, the simulator as Bedrock, a real WebSocket client,
//! and SIGTERM: readiness goes false at once, the live session finishes, the process exits.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use switchboard_crds::{Catalog, contract};
use switchboard_sim::{SimConfig, Simulator, banking_script};
use tokio_tungstenite::tungstenite::Message;

async fn get(addr: &str, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("writes");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_binary_serves_a_spec_and_drains_on_sigterm() {
    let sim = Simulator::start(SimConfig::new(banking_script().expect("script"))).await.expect("simulator");
    let examples = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let catalog = Catalog::load_paths(&[examples]).expect("examples");
    let agent = catalog.agents().find(|a| a.metadata.name.as_deref() == Some("banking")).expect("banking agent");
    let spec = catalog.resolve_agent(agent).expect("resolves");
    let dir = std::env::temp_dir().join(format!("switchboard-runtime-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let spec_path = dir.join("runtime.json");
    std::fs::write(&spec_path, spec.to_canonical_json()).expect("writes the spec");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let addr = format!("127.0.0.1:{port}");

    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("runtime")
        .env(contract::env::RUNTIME_SPEC, &spec_path)
        .env(contract::env::MODE, "text")
        .env(contract::env::LISTEN, &addr)
        .env("SWITCHBOARD_BEDROCK_ENDPOINT", sim.endpoint_url())
        .env("SWITCHBOARD_BEDROCK_CA_FILE", sim.ca_cert_path().expect("cert"))
        .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "not-a-secret")
        .env("SWITCHBOARD_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts the runtime");
    let stderr = child.stderr.take().expect("stderr");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("runtime serving") {
                let _ = ready_tx.send(());
            }
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(30)).expect("the runtime starts");
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
    ws.send(send(ClientMessage::BidiTextInput { text: "hello".into() })).await.expect("sends");
    let mut reply = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("in time") {
            Some(Ok(Message::Text(t))) => match serde_json::from_str::<ServerMessage>(t.as_str()).expect("protocol") {
                ServerMessage::BidiTranscriptStream {
                    role: TranscriptRole::Assistant, text, is_final: true, ..
                } => reply = Some(text),
                ServerMessage::BidiResponseComplete { .. } => break,
                _ => {}
            },
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(reply.expect("a reply").starts_with("Hello!"));
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
