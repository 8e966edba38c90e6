//! The session supervisor: one task per [`super::SonicSession`] that owns the current
//! stream, routes input to it, parses and forwards its output, keeps the history, and
//! replaces the stream — proactively (age, voice change) at a turn boundary, reactively
//! (retryable failure, end of stream) at once — with the input buffered meanwhile.

use std::collections::VecDeque;
use std::time::Duration;

use aws_sdk_bedrockruntime::Client;
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::connection::{Connection, StreamOutput, int, stream_span};
use super::events::{RestartReason, SonicEvent};
use super::history::History;
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
    history: History,
    turn: TurnState,
    generation: u64,
    failures: u32,
    /// The current stream has shown it works (output, or a long enough life).
    current_healthy: bool,
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
            turn: TurnState::default(),
            generation: 0,
            failures: 0,
            current_healthy: false,
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
            };
            if !keep_going {
                break;
            }
        }
        self.shutdown().await;
    }

    async fn on_command(&mut self, command: Command) -> bool {
        match command {
            Command::Audio(pcm) => {
                if is_voiced(&pcm, self.config.voice_threshold) {
                    self.turn.voiced();
                }
                return self.route(Deferred::Audio(pcm)).await;
            }
            Command::Text(text) => {
                self.turn.typed(&text, &mut self.history);
                return self.route(Deferred::Text(text)).await;
            }
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

    /// Sends input to the current stream, or holds it (in order) while there is none.
    /// Returns false when the session must end.
    async fn route(&mut self, input: Deferred) -> bool {
        let Some(current) = self.current.as_mut().filter(|_| self.deferred.is_empty()) else {
            self.defer(input);
            return true;
        };
        let sent = match &input {
            Deferred::Audio(pcm) => current.audio(pcm).await,
            Deferred::Text(text) => current.text(text).await,
        };
        if let Err(error) = sent {
            // Not queued on the old stream: it goes to the next one.
            self.defer(input);
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
                Ok(events) => {
                    if !events.is_empty() && !self.current_healthy {
                        self.current_healthy = true;
                        self.failures = 0;
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

    /// The current stream is gone: switch to the next one as soon as there is one. A
    /// stream that failed before it ever worked counts as a failed attempt; after
    /// `retry.max_attempts` of those in a row the session fails with `error`.
    async fn stream_failed(&mut self, reason: RestartReason, error: ModelError) -> bool {
        let lived = self.current.as_ref().is_some_and(|c| c.opened_at.elapsed() >= self.config.stable_after);
        if self.current_healthy || lived {
            self.failures = 0;
        } else {
            self.failures += 1;
        }
        if let Some(old) = self.current.take() {
            old.span.record("sonic.ended_for", reason.label());
            old.span.record("error.type", error.metric_label());
            tokio::spawn(old.close());
        }
        self.current_healthy = false;
        self.parser = OutputParser::default();
        self.turn.new_stream();
        if self.failures >= self.config.retry.max_attempts {
            tracing::warn!(%error, attempts = self.failures, "Nova Sonic streams keep failing; giving up");
            let _ = self.events.send(SonicEvent::Failed(error)).await;
            return false;
        }
        match std::mem::replace(&mut self.next, Next::Idle) {
            Next::Ready { connection, deadline, .. } => self.next = Next::Ready { reason, connection, deadline },
            Next::Opening { generation, .. } => self.next = Next::Opening { reason, generation },
            Next::Idle | Next::Waiting { .. } if self.failures > 0 => {
                let wait = self.config.retry.backoff(self.failures, &mut self.rng);
                self.next = Next::Waiting { reason, at: Instant::now() + wait };
            }
            Next::Idle | Next::Waiting { .. } => self.begin_opening(reason),
        }
        true
    }

    fn begin_opening(&mut self, reason: RestartReason) {
        self.generation += 1;
        let generation = self.generation;
        let (client, config, voice, out) =
            (self.client.clone(), self.config.clone(), self.voice.clone(), self.outputs_tx.clone());
        let span = stream_span(&self.trace, &client, &config, generation, reason.label());
        self.opening =
            Some(tokio::spawn(async move { Connection::open(&client, &config, &voice, generation, out, span).await }));
        self.next = Next::Opening { reason, generation };
    }

    fn on_opened(&mut self, opened: Result<Result<Connection, ModelError>, tokio::task::JoinError>) -> bool {
        let Next::Opening { reason, .. } = std::mem::replace(&mut self.next, Next::Idle) else {
            return true;
        };
        let opened = opened
            .unwrap_or_else(|join| Err(ModelError::Connection { message: format!("opening task failed: {join}") }));
        match opened {
            Ok(connection) => {
                let deadline = match (&reason, &self.current) {
                    (RestartReason::Rotation, Some(current)) => {
                        current.opened_at + self.config.rotate_after + self.config.boundary_wait
                    }
                    _ => Instant::now() + self.config.boundary_wait,
                };
                self.next = Next::Ready { reason, connection, deadline };
                true
            }
            Err(error) if error.is_retryable() => self.retry_later(reason, Some(error)),
            Err(error) => {
                let events = self.events.clone();
                tokio::spawn(async move { events.send(SonicEvent::Failed(error)).await });
                false
            }
        }
    }

    /// Schedules another attempt, unless the attempts in a row are used up and no stream
    /// is left (then the session fails).
    fn retry_later(&mut self, reason: RestartReason, error: Option<ModelError>) -> bool {
        self.failures += 1;
        if self.failures >= self.config.retry.max_attempts && self.current.is_none() {
            let error = error.unwrap_or_else(|| ModelError::StreamInterrupted {
                message: format!("no stream could be opened in {} attempts", self.failures),
            });
            let events = self.events.clone();
            tokio::spawn(async move { events.send(SonicEvent::Failed(error)).await });
            return false;
        }
        let wait = self.config.retry.backoff(self.failures, &mut self.rng);
        tracing::info!(attempt = self.failures, ?wait, ?error, "opening the next Nova Sonic stream failed; retrying");
        self.next = Next::Waiting { reason, at: Instant::now() + wait };
        true
    }

    /// Switches to a prepared stream when there is no current one, at a turn boundary, or
    /// past its deadline. Returns false when the session must end.
    async fn try_swap(&mut self) -> bool {
        let due = match &self.next {
            Next::Ready { deadline, .. } => {
                self.current.is_none()
                    || self.turn.at_boundary(self.config.boundary_quiet)
                    || Instant::now() >= *deadline
            }
            _ => false,
        };
        if !due {
            return true;
        }
        let Next::Ready { reason, mut connection, .. } = std::mem::replace(&mut self.next, Next::Idle) else {
            return true;
        };
        if let Err(error) = connection.begin(&self.history.replay()).await {
            return self.retry_later(reason, Some(error));
        }
        while let Some(input) = self.deferred.front() {
            let sent = match input {
                Deferred::Audio(pcm) => connection.audio(pcm).await,
                Deferred::Text(text) => connection.text(text).await,
            };
            if let Err(error) = sent {
                return self.retry_later(reason, Some(error));
            }
            self.deferred.pop_front();
        }
        let generation = connection.generation;
        if let Some(old) = self.current.replace(connection) {
            old.span.record("sonic.ended_for", reason.label());
            tokio::spawn(old.close());
        }
        self.parser = OutputParser::default();
        self.turn.new_stream();
        self.current_healthy = false;
        tracing::info!(generation, reason = reason.label(), "switched to a new Nova Sonic stream");
        self.events.send(SonicEvent::Restarted { reason, generation }).await.is_ok()
    }

    async fn cancel_next(&mut self) {
        if let Some(task) = self.opening.take() {
            task.abort();
        }
        if let Next::Ready { connection, .. } = std::mem::replace(&mut self.next, Next::Idle) {
            connection.close().await;
        }
    }

    async fn shutdown(&mut self) {
        self.cancel_next().await;
        if let Some(current) = self.current.take() {
            current.close().await;
        }
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
