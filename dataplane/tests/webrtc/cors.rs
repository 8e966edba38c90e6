//! A page of another origin calls over WebRTC (CORS, issue 47): the test serves an app's page
//! on its own port of 127.0.0.1 (another origin than local mode's gateway) with the
//! TypeScript client as the console vendors it (`dataplane/console/ui/client/webrtc.js`);
//! local mode allows that origin (`--allowed-origin`). In headless Chromium the page opens a
//! `WebRtcCall` to the gateway — the browser's preflights answered, the `201`'s `Location`
//! readable across origins — runs the session on its data channel with the WAV as its
//! microphone, and hears the agent's reply on the track; it trickles `end-of-candidates`
//! under its ufrag alone (`PATCH`, preflighted) and ends the call (`DELETE`, preflighted).
//! A second page, served on another port (an origin not allowed), cannot: its preflight is
//! refused, so `WebRtcCall.open` fails with `WebRtcUnavailable` and no call is made, and its
//! one request that needs no preflight reaches the gateway and is refused there (the
//! gateway counts the Origin refusal). The browser's part is cors.cjs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use switchboard_local::{self as local, LocalOptions};

use super::browser::{call_files, tools_bin};
use super::{drive, session_heard_the_request, which};

/// The app's page, and the TypeScript client's modules beside it.
fn app() -> Router {
    let client = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("console/ui/client");
    Router::new().route("/", get(|| async { Html("<!doctype html><title>an app</title><p>an app's page</p>") })).route(
        "/client/{file}",
        get(move |Path(file): Path<String>| {
            let client = client.clone();
            async move {
                let named = file
                    .strip_suffix(".js")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_lowercase()));
                match std::fs::read_to_string(client.join(&file)) {
                    Ok(text) if named => ([(header::CONTENT_TYPE, "text/javascript")], text).into_response(),
                    _ => StatusCode::NOT_FOUND.into_response(),
                }
            }
        }),
    )
}

/// Serves [`app`] on a fresh loopback port: its origin.
async fn serve_app() -> String {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("binds");
    let origin = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app()).await });
    origin
}

/// One HTTP GET of `path` on `addr`: the body.
async fn get_text(addr: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_calls_over_webrtc_and_a_foreign_one_cannot() {
    let bin = tools_bin();
    // The microphone: silence while triage greets, the request, then silence for the reply.
    let (dir, script_path, wav_path) = call_files("webrtc-cors", 3000, 1200, 8000, 1500, 5000);
    let page = serve_app().await;
    let foreign = serve_app().await;
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let mut options = LocalOptions { sim_script: Some(script_path), ..LocalOptions::default() };
    options.server.allowed_origins = vec![page.clone()];
    let local = local::start(&examples, options).await.expect("local mode starts");
    let addr = local.server.local_addr().expect("addr");
    let gateway = format!("http://{addr}/");
    let edge = local.webrtc.clone();
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webrtc/cors.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let mut command = Command::new("node");
    command.arg(driver).arg(playwright).arg(format!("{page}/")).arg(format!("{foreign}/")).arg(&gateway);
    command.arg(&wav_path).arg(which("chromium"));
    let (result, _) = tokio::task::spawn_blocking(move || drive(command, None)).await.expect("driven");
    let _ = std::fs::remove_dir_all(&dir);

    // The allowed page's call, end to end.
    let call = &result["call"];
    eprintln!("call: {}", serde_json::to_string(&call["stats"]).unwrap_or_default());
    assert_eq!(call["pageOrigin"], page.as_str(), "the page ran on its own origin");
    let location = call["location"].as_str().unwrap_or_default();
    assert!(
        location.starts_with(&format!("{gateway}v1/webrtc/")),
        "the Location was readable across origins, resolved against the gateway: {call}"
    );
    session_heard_the_request(call, "the microphone's request reached the agent");
    let stats = &call["stats"];
    assert!(stats["packetsReceived"].as_u64().unwrap_or_default() >= 20, "the reply's Opus packets: {stats}");
    assert!(stats["audioEnergy"].as_f64().unwrap_or_default() > 0.0, "the reply heard: {stats}");
    assert!(stats["packetsSent"].as_u64().unwrap_or_default() > 50, "the microphone was sent: {stats}");
    assert_eq!(call["patched"], 204, "a trickle PATCH under the ufrag alone, across origins: {call}");
    assert_eq!(call["closed"], true, "{call}");
    assert_eq!(call["deletedAgain"], 404, "the DELETE before it ended the call; this one is readable: {call}");
    let ended = std::time::Instant::now() + Duration::from_secs(10);
    while edge.live() > 0 && std::time::Instant::now() < ended {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(edge.metrics.calls.with_label_values(&["ended"]).get(), 1.0, "{}", edge.metrics.render());

    // The foreign page: refused before any offer was made.
    let refused = &result["foreign"];
    assert_eq!(refused["pageOrigin"], foreign.as_str());
    assert_eq!(refused["error"], "WebRtcUnavailable", "{refused}");
    let why = refused["message"].as_str().unwrap_or_default();
    assert!(why.starts_with("POST /v1/webrtc failed"), "the preflight failed, so the POST was never sent: {why}");
    assert!(refused["simple"].as_str().unwrap_or_default().contains("TypeError"), "unreadable: {refused}");
    let metrics = get_text(addr, "/metrics").await;
    assert!(
        metrics.contains("switchboard_gateway_sessions_refused_total{reason=\"origin\"} 1"),
        "the request that needed no preflight reached the gateway and was refused for its Origin:\n{metrics}"
    );
    let calls: f64 = ["ended", "client_closed", "ice_failed", "failed", "too_large", "no_session_start"]
        .iter()
        .map(|outcome| edge.metrics.calls.with_label_values(&[outcome]).get())
        .sum();
    assert_eq!(calls, 1.0, "one call in all: the allowed page's\n{}", edge.metrics.render());
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
}
