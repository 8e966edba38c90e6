//! The runtime server's own limits, met by a client that connects to it directly (as one
//! that bypasses the gateway would reach a pod): malformed input, oversized frames, floods,
//! the session and connection limits, idle and slow clients, browser origins, and the
//! drain on shutdown.

use switchboard_core::protocol::{ClientMessage, ServerMessage, close_code};
use switchboard_runtime::ServerConfig;

use crate::common::{self, Client, replies};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_json_and_unknown_types_get_bidi_error_and_the_session_continues() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = running.runtime_client("").await;
    client.send_raw("{this is not json").await;
    let got = client.until(|m| matches!(m, ServerMessage::BidiError { .. })).await;
    assert!(
        matches!(got.last(), Some(ServerMessage::BidiError { code, recoverable: true, .. }) if code == "invalid_json")
    );
    client.send_raw(r#"{"type":"dance","steps":3}"#).await;
    let got = client.until(|m| matches!(m, ServerMessage::BidiError { .. })).await;
    assert!(matches!(got.last(), Some(ServerMessage::BidiError { code, .. }) if code == "unknown_type"));
    client.send_raw(r#"{"type":"bidi_text_input"}"#).await;
    let got = client.until(|m| matches!(m, ServerMessage::BidiError { .. })).await;
    assert!(matches!(got.last(), Some(ServerMessage::BidiError { code, .. }) if code == "malformed_message"));
    client.say("hello").await;
    let turn = client.turn().await;
    assert!(replies(&turn).iter().any(|r| r.starts_with("Hello!")), "{turn:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_frames_are_refused_with_1009() {
    let running = common::banking(ServerConfig { max_message_bytes: 1024, ..ServerConfig::default() }).await;
    let mut client = running.runtime_client("").await;
    client.say(&"x".repeat(4096)).await;
    let (code, reason) = client.closed().await;
    assert_eq!(code, close_code::TOO_BIG, "{reason}");
    assert!(reason.contains("1024"), "{reason}");
}

/// A signed `session_start` may exceed the message limit (it carries the session's memory
/// and history), whatever the spacing of its JSON; nothing after it may.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_start_over_the_limit_is_taken_however_its_json_is_spaced() {
    let running = common::banking(ServerConfig { max_message_bytes: 1024, ..ServerConfig::default() }).await;
    let memory = [("notes".to_owned(), serde_json::json!("n".repeat(2048)))].into();
    let start = ClientMessage::SessionStart(common::signed_start(&running.key, "triage", memory));
    // As a client library writes it: `{ "type": ...`, not the runtime's own `{"type":...`.
    let spaced = serde_json::to_string_pretty(&start).expect("serialises");
    assert!(spaced.len() > 1024 && !spaced.starts_with(r#"{"type""#), "{}", &spaced[..40]);
    let mut client = Client::connect(&running.runtime_url("")).await;
    client.send_raw(&spaced).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    client.say(&"x".repeat(4096)).await;
    let (code, reason) = client.closed().await;
    assert_eq!(code, close_code::TOO_BIG, "only the start may pass the limit: {reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_are_refused_with_1008() {
    let running = common::banking(ServerConfig { rate_per_second: 2, rate_burst: 5, ..ServerConfig::default() }).await;
    let mut client = running.runtime_client("").await;
    for _ in 0..100 {
        if !client.try_send_raw(r#"{"type":"bogus"}"#).await {
            break;
        }
    }
    let (code, reason) = client.closed().await;
    assert_eq!(code, close_code::RATE_LIMITED, "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_beyond_the_limit_are_refused_with_1013() {
    let running = common::banking(ServerConfig { max_sessions: 1, ..ServerConfig::default() }).await;
    let mut first = running.runtime_client("").await;
    first.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let mut second = running.runtime_client("").await;
    let (code, reason) = second.closed().await;
    assert_eq!(code, close_code::TRY_AGAIN_LATER, "{reason}");
    assert!(reason.contains("limit of 1"), "{reason}");
    first.say("hello").await;
    assert!(replies(&first.turn().await).iter().any(|r| r.starts_with("Hello!")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_agents_are_refused_with_4400() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = running.runtime_client("?agent=nobody").await;
    let (code, reason) = client.closed().await;
    assert_eq!(code, close_code::BAD_START);
    assert!(reason.contains("triage"), "the reason lists the agents: {reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_refuses_new_sessions_and_lets_live_ones_finish() {
    let mut running = common::banking(ServerConfig::default()).await;
    assert_eq!(common::get(running.runtime_addr, "/readyz").await.0, 200);
    let mut live = running.runtime_client("").await;
    live.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    running.stop();
    running.state.draining.cancelled().await;
    assert_eq!(common::get(running.runtime_addr, "/readyz").await.0, 503, "not ready once draining");
    assert_eq!(common::get(running.runtime_addr, "/healthz").await.0, 200, "still alive");
    let mut late = running.runtime_client("").await;
    assert_eq!(late.closed().await.0, close_code::TRY_AGAIN_LATER);
    live.say("hello").await;
    assert!(replies(&live.turn().await).iter().any(|r| r.starts_with("Hello!")), "the live session still works");
    live.send(&switchboard_core::protocol::ClientMessage::Close {}).await;
    assert_eq!(live.closed().await.0, close_code::NORMAL);
    running.done.await.expect("the server stops once the live session ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_client_is_closed_with_4408() {
    let config = ServerConfig { idle_timeout: std::time::Duration::from_secs(1), ..ServerConfig::default() };
    let running = common::banking(config).await;
    let mut client = running.runtime_client("").await;
    let (code, reason) = client.closed().await;
    assert_eq!(code, close_code::IDLE_TIMEOUT, "{reason}");
    assert!(reason.contains("no message for 1 s"), "{reason}");
}

/// A client that stops reading while the server has much to say: the server's writes wait
/// on a full socket, and after the slow-client timeout the connection is closed (4409) and
/// its session slot freed, instead of the session waiting forever. The client is raw TCP
/// (a WebSocket client library reads while it writes): after the upgrade it only writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_closed_and_frees_its_session() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = ServerConfig {
        slow_client_timeout: std::time::Duration::from_secs(1),
        rate_per_second: 1_000_000,
        rate_burst: 1_000_000,
        ..ServerConfig::default()
    };
    let running = common::banking(config).await;
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    // A small receive window, so the server's socket fills after little.
    socket.set_recv_buffer_size(4096).expect("rcvbuf");
    let mut stream = socket.connect(running.runtime_addr).await.expect("connects");
    let upgrade = format!(
        "GET /v1/session HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        running.runtime_addr
    );
    stream.write_all(upgrade.as_bytes()).await.expect("upgrade request");
    let mut response = [0u8; 512];
    let n = stream.read(&mut response).await.expect("upgrade response");
    assert!(String::from_utf8_lossy(&response[..n]).starts_with("HTTP/1.1 101"), "upgraded");
    // A masked text frame (mask key 0: the payload as is).
    let frame = |text: &str| {
        let mut bytes = vec![0x81];
        match u8::try_from(text.len()) {
            Ok(short) if short < 126 => bytes.push(0x80 | short),
            _ => {
                bytes.push(0x80 | 126);
                bytes.extend_from_slice(&u16::try_from(text.len()).expect("under 64 KiB").to_be_bytes());
            }
        }
        bytes.extend_from_slice(&[0, 0, 0, 0]);
        bytes.extend_from_slice(text.as_bytes());
        bytes
    };
    // Started as the gateway starts sessions here: with a grant.
    let start = switchboard_core::protocol::ClientMessage::SessionStart(common::signed_start(
        &running.key,
        "triage",
        Default::default(),
    ));
    let start = serde_json::to_string(&start).expect("JSON");
    stream.write_all(&frame(&start)).await.expect("starts");
    // Each malformed message earns a bidi_error that is never read.
    let flood = tokio::spawn(async move {
        let junk = frame("{not json");
        for _ in 0..200_000 {
            if stream.write_all(&junk).await.is_err() {
                break;
            }
        }
        stream
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, metrics) = common::get(running.runtime_addr, "/metrics").await;
        let slow = common::metric_sum(&metrics, "switchboard_errors_total", &[("type", "slow_client")]);
        let active = common::metric_sum(&metrics, "switchboard_sessions_active", &[]);
        if slow >= 1.0 && active == 0.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the stuck session was not closed: {metrics}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    flood.abort();
    // The server still serves others.
    let mut other = running.runtime_client("").await;
    other.say("hello").await;
    assert!(replies(&other.turn().await).iter().any(|r| r.starts_with("Hello!")));
}

/// A page of another site cannot open a session from the user's browser (4405); the
/// server's own page and listed origins can, and clients that are not browsers send no
/// Origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_other_sites_are_refused_with_4405() {
    let running = common::banking(origins_config()).await;
    let url = running.runtime_url("");
    let start = || common::signed_start(&running.key, "triage", Default::default());
    let told = origins_are_checked(&url, &format!("http://{}", running.runtime_addr), start).await;
    assert!(told.contains("--allowed-origin https://evil.example"), "{told}");
}

/// Local mode's endpoint (the in-process gateway) holds pages of other sites off too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_refuses_pages_of_other_sites_with_4405() {
    let running = common::banking(origins_config()).await;
    let told = origins_are_checked(&running.url(""), &format!("http://{}", running.addr), Default::default).await;
    assert!(told.contains("--allowed-origin"), "{told}");
}

fn origins_config() -> ServerConfig {
    ServerConfig { allowed_origins: vec!["https://app.bank.example".into()], ..ServerConfig::default() }
}

/// A page of evil.example is refused with 4405 (the `bidi_error`'s message is returned);
/// the server's `own` page and the listed app.bank.example open sessions.
async fn origins_are_checked(
    url: &str,
    own: &str,
    start: impl Fn() -> switchboard_core::protocol::SessionStart,
) -> String {
    let mut foreign = Client::connect_with(url, &[("origin", "https://evil.example")]).await;
    let (code, _) = foreign.closed().await;
    assert_eq!(code, close_code::ORIGIN_NOT_ALLOWED);
    for origin in [own, "https://app.bank.example"] {
        let mut client = Client::connect_with(url, &[("origin", origin)]).await;
        client.send(&switchboard_core::protocol::ClientMessage::SessionStart(start())).await;
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    }
    foreign
        .seen
        .iter()
        .find_map(|m| match m {
            ServerMessage::BidiError { code, message, .. } if code == "origin" => Some(message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("an origin error: {:?}", foreign.seen))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_refused_before_the_upgrade() {
    // One place for a connection still opening; a live session does not hold it.
    let config = ServerConfig { max_sessions: 2, max_opening_connections: 1, ..ServerConfig::default() };
    let running = common::banking(config).await;
    let mut first = running.runtime_client("").await;
    first.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    // A connection that has not started a session holds the one place...
    let (opening, _) = tokio_tungstenite::connect_async(running.runtime_url("")).await.expect("the place is free");
    // ...so the next is refused with HTTP 503 and no upgrade.
    let refused = tokio_tungstenite::connect_async(running.runtime_url("")).await.expect_err("over the cap");
    let tokio_tungstenite::tungstenite::Error::Http(response) = refused else { panic!("an HTTP refusal: {refused:?}") };
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).into_owned();
    assert!(body.contains("too many connections"), "{body}");
    // The session goes on.
    first.say("hello").await;
    assert!(replies(&first.turn().await).iter().any(|r| r.starts_with("Hello!")));
    // The place is given back once the opening socket is closed: a client that honours
    // Retry-After gets in.
    drop(opening);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tokio_tungstenite::connect_async(running.runtime_url("")).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "the place was never given back");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
