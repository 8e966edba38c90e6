//! The console served by the gateway, behind its API keys: the real `switchboard gateway
//! --console` process with an API keys file, routing by a routes file of the folder's
//! Agents to local mode's runtime server (which takes this gateway's signed grants).
//! In Chromium the page asks for a key, says why a wrong one is refused, lists the Agents of
//! the routing table once given the right one — with what the operator carries for the
//! console in the table (persona, voice, tools, handoffs, workflow graph), as local mode
//! shows them from the resources — and holds a conversation through it. This gateway serves
//! no WebRTC (no `--webrtc-udp`): the console's voice falls back to the WebSocket, the page
//! saying why, and triage's spoken greeting arrives there.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use switchboard_core::grant::GatewaySigner;
use switchboard_crds::routing::summary::AgentSummary;
use switchboard_crds::routing::{Route, RoutingTable};
use switchboard_local::{self as local, LocalOptions};

use crate::served;

const KEY: &str = "console-test-key";

fn digest(key: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_serves_the_console_behind_its_api_keys() {
    let bin = super::tools_bin();
    let signer = GatewaySigner::from_seed(&[7; 32]);
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let options = LocalOptions { gateway_key: Some(signer.clone()), ..LocalOptions::default() };
    let local = local::start(&examples, options).await.expect("local mode starts");
    let runtime = local.server.runtime_addr().expect("the runtime's address");
    let specs = super::banking_specs(&examples);
    let routes: Vec<Route> =
        specs.iter().map(|spec| Route::ready_at(spec, runtime.ip().to_string(), runtime.port())).collect();
    let dir = std::env::temp_dir().join(format!("switchboard-console-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // The summaries as the operator makes them from each Agent's resolved resources.
    let summaries = specs.iter().map(|s| (format!("{}/{}", s.agent.namespace, s.agent.name), AgentSummary::of(s)));
    let (table, left_out) = RoutingTable::new(routes).with_summaries(summaries);
    assert_eq!(left_out, 0, "four agents fit the table's budget");
    std::fs::write(dir.join("routes.json"), table.to_json()).expect("routes");
    std::fs::write(dir.join("gateway.pem"), signer.to_pem().expect("pem")).expect("key");
    std::fs::write(dir.join("keys"), format!("console {}\n", digest(KEY))).expect("keys");
    let local_server = local.server;
    tokio::spawn(async move { local_server.run(std::future::pending()).await });
    let (gateway, addr) = start_gateway(&dir).await;
    let url = format!("http://{addr}/");

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web/gateway.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-console");
    std::fs::create_dir_all(&shots).expect("the screenshots' folder");
    let chromium = super::which("chromium");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node").arg(driver).arg(playwright).arg(&url).arg(chromium).arg(&shots).arg(KEY).output()
    })
    .await
    .expect("the driver finishes")
    .expect("runs node");
    assert!(out.status.success(), "the browser run failed: {}", String::from_utf8_lossy(&out.stderr));
    let result: serde_json::Value =
        serde_json::from_slice(out.stdout.trim_ascii()).expect("the driver prints one JSON line");

    assert_eq!(result["asked"], true, "the page asks for a key: {result}");
    let why = result["refused"].as_str().unwrap_or_default();
    assert!(why.contains("not valid"), "a wrong key is refused with the gateway's reason: {why}");
    let agents: Vec<&str> = result["agents"].as_array().expect("agents").iter().filter_map(|a| a.as_str()).collect();
    let triage = specs.iter().find(|s| s.agent.name == "triage").expect("triage");
    let expected = format!("{}/triage", triage.agent.namespace);
    assert_eq!(agents, [expected.as_str()], "the exposed Agents of the routing table: {result}");
    let panel = result["panel"].as_array().expect("the Agents panel");
    assert_eq!(panel.len(), specs.len(), "every Agent of the table in the panel: {result}");
    assert_eq!(result["asked_after"], false, "the key was taken: {result}");
    for spec in &specs {
        let name = format!("{}/{}", spec.agent.namespace, spec.agent.name);
        let card =
            panel.iter().find(|c| c["name"] == name.as_str()).unwrap_or_else(|| panic!("{name}'s card: {result}"));
        let facts = &card["facts"];
        let persona = facts["Persona"].as_str().unwrap_or_default();
        assert!(persona.contains(&spec.persona.spec.display_name), "{name}'s persona through the gateway: {card}");
        if spec.mode.has_audio() {
            let voice = facts["Voice"].as_str().unwrap_or_default();
            assert!(voice.starts_with(&spec.persona.spec.voice), "{name}'s voice through the gateway: {card}");
        }
        let tools: Vec<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(super::checks::strings(&card["tools"]), tools, "{name}'s tools through the gateway: {card}");
        let workflow = facts["Workflow"].as_str().unwrap_or_default();
        assert!(workflow.starts_with(&spec.workflow.name), "{name}'s workflow through the gateway: {card}");
        assert_eq!(card["description"].as_str(), spec.profile.description.as_deref(), "{name}'s description");
    }
    // The graph of the agent serving the session (idv, after the handoff), with its node.
    let graph = &result["graph"];
    let idv = specs.iter().find(|s| s.agent.name == "idv").expect("idv");
    let ids: Vec<String> = idv.workflow.spec.nodes.iter().map(|n| n.id.clone()).collect();
    assert_eq!(graph["agent"], "idv", "the graph follows the session through the gateway: {graph}");
    assert_eq!(super::checks::strings(&graph["nodes"]), ids, "idv's workflow drawn: {graph}");
    assert_eq!(super::checks::strings(&graph["current"]).len(), 1, "one current node: {graph}");
    let shown = super::checks::items(&result, "log");
    assert!(shown.iter().any(|(k, _, t)| k == "user" && t == super::checks::LINES[0]), "the line: {shown:#?}");
    assert!(
        shown.iter().any(|(k, a, t)| k == "assistant" && a == "idv" && t.contains("sort code")),
        "the conversation went through the gateway to idv: {shown:#?}"
    );
    // Voice at a gateway that serves no WebRTC: the WebSocket, and the page says why.
    let transport = result["transport"].as_str().unwrap_or_default();
    assert_eq!(
        transport,
        "WebSocket (fallback: POST /v1/webrtc answered 404: WebRTC is off on this gateway: start it with --webrtc-udp)",
        "the page says its voice fell back to the WebSocket, and why: {result}"
    );
    let voice = &result["voice"];
    assert!(voice["audioChunks"].as_u64().unwrap_or(0) > 0, "triage's spoken greeting came on the WebSocket: {voice}");
    assert_eq!(voice["call"], serde_json::Value::Null, "no WebRTC call: {voice}");
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kills the gateway process when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `switchboard gateway --console` with the files of `dir`, on a port it binds itself (0)
/// and logs; ready once its `/readyz` answers there.
async fn start_gateway(dir: &Path) -> (Process, SocketAddr) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command
        .args(["gateway", "--console", "--listen", "127.0.0.1:0"])
        .arg("--gateway-key-file")
        .arg(dir.join("gateway.pem"))
        .arg("--routes-file")
        .arg(dir.join("routes.json"))
        .arg("--api-keys-file")
        .arg(dir.join("keys"));
    let (child, addr) = served::spawn_gateway(command);
    let process = Process(child);
    for _ in 0..300 {
        if readyz(addr).await {
            return (process, addr);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the gateway on {addr} did not become ready");
}

/// Whether `GET /readyz` at `addr` answers 200.
async fn readyz(addr: SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else { return false };
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut response = String::new();
    stream.write_all(request.as_bytes()).await.is_ok()
        && stream.read_to_string(&mut response).await.is_ok()
        && response.starts_with("HTTP/1.1 200")
}
