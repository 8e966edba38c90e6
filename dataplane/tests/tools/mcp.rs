//! MCP tools through the runtime's executor against a real MCP server.

use serde_json::json;
use switchboard_core::FailureKind;
use switchboard_runtime::tools::{CallContext, Progress, ToolExecutor};

use crate::common::{McpServer, executor, mcp_tool};

#[tokio::test]
async fn a_tool_result_comes_back_as_json() {
    let server = McpServer::start().await;
    let executor = executor();
    let tool = mcp_tool("lookup_account", &server.url(), 10_000);
    let result = executor.execute(&tool, json!({"account": "12345678"})).await.expect("the call succeeds");
    assert_eq!(result, json!({"account": "12345678", "holder": "Ada Lovelace", "balance": 1234.5}));
    // The session is reused: a second call works the same.
    let again = executor.execute(&tool, json!({"account": "87654321"})).await.expect("the second call succeeds");
    assert_eq!(again["account"], "87654321");
}

#[tokio::test]
async fn progress_notifications_become_progress_lines_in_order() {
    let server = McpServer::start().await;
    let executor = executor();
    let tool = mcp_tool("slow_report", &server.url(), 10_000);
    let (tx, mut rx) = Progress::channel(64);
    let result = executor
        .execute_reporting(&tool, json!({"steps": 4}), Progress::new(tx, "call-1", "slow_report"))
        .await
        .expect("the call succeeds");
    assert_eq!(result, json!({"result": "report done after 4 steps"}), "structuredContent is the result");
    let mut lines = Vec::new();
    while let Ok(update) = rx.try_recv() {
        assert_eq!((update.tool_use_id.as_str(), update.name.as_str()), ("call-1", "slow_report"));
        lines.push(update.message);
    }
    let reported: Vec<&String> = lines.iter().filter(|l| l.starts_with("step ")).collect();
    assert_eq!(
        reported,
        ["step 1 of 4 (1/4)", "step 2 of 4 (2/4)", "step 3 of 4 (3/4)", "step 4 of 4 (4/4)"],
        "all progress lines: {lines:?}"
    );
}

#[tokio::test]
async fn tool_errors_unknown_tools_and_timeouts_are_classified() {
    let server = McpServer::start().await;
    let executor = executor();
    let failure = executor
        .execute(&mcp_tool("broken", &server.url(), 10_000), json!({"reason": "disk full"}))
        .await
        .expect_err("the tool fails");
    assert_eq!(failure.kind, FailureKind::ToolReported, "{}", failure.message);
    assert!(failure.message.contains("broken"), "{}", failure.message);

    let unknown = executor
        .execute(&mcp_tool("no_such_tool", &server.url(), 10_000), json!({}))
        .await
        .expect_err("an unknown tool fails");
    assert!(
        matches!(unknown.kind, FailureKind::ToolReported | FailureKind::InvalidInput),
        "{:?}: {}",
        unknown.kind,
        unknown.message
    );
    assert!(unknown.message.contains("no_such_tool"), "{}", unknown.message);

    let timeout =
        executor.execute(&mcp_tool("sleepy", &server.url(), 300), json!({"seconds": 5})).await.expect_err("times out");
    assert_eq!(timeout.kind, FailureKind::Timeout);
    assert!(timeout.message.contains("300 ms"), "{}", timeout.message);
    // The server is still usable after a call was abandoned.
    let ok = executor.execute(&mcp_tool("sleepy", &server.url(), 10_000), json!({"seconds": 0})).await;
    assert_eq!(ok.expect("answers"), json!({"result": "awake"}));
}

#[tokio::test]
async fn a_restarted_server_gets_a_new_session_transparently() {
    let server = McpServer::start().await;
    let executor = executor();
    let url = server.url();
    let tool = mcp_tool("lookup_account", &url, 10_000);
    executor.execute(&tool, json!({"account": "1"})).await.expect("first call");
    // The server restarts and forgets every session: it answers our session id with 404.
    let listener = server.stop();
    let _restarted = McpServer::start_on(listener).await;
    let result = executor.execute(&tool, json!({"account": "2"})).await.expect("the call after the restart");
    assert_eq!(result["account"], "2");
}

#[tokio::test]
async fn an_unreachable_server_is_a_connection_failure() {
    // Nothing listens there, and no other process can take the port meanwhile.
    let closed = crate::served::ClosedPort::new();
    let failure = executor()
        .execute(&mcp_tool("lookup_account", &format!("http://{}/mcp", closed.addr()), 5_000), json!({}))
        .await
        .expect_err("fails");
    assert_eq!(failure.kind, FailureKind::Connection, "{}", failure.message);
}

#[tokio::test]
async fn secret_headers_reach_the_server_from_the_mounted_secret_and_rotate_without_a_restart() {
    use switchboard_runtime::tools::secrets::SecretFiles;
    use switchboard_runtime::tools::{Executor, ExecutorOptions};
    let server = McpServer::start().await;
    let dir = std::env::temp_dir().join(format!("switchboard-mcp-secrets-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("crm")).expect("dir");
    std::fs::write(dir.join("crm/token"), "first-token\n").expect("writes");
    let executor = Executor::new(ExecutorOptions { secrets: SecretFiles::new(&dir), ..ExecutorOptions::default() })
        .expect("executor");
    let tool: switchboard_crds::agent::ToolSpec = serde_json::from_value(json!({
        "name": "whoami",
        "description": "test tool",
        "mcp": {
            "url": server.url(),
            "timeoutMs": 10_000,
            "secretHeaders": [{"name": "Authorization", "secretKeyRef": {"name": "crm", "key": "token"}, "prefix": "Bearer "}],
        },
    }))
    .expect("a tool spec");
    let first = executor.execute(&tool, json!({})).await.expect("the call succeeds");
    assert_eq!(first, json!({"result": "Bearer first-token"}));
    // The Secret is rotated (the kubelet rewrites the mounted file): the next call sends the
    // new value, on a session of its own.
    std::fs::write(dir.join("crm/token"), "second-token").expect("writes");
    let second = executor.execute(&tool, json!({})).await.expect("the call succeeds");
    assert_eq!(second, json!({"result": "Bearer second-token"}));
    // Unmounted: a clear failure naming the Secret and key, never a value.
    std::fs::remove_file(dir.join("crm/token")).expect("removes");
    let missing = executor.execute(&tool, json!({})).await.expect_err("no secret");
    let detail = missing.detail.clone().unwrap_or_default();
    assert!(detail.contains(r#"key "token" of the Secret "crm""#), "{detail}");
    assert!(!detail.contains("second-token") && !missing.message.contains("second-token"), "{detail}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The caller's identity assertion goes with that caller's call only: the MCP session the
/// process shares with every agent session does not keep it for the next call.
#[tokio::test]
async fn the_identity_assertion_goes_with_its_call_only() {
    let server = McpServer::start().await;
    let executor = executor();
    let tool = mcp_tool("caller", &server.url(), 10_000);
    let asserted =
        CallContext { identity: Some("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiIxIn0.c2ln".into()), ..CallContext::default() };
    let first = executor.call(&tool, json!({}), asserted).await.expect("the call succeeds");
    assert_eq!(first, json!({"result": "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiIxIn0.c2ln"}));
    let next = executor.execute(&tool, json!({})).await.expect("the call succeeds");
    assert_eq!(next, json!({"result": ""}), "a call without a caller carries none");
}

/// A traced call's `traceparent` goes to the MCP server with that call only, as the
/// identity assertion does.
#[tokio::test]
async fn the_traceparent_goes_with_its_call_only() {
    let server = McpServer::start().await;
    let executor = executor();
    let tool = mcp_tool("traceparent", &server.url(), 10_000);
    let sent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let traced = CallContext { traceparent: Some(sent.into()), ..CallContext::default() };
    let first = executor.call(&tool, json!({}), traced).await.expect("the call succeeds");
    assert_eq!(first, json!({"result": sent}));
    let next = executor.execute(&tool, json!({})).await.expect("the call succeeds");
    assert_eq!(next, json!({"result": ""}), "an untraced call carries none");
}
