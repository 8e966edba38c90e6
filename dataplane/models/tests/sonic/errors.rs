//! Errors: fatal ones are not retried and reach the caller; retryable ones are; and the
//! simulator refuses a malformed event sequence the way the service does.

use std::time::Duration;

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::primitives::event_stream::EventStreamSender;
use aws_sdk_bedrockruntime::types::error::{
    InvokeModelWithBidirectionalStreamInputError, InvokeModelWithBidirectionalStreamOutputError,
};
use aws_sdk_bedrockruntime::types::{BidirectionalInputPayloadPart, InvokeModelWithBidirectionalStreamInput};
use futures_util::StreamExt;
use serde_json::json;
use switchboard_models::ModelError;
use switchboard_models::sonic::{DEFAULT_MODEL, SonicEvent, SonicSession};
use switchboard_sim::Operation;

use crate::common::{client, config, session, start};

const BIDI: Operation = Operation::InvokeModelWithBidirectionalStream;

#[tokio::test]
async fn access_denied_and_an_unknown_model_are_not_retried() {
    let denied = start("faults: { error: { kind: accessDenied } }").await;
    let error = SonicSession::start(client(&denied).await, config()).await.expect_err("denied");
    assert!(matches!(error, ModelError::AccessDenied { .. }), "{error:?}");
    assert_eq!(denied.stats().requests(BIDI), 1);

    let unknown = start(&format!("knownModels: [{DEFAULT_MODEL}]")).await;
    let mut other = config();
    other.model_id = "amazon.nova-sonic-v9:0".into();
    let error = SonicSession::start(client(&unknown).await, other).await.expect_err("unknown");
    assert!(
        matches!(&error, ModelError::ModelNotFound { model_id, .. } if model_id == "amazon.nova-sonic-v9:0"),
        "{error:?}"
    );
    assert_eq!(unknown.stats().requests(BIDI), 1);
}

#[tokio::test]
async fn throttling_is_retried_and_an_in_stream_validation_error_ends_the_session() {
    let sim = start(
        r#"
faults: { error: { kind: throttling, first: 2 } }
sonic:
  turnDetection: { silenceMs: { high: 300, medium: 300, low: 300 } }
  faults: { streamError: { kind: validation, first: 1 } }
"#,
    )
    .await;
    let (session, mut events) = session(&sim, config()).await;
    assert_eq!(sim.stats().requests(BIDI), 3, "two throttled attempts, then the stream");
    let mut frames = switchboard_sim::sonic::phrase_tone(1, 400, 8000);
    frames.extend(switchboard_sim::sonic::audio::silence(500));
    for frame in frames.chunks(640) {
        session.send_audio(bytes::Bytes::copy_from_slice(frame)).await.expect("open");
    }
    let event = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Some(SonicEvent::Failed(error)) => return Some(error),
                Some(_) => {}
                None => return None,
            }
        }
    })
    .await
    .expect("in time");
    assert!(matches!(event, Some(ModelError::Validation { .. })), "{event:?}");
    assert!(events.recv().await.is_none(), "no events after a fatal error");
    assert_eq!(sim.stats().requests(BIDI), 3, "a validation error is not retried");
}

fn chunk(
    event: serde_json::Value,
) -> Result<InvokeModelWithBidirectionalStreamInput, InvokeModelWithBidirectionalStreamInputError> {
    let part = BidirectionalInputPayloadPart::builder().bytes(Blob::new(event.to_string().into_bytes())).build();
    Ok(InvokeModelWithBidirectionalStreamInput::Chunk(part))
}

#[tokio::test]
async fn a_malformed_event_sequence_gets_a_validation_exception_in_the_stream() {
    let sim = start("{}").await;
    let client = client(&sim).await;
    // sessionStart, then content without promptStart: the raw SDK, as any client would.
    let events = futures_util::stream::iter(vec![
        chunk(json!({"event": {"sessionStart": {"inferenceConfiguration": {"maxTokens": 100}}}})),
        chunk(json!({"event": {"contentStart": {"promptName": "p", "contentName": "c", "type": "TEXT", "role": "SYSTEM"}}})),
    ])
    .chain(futures_util::stream::pending());
    let sender: EventStreamSender<_, _> = events.into();
    let output = client
        .invoke_model_with_bidirectional_stream()
        .model_id(DEFAULT_MODEL)
        .body(sender)
        .send()
        .await
        .expect("the stream opens");
    let mut body = output.body;
    let error =
        tokio::time::timeout(Duration::from_secs(10), body.recv()).await.expect("in time").expect_err("refused");
    let exception = error.into_service_error();
    assert!(
        matches!(exception, InvokeModelWithBidirectionalStreamOutputError::ValidationException(_)),
        "{exception:?}"
    );
    assert!(exception.to_string().contains("before promptStart"), "{exception}");
    assert_eq!(sim.sonic_stats().validation_errors, 1);
}
