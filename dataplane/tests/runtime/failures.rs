//! Tools that fail, and a tool that needs consent: every failure reaches the model as an
//! error result and the session goes on; a consent-required tool runs only once approved.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use switchboard_core::FailureKind;
use switchboard_core::protocol::{ClientMessage, ServerMessage};
use switchboard_crds::agent::HttpTool;
use switchboard_dataplane::runtime::ServerConfig;
use switchboard_dataplane::tools::Aliases;
use switchboard_dataplane::tools::http::HttpToolClient;
use switchboard_models::net::Trust;

use crate::common::{self, Client, replies};

/// A tool server run by the test: the first call answers 503, the second invalid JSON.
async fn failing_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let app = Router::new().route(
        "/idv",
        post(move || {
            let counter = counter.clone();
            async move {
                match counter.fetch_add(1, Ordering::SeqCst) {
                    0 => (StatusCode::SERVICE_UNAVAILABLE, "down for maintenance".to_owned()),
                    _ => (StatusCode::OK, "this is not json".to_owned()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
    (addr, calls)
}

/// A copy of the banking example whose tool host points at `addr`.
fn example_with_tools_at(addr: SocketAddr) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("switchboard-failing-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for file in ["triage.yaml", "idv.yaml", "banking.yaml", "disputes.yaml"] {
        std::fs::copy(common::examples_dir().join(file), dir.join(file)).expect("copies example");
    }
    std::fs::create_dir_all(dir.join("tools")).expect("tools dir");
    std::fs::write(dir.join("tools/local.yaml"), format!("hostAliases:\n  banking-tools: \"{addr}\"\n"))
        .expect("writes local.yaml");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_tool_server_errors_go_to_the_model_and_the_session_lives_on() {
    let (addr, calls) = failing_server().await;
    let dir = example_with_tools_at(addr);
    let options = switchboard_dataplane::local::LocalOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        bedrock: false,
        sim_script: None,
        transcripts: None,
        server: ServerConfig::default(),
        ca_file: None,
        gateway_key: None,
    };
    let local = switchboard_dataplane::local::start(&dir, options).await.expect("starts");
    let url = format!("ws://{}/v1/session?agent=idv", local.server.local_addr().expect("addr"));
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });
    let mut client = Client::start(&url, None).await;
    for expected in ["http_status", "bad_response"] {
        client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
        let turn = client.turn().await;
        let kind = turn.iter().find_map(|m| match m {
            ServerMessage::ToolError { kind, .. } => Some(kind.clone()),
            _ => None,
        });
        assert_eq!(kind.as_deref(), Some(expected), "{turn:?}");
        assert!(
            replies(&turn).iter().any(|r| r.contains("couldn't verify")),
            "the model answered the error result: {turn:?}"
        );
        assert!(!turn.iter().any(|m| matches!(m, ServerMessage::MemoryUpdate { .. })), "nothing is remembered");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    client.say("hello").await;
    let turn = client.turn().await;
    assert!(replies(&turn).iter().any(|r| r.starts_with("Hello!")), "the session lives on: {turn:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn http_tool_client_classifies_timeouts_and_unreachable_servers() {
    // A server that accepts and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let silent = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let client = HttpToolClient::new(Trust::system().client().expect("a client"), Aliases::default());
    let tool =
        |url: String, timeout_ms| HttpTool { url, timeout_ms, headers: Default::default(), secret_headers: vec![] };
    let timeout = client.call(&tool(format!("http://{silent}/x"), 200), serde_json::json!({})).await;
    assert_eq!(timeout.map_err(|e| e.kind).err(), Some(FailureKind::Timeout));
    // A port with nothing listening.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("binds").local_addr().expect("addr");
    let refused = client.call(&tool(format!("http://{closed}/x"), 2000), serde_json::json!({})).await;
    assert_eq!(refused.map_err(|e| e.kind).err(), Some(FailureKind::Connection));
    let ftp = client.call(&tool("ftp://example.invalid/x".into(), 2000), serde_json::json!({})).await;
    assert_eq!(ftp.map_err(|e| e.kind).err(), Some(FailureKind::Unsupported));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consent_required_tool_runs_only_after_approval() {
    let key = common::gateway_key();
    let running = common::banking_signed(ServerConfig::default(), key.clone()).await;
    let mut client = Client::connect(&running.runtime_url("?agent=disputes")).await;
    client.send(&ClientMessage::SessionStart(common::signed_start(&key, "disputes", common::ada()))).await;

    client.say("Please dispute payment tx-1003").await;
    let asked = client.until(|m| matches!(m, ServerMessage::ConsentRequest { .. })).await;
    let Some(ServerMessage::ConsentRequest { tool_use_id, name, input, .. }) = asked.last().cloned() else {
        unreachable!()
    };
    assert_eq!(name, "open_dispute");
    assert_eq!(input["transactionId"], "tx-1003");
    client.send(&ClientMessage::ToolConsent { tool_use_id, approved: false }).await;
    let declined = client.turn().await;
    assert!(
        declined.iter().any(|m| matches!(m, ServerMessage::ToolError { kind, .. } if kind == "consent_declined")),
        "{declined:?}"
    );
    assert!(!declined.iter().any(|m| matches!(m, ServerMessage::ToolComplete { name, .. } if name == "open_dispute")));

    client.say("Please dispute payment tx-1003").await;
    let asked = client.until(|m| matches!(m, ServerMessage::ConsentRequest { .. })).await;
    let Some(ServerMessage::ConsentRequest { tool_use_id, .. }) = asked.last().cloned() else { unreachable!() };
    // Answering an unknown request is an error the session survives.
    client.send(&ClientMessage::ToolConsent { tool_use_id: "nope".into(), approved: true }).await;
    client.until(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "no_consent_pending")).await;
    client.send(&ClientMessage::ToolConsent { tool_use_id, approved: true }).await;
    let approved = client.turn().await;
    let result = approved.iter().find_map(|m| match m {
        ServerMessage::ToolComplete { name, result, .. } if name == "open_dispute" => Some(result.clone()),
        _ => None,
    });
    // D-00001: the declined call never reached the tool server.
    assert_eq!(result.expect("the approved call ran")["disputeId"], "D-00001");
    assert!(replies(&approved).iter().any(|r| r.contains("D-00001")), "{approved:?}");
}
