//! Malformed input, oversized frames, floods, the session limit, and the drain on shutdown.

use switchboard_core::protocol::{ServerMessage, close_code};
use switchboard_dataplane::runtime::ServerConfig;

use crate::common::{self, Client, replies};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_json_and_unknown_types_get_bidi_error_and_the_session_continues() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = Client::start(&running.url(""), None).await;
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
    let mut client = Client::start(&running.url(""), None).await;
    client.say(&"x".repeat(4096)).await;
    let (code, reason) = client.closed().await;
    assert_eq!(code, close_code::TOO_BIG, "{reason}");
    assert!(reason.contains("1024"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_are_refused_with_1008() {
    let running = common::banking(ServerConfig { rate_per_second: 2, rate_burst: 5, ..ServerConfig::default() }).await;
    let mut client = Client::start(&running.url(""), None).await;
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
    let mut first = Client::start(&running.url(""), None).await;
    first.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let mut second = Client::start(&running.url(""), None).await;
    let (code, reason) = second.closed().await;
    assert_eq!(code, close_code::TRY_AGAIN_LATER, "{reason}");
    assert!(reason.contains("limit of 1"), "{reason}");
    first.say("hello").await;
    assert!(replies(&first.turn().await).iter().any(|r| r.starts_with("Hello!")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_agents_are_refused_with_4400() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = Client::start(&running.url("?agent=nobody"), None).await;
    let (code, reason) = client.closed().await;
    assert_eq!(code, close_code::BAD_START);
    assert!(reason.contains("triage"), "the reason lists the agents: {reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_refuses_new_sessions_and_lets_live_ones_finish() {
    let mut running = common::banking(ServerConfig::default()).await;
    assert_eq!(common::get(running.addr, "/readyz").await.0, 200);
    let mut live = Client::start(&running.url(""), None).await;
    live.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    running.stop();
    running.state.draining.cancelled().await;
    assert_eq!(common::get(running.addr, "/readyz").await.0, 503, "not ready once draining");
    assert_eq!(common::get(running.addr, "/healthz").await.0, 200, "still alive");
    let mut late = Client::start(&running.url(""), None).await;
    assert_eq!(late.closed().await.0, close_code::TRY_AGAIN_LATER);
    live.say("hello").await;
    assert!(replies(&live.turn().await).iter().any(|r| r.starts_with("Hello!")), "the live session still works");
    live.send(&switchboard_core::protocol::ClientMessage::Close {}).await;
    assert_eq!(live.closed().await.0, close_code::NORMAL);
    running.done.await.expect("the server stops once the live session ended");
}
