//! The load generator against gateways that misbehave, over real sockets: one that accepts
//! connections and never answers (the connection times out), one that refuses the upgrade
//! with 401 and one that opens the session and then says nothing (the turn times out), and
//! one that sends garbage and closes: every run ends in time, with each session's code.

use std::time::Duration;

use switchboard_load::plan::Turn;
use switchboard_load::{CallerSettings, Conversation, LoadOptions, Mode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn options(url: String, callers: u64) -> LoadOptions {
    LoadOptions {
        caller: CallerSettings {
            url,
            api_key: Some("key".into()),
            mode: Mode::Text,
            agent: None,
            connect_timeout: Duration::from_millis(500),
            turn_timeout: Duration::from_millis(500),
            greeting: false,
            think: Duration::ZERO,
            max_message_bytes: 1 << 16,
        },
        callers,
        rate: 100.0,
        concurrency: 10,
        session_timeout: Duration::from_secs(5),
    }
}

fn conversation() -> Vec<Conversation> {
    vec![Conversation { path: "inline".into(), agent: None, turns: vec![(Turn::Text("hello".into()), Vec::new())] }]
}

/// A server on a free port that runs `serve` for every connection.
async fn server<F, Fut>(serve: F) -> String
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve(socket));
        }
    });
    format!("ws://{addr}/v1/session")
}

async fn run(url: String, callers: u64) -> switchboard_load::Report {
    let started = std::time::Instant::now();
    let report = switchboard_load::run(&options(url, callers), conversation()).await.expect("runs");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    report
}

#[tokio::test]
async fn a_gateway_that_never_answers_times_out_the_connection() {
    let url = server(|mut socket| async move {
        let mut buf = [0u8; 1024];
        while socket.read(&mut buf).await.is_ok_and(|n| n > 0) {}
    })
    .await;
    let report = run(url, 3).await;
    assert_eq!(report.failed_by_code.get("connect timeout"), Some(&3), "{}", report.render());
    assert!(!report.ok());
}

#[tokio::test]
async fn a_refused_upgrade_is_counted_by_its_status() {
    let url = server(|mut socket| async move {
        let mut buf = [0u8; 4096];
        let _ = socket.read(&mut buf).await;
        let _ = socket.write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n").await;
    })
    .await;
    let report = run(url, 2).await;
    assert_eq!(report.failed_by_code.get("http 401"), Some(&2), "{}", report.render());
}

#[tokio::test]
async fn a_session_that_opens_and_then_goes_quiet_times_out_its_turn() {
    use futures_util::{SinkExt, StreamExt};
    let url = server(|socket| async move {
        let Ok(mut ws) = tokio_tungstenite::accept_async(socket).await else { return };
        let start = r#"{"type":"bidi_connection_start","session_id":"s","agent":"a","mode":"text","model":"m"}"#;
        let _ = ws.next().await;
        let _ = ws.send(tokio_tungstenite::tungstenite::Message::text(start)).await;
        let _ = ws.send(tokio_tungstenite::tungstenite::Message::text(r#"{"type":"queued","position":1}"#)).await;
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
    let report = run(url, 2).await;
    assert_eq!(report.sessions.opened, 2, "{}", report.render());
    assert_eq!(report.failed_by_code.get("timeout turn"), Some(&2), "{}", report.render());
    assert_eq!(report.unknown_messages.get("queued"), Some(&2), "{}", report.render());
}

#[tokio::test]
async fn a_server_that_sends_garbage_then_closes_ends_the_session_with_its_close_code() {
    use futures_util::{SinkExt, StreamExt};
    let url = server(|socket| async move {
        let Ok(mut ws) = tokio_tungstenite::accept_async(socket).await else { return };
        let _ = ws.next().await;
        let _ = ws.send(tokio_tungstenite::tungstenite::Message::text("{{{ not json")).await;
        let _ = ws.send(tokio_tungstenite::tungstenite::Message::binary(vec![1u8; 100])).await;
        let frame =
            tokio_tungstenite::tungstenite::protocol::CloseFrame { code: 1013.into(), reason: "at capacity".into() };
        let _ = ws.close(Some(frame)).await;
    })
    .await;
    let report = run(url, 2).await;
    assert_eq!(report.capacity_refusals.get("close 1013"), Some(&2), "{}", report.render());
    assert_eq!(report.unknown_messages.get("(not json)"), Some(&2), "{}", report.render());
}
