//! Tool events a client can show, from a real runtime (issue 26): `tool_start` names what
//! the tool does (its description in the Agent's spec), `tool_complete` how long it ran,
//! and `tool_error` whether trying again can help, in words for the caller.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use switchboard_core::FailureKind;
use switchboard_core::protocol::ServerMessage;
use switchboard_crds::Catalog;
use switchboard_runtime::ServerConfig;

use crate::common::{self, Client};

/// How long the identity check takes when it answers.
const CHECK_MS: u64 = 400;

/// The identity check's server: the first call answers 503, the next ones Ada's identity
/// after [`CHECK_MS`].
async fn slow_then_down_server() -> SocketAddr {
    let calls = Arc::new(AtomicUsize::new(0));
    let app = Router::new().route(
        "/idv",
        post(move || {
            let calls = calls.clone();
            async move {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    return (StatusCode::SERVICE_UNAVAILABLE, "down for maintenance".to_owned());
                }
                tokio::time::sleep(Duration::from_millis(CHECK_MS)).await;
                let user = serde_json::json!({ "name": "Ada Lovelace", "accountNumber": "12345678" });
                (StatusCode::OK, serde_json::json!({ "verified": true, "user": user }).to_string())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
    addr
}

fn idv_check_description() -> String {
    let catalog = Catalog::load_paths(&[common::examples_dir()]).expect("the example loads");
    let idv = catalog.agents().find(|a| a.metadata.name.as_deref() == Some("idv")).expect("idv");
    let idv = catalog.resolve_agent(idv).expect("idv resolves");
    idv.tools.iter().find(|t| t.name == "perform_idv_check").expect("idv's check").description.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_events_say_what_runs_how_long_it_took_and_what_a_failure_means_to_the_caller() {
    let addr = slow_then_down_server().await;
    let dir = crate::failures::example_with_tools_at(addr);
    let running = crate::common::start_in(&dir, ServerConfig::default(), None, None, None).await;
    let url = running.url("");
    let mut client = Client::start(&url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;

    // The check's server is down: the caller is told so, and that trying again may help.
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let down = client.turn().await;
    let start = down.iter().find_map(|m| match m {
        ServerMessage::ToolStart { name, description, .. } if name == "perform_idv_check" => Some(description.clone()),
        _ => None,
    });
    assert_eq!(start, Some(Some(idv_check_description())), "tool_start says what the tool does: {down:#?}");
    let error = down.iter().find_map(|m| match m {
        ServerMessage::ToolError { kind, message, recoverable, user_message, suggestion, .. } => {
            Some((kind.clone(), message.clone(), *recoverable, user_message.clone(), suggestion.clone()))
        }
        _ => None,
    });
    let (kind, message, recoverable, user_message, suggestion) = error.expect("a tool_error");
    assert_eq!(kind, "http_status");
    assert!(message.contains("503"), "the developer's message keeps the detail: {message}");
    let said = FailureKind::HttpStatus.for_people();
    assert!(recoverable, "a server that is down may be up again");
    assert_eq!((user_message.as_str(), suggestion.as_str()), (said.message, said.suggestion));
    assert!(!user_message.contains("503") && !user_message.contains("http"), "{user_message}");

    // Then it answers, slowly: tool_complete says how long it ran.
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    let ran = verified.iter().find_map(|m| match m {
        ServerMessage::ToolComplete { name, duration_ms, cached: false, .. } if name == "perform_idv_check" => {
            Some(*duration_ms)
        }
        _ => None,
    });
    let ran = ran.unwrap_or_else(|| panic!("a tool_complete: {verified:#?}"));
    // At least the server's delay; the upper bound only guards against a wrong unit.
    assert!((CHECK_MS..30_000).contains(&ran), "the check took {CHECK_MS} ms and more, not {ran} ms");
    let _ = std::fs::remove_dir_all(dir);
}
