//! Tools that fail, and a tool that needs consent: every failure reaches the model as an
//! error result and the session goes on; a consent-required tool runs only once approved.
//! And sessions refused: local mode keeps each Agent's `gateway.expose`, so a client cannot
//! start with an agent that is reached only by handoff (issue 23).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use switchboard_core::FailureKind;
use switchboard_core::protocol::{ClientMessage, ServerMessage};
use switchboard_crds::agent::HttpTool;
use switchboard_models::net::Trust;
use switchboard_runtime::ServerConfig;
use switchboard_runtime::tools::Aliases;
use switchboard_runtime::tools::http::HttpToolClient;

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
pub(crate) fn example_with_tools_at(addr: SocketAddr) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("switchboard-failing-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for file in ["triage.yaml", "idv.yaml", "banking.yaml", "disputes.yaml", "fees.yaml"] {
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
    let running = crate::common::start_in(&dir, ServerConfig::default(), None, None, None).await;
    let url = running.url("");
    // idv is reached as a caller reaches it: triage hands the session over.
    let mut client = Client::start(&url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("I'd like to check my balance").await;
    let to_idv =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert!(
        to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { from, to, .. } if from == "triage" && to == "idv")),
        "{to_idv:?}"
    );
    client.turn().await;
    for expected in ["http_status", "bad_response"] {
        client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
        let turn = client.turn().await;
        let kind = turn.iter().find_map(|m| match m {
            ServerMessage::ToolError { kind, .. } => Some(kind.clone()),
            _ => None,
        });
        assert_eq!(kind.as_deref(), Some(expected), "{turn:?}");
        // Where the tool server is and what it answered stay in the runtime's log.
        let said = serde_json::to_string(&turn).expect("json");
        for internal in [addr.to_string(), "down for maintenance".to_owned(), "banking-tools".to_owned()] {
            assert!(!said.contains(&internal), "{internal} reached the client: {said}");
        }
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

/// `?agent=banking` (or `session_start.agent`) would skip identity verification: local
/// mode's gateway refuses it, and idv and disputes, with 4403 and a `bidi_error` naming
/// `gateway.expose`, as on a cluster; the web page's list offers only triage to start with.
/// The same agents still serve the caller who comes by handoff: triage -> idv -> banking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_refuses_unexposed_agents_and_serves_them_by_handoff() {
    let running = common::banking(ServerConfig::default()).await;

    let (status, body) = common::get(running.addr, "/v1/agents").await;
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).expect("the agent list is JSON");
    let names = |key: &str| -> Vec<String> {
        list[key].as_array().into_iter().flatten().filter_map(|a| a["name"].as_str().map(str::to_owned)).collect()
    };
    assert_eq!(names("agents"), ["triage"], "only exposed agents are offered to start with: {list}");
    assert_eq!(names("by_handoff"), ["banking", "disputes", "idv"], "{list}");
    assert_eq!(list["default"], "triage");

    let refusals = [("?agent=banking", None), ("?agent=idv", None), ("?agent=disputes", None), ("", Some("banking"))];
    for (query, agent) in refusals {
        let mut client = Client::start(&running.url(query), agent).await;
        let (code, reason) = client.closed().await;
        assert_eq!(code, switchboard_core::protocol::close_code::NOT_EXPOSED, "{query} {agent:?}: {reason}");
        let error = client.seen.iter().find_map(|m| match m {
            ServerMessage::BidiError { code, message, recoverable, .. } => {
                Some((code.clone(), message.clone(), *recoverable))
            }
            _ => None,
        });
        let (code, message, recoverable) = error.expect("a bidi_error says why");
        assert_eq!((code.as_str(), recoverable), ("not_exposed", false), "{message}");
        assert!(message.contains("gateway.expose: false") && message.contains("handoff"), "{message}");
        assert!(
            !client.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })),
            "{:?}",
            client.seen
        );
    }
    let (_, metrics) = common::get(running.addr, "/metrics").await;
    assert_eq!(
        common::metric_sum(&metrics, "switchboard_gateway_sessions_refused_total", &[("reason", "not_exposed")]),
        refusals.len() as f64,
        "{metrics}"
    );

    // The exposed default agent may also be named.
    let mut named = Client::start(&running.url("?agent=triage"), None).await;
    named.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;

    // triage -> idv -> banking, by handoff, on one socket.
    let mut client = Client::start(&running.url(""), None).await;
    client.verify_at_idv().await;
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = client.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "{balance:?}");
    let handoffs: Vec<(&str, &str)> = client
        .seen
        .iter()
        .filter_map(|m| match m {
            ServerMessage::Handoff { from, to, .. } => Some((from.as_str(), to.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(handoffs, [("triage", "idv"), ("idv", "banking")]);
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
    let timeout = client.call(&tool(format!("http://{silent}/x"), 200), serde_json::json!({}), None, None).await;
    assert_eq!(timeout.map_err(|e| e.kind).err(), Some(FailureKind::Timeout));
    // A port with nothing listening (held: no other process can take it meanwhile).
    let closed_port = crate::served::ClosedPort::new();
    let closed = closed_port.addr();
    let refused = client.call(&tool(format!("http://{closed}/x"), 2000), serde_json::json!({}), None, None).await;
    assert_eq!(refused.map_err(|e| e.kind).err(), Some(FailureKind::Connection));
    let ftp = client.call(&tool("ftp://example.invalid/x".into(), 2000), serde_json::json!({}), None, None).await;
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
