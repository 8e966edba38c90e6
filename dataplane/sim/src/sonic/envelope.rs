//! The input side of the bidirectional stream on the wire. Each input event arrives as an
//! event-stream message wrapped in a signed envelope: the envelope's headers are `:date`
//! and `:chunk-signature` (ignored here), its payload is the inner message; an envelope
//! with an empty payload ends the input. The inner message is a `chunk` event whose JSON
//! payload `{"bytes": "<base64>"}` holds the Nova Sonic event (`{"event": {...}}`).
//!
//! Output events go the other way without an envelope: [`encode_event`].

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::{Bytes, BytesMut};

/// What one complete envelope held.
#[derive(Debug, PartialEq)]
pub enum Envelope {
    /// A Nova Sonic event (the decoded JSON document).
    Event(serde_json::Value),
    /// The empty envelope: the client ended its input.
    End,
}

/// The input could not be read as the service expects it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct EnvelopeError(pub String);

/// Splits the request body into envelopes as bytes arrive.
#[derive(Debug, Default)]
pub struct EnvelopeDecoder {
    buffer: BytesMut,
    frames: MessageFrameDecoder,
}

impl EnvelopeDecoder {
    /// Adds bytes of the body.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete envelope, if the buffered bytes hold one. An `initial-request`
    /// message, which some SDKs send first, is skipped.
    pub fn next_envelope(&mut self) -> Result<Option<Envelope>, EnvelopeError> {
        loop {
            let envelope = match self.frames.decode_frame(&mut self.buffer) {
                Ok(DecodedFrame::Complete(message)) => message,
                Ok(DecodedFrame::Incomplete) => return Ok(None),
                Err(error) => return Err(EnvelopeError(format!("the input is not a valid event stream: {error}"))),
            };
            if envelope.payload().is_empty() {
                return Ok(Some(Envelope::End));
            }
            let inner = aws_smithy_eventstream::frame::read_message_from(envelope.payload().clone())
                .map_err(|e| EnvelopeError(format!("an input envelope does not hold an event-stream message: {e}")))?;
            if header(&inner, ":event-type") == Some("initial-request") {
                continue;
            }
            return decode_chunk(&inner).map(|event| Some(Envelope::Event(event)));
        }
    }
}

fn header<'m>(message: &'m Message, name: &str) -> Option<&'m str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|s| s.as_str())
}

/// The Nova Sonic event inside a `chunk` input message.
pub fn decode_chunk(message: &Message) -> Result<serde_json::Value, EnvelopeError> {
    match header(message, ":event-type") {
        Some("chunk") => {}
        other => {
            return Err(EnvelopeError(format!(
                "unexpected input event type {other:?}; only chunk events are accepted"
            )));
        }
    }
    #[derive(serde::Deserialize)]
    struct Chunk {
        bytes: String,
    }
    let chunk: Chunk = serde_json::from_slice(message.payload())
        .map_err(|e| EnvelopeError(format!("a chunk event's payload is not {{\"bytes\": <base64>}}: {e}")))?;
    let bytes = aws_smithy_types::base64::decode(&chunk.bytes)
        .map_err(|e| EnvelopeError(format!("a chunk's bytes are not valid base64: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| EnvelopeError(format!("a chunk does not hold a JSON event: {e}")))
}

/// The output message carrying `event` (`{"event": {...}}`), encoded for the response body.
pub fn encode_event(event: &serde_json::Value) -> Result<Bytes, EnvelopeError> {
    encode_event_text(&event.to_string())
}

/// [`encode_event`] of an event already written as JSON text.
pub fn encode_event_text(json: &str) -> Result<Bytes, EnvelopeError> {
    // Base64 has no character JSON would escape.
    let payload = format!(r#"{{"bytes":"{}"}}"#, aws_smithy_types::base64::encode(json.as_bytes()));
    let message = Message::new(Bytes::from(payload))
        .add_header(Header::new(":event-type", HeaderValue::String("chunk".into())))
        .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())))
        .add_header(Header::new(":message-type", HeaderValue::String("event".into())));
    encode_message(&message)
}

/// `message`, encoded.
pub fn encode_message(message: &Message) -> Result<Bytes, EnvelopeError> {
    let mut buffer = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(message, &mut buffer)
        .map_err(|e| EnvelopeError(format!("cannot encode an event-stream message: {e}")))?;
    Ok(Bytes::from(buffer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(event: &serde_json::Value) -> Message {
        let payload = json!({ "bytes": aws_smithy_types::base64::encode(event.to_string().as_bytes()) });
        Message::new(Bytes::from(payload.to_string()))
            .add_header(Header::new(":message-type", HeaderValue::String("event".into())))
            .add_header(Header::new(":event-type", HeaderValue::String("chunk".into())))
    }

    fn envelope(inner: Option<&Message>) -> Vec<u8> {
        let payload = inner.map(|m| encode_message(m).expect("encodes")).unwrap_or_default();
        let message = Message::new(payload)
            .add_header(Header::new(":date", HeaderValue::Timestamp(aws_smithy_types::DateTime::from_secs(1))))
            .add_header(Header::new(":chunk-signature", HeaderValue::ByteArray(Bytes::from_static(&[1, 2, 3]))));
        encode_message(&message).expect("encodes").to_vec()
    }

    #[test]
    fn envelopes_split_across_reads_give_events_then_the_end() {
        let first = json!({"event": {"sessionStart": {"inferenceConfiguration": {"maxTokens": 10}}}});
        let second = json!({"event": {"sessionEnd": {}}});
        let initial = Message::new(Bytes::from_static(b"{}"))
            .add_header(Header::new(":event-type", HeaderValue::String("initial-request".into())));
        let mut body = envelope(Some(&initial));
        body.extend(envelope(Some(&chunk(&first))));
        body.extend(envelope(Some(&chunk(&second))));
        body.extend(envelope(None));
        let mut decoder = EnvelopeDecoder::default();
        let mut seen = Vec::new();
        for piece in body.chunks(7) {
            decoder.extend(piece);
            while let Some(envelope) = decoder.next_envelope().expect("valid") {
                seen.push(envelope);
            }
        }
        assert_eq!(seen, vec![Envelope::Event(first), Envelope::Event(second), Envelope::End]);
    }

    #[test]
    fn malformed_inner_messages_are_refused_with_a_reason() {
        let not_chunk = Message::new(Bytes::from_static(b"{}"))
            .add_header(Header::new(":event-type", HeaderValue::String("audio".into())));
        let bad_base64 = Message::new(Bytes::from_static(br#"{"bytes": "@@@"}"#))
            .add_header(Header::new(":event-type", HeaderValue::String("chunk".into())));
        for (message, needle) in [(not_chunk, "only chunk events"), (bad_base64, "base64")] {
            let mut decoder = EnvelopeDecoder::default();
            decoder.extend(&envelope(Some(&message)));
            let error = decoder.next_envelope().expect_err("refused");
            assert!(error.0.contains(needle), "{error}");
        }
        let mut garbage = EnvelopeDecoder::default();
        garbage.extend(&[0, 0, 0, 16, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(garbage.next_envelope().is_err());
    }
}
