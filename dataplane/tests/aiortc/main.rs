//! The WebRTC edge with a second, independent WebRTC stack: Python's aiortc (installed by
//! tests/tools/install.sh) calls a gateway in front of local mode's runtime and simulator.
//! The gateway hands callers a TURN server with time-limited credentials from a shared
//! secret. One call by the JSON form of `POST /v1/webrtc`: 201 with the SDP answer, a
//! Location and the TURN server (a `Link: rel="ice-server"` header and `ice_servers`, whose
//! credential the client checks with Python's own HMAC-SHA1, as coturn would); the data
//! channel's `session_start` first; the spoken request (Opus from a WAV) heard by the agent
//! (its transcript back on the data channel), the reply heard on the remote track; `DELETE`
//! ends it. The call goes through a UDP relay that drops 5 % of the RTP packets each way and
//! holds back another 5 % behind the next packet (reordered): the edge's reorder buffer, Opus
//! FEC and loss concealment, and the agent's reply, still get through; the edge counts the
//! call's ICE as connected through a peer-reflexive address (the relay is a NAT). The
//! client's part is call.py.
//!
//! [`resume`]: a spoken conversation whose client vanishes and resumes it from a new
//! process, through a real TURN server ([`coturn`]) with relay candidates only.
//!
//! What aiortc's side reaches (the relay's outside, the edge, coturn) is on this machine's
//! own non-loopback address ([`machine_ip`]), never on loopback: aiortc gathers no loopback
//! candidates, so it would send from its interfaces' addresses to 127.0.0.1, which a real
//! node's kube-proxy on the same machine drops ("block incoming localnet connections").

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchboard_core::grant::GatewaySigner;
use switchboard_crds::routing::{Route, RoutingTable};
use switchboard_crds::{Catalog, RuntimeSpec};
use switchboard_gateway::auth::Auth;
use switchboard_gateway::server::Server;
use switchboard_gateway::{Gateway, GatewayConfig};
use switchboard_local::{self as local, LocalOptions};
use switchboard_webrtc_edge::turn::{Credential, Turn};
use switchboard_webrtc_edge::{Edge, WebrtcConfig};

// Shared by the browser suites; this one keeps no conversation record (its `recorder`).
#[allow(dead_code)]
#[path = "../support/browser.rs"]
mod browser;

use browser::{call_files, tools_bin};

mod coturn;
#[path = "../support/ports.rs"]
#[allow(dead_code)]
mod ports;
mod resume;

const TURN_SECRET: &str = "a-secret-shared-with-coturn";
const TURN_URL: &str = "turn:turn.bank.example:3478?transport=udp";

/// This machine's address on the interface of its default route (no packet is sent: a UDP
/// socket is only connected), where aiortc's host candidates reach it whatever kube-proxy
/// does to loopback; loopback only on a machine with no other interface.
fn machine_ip() -> IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("a socket");
    match socket.connect("192.0.2.1:9").and_then(|()| socket.local_addr()) {
        Ok(local) if !local.ip().is_loopback() && !local.ip().is_unspecified() => local.ip(),
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    }
}

/// Whether a datagram is RTP or RTCP (RFC 7983: first byte 128-191); ICE and DTLS pass
/// untouched, so the call sets up as it would on a lossy network that a handshake's
/// retransmissions ride out.
fn is_rtp(packet: &[u8]) -> bool {
    packet.first().is_some_and(|b| (128..192).contains(b))
}

/// What the relay does to the media: per direction, drops and reorders.
#[derive(Debug, Default)]
struct Damage {
    rtp: std::sync::atomic::AtomicU64,
    dropped: std::sync::atomic::AtomicU64,
    reordered: std::sync::atomic::AtomicU64,
}

/// What the relay does to one packet: 5 % of RTP dropped, another 5 % held back and sent
/// after the next packet (reordered). Seeded: the same damage every run.
struct Lossy {
    rng: fastrand::Rng,
    held: Option<Vec<u8>>,
}

impl Lossy {
    /// The packets to send now, in order, for `packet`.
    fn pass(&mut self, packet: Vec<u8>, stats: &Damage) -> Vec<Vec<u8>> {
        use std::sync::atomic::Ordering::Relaxed;
        if is_rtp(&packet) {
            stats.rtp.fetch_add(1, Relaxed);
            let roll = self.rng.u32(0..100);
            if roll < 5 {
                stats.dropped.fetch_add(1, Relaxed);
                return Vec::new();
            }
            if roll < 10 && self.held.is_none() {
                stats.reordered.fetch_add(1, Relaxed);
                self.held = Some(packet);
                return Vec::new();
            }
        }
        let mut out = vec![packet];
        out.extend(self.held.take());
        out
    }
}

/// A UDP relay in front of the edge, as a NAT on a lossy network: each client address gets
/// its own inside socket (its address at the edge); both ways, [`Lossy`].
async fn lossy_relay(outside: tokio::net::UdpSocket, edge: SocketAddr) -> Arc<[Damage; 2]> {
    use std::collections::HashMap;
    let outside = Arc::new(outside);
    let damage: Arc<[Damage; 2]> = Arc::new(Default::default());
    let up = Arc::new(std::sync::Mutex::new(Lossy { rng: fastrand::Rng::with_seed(47), held: None }));
    let down = Arc::new(std::sync::Mutex::new(Lossy { rng: fastrand::Rng::with_seed(48), held: None }));
    let relay_damage = damage.clone();
    tokio::spawn(async move {
        let mut inside: HashMap<SocketAddr, Arc<tokio::net::UdpSocket>> = HashMap::new();
        let mut buffer = vec![0; 2048];
        while let Ok((n, client)) = outside.recv_from(&mut buffer).await {
            let socket = match inside.get(&client) {
                Some(socket) => socket.clone(),
                None => {
                    let socket = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("binds"));
                    inside.insert(client, socket.clone());
                    let (back, out, down, damage) =
                        (socket.clone(), outside.clone(), down.clone(), relay_damage.clone());
                    tokio::spawn(async move {
                        let mut buffer = vec![0; 2048];
                        while let Ok((n, _)) = back.recv_from(&mut buffer).await {
                            let packets = down.lock().expect("lock").pass(buffer[..n].to_vec(), &damage[1]);
                            for packet in packets {
                                let _ = out.send_to(&packet, client).await;
                            }
                        }
                    });
                    socket
                }
            };
            let packets = up.lock().expect("lock").pass(buffer[..n].to_vec(), &relay_damage[0]);
            for packet in packets {
                let _ = socket.send_to(&packet, edge).await;
            }
        }
    });
    damage
}

/// A gateway (no credentials) in front of local mode's runtime, with its WebRTC edge as
/// `webrtc` sets it up; its URL.
async fn serve(
    signer: GatewaySigner,
    runtime: SocketAddr,
    specs: &[RuntimeSpec],
    webrtc: &WebrtcConfig,
) -> (String, Arc<Gateway>, Arc<Edge>) {
    let auth = Auth::new(None, Vec::new()).expect("auth");
    let routes: Vec<Route> = specs.iter().map(|spec| Route::ready_at(spec, "127.0.0.1", 0)).collect();
    let endpoints = routes.iter().map(|r| ((r.namespace.clone(), r.name.clone()), vec![runtime])).collect();
    let directory = switchboard_gateway::Directory::new(Arc::new(RoutingTable::new(routes)), Arc::new(endpoints), None);
    let (routes, receiver) = tokio::sync::watch::channel(directory);
    std::mem::forget(routes);
    let gateway =
        Gateway::new(GatewayConfig::default(), receiver, signer, auth, Default::default()).expect("a gateway");
    let edge = Edge::bind(webrtc, gateway.config.max_message_bytes).await.expect("the edge binds");
    let server = Server::bind(SocketAddr::from(([127, 0, 0, 1], 0)), gateway.clone()).await.expect("binds");
    let server = server.with_channel(edge.clone());
    let url = format!("http://{}/", server.local_addr().expect("addr"));
    tokio::spawn(server.run(std::future::pending()));
    (url, gateway, edge)
}

/// A gateway whose edge clients reach directly at [`machine_ip`], handing them `turn`.
async fn direct_gateway(
    signer: GatewaySigner,
    runtime: SocketAddr,
    specs: &[RuntimeSpec],
    turn: Turn,
) -> (String, Arc<Gateway>, Arc<Edge>) {
    let webrtc = WebrtcConfig { listen: SocketAddr::new(machine_ip(), 0), turn, ..WebrtcConfig::default() };
    serve(signer, runtime, specs, &webrtc).await
}

/// A gateway whose edge is reached through a lossy relay, handing callers a TURN server with
/// the shared secret's credentials.
async fn gateway(
    signer: GatewaySigner,
    runtime: SocketAddr,
    specs: &[RuntimeSpec],
) -> (String, Arc<Edge>, Arc<[Damage; 2]>) {
    // The relay's outside address is what the edge advertises; inside, the relay and the
    // edge talk on loopback.
    let outside = tokio::net::UdpSocket::bind(SocketAddr::new(machine_ip(), 0)).await.expect("binds the relay");
    let webrtc = WebrtcConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        advertise: Some(outside.local_addr().expect("addr")),
        turn: Turn {
            urls: vec![TURN_URL.into()],
            credential: Credential::Shared { secret: TURN_SECRET.as_bytes().to_vec(), ttl: Duration::from_secs(600) },
        },
        ..WebrtcConfig::default()
    };
    let (url, _, edge) = serve(signer, runtime, specs, &webrtc).await;
    let damage = lossy_relay(outside, edge.bound()).await;
    (url, edge, damage)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiortc_calls_an_agent_through_a_lossy_network_and_gets_turn_credentials() {
    use std::sync::atomic::Ordering::Relaxed;
    let python = tools_bin().join("aiortc-python");
    // The microphone: silence while triage greets, the request, then silence for the reply.
    let (dir, script_path, wav_path) = call_files("aiortc", 2000, 1200, 500, 0, 8000);
    // Replies spoken slower than the browser suites' (30 ms a character): seconds of reply
    // audio, so the loss and reordering on the way to the client hit it many times.
    let script = std::fs::read_to_string(&script_path).expect("the script");
    let slower = script.replace("msPerChar: 4,", "msPerChar: 30,");
    assert_ne!(slower, script, "the script's speech pace");
    std::fs::write(&script_path, slower).expect("writes the script");
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let signer = GatewaySigner::from_seed(&[9; 32]);
    let options =
        LocalOptions { sim_script: Some(script_path), gateway_key: Some(signer.clone()), ..LocalOptions::default() };
    let local = local::start(&examples, options).await.expect("local mode starts");
    let runtime = local.server.runtime_addr().expect("the runtime");
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });
    let catalog = Catalog::load_paths(&[&examples]).expect("the banking example loads");
    let specs: Vec<RuntimeSpec> = catalog.agents().map(|a| catalog.resolve_agent(a).expect("resolves")).collect();
    let (url, edge, damage) = gateway(signer, runtime, &specs).await;

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/aiortc/call.py");
    let mut command = Command::new(python);
    command.arg(driver).arg(&url).arg(&wav_path).arg(TURN_SECRET);
    let output = tokio::task::spawn_blocking(move || command.output()).await.expect("joins").expect("runs python");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("a JSON result ({e}):\n{stdout}\n{stderr}"));
    let summary = || format!("{result}\nstderr:\n{stderr}");
    eprintln!("the client reached, in seconds: {}", result["reached"]);
    assert!(result.get("error").is_none(), "the call: {}", summary());

    assert_eq!(result["status"], 201, "{}", summary());
    assert_eq!(result["answer_type"], "answer");
    let location = result["location"].as_str().expect("a Location");
    assert!(location.starts_with("/v1/webrtc/") && result["json_location"] == location, "{}", summary());
    let links = result["links"].as_array().expect("links");
    assert_eq!(links.len(), 1, "one TURN server: {links:?}");
    let link = links[0].as_str().unwrap_or_default();
    assert!(link.starts_with(&format!("<{TURN_URL}>; rel=\"ice-server\"; username=\"")), "{link}");
    assert_eq!(result["ice_servers"][0]["urls"], serde_json::json!([TURN_URL]));
    let credential = &result["credentials"][0];
    assert_eq!(credential["valid"], true, "the TURN credential is HMAC-SHA1 of the secret: {}", summary());
    let ttl = credential["ttl"].as_i64().unwrap_or_default();
    assert!((590..=600).contains(&ttl), "expires after the configured 600 s: {ttl}");
    assert_eq!(credential["user"], location.trim_start_matches("/v1/webrtc/"), "the call's own credential");
    assert!(link.contains(result["ice_servers"][0]["credential"].as_str().unwrap_or("none")), "{link}");

    assert_eq!(result["opened"], true, "the data channel opened");
    let messages = result["messages"].as_array().expect("messages");
    let types: Vec<&str> = messages.iter().filter_map(|m| m["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"bidi_connection_start"), "{types:?}");
    assert!(types.contains(&"bidi_response_complete"), "{types:?}");
    assert!(!types.contains(&"bidi_error") && !types.contains(&"bidi_audio_stream"), "{types:?}");
    let audio = &result["audio"];
    assert!(
        audio["loud"].as_u64().unwrap_or_default() >= 50,
        "a second of reply audio heard through the loss: {audio}"
    );
    assert_eq!(result["deleted"], 200);
    assert_eq!(result["channel_closed"], true);

    // The network really was lossy both ways.
    for (direction, stats) in ["to the edge", "to the client"].iter().zip(damage.iter()) {
        let (rtp, dropped, reordered) =
            (stats.rtp.load(Relaxed), stats.dropped.load(Relaxed), stats.reordered.load(Relaxed));
        eprintln!("{direction}: {rtp} RTP packets, {dropped} dropped, {reordered} reordered");
        assert!(
            rtp >= 50 && dropped >= 1 && reordered >= 1,
            "{direction}: {rtp} packets, {dropped} dropped, {reordered} reordered"
        );
    }
    // The call ended as DELETE ends it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(edge.metrics.calls.with_label_values(&["ended"]).get(), 1.0, "{}", edge.metrics.render());
    assert_eq!(edge.metrics.live.get(), 0);
    // The relay is a NAT: the edge sends to an address the client's offer did not name.
    let ice = edge.metrics.ice.with_label_values(&["connected", "prflx", "udp"]).get();
    assert_eq!(ice, 1.0, "connected through a peer-reflexive address: {}", edge.metrics.render());
}
