//! ICE-TCP connections count in the gateway's memory budget (issue 47): a real gateway with
//! a small budget serving the edge with ICE-TCP on, and real TCP connections from the test.
//! Each open connection holds `CONNECTION_BYTES` of the budget from its accept; while they
//! hold enough of it, new calls are refused as new sessions are (`503 memory_budget`); a
//! connection that would pass the budget is closed at once and counted
//! (`switchboard_gateway_webrtc_tcp_refused_total{reason="memory_budget"}`); connections
//! that end give their bytes back, and then calls and connections are taken again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_core::grant::GatewaySigner;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::server::Server;
use switchboard_gateway::{Directory, Gateway, GatewayConfig};
use switchboard_webrtc_edge::tcp::CONNECTION_BYTES;
use switchboard_webrtc_edge::{Edge, WebrtcConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A gateway whose memory budget is `budget` bytes, serving an edge with ICE-TCP.
async fn serve(budget: usize) -> (Arc<Gateway>, Arc<Edge>, SocketAddr) {
    let (routes, receiver) = tokio::sync::watch::channel(Directory::empty(None));
    std::mem::forget(routes);
    let auth = Auth::new(None, Vec::new()).expect("auth");
    let config = GatewayConfig { memory_budget: Some(budget), ..GatewayConfig::default() };
    let signer = GatewaySigner::from_seed(&[5; 32]);
    let gateway = Gateway::new(config, receiver, signer, auth, Default::default()).expect("a gateway");
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    let webrtc = WebrtcConfig { listen: local, tcp: Some(local), ..WebrtcConfig::default() };
    let edge = Edge::bind(&webrtc, gateway.config.max_message_bytes).await.expect("the edge binds");
    let server = Server::bind(local, gateway.clone()).await.expect("binds").with_channel(edge.clone());
    let http = server.local_addr().expect("addr");
    tokio::spawn(server.run(std::future::pending()));
    (gateway, edge, http)
}

/// Waits (at most 10 s) until `test` holds.
async fn until(what: &str, test: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !test() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `POST /v1/webrtc` with a body that is no offer: the status and the body. Admission comes
/// first (503 `memory_budget` past the budget); an admitted one is refused for its SDP (400).
async fn post(http: SocketAddr) -> (u16, String) {
    let mut stream = TcpStream::connect(http).await.expect("connects");
    let body = "not sdp";
    let request = format!(
        "POST /v1/webrtc HTTP/1.1\r\nHost: {http}\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ice_tcp_connections_hold_memory_budget_and_are_refused_past_it() {
    let session = GatewayConfig::default().session_bound();
    // Room for a session beside two connections and a half; more connections fit on their own.
    let budget = session + 2 * CONNECTION_BYTES + CONNECTION_BYTES / 2;
    let fit = budget / CONNECTION_BYTES;
    assert!(fit >= 3, "the test needs a session bound of at least 1.5 connections ({session} B)");
    let (gateway, edge, http) = serve(budget).await;
    let (tcp, _) = edge.tcp().expect("ICE-TCP on");
    let metrics = &edge.metrics;
    let refused = |reason: &str| metrics.tcp_refused.with_label_values(&[reason]).get();
    assert_eq!(post(http).await.0, 400, "admitted with nothing held (then the SDP refused)");

    let mut open = Vec::new();
    for n in 1..=fit {
        open.push(TcpStream::connect(tcp).await.expect("connects"));
        until("the connection taken", || metrics.tcp_connections.get() == n as i64).await;
        assert_eq!(gateway.budget.held(), n * CONNECTION_BYTES, "each open connection holds its bytes");
    }
    let (status, body) = post(http).await;
    assert_eq!(status, 503, "the connections' buffers leave no room for a call's session: {body}");
    assert!(body.contains("memory_budget"), "{body}");

    // One more would pass the budget: closed at once, counted, the others untouched.
    let mut over = TcpStream::connect(tcp).await.expect("the kernel takes it");
    until("the refusal", || refused("memory_budget") == 1).await;
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), over.read(&mut byte)).await.expect("closed at once");
    assert!(matches!(read, Ok(0) | Err(_)), "the refused connection is closed: {read:?}");
    assert_eq!(metrics.tcp_connections.get(), fit as i64);
    assert_eq!(gateway.budget.held(), fit * CONNECTION_BYTES);
    let rendered = edge.metrics.render();
    assert!(
        rendered.contains("switchboard_gateway_webrtc_tcp_refused_total{reason=\"memory_budget\"} 1"),
        "{rendered}"
    );

    // Connections that end (here before any first frame) give their bytes back.
    drop(open);
    until("the connections closed", || metrics.tcp_connections.get() == 0).await;
    assert_eq!(gateway.budget.held(), 0, "every byte given back");
    assert_eq!(refused("no_call"), fit as u64, "none of them named a call");
    assert_eq!(post(http).await.0, 400, "calls admitted again");
    let _again = TcpStream::connect(tcp).await.expect("connects");
    until("a connection taken again", || metrics.tcp_connections.get() == 1).await;
    assert_eq!(refused("memory_budget"), 1, "no further refusal");
}
