//! ICE-TCP (RFC 6544) with Chromium: as the fallback where UDP is blocked, and in local mode
//! with the TCP candidate alone (see the crate's docs; the browser's part is tcp.cjs).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use switchboard_core::grant::GatewaySigner;
use switchboard_crds::{Catalog, RuntimeSpec};
use switchboard_local::{self as local, LocalOptions};
use switchboard_webrtc_edge::Edge;

use super::browser::{call_files, tools_bin};
use super::{drive, keyed_gateway, session_heard_the_request, which};

/// ICE-TCP as the fallback: UDP to the edge is blocked (its relay cut from the start), so
/// Chromium's media and data channel can only go over TCP, and the test fails if they did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_falls_back_to_ice_tcp_when_udp_is_blocked() {
    let bin = tools_bin();
    // The microphone: silence while triage greets, the request, then silence for the reply.
    let (dir, script_path, wav_path) = call_files("webrtc-tcp", 3000, 1200, 8000, 1500, 5000);
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let signer = GatewaySigner::from_seed(&[7; 32]);
    let options =
        LocalOptions { sim_script: Some(script_path), gateway_key: Some(signer.clone()), ..LocalOptions::default() };
    let local = local::start(&examples, options).await.expect("local mode starts");
    let runtime = local.server.runtime_addr().expect("the runtime");
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });
    let key = "the-right-key";
    let catalog = Catalog::load_paths(&[&examples]).expect("the banking example loads");
    let specs: Vec<RuntimeSpec> = catalog.agents().map(|a| catalog.resolve_agent(a).expect("resolves")).collect();
    let (keyed, gateway, edge, relay) = keyed_gateway(key, signer, runtime, &specs, true).await;
    let (tcp_bound, tcp_advertised) = edge.tcp().expect("the edge listens on TCP");
    assert_eq!(tcp_bound, tcp_advertised, "bound on a specific address: advertised as bound");
    // UDP blocked: whatever reaches the edge's UDP candidate is dropped, both ways.
    relay.cut.store(true, Ordering::SeqCst);

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webrtc/tcp.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let mut command = Command::new("node");
    command.arg(driver).arg(playwright).arg(&keyed).arg(&wav_path).arg(which("chromium")).arg(key);
    let watched = gateway.clone();
    let tried = relay.from_clients.clone();
    let (result, _) =
        tokio::task::spawn_blocking(move || drive(command, Some((&relay, &watched)))).await.expect("driven");
    let _ = std::fs::remove_dir_all(&dir);
    let candidates = answer_candidates(&result["call"]);
    assert!(candidates.iter().any(|c| c.contains(" udp ")), "the UDP candidate is offered too: {candidates:?}");
    assert!(tried.load(Ordering::SeqCst) > 0, "Chromium tried the UDP candidate first (and it was dropped)");
    over_tcp(&result, &edge, tcp_advertised).await;
}

/// ICE-TCP in local mode (`switchboard local`, on by default): Chromium is told of the edge's
/// TCP candidate alone (the page takes the UDP one out of the answer), so the call can only
/// go over TCP; it does, end to end, and DELETE's close reaches Chromium over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_calls_local_mode_over_ice_tcp_alone() {
    let bin = tools_bin();
    let (dir, script_path, wav_path) = call_files("webrtc-local-tcp", 3000, 1200, 8000, 1500, 5000);
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let options = LocalOptions { sim_script: Some(script_path), ..LocalOptions::default() };
    let local = local::start(&examples, options).await.expect("local mode starts");
    let url = format!("http://{}/", local.server.local_addr().expect("addr"));
    let edge = local.webrtc.clone();
    let (tcp_bound, tcp_advertised) = edge.tcp().expect("local mode listens for ICE-TCP");
    assert_eq!(tcp_bound, tcp_advertised, "on the loopback address: advertised as bound");
    assert_ne!(tcp_advertised.port(), 0);
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webrtc/tcp.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let mut command = Command::new("node");
    command.arg(driver).arg(playwright).arg(&url).arg(&wav_path).arg(which("chromium")).arg("").arg("tcp-only");
    let (result, _) = tokio::task::spawn_blocking(move || drive(command, None)).await.expect("driven");
    let _ = std::fs::remove_dir_all(&dir);
    let call = &result["call"];
    let told: Vec<&str> =
        call["toldCandidates"].as_array().expect("candidates").iter().filter_map(Value::as_str).collect();
    assert!(!told.is_empty() && told.iter().all(|c| c.contains(" tcp ")), "Chromium was told of TCP alone: {told:?}");
    over_tcp(&result, &edge, tcp_advertised).await;
}

/// The candidates of the edge's answer.
fn answer_candidates(call: &Value) -> Vec<&str> {
    call["answerCandidates"].as_array().expect("candidates").iter().filter_map(Value::as_str).collect()
}

/// A call that went over ICE-TCP, to the edge's TCP port at `tcp_advertised`, and was heard
/// both ways; its bytes counted on the TCP port; DELETE ended it and closed its data channel.
async fn over_tcp(result: &Value, edge: &Edge, tcp_advertised: SocketAddr) {
    let call = &result["call"];
    eprintln!("selected: {}\ninbound: {}\nstates: {}", call["selected"], call["inbound"], call["states"]);
    assert_eq!(call["status"], 201, "{call}");
    let candidates = answer_candidates(call);
    let passive = format!(" {} {} typ host tcptype passive", tcp_advertised.ip(), tcp_advertised.port());
    assert!(
        candidates.iter().any(|c| c.contains(" tcp ") && c.contains(&passive)),
        "a passive TCP candidate ({passive}): {candidates:?}"
    );
    // Both ends agree the call went over TCP, to the edge's TCP port.
    let selected = &call["selected"];
    assert_eq!(selected["local"]["protocol"], "tcp", "Chromium's side of the selected pair: {selected}");
    assert_eq!(selected["remote"]["protocol"], "tcp", "{selected}");
    assert_eq!(selected["remote"]["port"], tcp_advertised.port(), "the edge's TCP port: {selected}");
    let ice = &edge.metrics.ice;
    let over = |transport: &str| {
        ["host", "srflx", "prflx", "relay"]
            .iter()
            .map(|c| ice.with_label_values(&["connected", c, transport]).get())
            .sum::<f64>()
    };
    assert_eq!(
        (over("tcp"), over("udp")),
        (1.0, 0.0),
        "the edge's media path: TCP, never UDP\n{}",
        edge.metrics.render()
    );
    // The bytes themselves went through the edge's TCP port: some 50 Opus packets a second
    // each way for seconds (about 30 kB in, 20 kB out where measured). Chromium's own pair
    // counters are printed, not compared: the pair it reports selected at the end is not
    // always the one that carried the call (once it reported 0 bytes received there).
    let bytes = |direction: &str| edge.metrics.tcp_bytes.with_label_values(&[direction]).get();
    let (into, out) = (bytes("in"), bytes("out"));
    eprintln!(
        "ICE-TCP bytes: edge in {into} out {out}; Chromium's selected pair sent {} received {}",
        selected["bytesSent"], selected["bytesReceived"]
    );
    assert!(into > 10_000 && out > 10_000, "the edge's TCP byte counter saw the call: in {into}, out {out}");
    // The session over it: the data channel, the caller heard, the reply's audio back.
    assert_eq!(call["opened"], true, "the data channel opened over TCP");
    session_heard_the_request(call, "the microphone's request reached the agent over TCP");
    let inbound = &call["inbound"];
    assert!(inbound["packets"].as_u64().unwrap_or_default() >= 20, "Opus packets received over TCP: {inbound}");
    assert!(inbound["energy"].as_f64().unwrap_or_default() > 0.0, "reply audio energy: {inbound}");
    assert!(call["outbound"]["packets"].as_u64().unwrap_or_default() > 50, "the microphone was sent: {call}");
    assert_eq!(call["deleted"], 200, "DELETE ends the call");
    assert_eq!(call["channelClosed"], true, "the data channel closed with it, over TCP");
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
    let ended = std::time::Instant::now() + Duration::from_secs(10);
    while edge.live() > 0 && std::time::Instant::now() < ended {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(edge.metrics.calls.with_label_values(&["ended"]).get(), 1.0, "{}", edge.metrics.render());
}
