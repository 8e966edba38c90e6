//! One bidirectional stream: opening it (the setup events are queued before `send()`,
//! which returns only when the response headers arrive), the input side as a bounded
//! channel of events, and a reader task that forwards the output, tagged with the
//! stream's generation, to the session. Each stream is a `sonic.stream` span ([`stream_span`])
//! from its opening until it is closed.

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::primitives::event_stream::EventStreamSender;
use aws_sdk_bedrockruntime::types::error::InvokeModelWithBidirectionalStreamInputError;
use aws_sdk_bedrockruntime::types::{BidirectionalInputPayloadPart, InvokeModelWithBidirectionalStreamInput};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::history::HistoryEntry;
use super::{SonicConfig, wire};
use crate::ModelError;
use crate::bedrock::errors;

/// Input events buffered per stream before senders wait.
const INPUT_BUFFER: usize = 64;

/// What a stream's reader reports.
#[derive(Debug)]
pub enum StreamOutput {
    /// An output chunk's payload (the JSON event).
    Chunk(Vec<u8>),
    /// The stream failed.
    Error(ModelError),
    /// The stream ended.
    Ended,
}

/// An open stream.
#[derive(Debug)]
pub struct Connection {
    /// The stream's number within the session (1 is the first).
    pub generation: u64,
    /// When it was opened.
    pub opened_at: Instant,
    /// Its span: open while the stream is (ends when the connection is dropped).
    pub span: tracing::Span,
    input: mpsc::Sender<Vec<u8>>,
    audio_events: wire::AudioInputWriter,
    prompt: String,
    audio_content: String,
    audio_open: bool,
    contents: u64,
}

impl Connection {
    /// Opens a stream with `voice_id`: sessionStart, promptStart and the SYSTEM content
    /// are sent; history and audio follow with [`Connection::begin`].
    pub async fn open(
        client: &Client,
        config: &SonicConfig,
        voice_id: &str,
        generation: u64,
        out: mpsc::Sender<(u64, StreamOutput)>,
        span: tracing::Span,
    ) -> Result<Self, ModelError> {
        let opened = Self::open_in(client, config, voice_id, generation, out, span.clone()).await;
        if let Err(error) = &opened {
            span.record("error.type", error.metric_label());
        }
        opened
    }

    async fn open_in(
        client: &Client,
        config: &SonicConfig,
        voice_id: &str,
        generation: u64,
        out: mpsc::Sender<(u64, StreamOutput)>,
        span: tracing::Span,
    ) -> Result<Self, ModelError> {
        let (input, receiver) = mpsc::channel::<Vec<u8>>(INPUT_BUFFER);
        let prompt = format!("prompt-{generation}");
        let audio_content = format!("audio-{generation}");
        let mut connection = Self {
            generation,
            opened_at: Instant::now(),
            span,
            input,
            audio_events: wire::AudioInputWriter::new(&prompt, &audio_content),
            audio_content,
            prompt,
            audio_open: false,
            contents: 0,
        };
        connection.send(wire::session_start(config)).await?;
        connection.send(wire::prompt_start(&connection.prompt, config, voice_id)).await?;
        let system = connection.next_content();
        for event in wire::text_content(&connection.prompt, &system, "SYSTEM", false, &config.system_prompt) {
            connection.send(event).await?;
        }
        let events = futures_util::stream::unfold(receiver, |mut receiver| async move {
            let event = receiver.recv().await?;
            let part = BidirectionalInputPayloadPart::builder().bytes(Blob::new(event)).build();
            Some((
                Ok::<_, InvokeModelWithBidirectionalStreamInputError>(InvokeModelWithBidirectionalStreamInput::Chunk(
                    part,
                )),
                receiver,
            ))
        })
        .fuse();
        let sender: EventStreamSender<
            InvokeModelWithBidirectionalStreamInput,
            InvokeModelWithBidirectionalStreamInputError,
        > = events.into();
        let call = client.invoke_model_with_bidirectional_stream().model_id(&config.model_id).body(sender).send();
        let model_id = config.model_id.clone();
        let mut started = tokio::spawn(call);
        let output = match tokio::time::timeout(config.open_timeout, &mut started).await {
            Err(_) => {
                started.abort();
                return Err(ModelError::Timeout {
                    message: format!("the stream did not open within {:?}", config.open_timeout),
                });
            }
            Ok(Err(join)) => return Err(ModelError::Connection { message: format!("the stream task failed: {join}") }),
            Ok(Ok(Err(error))) => return Err(errors::from_start_error(error, &model_id)),
            Ok(Ok(Ok(output))) => output,
        };
        tokio::spawn(read(output.body, generation, out));
        Ok(connection)
    }

    fn next_content(&mut self) -> String {
        self.contents += 1;
        format!("content-{}-{}", self.generation, self.contents)
    }

    /// Queues one input event.
    pub async fn send(&self, event: Value) -> Result<(), ModelError> {
        self.send_json(event.to_string().into_bytes()).await
    }

    /// Queues one input event, already JSON text.
    async fn send_json(&self, event: Vec<u8>) -> Result<(), ModelError> {
        self.input.send(event).await.map_err(|_| ModelError::StreamInterrupted {
            message: format!("stream {} no longer takes input", self.generation),
        })
    }

    /// Replays `history` and opens the interactive audio content.
    pub async fn begin(&mut self, history: &[HistoryEntry]) -> Result<(), ModelError> {
        for entry in history {
            let name = self.next_content();
            for event in wire::text_content(&self.prompt, &name, entry.speaker.role(), false, &entry.text) {
                self.send(event).await?;
            }
        }
        self.send(wire::audio_content_start(&self.prompt, &self.audio_content)).await?;
        self.audio_open = true;
        Ok(())
    }

    /// Sends one frame of 16 kHz PCM16 audio.
    pub async fn audio(&self, pcm: &[u8]) -> Result<(), ModelError> {
        self.send_json(self.audio_events.event(pcm)).await
    }

    /// Sends typed user text as an interactive USER text content.
    pub async fn text(&mut self, text: &str) -> Result<(), ModelError> {
        let name = self.next_content();
        for event in wire::text_content(&self.prompt, &name, "USER", true, text) {
            self.send(event).await?;
        }
        Ok(())
    }

    /// Sends a notice the model takes in without answering: a non-interactive USER text
    /// content, after the interactive contents began (see [`super::SonicSession::tell`]).
    pub async fn notice(&mut self, text: &str) -> Result<(), ModelError> {
        let name = self.next_content();
        for event in wire::text_content(&self.prompt, &name, "USER", false, text) {
            self.send(event).await?;
        }
        Ok(())
    }

    /// Sends a tool result.
    pub async fn tool_result(&mut self, tool_use_id: &str, result: &Value) -> Result<(), ModelError> {
        let name = self.next_content();
        for event in wire::tool_result(&self.prompt, &name, tool_use_id, result) {
            self.send(event).await?;
        }
        Ok(())
    }

    /// Ends the stream politely: audio content end, promptEnd, sessionEnd, end of input.
    /// Every event queued before is still sent.
    pub async fn close(mut self) {
        let mut events = Vec::new();
        if std::mem::take(&mut self.audio_open) {
            events.push(wire::content_end(&self.prompt, &self.audio_content));
        }
        events.push(wire::prompt_end(&self.prompt));
        events.push(wire::session_end());
        for event in events {
            if self.send(event).await.is_err() {
                break;
            }
        }
        // Dropping `input` ends the event stream: the SDK sends the final empty envelope.
    }
}

/// The span of stream `generation`, a child of `parent` (the runtime's session span): the
/// GenAI attributes, the region, why it was opened (`start`, `rotation`, `voice_change`, or
/// the failure it recovers from), and — recorded later — the stream's token totals, why it
/// ended, and `error.type` when it failed. Never what is said.
pub fn stream_span(
    parent: &tracing::Span,
    client: &Client,
    config: &SonicConfig,
    generation: u64,
    reason: &str,
) -> tracing::Span {
    let region = client.config().region().map(ToString::to_string).unwrap_or_default();
    tracing::info_span!(
        parent: parent,
        "sonic.stream",
        otel.kind = "client",
        gen_ai.system = "aws.bedrock",
        gen_ai.operation.name = "realtime",
        gen_ai.request.model = %config.model_id,
        cloud.region = %region,
        sonic.generation = int(generation),
        sonic.opened_for = reason,
        sonic.ended_for = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// A count as a span attribute: OpenTelemetry integers are signed (a `u64` would be exported
/// as a string).
pub fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

type Receiver = aws_sdk_bedrockruntime::primitives::event_stream::EventReceiver<
    aws_sdk_bedrockruntime::types::InvokeModelWithBidirectionalStreamOutput,
    aws_sdk_bedrockruntime::types::error::InvokeModelWithBidirectionalStreamOutputError,
>;

async fn read(mut receiver: Receiver, generation: u64, out: mpsc::Sender<(u64, StreamOutput)>) {
    use aws_sdk_bedrockruntime::types::InvokeModelWithBidirectionalStreamOutput as Output;
    loop {
        let output = match receiver.recv().await {
            Ok(Some(Output::Chunk(part))) => match part.bytes {
                Some(bytes) => StreamOutput::Chunk(bytes.into_inner()),
                None => continue,
            },
            Ok(Some(_)) => continue,
            Ok(None) => StreamOutput::Ended,
            Err(error) => StreamOutput::Error(errors::from_stream_error(error)),
        };
        let last = !matches!(output, StreamOutput::Chunk(_));
        if out.send((generation, output)).await.is_err() || last {
            return;
        }
    }
}
