//! The gateway's WebRTC edge with a real WebRTC stack: headless Chromium (Debian's, driven by
//! playwright-core; both installed by tests/tools/install.sh) calls local mode (the Bedrock
//! simulator, the conversation record in a fresh SQLite file) with a WAV file as its
//! microphone. One call: `POST /v1/webrtc` with the browser's offer is answered 201 with SDP
//! and a Location; ICE and DTLS connect on the edge's one UDP port; the data channel carries
//! `session_start` and brings the session protocol's messages; the spoken request reaches
//! the agent (its transcript comes back) and the agent's spoken reply plays on the remote
//! track (energy above silence, from a Web Audio analyser and WebRTC's own stats);
//! `DELETE` ends the call and its session, which the record holds as ended (and the
//! gateway's metrics count as a call `ended`). Refusals, with
//! offers Chromium made: a wrong or missing key at a gateway that wants one (401, no
//! answer), an Origin it does not allow (403), malformed SDP and offers without a data
//! channel or without audio (400 naming what is wrong), a body that is not SDP (415). And a
//! client that vanishes: a call to a second gateway (which wants a key, in front of the same
//! runtime) through a UDP relay the test cuts after the greeting — the call ends after the
//! ICE grace, its session parks as a WebSocket's dropped without a goodbye, and a new call's
//! `session_start` with the newest resume token continues the same session, the details
//! spoken on it heard. The browser's part is call.cjs.
//!
//! ICE-TCP (RFC 6544, RFC 4571 framing) as the fallback where UDP is blocked: a call to a
//! gateway whose edge also listens on TCP, its UDP reached only through the test's relay,
//! cut from the start (every datagram Chromium sends there dropped). Chromium tries the UDP
//! candidate, gets nothing back, and connects over TCP to the passive candidate: the session
//! opens on the data channel, the spoken request is heard, the reply's audio comes back,
//! and both ends say the media went over TCP (Chromium's selected candidate pair, and the
//! edge's ICE metric — none over UDP); the edge's TCP byte counter saw the pair's bytes, and
//! DELETE's close reaches Chromium over TCP. The same against local mode (ICE-TCP on by
//! default), Chromium told of the TCP candidate alone. The browser's part is tcp.cjs.
//!
//! A burst of loss (loss.rs): a str0m client's caller is still heard after 50 of its RTP
//! packets in a row were lost.
//!
//! CORS (cors.rs, cors.cjs): a page of another origin, allowed by local mode, calls with the
//! TypeScript client and hears the reply; a page of an origin not allowed cannot.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use switchboard_core::grant::GatewaySigner;
use switchboard_crds::routing::{Route, RoutingTable};
use switchboard_crds::{Catalog, RuntimeSpec};
use switchboard_gateway::auth::Auth;
use switchboard_gateway::server::Server;
use switchboard_gateway::{Gateway, GatewayConfig};
use switchboard_local::{self as local, LocalOptions};
use switchboard_sim::sonic::phrase_frequency;
use switchboard_webrtc_edge::{Edge, WebrtcConfig};

mod barge_in;
#[path = "../support/browser.rs"]
mod browser;
mod cors;
mod loss;
mod tcp;

use browser::{IDV_DETAILS, call_files, recorder, tools_bin};

fn digest(key: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A UDP relay between WebRTC clients and an edge, as a NAT: each client address gets its
/// own inside socket (its address at the edge); the test can cut it both ways (a client's
/// network gone).
struct Relay {
    outside: SocketAddr,
    cut: Arc<AtomicBool>,
    /// Datagrams that came from clients, cut or not.
    from_clients: Arc<AtomicUsize>,
}

impl Relay {
    async fn start(edge: SocketAddr, outside: tokio::net::UdpSocket) -> Self {
        let outside = Arc::new(outside);
        let cut = Arc::new(AtomicBool::new(false));
        let from_clients = Arc::new(AtomicUsize::new(0));
        let address = outside.local_addr().expect("addr");
        let relay_cut = cut.clone();
        let counted = from_clients.clone();
        tokio::spawn(async move {
            let mut inside: HashMap<SocketAddr, Arc<tokio::net::UdpSocket>> = HashMap::new();
            let mut buffer = vec![0; 2048];
            while let Ok((n, client)) = outside.recv_from(&mut buffer).await {
                counted.fetch_add(1, Ordering::SeqCst);
                if relay_cut.load(Ordering::SeqCst) {
                    continue;
                }
                let socket = match inside.get(&client) {
                    Some(socket) => socket.clone(),
                    None => {
                        let socket = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("binds"));
                        inside.insert(client, socket.clone());
                        let (back, out, cut) = (socket.clone(), outside.clone(), relay_cut.clone());
                        tokio::spawn(async move {
                            let mut buffer = vec![0; 2048];
                            while let Ok((n, _)) = back.recv_from(&mut buffer).await {
                                if !cut.load(Ordering::SeqCst) {
                                    let _ = out.send_to(&buffer[..n], client).await;
                                }
                            }
                        });
                        socket
                    }
                };
                let _ = socket.send_to(&buffer[..n], edge).await;
            }
        });
        Self { outside: address, cut, from_clients }
    }
}

/// A gateway that wants an API key (pages of its own origin and one other allowed), in front
/// of local mode's runtime (which trusts its key), its WebRTC edge reached through a
/// [`Relay`] (its advertised address), a client gone 2 s before its call ends; `tcp`: with
/// ICE-TCP, on any port.
async fn keyed_gateway(
    key: &str,
    signer: GatewaySigner,
    runtime: SocketAddr,
    specs: &[RuntimeSpec],
    tcp: bool,
) -> (String, Arc<Gateway>, Arc<Edge>, Relay) {
    let keys = format!("caller {}\n", digest(key));
    let auth = Auth::new(Some(&keys), vec!["https://bank.example".into()]).expect("keys").with_own_page();
    let routes: Vec<Route> = specs.iter().map(|spec| Route::ready_at(spec, "127.0.0.1", 0)).collect();
    let endpoints = routes.iter().map(|r| ((r.namespace.clone(), r.name.clone()), vec![runtime])).collect();
    let directory = switchboard_gateway::Directory::new(Arc::new(RoutingTable::new(routes)), Arc::new(endpoints), None);
    let (routes, receiver) = tokio::sync::watch::channel(directory);
    std::mem::forget(routes);
    let outside = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("binds the relay");
    let webrtc = WebrtcConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        advertise: Some(outside.local_addr().expect("addr")),
        disconnect_grace: Duration::from_secs(2),
        tcp: tcp.then(|| SocketAddr::from(([127, 0, 0, 1], 0))),
        ..WebrtcConfig::default()
    };
    let gateway =
        Gateway::new(GatewayConfig::default(), receiver, signer, auth, Default::default()).expect("a gateway");
    let edge = Edge::bind(&webrtc, gateway.config.max_message_bytes).await.expect("the edge binds");
    let server = Server::bind(SocketAddr::from(([127, 0, 0, 1], 0)), gateway.clone()).await.expect("binds");
    let server = server.with_channel(edge.clone());
    let url = format!("http://{}/", server.local_addr().expect("addr"));
    let relay = Relay::start(edge.bound(), outside).await;
    assert_eq!(edge.advertised(), relay.outside, "the edge advertises the relay");
    tokio::spawn(server.run(std::future::pending()));
    (url, gateway, edge, relay)
}

/// Runs the driver: its `event cut` line cuts the relay of `cut`; once the gateway has parked
/// the session the relay is restored and the driver told (`parked`). Its last line is the
/// result.
fn drive(mut command: Command, cut: Option<(&Relay, &Gateway)>) -> (Value, String) {
    use std::io::{BufRead, Write};
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("runs node");
    let mut stdin = child.stdin.take().expect("stdin");
    let stderr = child.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut last = String::new();
    for line in std::io::BufReader::new(child.stdout.take().expect("stdout")).lines() {
        let line = line.expect("a line");
        if line == "event cut" {
            let (relay, gateway) = cut.expect("a driver that cuts its network has a relay");
            relay.cut.store(true, Ordering::SeqCst);
            // The session parks at whichever Agent it was with (triage, or idv after a handoff).
            let parked = || {
                let parked = &gateway.metrics.parked;
                parked.with_label_values(&["default/triage"]).get() + parked.with_label_values(&["default/idv"]).get()
            };
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while parked() < 1.0 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            relay.cut.store(false, Ordering::SeqCst);
            let word = if parked() >= 1.0 { "parked" } else { "not-parked" };
            if parked() < 1.0 {
                eprintln!("not parked; the gateway's metrics:\n{}", gateway.metrics.render());
            }
            writeln!(stdin, "{word}").expect("tells the driver");
        } else {
            last = line;
        }
    }
    let status = child.wait().expect("node ends");
    let errors = errors.join().unwrap_or_default();
    assert!(status.success(), "the browser run failed: {errors}");
    (
        serde_json::from_str(&last)
            .unwrap_or_else(|e| panic!("the driver's last line is JSON ({e}): {last}\n{errors}")),
        errors,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_calls_an_agent_over_webrtc_resumes_after_vanishing_and_bad_offers_are_refused() {
    let bin = tools_bin();
    // The microphone: silence while triage greets, the request, silence while triage hands
    // over, idv asks and the call restarts ICE, the details, then silence for the reply.
    let (dir, script_path, wav_path) = call_files("webrtc", 3000, 1200, 8000, 1500, 20_000);

    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    // Local mode's runtime trusts this key: the second gateway's too.
    let signer = GatewaySigner::from_seed(&[7; 32]);
    let options =
        LocalOptions { sim_script: Some(script_path), gateway_key: Some(signer.clone()), ..LocalOptions::default() };
    let local = local::start_recording(&examples, options, Some(recorder(&dir, &[]))).await.expect("local mode starts");
    let url = format!("http://{}/", local.server.local_addr().expect("addr"));
    let runtime = local.server.runtime_addr().expect("the runtime");
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });
    let key = "the-right-key";
    let catalog = Catalog::load_paths(&[&examples]).expect("the banking example loads");
    let specs: Vec<RuntimeSpec> = catalog.agents().map(|a| catalog.resolve_agent(a).expect("resolves")).collect();
    let (keyed, gateway, edge, relay) = keyed_gateway(key, signer, runtime, &specs, false).await;

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webrtc/call.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let chromium = which("chromium");
    let mut command = Command::new("node");
    command.arg(driver).arg(playwright).arg(&url).arg(&wav_path).arg(chromium).arg(&keyed).arg(key);
    command.arg(phrase_frequency(IDV_DETAILS).to_string());
    let watched = gateway.clone();
    let (result, _) =
        tokio::task::spawn_blocking(move || drive(command, Some((&relay, &watched)))).await.expect("driven");
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{}", serde_json::to_string_pretty(&result["call"]["inbound"]).unwrap_or_default());

    refusals(&result);
    call(&result["call"]);
    record(&result);
    resumed(&result["resume"], &gateway, &edge);
    let metrics: Vec<&str> = result["metrics"].as_array().expect("metrics").iter().filter_map(Value::as_str).collect();
    assert!(metrics.contains(&"switchboard_gateway_webrtc_calls_total{outcome=\"ended\"} 1"), "{metrics:?}");
    assert!(metrics.contains(&"switchboard_gateway_webrtc_calls_live 0"), "{metrics:?}");
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
}

/// The session a call's page saw on its data channel: opened by `bidi_connection_start`, no
/// `bidi_error`, and the microphone's request ("balance") heard as the caller's words
/// (`what` says how it got there, for the failure).
fn session_heard_the_request(call: &Value, what: &str) {
    let messages = call["messages"].as_array().expect("messages");
    let types: Vec<&str> = messages.iter().filter_map(|m| m["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"bidi_connection_start"), "{types:?}");
    assert!(!types.contains(&"bidi_error"), "no errors: {messages:?}");
    let heard = messages.iter().any(|m| {
        m["type"] == "bidi_transcript_stream"
            && m["role"].as_str().unwrap_or_default().eq_ignore_ascii_case("user")
            && m["text"].as_str().unwrap_or_default().contains("balance")
    });
    assert!(heard, "{what}: {messages:?}");
}

/// `{"code", "message"}` of a refusal, checked for its status and code.
fn refusal(result: &Value, name: &str, status: u64, code: &str) -> String {
    let answer = &result[name];
    assert_eq!(answer["status"], status, "{name}: {answer}");
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap_or_default()).expect("a JSON body");
    assert_eq!(body["code"], code, "{name}: {body}");
    assert!(!answer["body"].as_str().unwrap_or_default().contains("a=ice-ufrag"), "{name}: no answer");
    body["message"].as_str().unwrap_or_default().to_owned()
}

fn refusals(result: &Value) {
    assert_eq!(result["offerHasOpus"], true, "Chromium offers Opus");
    let wrong = refusal(result, "wrongKey", 401, "unknown_key");
    assert!(wrong.contains("API key is not valid"), "{wrong}");
    refusal(result, "noKey", 401, "missing_key");
    let origin = refusal(result, "badOrigin", 403, "origin");
    assert!(origin.contains("elsewhere.example"), "{origin}");
    let malformed = refusal(result, "malformed", 400, "malformed_sdp");
    assert!(malformed.contains("line 3") && malformed.contains("port"), "names the line and the field: {malformed}");
    refusal(result, "notSdp", 400, "malformed_sdp");
    let no_channel = refusal(result, "noChannel", 400, "no_data_channel");
    assert!(no_channel.contains("data channel"), "{no_channel}");
    let no_audio = refusal(result, "noAudio", 400, "no_audio");
    assert!(no_audio.contains("no audio"), "{no_audio}");
    assert_eq!(result["wrongType"]["status"], 415, "{}", result["wrongType"]);
}

fn call(call: &Value) {
    assert_eq!(call["status"], 201, "{call}");
    assert_eq!(call["type"], "application/sdp");
    let location = call["location"].as_str().expect("a Location");
    assert!(location.starts_with("/v1/webrtc/") && location.len() > 30, "{location}");
    let candidates = call["answerCandidates"].as_array().expect("candidates");
    assert!(
        candidates
            .iter()
            .any(|c| c.as_str().unwrap_or_default().contains("127.0.0.1")
                && c.as_str().unwrap_or_default().contains("udp")),
        "a host candidate on the edge's UDP port: {candidates:?}"
    );
    assert_eq!(call["opened"], true, "the data channel opened");
    let messages = call["messages"].as_array().expect("messages");
    let types: Vec<&str> = messages.iter().filter_map(|m| m["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"bidi_connection_start"), "{types:?}");
    for kind in ["bidi_transcript_stream", "bidi_response_start", "bidi_response_complete"] {
        assert!(types.contains(&kind), "{kind} over the data channel: {types:?}");
    }
    assert!(!types.contains(&"bidi_audio_stream"), "audio comes on the track, not the data channel: {types:?}");
    assert!(!types.contains(&"bidi_error"), "no errors: {messages:?}");
    let heard = messages.iter().any(|m| {
        m["type"] == "bidi_transcript_stream"
            && m["role"].as_str().unwrap_or_default().eq_ignore_ascii_case("user")
            && m["text"].as_str().unwrap_or_default().contains("balance")
    });
    assert!(heard, "the microphone's request reached the agent: {messages:?}");
    // The reply's audio, heard: a Web Audio analyser's RMS, and the receiver's own energy.
    let peak = call["peak"].as_f64().unwrap_or_default();
    assert!(peak > 0.01, "reply audio above silence on the track: RMS {peak}");
    let inbound = &call["inbound"];
    // The simulator speaks briefly (4 ms a character) and silence is not sent (DTX): a
    // greeting and an answer are tens of packets.
    assert!(inbound["packets"].as_u64().unwrap_or_default() >= 20, "Opus packets received: {inbound}");
    assert!(inbound["energy"].as_f64().unwrap_or_default() > 0.0, "energy received: {inbound}");
    assert!(call["outbound"]["packets"].as_u64().unwrap_or_default() > 50, "the microphone was sent: {call}");
    let states = call["states"].as_array().expect("states");
    assert!(states.iter().any(|s| s == "connected"), "{states:?}");
    let restart = &call["restart"];
    assert_eq!(restart["status"], 200, "an ICE restart is answered with a fragment: {restart}");
    assert_eq!(restart["type"], "application/trickle-ice-sdpfrag", "{restart}");
    assert_eq!(restart["changed"], true, "the edge's credentials changed: {restart}");
    assert_eq!(restart["connected"], true, "ICE connected again on the new credentials: {restart}");
    assert_eq!(restart["newStarts"], 0, "the same session, no new session_start: {restart}");
    assert_eq!(call["deleted"], 200, "DELETE ends the call");
    assert_eq!(call["channelClosed"], true, "the data channel closed with it");
    assert_eq!(call["deletedAgain"], 404, "and the resource is gone");
}

fn record(result: &Value) {
    let id = result["sessionId"].as_str().expect("a session id");
    let record = &result["record"];
    assert_eq!(record["id"], id, "the session is in the record: {record}");
    assert_eq!(record["outcome"], "ended", "ended by DELETE, not parked: {record}");
    assert_eq!(record["first_agent"], "default/triage", "{record}");
    assert_eq!(
        record["agents"],
        serde_json::json!(["default/triage", "default/idv"]),
        "the handoff is the session's: {record}"
    );
    let events = record["events"].as_array().expect("events");
    assert!(
        events.iter().any(|e| e["kind"] == "user" && e.to_string().contains("balance")),
        "the caller's words are in the record: {events:?}"
    );
}

/// A call whose client vanished (its network cut): the call ends after the ICE grace and
/// its session parks, as a WebSocket's dropped without a goodbye; a new call resumes it with
/// its token and the conversation goes on (the details spoken on the new call heard).
fn resumed(resume: &Value, gateway: &Gateway, edge: &Edge) {
    assert_eq!(resume["first"]["status"], 201, "{resume}");
    assert_eq!(resume["parked"], "parked", "the vanished client's session parked: {resume}");
    assert_eq!(resume["second"]["status"], 201, "{resume}");
    let first = resume["first"]["session_id"].as_str().expect("a session id");
    assert_eq!(resume["second"]["session_id"], first, "the same session resumed: {resume}");
    assert_eq!(resume["second"]["heard"], true, "the resumed call's audio reaches the agent: {resume}");
    let metrics = &gateway.metrics;
    let resumed = ["default/triage", "default/idv"].map(|a| metrics.resumed.with_label_values(&[a]).get());
    assert_eq!(resumed.iter().sum::<f64>(), 1.0, "one resume: {resumed:?}");
    let calls = &edge.metrics.calls;
    assert_eq!(calls.with_label_values(&["ice_failed"]).get(), 1.0, "the vanished call");
    assert_eq!(calls.with_label_values(&["ended"]).get(), 1.0, "the resumed call, deleted");
}

fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(program)).find(|p| p.is_file()))
        .unwrap_or_else(|| panic!("{program} is not on PATH; tests/tools/install.sh installs it"))
}
