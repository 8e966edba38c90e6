//! The session supervisor: one task per [`super::SonicSession`] that owns the current
//! stream, routes input to it, parses and forwards its output, keeps the history, and
//! replaces the stream — proactively (age, voice change) at a turn boundary, reactively
//! (retryable failure, end of stream) at once — with the input buffered meanwhile
//! ([`switch`]), asking the replacement again what a lost stream owed a reply for.

mod switch;

use std::collections::VecDeque;
use std::time::Duration;

use aws_sdk_bedrockruntime::Client;
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::chunk::AudioChunker;
use super::connection::{Connection, StreamOutput, int, stream_span};
use super::events::{RestartReason, SonicEvent};
use super::history::History;
use super::reask::EchoGuard;
use super::turn::TurnState;
use super::wire::OutputParser;
use super::{Command, SonicConfig};
use crate::ModelError;

/// How often a prepared stream re-checks for a turn boundary.
const BOUNDARY_POLL: Duration = Duration::from_millis(100);

/// Input held while no stream can take it, in order.
#[derive(Debug)]
enum Deferred {
    Audio(Bytes),
    Text(String),
}

/// The next stream.
enum Next {
    Idle,
    Opening { reason: RestartReason, generation: u64 },
    Waiting { reason: RestartReason, at: Instant },
    Ready { reason: RestartReason, connection: Connection, deadline: Instant },
}

type Opening = JoinHandle<Result<Connection, ModelError>>;

/// The session task's state.
pub struct Supervisor {
    client: Client,
    config: SonicConfig,
    voice: String,
    commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<SonicEvent>,
    outputs_tx: mpsc::Sender<(u64, StreamOutput)>,
    outputs: mpsc::Receiver<(u64, StreamOutput)>,
    current: Option<Connection>,
    parser: OutputParser,
    next: Next,
    opening: Option<Opening>,
    deferred: VecDeque<Deferred>,
    /// The caller's audio gathered for the current stream's next `audioInput` event.
    chunker: AudioChunker,
    history: History,
    turn: TurnState,
    /// The user's words the next stream is asked again (after its history).
    reask: Option<String>,
    /// Holds back the current stream's echo of the words it was asked again.
    echo: EchoGuard,
    generation: u64,
    failures: u32,
    /// The current stream has shown it works (output, or a long enough life).
    current_healthy: bool,
    /// The session failed ([`SonicEvent::Failed`] was sent): what is held is not handed
    /// to another stream at the end.
    failed: bool,
    rng: fastrand::Rng,
    /// The span the session started in (the runtime's session span): the task runs in it,
    /// and each stream's span is its child.
    trace: tracing::Span,
}

impl Supervisor {
    /// Opens the first stream and spawns the session task.
    pub async fn start(
        client: Client,
        config: SonicConfig,
        commands: mpsc::Receiver<Command>,
        events: mpsc::Sender<SonicEvent>,
    ) -> Result<(), ModelError> {
        let (outputs_tx, outputs) = mpsc::channel(256);
        let rng = config.retry.jitter_seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed);
        let chunker = AudioChunker::new(config.audio_chunk);
        let mut supervisor = Self {
            voice: config.voice_id.clone(),
            history: History::new(config.history.clone()),
            client,
            config,
            commands,
            events,
            outputs_tx,
            outputs,
            current: None,
            parser: OutputParser::default(),
            next: Next::Idle,
            opening: None,
            deferred: VecDeque::new(),
            chunker,
            turn: TurnState::default(),
            reask: None,
            echo: EchoGuard::default(),
            generation: 0,
            failures: 0,
            current_healthy: false,
            failed: false,
            rng,
            trace: tracing::Span::current(),
        };
        let mut connection = supervisor.open_first().await?;
        connection.begin(&supervisor.history.replay()).await?;
        supervisor.current = Some(connection);
        supervisor.failures = 0;
        let trace = supervisor.trace.clone();
        tokio::spawn(supervisor.run().instrument(trace));
        Ok(())
    }

    async fn open_first(&mut self) -> Result<Connection, ModelError> {
        loop {
            self.generation += 1;
            let span = stream_span(&self.trace, &self.client, &self.config, self.generation, "start");
            let (generation, out) = (self.generation, self.outputs_tx.clone());
            let opened = Connection::open(&self.client, &self.config, &self.voice, generation, out, span).await;
            match opened {
                Ok(connection) => return Ok(connection),
                Err(error) if !error.is_retryable() || self.failures + 1 >= self.config.retry.max_attempts => {
                    return Err(error);
                }
                Err(error) => {
                    self.failures += 1;
                    let wait = self.config.retry.backoff(self.failures, &mut self.rng);
                    tracing::info!(%error, attempt = self.failures, ?wait, "opening the Nova Sonic stream failed; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn run(mut self) {
        loop {
            if !self.try_swap().await {
                break;
            }
            let rotate_at = match (&self.next, &self.current) {
                (Next::Idle, Some(current)) => Some(current.opened_at + self.config.rotate_after),
                _ => None,
            };
            let waiting_at = match &self.next {
                Next::Waiting { at, .. } => Some(*at),
                _ => None,
            };
            let ready = matches!(self.next, Next::Ready { .. });
            let flush_at = self.chunker.deadline();
            let keep_going = tokio::select! {
                command = self.commands.recv() => match command {
                    None | Some(Command::Close) => false,
                    Some(command) => self.on_command(command).await,
                },
                Some((generation, output)) = self.outputs.recv() => self.on_output(generation, output).await,
                opened = join(&mut self.opening), if self.opening.is_some() => {
                    self.opening = None;
                    self.on_opened(opened)
                }
                () = sleep_until(waiting_at), if waiting_at.is_some() => {
                    if let Next::Waiting { reason, .. } = std::mem::replace(&mut self.next, Next::Idle) {
                        self.begin_opening(reason);
                    }
                    true
                }
                () = sleep_until(rotate_at), if rotate_at.is_some() => {
                    self.begin_opening(RestartReason::Rotation);
                    true
                }
                () = tokio::time::sleep(BOUNDARY_POLL), if ready => true,
                () = sleep_until(flush_at), if flush_at.is_some() => self.flush_audio().await,
            };
            if !keep_going {
                break;
            }
        }
        self.shutdown().await;
    }

    async fn on_command(&mut self, command: Command) -> bool {
        if let Command::Audio(pcm) = command {
            return self.on_audio(pcm).await;
        }
        // Audio gathered before this input goes first.
        if !self.flush_audio().await {
            return false;
        }
        match command {
            Command::Audio(_) => {}
            Command::Text(text) => return self.route(Deferred::Text(text)).await,
            Command::ToolResult { tool_use_id, result } => {
                let known = self.turn.answer_tool_call(&tool_use_id);
                match self.current.as_mut() {
                    Some(current) if known => {
                        if let Err(error) = current.tool_result(&tool_use_id, &result).await {
                            return self.stream_failed(RestartReason::StreamError(error.metric_label()), error).await;
                        }
                    }
                    _ => tracing::warn!(
                        tool_use_id,
                        "dropping a tool result: its call belongs to a stream that was replaced"
                    ),
                }
            }
            Command::Notice(text) => match self.current.as_mut().filter(|_| self.deferred.is_empty()) {
                Some(current) => {
                    if let Err(error) = current.notice(&text).await {
                        return self.stream_failed(RestartReason::StreamError(error.metric_label()), error).await;
                    }
                }
                // The stream that takes the input held now opens with the new SYSTEM prompt.
                None => tracing::debug!("no stream takes input now; the notice is in the next stream's prompt"),
            },
            Command::ForgetHistory(bytes) => self.history.forget_oldest(bytes),
            Command::ChangeVoice(voice) => {
                if voice != self.voice {
                    self.voice = voice;
                    self.cancel_next().await;
                    self.begin_opening(RestartReason::VoiceChange);
                }
            }
            Command::SystemPrompt(prompt) => {
                if prompt != self.config.system_prompt {
                    self.config.system_prompt = prompt;
                    let prepared = match &self.next {
                        Next::Opening { reason, .. } | Next::Ready { reason, .. } => Some(reason.clone()),
                        Next::Idle | Next::Waiting { .. } => None,
                    };
                    if let Some(reason) = prepared {
                        self.cancel_next().await;
                        self.begin_opening(reason);
                    }
                }
            }
            Command::Close => return false,
        }
        true
    }

    /// A frame of the caller's audio: gathered into the current stream's next event
    /// ([`AudioChunker`]); held on its own (in order) while no stream takes input.
    async fn on_audio(&mut self, pcm: Bytes) -> bool {
        if is_voiced(&pcm, self.config.voice_threshold) {
            self.turn.voiced();
        }
        if self.current.is_none() || !self.deferred.is_empty() {
            return self.flush_audio().await && self.route(Deferred::Audio(pcm)).await;
        }
        match self.chunker.push(pcm, Instant::now()) {
            Some(audio) => self.route(Deferred::Audio(audio)).await,
            None => true,
        }
    }

    /// Sends the audio gathered so far. Returns false when the session must end.
    async fn flush_audio(&mut self) -> bool {
        match self.chunker.take() {
            Some(audio) => self.route(Deferred::Audio(audio)).await,
            None => true,
        }
    }

    /// Sends input to the current stream, or holds it (in order) while there is none.
    /// Typed text enters the history as it goes to a stream: held, it would be replayed
    /// and sent as well. Returns false when the session must end.
    async fn route(&mut self, input: Deferred) -> bool {
        let Some(current) = self.current.as_mut().filter(|_| self.deferred.is_empty()) else {
            self.defer(input);
            return true;
        };
        if let Deferred::Text(text) = &input {
            self.turn.typed(text, &mut self.history);
        }
        let sent = match &input {
            Deferred::Audio(pcm) => current.audio(pcm).await,
            Deferred::Text(text) => current.text(text).await,
        };
        if let Err(error) = sent {
            // Not queued on the old stream: it goes to the next one (text as the words
            // the next stream is asked again, which it is one of now).
            if matches!(input, Deferred::Audio(_)) {
                self.defer(input);
            }
            return self.stream_failed(RestartReason::StreamError(error.metric_label()), error).await;
        }
        true
    }

    fn defer(&mut self, input: Deferred) {
        if self.deferred.len() >= self.config.max_buffered_frames {
            self.deferred.pop_front();
            tracing::warn!(
                max = self.config.max_buffered_frames,
                "input buffer full while reconnecting; dropping the oldest frame"
            );
        }
        self.deferred.push_back(input);
    }

    async fn on_output(&mut self, generation: u64, output: StreamOutput) -> bool {
        if self.current.as_ref().map(|c| c.generation) != Some(generation) {
            let next_failed = !matches!(output, StreamOutput::Chunk(_))
                && matches!(&self.next, Next::Ready { connection, .. } if connection.generation == generation);
            if next_failed && let Next::Ready { reason, .. } = std::mem::replace(&mut self.next, Next::Idle) {
                tracing::info!(generation, "the prepared stream ended before the switch; preparing another");
                return self.retry_later(reason, None);
            }
            // A replaced stream's last usage report still counts.
            if let StreamOutput::Chunk(bytes) = output {
                for event in OutputParser::default().parse(&bytes).unwrap_or_default() {
                    if matches!(event, SonicEvent::Usage(_)) && self.events.send(event).await.is_err() {
                        return false;
                    }
                }
            }
            return true;
        }
        match output {
            StreamOutput::Chunk(bytes) => match self.parser.parse(&bytes) {
                Ok(parsed) => {
                    if !parsed.is_empty() && !self.current_healthy {
                        self.current_healthy = true;
                        self.failures = 0;
                    }
                    let mut events = Vec::with_capacity(parsed.len());
                    for event in parsed {
                        self.echo.filter(event, &mut events);
                    }
                    for event in events {
                        if let (SonicEvent::Usage(usage), Some(current)) = (&event, &self.current) {
                            current.span.record("gen_ai.usage.input_tokens", int(usage.total_input_tokens));
                            current.span.record("gen_ai.usage.output_tokens", int(usage.total_output_tokens));
                        }
                        self.turn.observe(&event, &mut self.history);
                        if self.events.send(event).await.is_err() {
                            return false;
                        }
                    }
                    true
                }
                Err(error) => {
                    tracing::warn!(%error, "skipping an output event that cannot be parsed");
                    true
                }
            },
            StreamOutput::Error(error) if error.is_retryable() => {
                tracing::info!(%error, generation, "the Nova Sonic stream failed; replacing it");
                self.stream_failed(RestartReason::StreamError(error.metric_label()), error).await
            }
            StreamOutput::Error(error) => {
                self.failed = true;
                let _ = self.events.send(SonicEvent::Failed(error)).await;
                false
            }
            StreamOutput::Ended => {
                tracing::info!(generation, "the service ended the Nova Sonic stream; replacing it");
                let error = ModelError::StreamInterrupted { message: "the service ended the stream".into() };
                self.stream_failed(RestartReason::StreamEnded, error).await
            }
        }
    }

    /// Ends the session: the audio gathered last goes to the current stream, or after the
    /// input held for the next one; input held while the session ends goes to the next
    /// stream ([`Supervisor::hand_over_held`]); then every stream is closed.
    async fn shutdown(&mut self) {
        if let Some(audio) = self.chunker.take() {
            match self.current.as_ref().filter(|_| self.deferred.is_empty()) {
                Some(current) => {
                    if current.audio(&audio).await.is_err()
                        && let Some(lost) = self.current.take()
                    {
                        // Its input side is gone: the audio is held for the next stream.
                        tokio::spawn(lost.close());
                        self.defer(Deferred::Audio(audio));
                    }
                }
                None => self.defer(Deferred::Audio(audio)),
            }
        }
        if !self.deferred.is_empty() && !self.failed {
            self.hand_over_held().await;
        }
        self.cancel_next().await;
        if let Some(current) = self.current.take() {
            current.close().await;
        }
    }

    /// The session ends while input is held for a stream that is not there yet (the
    /// current one was lost and the next is opening, or waiting out a backoff): the next
    /// stream is opened now if it is not under way (one attempt, bounded by
    /// `open_timeout`), takes the history and the held input, and is closed with the
    /// session — every frame the caller sent reaches a stream once, whenever the call
    /// ends. Nothing is asked again (nobody is left to hear an answer), and the client is
    /// not told of the switch. Should the stream not open, the held input is dropped (and
    /// logged).
    async fn hand_over_held(&mut self) {
        self.reask = None;
        let mut next = match std::mem::replace(&mut self.next, Next::Idle) {
            Next::Ready { connection, .. } => Some(connection),
            state => {
                match state {
                    Next::Waiting { reason, .. } => self.begin_opening(reason),
                    Next::Idle => self.begin_opening(RestartReason::StreamEnded),
                    Next::Opening { .. } | Next::Ready { .. } => {}
                }
                self.next = Next::Idle;
                match self.opening.take() {
                    Some(opening) => match opening.await {
                        Ok(Ok(connection)) => Some(connection),
                        Ok(Err(error)) => {
                            tracing::info!(%error, "the stream to take the session's last input did not open");
                            None
                        }
                        Err(_) => None,
                    },
                    None => None,
                }
            }
        };
        let held = self.deferred.len();
        let handed = match next.as_mut() {
            Some(next) => self.send_held(next).await,
            None => false,
        };
        if !handed {
            tracing::warn!(held, "the session ended while no Nova Sonic stream could take its last input; dropping it");
        }
        if let Some(next) = next {
            next.close().await;
        }
    }

    /// Sends the history and the held input to `next`, a stream opened to take them.
    async fn send_held(&mut self, next: &mut Connection) -> bool {
        if next.begin(&self.history.replay()).await.is_err() {
            return false;
        }
        for input in std::mem::take(&mut self.deferred) {
            let sent = match &input {
                Deferred::Audio(pcm) => next.audio(pcm).await,
                Deferred::Text(text) => next.text(text).await,
            };
            if sent.is_err() {
                return false;
            }
        }
        true
    }
}

fn is_voiced(pcm: &[u8], threshold: f64) -> bool {
    let count = pcm.len() / 2;
    if count == 0 {
        return false;
    }
    let sum: f64 = pcm.chunks_exact(2).map(|p| f64::from(i16::from_le_bytes([p[0], p[1]]))).map(|s| s * s).sum();
    (sum / count as f64).sqrt() >= threshold
}

async fn join(task: &mut Option<Opening>) -> Result<Result<Connection, ModelError>, tokio::task::JoinError> {
    match task {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
