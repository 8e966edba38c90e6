//! Injected and validation errors reach the client as the right classified error, and
//! the retry helper retries what it should.

use std::time::Duration;

use futures_util::StreamExt;
use switchboard_models::{Message, ModelError, ModelEvent, RetryPolicy, collect_reply, stream_with_retry};
use switchboard_sim::{Operation, SimConfig, Simulator};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{MODEL, model, request, script, start};

const ERRORS: &str = r#"
timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }
knownModels: ["amazon.nova-lite-v1:0"]
rules:
  - { name: throttling, when: { userText: "^throttling$" }, reply: { text: x }, faults: { error: { kind: throttling } } }
  - { name: access, when: { userText: "^accessDenied$" }, reply: { text: x }, faults: { error: { kind: accessDenied } } }
  - { name: internal, when: { userText: "^internalServer$" }, reply: { text: x }, faults: { error: { kind: internalServer } } }
  - { name: unavailable, when: { userText: "^serviceUnavailable$" }, reply: { text: x }, faults: { error: { kind: serviceUnavailable } } }
  - { name: validation, when: { userText: "^validation$" }, reply: { text: x }, faults: { error: { kind: validation, message: "bad input" } } }
  - { name: timeout, when: { userText: "^modelTimeout$" }, reply: { text: x }, faults: { error: { kind: modelTimeout } } }
  - { name: creds, when: { userText: "^unrecognizedClient$" }, reply: { text: x }, faults: { error: { kind: unrecognizedClient } } }
"#;

/// The first error of a call, and how many output events came before it.
async fn first_error(model: &std::sync::Arc<dyn switchboard_models::TextModel>, text: &str) -> (usize, ModelError) {
    let mut stream = model.stream(&request(text, &[]));
    let mut outputs = 0;
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) if event.is_output() => outputs += 1,
            Ok(_) => {}
            Err(error) => return (outputs, error),
        }
    }
    panic!("{text}: the call succeeded");
}

#[tokio::test]
async fn request_errors_are_classified() {
    let sim = start(script(ERRORS)).await;
    let model = model(&sim).await;
    let cases: [(&str, &str, bool); 7] = [
        ("throttling", "throttled", true),
        ("accessDenied", "access_denied", false),
        ("internalServer", "service_unavailable", true),
        ("serviceUnavailable", "service_unavailable", true),
        ("validation", "validation", false),
        ("modelTimeout", "timeout", true),
        ("unrecognizedClient", "credentials", false),
    ];
    for (trigger, label, retryable) in cases {
        let (outputs, error) = first_error(&model, trigger).await;
        assert_eq!(outputs, 0, "{trigger}");
        assert_eq!(error.metric_label(), label, "{trigger}: {error}");
        assert_eq!(error.is_retryable(), retryable, "{trigger}: {error}");
    }
    let (_, error) = first_error(&model, "validation").await;
    assert!(error.to_string().contains("bad input"), "{error}");

    let mut unknown = request("hello", &[]);
    unknown.model_id = "amazon.nova-nonexistent-v9:0".into();
    let error = collect_reply(model.stream(&unknown)).await.expect_err("unknown model");
    assert!(matches!(&error, ModelError::ModelNotFound { model_id, .. } if model_id == &unknown.model_id), "{error}");
    assert!(!error.is_retryable());
    sim.shutdown().await;
}

#[tokio::test]
async fn invalid_conversations_get_validation_errors() {
    let sim = start(script("timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }")).await;
    let model = model(&sim).await;
    let mut starts_with_assistant = request("hi", &[]);
    starts_with_assistant.messages.insert(0, Message::assistant_text("hello"));
    let mut not_alternating = request("hi", &[]);
    not_alternating.messages.push(Message::user_text("again"));
    let mut bad_temperature = request("hi", &[]);
    bad_temperature.temperature = 1.5;
    for (request, needle) in [
        (starts_with_assistant, "must start with a user message"),
        (not_alternating, "alternate between user and assistant"),
        (bad_temperature, "temperature"),
    ] {
        let error = collect_reply(model.stream(&request)).await.expect_err("invalid");
        assert!(matches!(error, ModelError::Validation { .. }), "{error}");
        assert!(error.to_string().contains(needle), "{error}");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn malformed_json_gets_a_validation_exception_over_plain_http() {
    let mut config = SimConfig::new(script("{}"));
    config.tls = false;
    let sim = Simulator::start(config).await.expect("starts");
    assert!(sim.endpoint_url().starts_with("http://") && sim.ca_cert_path().is_none());
    let mut socket = tokio::net::TcpStream::connect(sim.local_addr()).await.expect("connects");
    let body = r#"{"messages": [{"role": "user", "content": "not a list"}]}"#;
    let head = format!(
        "POST /model/{}/converse-stream HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        MODEL.replace(':', "%3A"),
        body.len()
    );
    socket.write_all(head.as_bytes()).await.expect("writes");
    socket.write_all(body.as_bytes()).await.expect("writes");
    let mut response = String::new();
    socket.read_to_string(&mut response).await.expect("reads");
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    let lower = response.to_ascii_lowercase();
    assert!(lower.contains("x-amzn-errortype: validationexception"), "{response}");
    assert!(response.contains("Malformed input request"), "{response}");
    assert_eq!(sim.stats().requests(Operation::ConverseStream), 1);
    sim.shutdown().await;
}

const CUTS: &str = r#"
timing: { timeToFirstTokenMs: 0, tokensPerSecond: 500 }
rules:
  - name: exception
    when: { userText: "^exception$" }
    reply: { text: "one two three four five six seven eight nine ten" }
    faults: { cut: { afterTokens: 3, mode: exception } }
  - name: drop
    when: { userText: "^drop$" }
    reply: { text: "one two three four five six seven eight nine ten" }
    faults: { cut: { afterTokens: 4, mode: drop } }
"#;

#[tokio::test]
async fn cut_streams_surface_mid_stream_as_retryable() {
    let sim = start(script(CUTS)).await;
    let model = model(&sim).await;
    for (trigger, tokens) in [("exception", 3), ("drop", 4)] {
        let (outputs, error) = first_error(&model, trigger).await;
        assert!(matches!(error, ModelError::StreamInterrupted { .. }), "{trigger}: {error}");
        assert!(error.is_retryable(), "{trigger}");
        assert_eq!(outputs, tokens, "{trigger}: deltas before the cut");
    }
    // A dropped connection does not break later calls.
    let reply = collect_reply(model.stream(&request("after", &[]))).await.expect("later call works");
    assert_eq!(reply.text, "You said: after");
    sim.shutdown().await;
}

fn fast_retries(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        jitter_seed: Some(42),
    }
}

#[tokio::test]
async fn retry_helper_retries_throttling_then_succeeds() {
    let sim = start(script(
        "timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }\nfaults: { error: { kind: throttling, first: 2 } }",
    ))
    .await;
    let model = model(&sim).await;
    let stream = stream_with_retry(model.clone(), request("hello", &[]), fast_retries(3));
    let reply = collect_reply(stream).await.expect("third attempt succeeds");
    assert_eq!(reply.text, "You said: hello");
    assert_eq!(sim.stats().requests(Operation::ConverseStream), 3);
    assert_eq!(sim.stats().faults_injected, 2);
    sim.shutdown().await;

    let sim = start(script(
        "timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }\nfaults: { error: { kind: throttling, first: 5 } }",
    ))
    .await;
    let model = crate::common::model(&sim).await;
    let stream = stream_with_retry(model, request("hello", &[]), fast_retries(2));
    let error = collect_reply(stream).await.expect_err("gives up");
    assert!(matches!(error, ModelError::Throttled { .. }), "{error}");
    assert_eq!(sim.stats().requests(Operation::ConverseStream), 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn retry_helper_does_not_replay_after_output() {
    let sim = start(script(CUTS)).await;
    let model = model(&sim).await;
    let mut stream = stream_with_retry(model, request("exception", &[]), fast_retries(3));
    let mut deltas = 0;
    let mut error = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(ModelEvent::TextDelta(_)) => deltas += 1,
            Ok(_) => {}
            Err(e) => error = Some(e),
        }
    }
    assert_eq!(deltas, 3);
    assert!(matches!(error, Some(ModelError::StreamInterrupted { .. })), "{error:?}");
    assert_eq!(sim.stats().requests(Operation::ConverseStream), 1, "no retry after output");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_certificate_issued_by_the_callers_ca_is_served_and_a_bad_key_is_refused() {
    // A CA of the caller's and a leaf it issued for 127.0.0.1 (as for a node IP that pods
    // dial): a client trusting only the CA talks to the simulator.
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("leaf params")
        .signed_by(&leaf_key, &issuer)
        .expect("leaf certificate");
    let mut config = SimConfig::new(switchboard_sim::banking_script().expect("the bundled script"));
    config.identity = Some((leaf.pem(), leaf_key.serialize_pem()));
    let sim = Simulator::start(config).await.expect("starts with the given certificate");
    assert_eq!(sim.ca_cert_pem(), Some(leaf.pem().as_str()));
    let ca_file = std::env::temp_dir().join(format!("switchboard-sim-test-ca-{}.pem", std::process::id()));
    std::fs::write(&ca_file, ca.pem()).expect("writes the CA");
    let config = switchboard_models::bedrock::BedrockConfig::simulator(sim.endpoint_url(), Some(&ca_file));
    let model = switchboard_models::bedrock::BedrockTextModel::connect(&config).await.expect("client builds");
    let reply = collect_reply(switchboard_models::TextModel::stream(&model, &request("hello", &[])))
        .await
        .expect("a reply over the issued certificate");
    assert!(!reply.text.is_empty(), "{reply:?}");
    sim.shutdown().await;
    let _ = std::fs::remove_file(&ca_file);

    let mut config = SimConfig::new(script("{}"));
    config.identity = Some((leaf.pem(), "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n".into()));
    let error = Simulator::start(config).await.expect_err("a broken key");
    assert!(error.to_string().contains("private key PEM is not readable"), "{error}");
    let mut config = SimConfig::new(script("{}"));
    config.identity = Some(("no certificate here".into(), leaf_key.serialize_pem()));
    let error = Simulator::start(config).await.expect_err("no certificate");
    assert!(error.to_string().contains("no CERTIFICATE block"), "{error}");
}

/// A script's `contextWindow` refuses a longer request as Bedrock refuses one beyond the
/// model's window: the real client reads a `ValidationException` that says the input is
/// too long (not retried, no fallback), and a request within the window is answered.
#[tokio::test]
async fn a_request_beyond_the_context_window_is_refused_as_too_long() {
    let sim = start(script("timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }\ncontextWindow: 200")).await;
    let model = model(&sim).await;
    let long = "the caller said many words ".repeat(100);
    let error = collect_reply(model.stream(&request(&long, &[]))).await.expect_err("too long");
    assert!(
        matches!(&error, ModelError::Validation { message } if message == switchboard_sim::converse::CONTEXT_TOO_LONG),
        "{error}"
    );
    assert!(error.is_context_too_long() && !error.is_retryable() && !error.calls_for_fallback(), "{error}");
    let reply = collect_reply(model.stream(&request("short", &[]))).await.expect("within the window");
    assert_eq!(reply.text, "You said: short");
    sim.shutdown().await;
}
