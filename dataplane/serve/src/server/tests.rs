//! The server's limits on real sockets: raw TCP clients that send half a request, sit idle,
//! hold connections past the cap or speak HTTP/2. Timeouts are short and the waits for
//! them long: a test fails only when a connection is never closed, never on timing.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::routing::get;
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::frames::{self, Upgrade};

/// The most a test waits for the server to close a connection: generous, as the machine
/// may be busy; the timeouts under test are a fraction of it.
const PATIENCE: Duration = Duration::from_secs(15);

struct Running {
    addr: SocketAddr,
    stop: CancellationToken,
    refused: Arc<AtomicU64>,
    done: tokio::task::JoinHandle<()>,
}

async fn start(limits: Limits) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("addr");
    let app = Router::new().route("/", get(|| async { "ok" })).route(
        "/ws",
        get(|upgrade: Upgrade| async move {
            let limits = frames::Limits { max_message: 1 << 16, max_frame: 1 << 16 };
            upgrade.on_upgrade(limits, |mut socket| async move { while let Some(Ok(_)) = socket.next().await {} })
        }),
    );
    let stop = CancellationToken::new();
    let refused = Arc::new(AtomicU64::new(0));
    let counted = refused.clone();
    let on_refused = OnRefused::new(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    let done = tokio::spawn(serve(listener, app, limits, on_refused, stop.clone()));
    Running { addr, stop, refused, done }
}

fn limits(header_read_timeout: Duration, max_connections: usize) -> Limits {
    Limits { header_read_timeout, max_connections }
}

/// Reads until the server closes the connection (EOF or reset); what it sent, or `None`
/// when it is still open after [`PATIENCE`].
async fn until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.ok().map(|()| got)
}

/// One keep-alive `GET /`: the answer's head and body as text.
async fn get_root(stream: &mut TcpStream) -> String {
    stream.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n").await.expect("writes");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"ok") {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await.expect("answered").expect("reads");
        assert!(n > 0, "closed before answering: {:?}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_half_sent_request_head_is_closed_after_the_header_read_timeout() {
    let running = start(limits(Duration::from_millis(300), 16)).await;
    let mut slow = TcpStream::connect(running.addr).await.expect("connects");
    slow.write_all(b"GET / HTTP/1.1\r\nHost: test\r\nX-Slow: ").await.expect("writes");
    assert!(until_closed(&mut slow).await.is_some(), "a half-sent request head is still open");
    // A connection that sends nothing at all is closed too.
    let mut silent = TcpStream::connect(running.addr).await.expect("connects");
    assert!(until_closed(&mut silent).await.is_some(), "a silent connection is still open");
    // Others are served as before.
    let mut client = TcpStream::connect(running.addr).await.expect("connects");
    assert!(get_root(&mut client).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_read_timeout() {
    let running = start(limits(Duration::from_millis(300), 16)).await;
    let mut client = TcpStream::connect(running.addr).await.expect("connects");
    // Two requests on one connection: keep-alive works...
    assert!(get_root(&mut client).await.starts_with("HTTP/1.1 200"));
    assert!(get_root(&mut client).await.starts_with("HTTP/1.1 200"));
    // ...and once idle, the connection does not stay open waiting for a third.
    assert_eq!(until_closed(&mut client).await.as_deref(), Some(&b""[..]), "an idle connection is still open");
}

#[tokio::test]
async fn past_the_cap_a_connection_is_answered_503_and_closed_until_one_closes() {
    let running = start(limits(Duration::from_secs(60), 2)).await;
    let mut first = TcpStream::connect(running.addr).await.expect("connects");
    let mut second = TcpStream::connect(running.addr).await.expect("connects");
    // Both are admitted (answered) before the third comes: the cap is what they hold.
    assert!(get_root(&mut first).await.starts_with("HTTP/1.1 200"));
    assert!(get_root(&mut second).await.starts_with("HTTP/1.1 200"));
    let mut third = TcpStream::connect(running.addr).await.expect("the port accepts");
    let answer = until_closed(&mut third).await.expect("the third is closed at once");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\ntoo many connections; try again shortly\n"), "{answer}");
    assert_eq!(running.refused.load(Ordering::SeqCst), 1);
    // The held ones are still served.
    assert!(get_root(&mut first).await.starts_with("HTTP/1.1 200"));
    // Once one closes, its place is given back.
    drop(second);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut next = TcpStream::connect(running.addr).await.expect("connects");
        next.write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await.expect("writes");
        let answer = until_closed(&mut next).await.expect("answered and closed");
        if answer.starts_with(b"HTTP/1.1 200") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the closed connection's place was never given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn the_refusal_is_a_whole_http_answer() {
    let text = std::str::from_utf8(REFUSAL).expect("text");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
}

#[tokio::test]
async fn an_upgraded_websocket_keeps_its_place_under_the_cap_until_it_closes() {
    let running = start(limits(Duration::from_millis(300), 1)).await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws", running.addr)).await.expect("upgrades");
    // Past the header read timeout, the WebSocket is open and still holds the one place.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut refused = TcpStream::connect(running.addr).await.expect("the port accepts");
    let answer = until_closed(&mut refused).await.expect("refused at once");
    assert!(answer.starts_with(b"HTTP/1.1 503"), "{}", String::from_utf8_lossy(&answer));
    ws.close(None).await.expect("closes");
    while ws.next().await.is_some() {}
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut next = TcpStream::connect(running.addr).await.expect("connects");
        next.write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await.expect("writes");
        if until_closed(&mut next).await.expect("answered").starts_with(b"HTTP/1.1 200") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the WebSocket's place was never given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn cleartext_http2_is_not_served() {
    let running = start(limits(Duration::from_secs(5), 16)).await;
    let mut client = TcpStream::connect(running.addr).await.expect("connects");
    // The prior-knowledge preface, then an empty SETTINGS frame.
    client.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.expect("writes");
    client.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.expect("writes");
    let answer = until_closed(&mut client).await.expect("the connection is closed");
    // An HTTP/2 server answers with its own SETTINGS frame (type 4 in the fourth byte);
    // this one answers nothing, or in HTTP/1.1.
    assert!(answer.is_empty() || answer.starts_with(b"HTTP/1.1 "), "answered {answer:?}");
}

#[tokio::test]
async fn stopping_closes_the_listener_and_idle_connections() {
    let running = start(limits(Duration::from_secs(60), 16)).await;
    let mut idle = TcpStream::connect(running.addr).await.expect("connects");
    assert!(get_root(&mut idle).await.starts_with("HTTP/1.1 200"));
    running.stop.cancel();
    tokio::time::timeout(PATIENCE, running.done).await.expect("stops in time").expect("joins");
    assert!(until_closed(&mut idle).await.is_some(), "the idle connection is closed");
    assert!(TcpStream::connect(running.addr).await.is_err(), "the listener is closed");
}
