//! Connections that never send a grant: on the real runtime server (local mode's, which
//! serves only sessions its gateway signed), sockets that only ping take no session slot
//! and are closed at the start deadline, while a session with a grant is served.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ServerMessage, close_code};
use switchboard_runtime::ServerConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::common::{self, PATIENCE, replies};

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Pings `socket` every 100 ms (what once kept a socket's slot for good) until the server
/// closes it; its close code and reason, or `None` when it is still open after [`PATIENCE`].
async fn ping_until_closed(mut socket: Socket) -> Option<(u16, String)> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if socket.send(Message::Ping(Vec::new().into())).await.is_err() {
                    return Some((1006, String::new()));
                }
            }
            frame = tokio::time::timeout_at(deadline, socket.next()) => match frame {
                Err(_) => return None,
                Ok(Some(Ok(Message::Close(close)))) => {
                    return Some(close.map_or((1005, String::new()), |c| (u16::from(c.code), c.reason.to_string())));
                }
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(_)) | None) => return Some((1006, String::new())),
            },
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_without_a_grant_take_no_session_slot_and_are_closed_at_the_start_deadline() {
    // Two session slots; more silent sockets than that, each pinging.
    let config = ServerConfig {
        max_sessions: 2,
        max_opening_connections: 8,
        start_timeout: Duration::from_secs(2),
        ..ServerConfig::default()
    };
    let running = common::banking(config).await;
    let opened = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..3 {
        let (socket, _) = tokio_tungstenite::connect_async(running.runtime_url("")).await.expect("upgrades");
        silent.push(tokio::spawn(ping_until_closed(socket)));
    }
    // They hold no session slot...
    let (status, health) = common::get(running.runtime_addr, "/healthz").await;
    assert_eq!(status, 200);
    assert!(health.contains(r#""active_sessions":0"#), "{health}");
    // ...so sessions with a grant are served beside them, up to the limit.
    let mut granted = running.runtime_client("").await;
    granted.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    granted.say("hello").await;
    assert!(replies(&granted.turn().await).iter().any(|r| r.starts_with("Hello!")));
    let mut second = running.runtime_client("").await;
    second.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    // Each silent socket is closed at the deadline though it kept pinging.
    for socket in silent {
        let (code, reason) = socket.await.expect("joins").expect("the silent socket is closed");
        assert_eq!(code, close_code::IDLE_TIMEOUT, "{reason}");
        assert!(reason.contains("no session_start within 2 s"), "{reason}");
    }
    assert!(opened.elapsed() >= Duration::from_millis(1500), "closed before the deadline: {:?}", opened.elapsed());
    let metrics = running.state.shared.metrics.render();
    assert_eq!(common::metric_sum(&metrics, "switchboard_errors_total", &[("type", "start_timeout")]), 3.0);
    // A session_start without a grant is refused at once and takes no slot either.
    let mut unsigned = common::Client::start(&running.runtime_url(""), None).await;
    assert_eq!(unsigned.closed().await.0, close_code::BAD_START);
    let (_, health) = common::get(running.runtime_addr, "/healthz").await;
    assert!(health.contains(r#""active_sessions":2"#), "{health}");
    // The granted sessions went on meanwhile.
    second.say("hello").await;
    assert!(replies(&second.turn().await).iter().any(|r| r.starts_with("Hello!")));
}
