//! The raw SDK client, configured by hand (not through `BedrockTextModel`), sees the
//! simulator's events and errors as the service's own types.

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ContentBlockDelta, ConversationRole, ConverseOutput, ConverseStreamOutput, Message, StopReason,
};
use aws_smithy_http_client::tls;
use switchboard_sim::{Operation, SimHandle};

use crate::common::{MODEL, script, start};

const SCRIPT: &str = r#"
timing: { timeToFirstTokenMs: 0, tokensPerSecond: 1000 }
rules:
  - { name: throttle, when: { userText: "^throttle$" }, reply: { text: x }, faults: { error: { kind: throttling } } }
  - name: cut
    when: { userText: "^cut$" }
    reply: { text: "alpha beta gamma delta" }
    faults: { cut: { afterTokens: 2, mode: exception } }
"#;

fn client(sim: &SimHandle) -> Client {
    let pem = sim.ca_cert_pem().expect("TLS simulator").as_bytes().to_vec();
    let context = tls::TlsContext::builder()
        .with_trust_store(tls::TrustStore::empty().with_pem_certificate(pem))
        .build()
        .expect("TLS context");
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::AwsLc))
        .tls_context(context)
        .build_https();
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(sim.endpoint_url())
        .credentials_provider(Credentials::new("AKIDSIM", "secret", None, None, "test"))
        .http_client(http_client)
        .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

fn user(text: &str) -> Message {
    Message::builder()
        .role(ConversationRole::User)
        .content(ContentBlock::Text(text.to_owned()))
        .build()
        .expect("valid message")
}

#[tokio::test]
async fn raw_sdk_streams_converses_and_types_errors() {
    let sim = start(script(SCRIPT)).await;
    let client = client(&sim);

    // A streamed reply: every event type in order.
    let mut output =
        client.converse_stream().model_id(MODEL).messages(user("hi there")).send().await.expect("stream starts");
    let mut kinds = Vec::new();
    let mut text = String::new();
    while let Some(event) = output.stream.recv().await.expect("no stream error") {
        match &event {
            ConverseStreamOutput::MessageStart(_) => kinds.push("messageStart"),
            ConverseStreamOutput::ContentBlockDelta(delta) => {
                if let Some(ContentBlockDelta::Text(t)) = &delta.delta {
                    text.push_str(t);
                }
                if kinds.last() != Some(&"delta") {
                    kinds.push("delta");
                }
            }
            ConverseStreamOutput::ContentBlockStop(_) => kinds.push("contentBlockStop"),
            ConverseStreamOutput::MessageStop(stop) => {
                assert_eq!(stop.stop_reason, StopReason::EndTurn);
                kinds.push("messageStop");
            }
            ConverseStreamOutput::Metadata(metadata) => {
                let usage = metadata.usage.as_ref().expect("usage");
                assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);
                assert!(metadata.metrics.is_some());
                kinds.push("metadata");
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(text, "You said: hi there");
    assert_eq!(kinds, ["messageStart", "delta", "contentBlockStop", "messageStop", "metadata"]);

    // Request-level error: the modelled exception type.
    let error =
        client.converse_stream().model_id(MODEL).messages(user("throttle")).send().await.expect_err("throttled");
    let service_error = error.into_service_error();
    assert!(matches!(service_error, ConverseStreamError::ThrottlingException(_)), "{service_error:?}");

    // In-stream exception after two deltas.
    let mut output =
        client.converse_stream().model_id(MODEL).messages(user("cut")).send().await.expect("stream starts");
    let mut deltas = 0;
    let error = loop {
        match output.stream.recv().await {
            Ok(Some(ConverseStreamOutput::ContentBlockDelta(_))) => deltas += 1,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the stream ended without the scripted exception"),
            Err(error) => break error,
        }
    };
    assert_eq!(deltas, 2);
    let exception = error.into_service_error();
    assert!(matches!(exception, ConverseStreamOutputError::ModelStreamErrorException(_)), "{exception:?}");

    // Non-streaming Converse.
    let response = client.converse().model_id(MODEL).messages(user("plain call")).send().await.expect("converse works");
    let Some(ConverseOutput::Message(message)) = response.output else { panic!("a message") };
    assert_eq!(message.content, vec![ContentBlock::Text("You said: plain call".into())]);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert!(response.usage.is_some_and(|u| u.output_tokens > 0));

    let stats = sim.stats();
    assert_eq!(stats.requests(Operation::ConverseStream), 3);
    assert_eq!(stats.requests(Operation::Converse), 1);
    assert_eq!(stats.http2_requests, 4);
    sim.shutdown().await;
}
