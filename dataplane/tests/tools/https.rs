//! HTTP tools over TLS: a tool server with a certificate from a private CA is reached
//! once that CA is trusted (`--ca-file`), and refused with a certificate error otherwise.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use switchboard_core::FailureKind;
use switchboard_models::net::Trust;
use switchboard_runtime::tools::{Executor, ExecutorOptions, ToolExecutor};
use switchboard_sim::tls::self_signed;

/// An HTTPS tool server echoing the JSON it is sent under `"echo"`; returns its port and CA.
async fn tls_tool_server() -> (u16, String) {
    let cert = self_signed(&["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("a certificate");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let port = listener.local_addr().expect("addr").port();
    let acceptor = cert.acceptor.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let service = service_fn(|request: hyper::Request<hyper::body::Incoming>| async move {
                    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                    let input: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                    let answer = json!({ "echo": input, "tls": true }).to_string();
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(answer))))
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    (port, cert.cert_pem)
}

fn https_tool(port: u16) -> switchboard_crds::agent::ToolSpec {
    serde_json::from_value(json!({
        "name": "echo",
        "description": "echoes",
        "http": { "url": format!("https://localhost:{port}/echo"), "timeoutMs": 10_000 },
    }))
    .expect("a tool spec")
}

#[tokio::test]
async fn an_https_tool_server_is_called_when_its_ca_is_trusted() {
    let (port, ca) = tls_tool_server().await;
    let trust = Trust::with_pem(ca.as_bytes(), "test CA").expect("the CA parses");
    let executor = Executor::new(ExecutorOptions { trust, ..ExecutorOptions::default() }).expect("an executor");
    let result = executor.execute(&https_tool(port), json!({"q": 1})).await.expect("the call succeeds");
    assert_eq!(result, json!({"echo": {"q": 1}, "tls": true}));
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused_with_the_reason() {
    let (port, _) = tls_tool_server().await;
    let executor = Executor::new(ExecutorOptions::default()).expect("an executor");
    let failure = executor.execute(&https_tool(port), json!({})).await.expect_err("refused");
    assert_eq!(failure.kind, FailureKind::Connection, "{}", failure.message);
    // The operator's log names the certificate problem; the model and the client hear only
    // that the server was not reached.
    let detail = failure.detail.clone().unwrap_or_default();
    assert!(detail.to_lowercase().contains("certificate"), "names the certificate problem: {detail}");
    assert!(!failure.message.contains("localhost"), "{}", failure.message);
}
