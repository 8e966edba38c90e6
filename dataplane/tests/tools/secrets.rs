//! HTTP tool headers from a mounted Secret, against a real HTTP server.

use axum::routing::post;
use serde_json::json;
use switchboard_runtime::tools::secrets::SecretFiles;
use switchboard_runtime::tools::{Executor, ExecutorOptions, ToolExecutor};

#[tokio::test]
async fn an_http_tool_sends_its_secret_and_plain_headers() {
    let app = axum::Router::new().route(
        "/whoami",
        post(|headers: axum::http::HeaderMap| async move {
            let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            axum::Json(json!({"authorization": get("authorization"), "tenant": get("x-tenant")}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = std::env::temp_dir().join(format!("switchboard-http-secrets-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("crm")).expect("dir");
    std::fs::write(dir.join("crm/api-key"), "k-123\n").expect("writes");
    let executor = Executor::new(ExecutorOptions { secrets: SecretFiles::new(&dir), ..ExecutorOptions::default() })
        .expect("executor");
    let tool: switchboard_crds::agent::ToolSpec = serde_json::from_value(json!({
        "name": "whoami",
        "description": "test tool",
        "http": {
            "url": format!("http://{addr}/whoami"),
            "headers": {"X-Tenant": "bank"},
            "secretHeaders": [{"name": "Authorization", "secretKeyRef": {"name": "crm", "key": "api-key"}, "prefix": "Token "}],
        },
    }))
    .expect("a tool spec");
    let result = executor.execute(&tool, json!({})).await.expect("the call succeeds");
    assert_eq!(result, json!({"authorization": "Token k-123", "tenant": "bank"}));
    server.abort();
    let _ = std::fs::remove_dir_all(&dir);
}
