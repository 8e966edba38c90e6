//! Whole conversations with tungstenite's client and server (the library the gateway's
//! clients and runtimes use), at every length form, and handshakes that are refused.

use axum::Router;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::{BIG, LIMITS, kind};
use crate::frames::*;

/// A server on the gateway's stack (axum, hyper's upgrade) that echoes what it reads
/// until the client closes, then closes with 1000 "done".
async fn echo_server() -> std::net::SocketAddr {
    let app = Router::new().route(
        "/ws",
        get(|upgrade: Upgrade| async move {
            upgrade.on_upgrade(BIG, |mut conn| async move {
                while let Some(Ok(message)) = conn.next().await {
                    match message {
                        Message::Text(_) | Message::Binary(_) => conn.send(message).await.expect("echo"),
                        Message::Close(_) => break,
                        _ => {}
                    }
                }
                let _ = conn.close(None).await;
            })
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Asserts two messages are the same, naming only their kinds and lengths if not.
fn same(got: &Message, want: &Message) {
    assert!(got == want, "got a {}-byte {:?}, want a {}-byte {:?}", got.len(), kind(got), want.len(), kind(want));
}

fn sizes() -> Vec<Message> {
    [0, 1, 125, 126, 127, 1300, 65_535]
        .into_iter()
        .flat_map(|n| [Message::text("ü".repeat(n / 2)), Message::binary(vec![n as u8; n])])
        .collect()
}

#[tokio::test]
async fn tungstenites_client_talks_to_the_server_side_at_every_length_form() {
    let addr = echo_server().await;
    let config = WebSocketConfig::default().max_frame_size(Some(1 << 20));
    let (mut client, _) = tokio_tungstenite::connect_async_with_config(format!("ws://{addr}/ws"), Some(config), false)
        .await
        .expect("connects");
    for message in sizes() {
        client.send(message.clone()).await.expect("send");
        same(&client.next().await.expect("an echo").expect("valid"), &message);
    }
    client.send(Message::Ping("p".into())).await.expect("ping");
    assert_eq!(client.next().await.expect("a pong").expect("valid"), Message::Pong("p".into()));
    client.close(None).await.expect("close");
    while let Some(Ok(_)) = client.next().await {}

    // A request that is not an upgrade is refused with a status that says why.
    let response = plain_get(addr).await;
    assert!(response.starts_with("HTTP/1.1 400") && response.contains("Connection header"), "{response}");
}

/// A plain GET of the WebSocket path, its response as text.
async fn plain_get(addr: std::net::SocketAddr) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
}

#[tokio::test]
async fn the_client_side_talks_to_tungstenites_server_and_masks_what_it_sends() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        // tungstenite's server refuses unmasked client frames.
        let config = WebSocketConfig::default().max_frame_size(Some(1 << 20));
        let mut ws = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await.expect("handshake");
        // Something sent at once, with the handshake's answer, is read too.
        ws.send(Message::text("hello")).await.expect("send");
        // Until the client's close, which tungstenite answers while reading on.
        while let Some(Ok(message)) = ws.next().await {
            if message.is_text() || message.is_binary() {
                ws.send(message).await.expect("echo");
            }
        }
    });
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut conn = connect(stream, &addr.to_string(), "/", BIG).await.expect("handshake");
    assert_eq!(conn.next().await.expect("hello").expect("valid"), Message::text("hello"));
    for message in sizes() {
        conn.send(message.clone()).await.expect("send");
        same(&conn.next().await.expect("an echo").expect("valid"), &message);
    }
    conn.close(Some(CloseFrame { code: CloseCode::Away, reason: "bye".into() })).await.expect("close");
    match conn.next().await {
        Some(Ok(Message::Close(Some(frame)))) => assert_eq!(frame.code, CloseCode::Away),
        other => panic!("a close, not {other:?}"),
    }
    server.await.expect("the server ends");
}

#[tokio::test]
async fn a_server_that_does_not_upgrade_is_refused_with_its_status() {
    let app = Router::new().route("/", get(|| async { "not a websocket" }));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let error = connect(stream, &addr.to_string(), "/", LIMITS).await.expect_err("refused").to_string();
    assert!(error.contains("HTTP 200"), "{error}");
}
