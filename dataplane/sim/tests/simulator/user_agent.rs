//! The Bedrock client made by `build_client` sends the SDK's User-Agent headers on every
//! call, built by the SDK for the first call and reused (the SDK's own per-call
//! interceptor disabled) after it.

use std::sync::{Arc, Mutex};

use aws_runtime::user_agent::UserAgentInterceptor;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_bedrockruntime::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_bedrockruntime::error::BoxError;
use aws_sdk_bedrockruntime::types::{ContentBlock, ConversationRole, Message};
use aws_smithy_runtime_api::client::interceptors::DisableInterceptor;
use switchboard_models::bedrock::{BedrockConfig, build_client};

use crate::common::{MODEL, script, start};

/// What one call sent, as it left (after signing).
#[derive(Debug, Clone, PartialEq)]
struct Sent {
    user_agent: Vec<String>,
    x_amz_user_agent: Vec<String>,
    sdk_interceptor_disabled: bool,
}

#[derive(Debug, Default, Clone)]
struct Capture(Arc<Mutex<Vec<Sent>>>);

impl Intercept for Capture {
    fn name(&self) -> &'static str {
        "Capture"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let headers = context.request().headers();
        let all = |name: &str| headers.get_all(name).map(str::to_owned).collect::<Vec<_>>();
        self.0.lock().expect("capture lock").push(Sent {
            user_agent: all("user-agent"),
            x_amz_user_agent: all("x-amz-user-agent"),
            sdk_interceptor_disabled: cfg.load::<DisableInterceptor<UserAgentInterceptor>>().is_some(),
        });
        Ok(())
    }
}

#[tokio::test]
async fn every_call_carries_the_sdk_user_agent_made_once() {
    let sim = start(script("rules: []")).await;
    let client =
        build_client(&BedrockConfig::simulator(sim.endpoint_url(), sim.ca_cert_path())).await.expect("client builds");
    let capture = Capture::default();
    let client = Client::from_conf(client.config().to_builder().interceptor(capture.clone()).build());
    for text in ["one", "two", "three"] {
        let message =
            Message::builder().role(ConversationRole::User).content(ContentBlock::Text(text.into())).build().unwrap();
        let mut output = client.converse_stream().model_id(MODEL).messages(message).send().await.expect("starts");
        while output.stream.recv().await.expect("no stream error").is_some() {}
    }
    let sent = capture.0.lock().expect("capture lock").clone();
    assert_eq!(sent.len(), 3);
    let first = &sent[0];
    assert!(!first.sdk_interceptor_disabled, "the SDK builds the first call's headers");
    assert_eq!(first.user_agent.len(), 1, "{first:?}");
    assert_eq!(first.x_amz_user_agent.len(), 1, "{first:?}");
    for header in [&first.user_agent[0], &first.x_amz_user_agent[0]] {
        assert!(header.starts_with("aws-sdk-rust/") && header.contains("api/bedrockruntime/"), "{header}");
    }
    for later in &sent[1..] {
        assert!(later.sdk_interceptor_disabled, "later calls reuse the first call's headers");
        assert_eq!(later.user_agent, first.user_agent);
        assert_eq!(later.x_amz_user_agent, first.x_amz_user_agent);
    }
}
