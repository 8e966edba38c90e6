//! Drives one core [`Session`] with real I/O: streams model calls (forwarding text deltas
//! as they arrive), runs tools concurrently, feeds outcomes back, sends the core's
//! messages to the client, writes transcripts and records metrics. Generic over channels,
//! so the WebSocket server, local mode and tests all use it.

use std::time::Instant;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agent::{AgentRuntime, Exit, Shared};
use super::identity::SessionIdentity;
use super::metrics::ModelLabels;
use super::perform::{Medium, Performed, Performer};
use super::summaries::Summaries;
use super::tool_calls::{ToolCalls, ToolEvent};
use super::trace::SessionTrace;
use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, TranscriptRole};
use switchboard_core::{Effect, Input, ModelReply, Session};
use switchboard_models::{ModelEvent, ModelStream, stream_with_retry};

struct ModelCall {
    stream: ModelStream,
    started: Instant,
    first_token: bool,
    reply: ModelReply,
    /// The model answering: the one asked for, then each fallback moved to (`model@region`
    /// when in another region). Token and latency metrics are labelled with it.
    model: String,
}

/// The connection's side of a driven session: the client's decoded messages, the channel
/// to the client, what every session shares, and the process's shutdown.
#[derive(Debug)]
pub struct Link<'a> {
    /// Client messages, in order; closed when the client is gone.
    pub inbound: &'a mut mpsc::Receiver<ClientMessage>,
    /// Messages for the client.
    pub outbound: &'a mpsc::Sender<ServerMessage>,
    /// Metrics, transcripts, retries.
    pub shared: &'a Shared,
    /// Fires when the process shuts down.
    pub shutdown: &'a CancellationToken,
    /// The verified caller's identity assertion, for the session's tool calls.
    pub identity: &'a mut SessionIdentity,
}

/// How a driven session begins: the effects its start returned ([`Session::start`]) and
/// client messages to handle before reading the link (one sent before `session_start`, or
/// inputs queued in the session a handoff came from).
#[derive(Debug, Default)]
pub struct Opening {
    /// The start's effects.
    pub effects: Vec<Effect>,
    /// Client messages handled first.
    pub first: Vec<ClientMessage>,
}

/// Runs `session` until it closes, hands off, loses its client or the link's shutdown
/// fires.
pub async fn drive(agent: &AgentRuntime, session: &mut Session, opening: Opening, link: Link<'_>) -> Exit {
    let Link { inbound, outbound, shared, shutdown, identity } = link;
    let tools = ToolCalls::new(identity.watch());
    let trace = SessionTrace::new(agent, session.id(), &shared.redact);
    let summaries = Summaries::default();
    let mut driver =
        Driver { agent, shared, outbound, model: None, tools, turn_started: None, identity, trace, summaries };
    if let Some(exit) = driver.apply(opening.effects).await {
        return exit;
    }
    for message in opening.first {
        match driver.client_input(message).await {
            Ok(Some(input)) => {
                let effects = session.handle(input, Instant::now());
                if let Some(exit) = driver.apply(effects).await {
                    return exit;
                }
            }
            Ok(None) => {}
            Err(exit) => return exit,
        }
    }
    loop {
        let deadline = session.next_deadline();
        let input = tokio::select! {
            () = sleep_until(deadline) => Input::Tick,
            message = inbound.recv() => match message {
                None => { session.handle(Input::End, Instant::now()); return Exit::ClientGone; }
                Some(message) => match driver.client_input(message).await {
                    Ok(Some(input)) => input,
                    Ok(None) => continue,
                    Err(exit) => return exit,
                },
            },
            event = next_model_event(&mut driver.model) => match driver.model_event(event) {
                Some(input) => input,
                None => continue,
            },
            summary = driver.summaries.next() => summary,
            event = driver.tools.next() => match event {
                ToolEvent::Progress(message) => {
                    if let Err(exit) = driver.send(message).await {
                        return exit;
                    }
                    continue;
                }
                ToolEvent::Done(done) => {
                    ToolCalls::record(shared, agent, &done);
                    let (tool_use_id, _, _, outcome) = done;
                    Input::ToolFinished { tool_use_id, outcome }
                }
            },
            () = shutdown.cancelled() => {
                session.handle(Input::End, Instant::now());
                return Exit::Shutdown;
            }
        };
        let effects = session.handle(input, Instant::now());
        if let Some(exit) = driver.apply(effects).await {
            return exit;
        }
    }
}

/// Waits until `deadline` (a session's [`Session::next_deadline`]); never without one.
pub(super) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

async fn next_model_event(call: &mut Option<ModelCall>) -> Option<Result<ModelEvent, switchboard_models::ModelError>> {
    match call {
        Some(call) => call.stream.next().await,
        None => std::future::pending().await,
    }
}

struct Driver<'a> {
    agent: &'a AgentRuntime,
    shared: &'a Shared,
    outbound: &'a mpsc::Sender<ServerMessage>,
    model: Option<ModelCall>,
    tools: ToolCalls,
    turn_started: Option<Instant>,
    identity: &'a mut SessionIdentity,
    trace: SessionTrace,
    summaries: Summaries,
}

impl Driver<'_> {
    async fn send(&mut self, message: ServerMessage) -> Result<(), Exit> {
        self.outbound.send(message).await.map_err(|_| Exit::ClientGone)
    }

    async fn client_input(&mut self, message: ClientMessage) -> Result<Option<Input>, Exit> {
        Ok(match message {
            ClientMessage::BidiTextInput { text, id } => Some(Input::UserText { text, id }),
            ClientMessage::ToolConsent { tool_use_id, approved } => Some(Input::Consent { tool_use_id, approved }),
            // Checked and gathered by the core; never logged here (keys may be a PIN).
            ClientMessage::BidiDtmf { digits } => Some(Input::Dtmf { digits }),
            ClientMessage::ClientToolResult { tool_use_id, result, error } => {
                Some(Input::ClientToolResult { tool_use_id, result, error })
            }
            ClientMessage::TransferResult { tool_use_id, outcome, message } => {
                Some(Input::TransferResult { tool_use_id, outcome, message })
            }
            ClientMessage::DigitsResult { tool_use_id, outcome, sent, message } => {
                Some(Input::DigitsResult { tool_use_id, outcome, sent, message })
            }
            ClientMessage::Close {} => Some(Input::End),
            ClientMessage::BidiCancel {} => Some(Input::Cancel),
            // No audio was played in a text session.
            ClientMessage::BidiAudioPlayed { .. } => None,
            ClientMessage::SessionUpdate(update) => {
                // Nothing a text session may change applies: a voice needs audio, and
                // modalities without audio are what it has.
                let refused = match update.check() {
                    Err(refusal) => Some(refusal),
                    Ok(_) if update.voice.is_some() => {
                        let message = "this session has no audio: a voice applies to sessions started with modalities [\"audio\"]; nothing was changed";
                        Some((ErrorCode::UnsupportedModality, message.to_owned()))
                    }
                    Ok(Some(modalities)) => modalities
                        .check_text_session()
                        .err()
                        .map(|why| (ErrorCode::UnsupportedModality, format!("{why}; nothing was changed"))),
                    Ok(None) => None,
                };
                match refused {
                    Some((code, message)) => self.error(code, &message).await?,
                    None => {
                        let modalities = update.check().ok().flatten().map(|m| m.names());
                        self.send(ServerMessage::BidiSessionUpdated { voice: None, modalities }).await?;
                    }
                }
                None
            }
            ClientMessage::BidiAudioInputEnd {} => {
                self.error(
                    ErrorCode::UnsupportedModality,
                    "this session has no audio; bidi_audio_input_end applies to sessions with audio",
                )
                .await?;
                None
            }
            ClientMessage::SessionStart(_) => {
                self.error(ErrorCode::AlreadyStarted, "the session has already started; send bidi_text_input").await?;
                None
            }
            ClientMessage::BidiAudioInput { .. } => {
                self.error(ErrorCode::UnsupportedModality, "this agent runs in text mode; send bidi_text_input")
                    .await?;
                None
            }
            ClientMessage::IdentityAssertion { assertion } => {
                match self.identity.accept(&assertion) {
                    Ok(()) => {}
                    Err(refused) if refused.is_quiet() => {
                        tracing::debug!("an identity assertion was not used: {refused}")
                    }
                    Err(refused) => {
                        let (agent, session_id) = (self.agent.core.name(), self.trace.session_id());
                        tracing::warn!(agent, session_id, "an identity assertion was refused: {refused}");
                        self.error(ErrorCode::IdentityRefused, &refused.to_string()).await?;
                    }
                }
                None
            }
        })
    }

    async fn error(&mut self, code: ErrorCode, message: &str) -> Result<(), Exit> {
        self.shared.metrics.errors.with_label_values(&[self.agent.core.name(), code.metric_label()]).inc();
        self.send(ServerMessage::error(code, message, true)).await
    }

    fn model_event(&mut self, event: Option<Result<ModelEvent, switchboard_models::ModelError>>) -> Option<Input> {
        let [agent, mode, _] = self.agent.labels();
        let call = self.model.as_mut()?;
        let labels = ModelLabels { model: call.model.as_str(), ..ModelLabels::text(self.agent.core.spec()) };
        match event {
            Some(Ok(event)) => {
                if event.is_output() && !call.first_token {
                    call.first_token = true;
                    let now = Instant::now();
                    self.trace.first_token(now - call.started);
                    self.shared.metrics.first_token(labels, now - call.started);
                    if let Some(start) = self.turn_started.take() {
                        self.trace.first_response(now - start);
                        self.shared
                            .metrics
                            .turn_latency
                            .with_label_values(&[agent, mode, labels.model])
                            .observe((now - start).as_secs_f64());
                    }
                }
                match event {
                    ModelEvent::TextDelta(delta) => {
                        call.reply.text.push_str(&delta);
                        let message = ServerMessage::BidiTranscriptStream {
                            role: TranscriptRole::Assistant,
                            text: delta,
                            delta: true,
                            is_final: false,
                            input_id: None,
                        };
                        // Deltas are best effort: the final transcript follows.
                        let _ = self.outbound.try_send(message);
                    }
                    ModelEvent::ToolUse(tool_use) => call.reply.tool_uses.push(tool_use),
                    ModelEvent::Usage(usage) => {
                        let tokens = &self.shared.metrics.tokens;
                        let model = labels.model;
                        tokens.with_label_values(&[agent, mode, model, "input", "text"]).inc_by(usage.input_tokens);
                        tokens.with_label_values(&[agent, mode, model, "output", "text"]).inc_by(usage.output_tokens);
                        self.shared.metrics.token_usage(labels, usage.input_tokens, usage.output_tokens);
                        self.trace.usage(usage.input_tokens, usage.output_tokens);
                        call.reply.usage = Some(usage);
                    }
                    ModelEvent::Stop(reason) => call.reply.stop_reason = Some(reason),
                    ModelEvent::FellBack(fallback) => {
                        let values = [agent, mode, fallback.from.as_str(), fallback.to.as_str(), fallback.reason];
                        self.shared.metrics.fallbacks.with_label_values(&values).inc();
                        // What follows comes from the model moved to.
                        call.model.clone_from(&fallback.to);
                        call.reply.model = Some(fallback.to.clone());
                        tracing::warn!(
                            agent,
                            session_id = self.trace.session_id(),
                            from = %fallback.from,
                            to = %fallback.to,
                            reason = fallback.reason,
                            "model call falls back: {}",
                            fallback.message
                        );
                    }
                }
                None
            }
            Some(Err(error)) => {
                self.end_model_call(Some(error.metric_label()))?;
                self.trace.model_failed(error.metric_label());
                self.shared
                    .metrics
                    .errors
                    .with_label_values(&[agent, &format!("model_{}", error.metric_label())])
                    .inc();
                tracing::warn!(agent, session_id = self.trace.session_id(), "model call failed: {error}");
                if error.is_context_too_long() {
                    return Some(Input::ContextTooLong { message: error.to_string() });
                }
                Some(Input::ModelFailed { code: error.metric_label().to_owned(), message: error.to_string() })
            }
            None => {
                let call = self.finish_model_call()?;
                self.trace.model_done(call.reply.stop_reason.as_ref().map(|reason| reason.as_str()));
                Some(Input::ModelReply(call.reply))
            }
        }
    }

    /// Ends the model call in flight (if any) and records its duration.
    fn finish_model_call(&mut self) -> Option<ModelCall> {
        self.end_model_call(None)
    }

    /// Ends the model call in flight (if any) and records its duration and, when it failed,
    /// its error type.
    fn end_model_call(&mut self, error: Option<&str>) -> Option<ModelCall> {
        let call = self.model.take()?;
        let labels = ModelLabels { model: call.model.as_str(), ..ModelLabels::text(self.agent.core.spec()) };
        self.shared.metrics.model_call_done(labels, call.started.elapsed(), error);
        Some(call)
    }

    /// Performs `effects` (those every session performs alike through the [`Performer`]);
    /// returns how the session ended if it did.
    async fn apply(&mut self, effects: Vec<Effect>) -> Option<Exit> {
        let mut exit = None;
        for effect in effects {
            if matches!(effect, Effect::Send(ServerMessage::BidiResponseStart { .. })) {
                self.turn_started = Some(Instant::now());
            }
            let medium = match self.performer().perform(effect) {
                Performed::Done => continue,
                Performed::Ends(end) => {
                    exit = Some(end);
                    continue;
                }
                Performed::Medium(medium) => medium,
            };
            match medium {
                Medium::Send(message) => {
                    if let Err(gone) = self.send(message).await {
                        return Some(gone);
                    }
                }
                Medium::CallModel(request) => {
                    self.trace.model_call();
                    let model = request.model_id.clone();
                    let stream = stream_with_retry(self.agent.model.clone(), request, self.shared.retry.clone());
                    self.model = Some(ModelCall {
                        stream,
                        started: Instant::now(),
                        first_token: false,
                        reply: ModelReply::default(),
                        model,
                    });
                }
                Medium::Cancel => {
                    // The call's stream is dropped (its HTTP request with it).
                    if self.finish_model_call().is_some() {
                        self.turn_started = None;
                    }
                    self.tools.cancel();
                }
                // Only voice sessions (runtime::voice) ask for these.
                Medium::Voice(_) => {}
            }
        }
        exit
    }

    /// What the [`Performer`] borrows of this driver.
    fn performer(&mut self) -> Performer<'_> {
        Performer {
            agent: self.agent,
            shared: self.shared,
            tools: &mut self.tools,
            identity: &mut *self.identity,
            trace: &mut self.trace,
            summaries: &mut self.summaries,
        }
    }
}
