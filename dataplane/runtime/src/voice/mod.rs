//! Voice and hybrid sessions: a core [`Session`] (started with
//! [`Session::start_voice`]) driven over one Nova Sonic [`SonicSession`]. The user's
//! audio goes from the socket to the stream as it arrives; reply audio and SPECULATIVE
//! text go from the stream to the client as they arrive ([`relay`]); FINAL texts, tool
//! calls, barge-ins and completion ends go through the core, whose effects this adapter
//! performs — tools run concurrently while audio keeps flowing both ways, and their
//! results go back into the stream. Hybrid sessions also take typed text into the same
//! stream. Audio input is checked in [`audio`]; the client's other messages are handled
//! in `client`.
//!
//! Which sessions are voice sessions is decided where a connection starts its session
//! ([`super::connection`]): the client's `session_start.modalities` includes `audio`, the
//! agent is voice or hybrid, and this runtime has a voice model for it.
//!
//! A Persona with `speakFirst` opens a new session by saying its greeting, and greets a caller
//! transferred to it before it answers their request ([`greeting`]); a workflow node's
//! `say` line is said on entering the node (`lines`).
//!
//! Audio formats (`session_start.audio`): the reader converts the caller's audio to the
//! model's, the [`relay`] the reply audio to the client's; formats not offered get a
//! recoverable `bidi_error` once the session has started.

pub mod audio;
mod client;
mod controls;
mod fallback;
pub mod filler;
mod gate;
pub mod greeting;
mod languages;
mod lines;
mod model;
pub mod relay;
mod turns;

pub use gate::{AudioGate, BinaryAudio, Gate};
pub use model::{MAX_CLIENTS, STREAMS_PER_CLIENT, VoiceModel};

use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard_core::protocol::close_code;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agent::{AgentRuntime, Exit, Shared};
use super::driver::{Link, Opening};
use super::identity::SessionIdentity;
use super::metrics::ModelLabels;
use super::perform::{Medium, Performed, Performer};
use super::summaries::Summaries;
use super::tool_calls::{ToolCalls, ToolEvent};
use super::trace::SessionTrace;
use relay::Relay;
use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage};
use switchboard_core::{Activity, Effect, Input, Session, VoiceEffect, VoiceInput};
use switchboard_models::sonic::{SonicEvents, SonicSession};

/// How long sending a message to a client that does not read may block the session.
const SLOW_CLIENT: Duration = switchboard_serve::ws::SLOW_PEER;

/// The user's audio, checked, from the connection's reader.
pub type AudioFrames = mpsc::Receiver<Bytes>;

/// The session's audio formats (`session_start.audio`).
#[derive(Debug, Default)]
pub struct Formats {
    /// What the session uses.
    pub negotiated: switchboard_core::audio::Negotiated,
    /// What the client asked for that is not offered (each falls back to the default).
    pub refused: Vec<switchboard_core::audio::FormatError>,
}

/// Runs a voice `session` over `sonic` until it closes, hands off, loses its client, fails
/// or the link's shutdown fires. Like [`super::driver::drive`], plus the audio channel.
pub async fn drive(
    agent: &AgentRuntime,
    session: &mut Session,
    sonic: (SonicSession, SonicEvents),
    opening: Opening,
    link: Link<'_>,
    audio: &mut AudioFrames,
    formats: Formats,
) -> Exit {
    let Link { inbound, outbound, shared, shutdown, identity } = link;
    let (stream, mut events) = sonic;
    // The prompt the stream was opened with (see `VoiceModel::open`).
    let prompt = session.system_prompt();
    let tools = ToolCalls::new(identity.watch());
    let trace = SessionTrace::new(agent, session.id(), &shared.redact);
    let relay = Relay::new(formats.negotiated.output);
    let speech = audio::SpeechDetector::default();
    let greeting = greeting::Greeting::default();
    let mut voice = Voice {
        agent,
        shared,
        outbound,
        stream,
        prompt,
        tools,
        relay,
        speech,
        identity,
        trace,
        greeting,
        audio_on: true,
        fillers: filler::Fillers::default(),
        dead_air: filler::DeadAir::default(),
        turns: turns::Turns::new(
            &agent.core.spec().persona.spec.turn_taking,
            Instant::now(),
            session.call_started_at_ms(),
            crate::grants::now_ms(),
        ),
        summaries: Summaries::default(),
        languages: switchboard_core::language::Languages::new(&agent.core.spec().persona.spec),
        lines: lines::Lines::default(),
    };
    let mut inputs = Inputs { inbound, audio, events: &mut events, shutdown };
    let exit = voice.run(session, opening, formats.refused, &mut inputs).await;
    let _ = voice.stream.close().await;
    exit
}

/// What a voice session waits on.
struct Inputs<'a> {
    inbound: &'a mut mpsc::Receiver<ClientMessage>,
    audio: &'a mut AudioFrames,
    events: &'a mut SonicEvents,
    shutdown: &'a CancellationToken,
}

struct Voice<'a> {
    agent: &'a AgentRuntime,
    shared: &'a Shared,
    outbound: &'a mpsc::Sender<ServerMessage>,
    stream: SonicSession,
    /// The SYSTEM prompt the session's next stream opens with.
    prompt: String,
    tools: ToolCalls,
    relay: Relay,
    /// The caller's speech, from their audio.
    speech: audio::SpeechDetector,
    identity: &'a mut SessionIdentity,
    /// Turns, tool calls and handoffs in the session's trace (the Nova Sonic stream's own
    /// spans are not there yet).
    trace: SessionTrace,
    /// The greeting, while it is being spoken first.
    greeting: greeting::Greeting,
    /// Whether the client uses audio now (`session_update.modalities`): when not, reply
    /// audio is not sent and its microphone is not listened to.
    audio_on: bool,
    /// Running tool calls, for the fillers that break a long silence.
    fillers: filler::Fillers,
    /// How long the caller has waited for the agent's audio in its turn.
    dead_air: filler::DeadAir,
    /// Model summaries of compacted turns under way.
    summaries: Summaries,
    /// Barge-in, lines played whole, re-prompts and the call's time limit.
    turns: turns::Turns,
    /// The languages the Persona speaks and the one the call is in (`None`: only its own).
    languages: Option<switchboard_core::language::Languages>,
    /// Workflow nodes' lines, due or being said.
    lines: lines::Lines,
}

impl Voice<'_> {
    async fn run(
        &mut self,
        session: &mut Session,
        opening: Opening,
        refused: Vec<switchboard_core::audio::FormatError>,
        inputs: &mut Inputs<'_>,
    ) -> Exit {
        let Inputs { inbound, audio, events, shutdown } = inputs;
        let mut effects = opening.effects;
        let greeting = greeting::Greeting::take(session.spoken_opening(), &mut effects);
        if let Some(exit) = self.apply(session, effects).await {
            return exit;
        }
        if let Some(exit) = self.start_language(session).await {
            return exit;
        }
        for error in refused {
            if let Some(exit) = self.error(ErrorCode::UnsupportedAudioFormat, error.to_string()).await {
                return exit;
            }
        }
        if let Some(greeting) = greeting {
            if self.agent.core.spec().persona.spec.turn_taking.uninterruptible_greeting {
                self.turns.protect(Instant::now());
            }
            if self.stream.speak_first(greeting.text()).await.is_err() {
                return Exit::model_gone();
            }
            self.greeting = greeting;
        }
        for message in opening.first {
            if let Some(exit) = self.client_message(session, message).await {
                return exit;
            }
        }
        loop {
            let deadline = session.next_deadline();
            let exit = tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    session.handle(Input::End, Instant::now());
                    Some(Exit::Shutdown)
                }
                () = super::driver::sleep_until(deadline) => {
                    let effects = session.handle(Input::Tick, Instant::now());
                    self.apply(session, effects).await
                }
                () = super::driver::sleep_until(self.fillers.deadline()) => self.filler().await,
                () = super::driver::sleep_until(self.turns.deadline()) => self.clock_due(session).await,
                () = super::driver::sleep_until(self.lines.deadline()) => self.line_overdue(session).await,
                summary = self.summaries.next() => {
                    let effects = session.handle(summary, Instant::now());
                    self.apply(session, effects).await
                }
                frame = audio.recv() => match frame {
                    Some(pcm) => self.audio(session, pcm).await,
                    None => {
                        session.handle(Input::End, Instant::now());
                        Some(Exit::ClientGone)
                    }
                },
                event = events.recv() => match event {
                    Some(event) => self.model_event(session, event).await,
                    None => Some(Exit::model_gone()),
                },
                message = inbound.recv() => match message {
                    Some(message) => self.client_message(session, message).await,
                    None => {
                        session.handle(Input::End, Instant::now());
                        Some(Exit::ClientGone)
                    }
                },
                event = self.tools.next() => match event {
                    ToolEvent::Progress(message) => self.send(message).await.err(),
                    ToolEvent::Done(done) => {
                        ToolCalls::record(self.shared, self.agent, &done);
                        let (tool_use_id, _, _, outcome) = done;
                        self.fillers.finished(&tool_use_id);
                        let effects = session.handle(Input::ToolFinished { tool_use_id, outcome }, Instant::now());
                        self.apply(session, effects).await
                    }
                }
            };
            if let Some(exit) = exit {
                return exit;
            }
        }
    }

    async fn send(&mut self, message: ServerMessage) -> Result<(), Exit> {
        if !self.audio_on && matches!(message, ServerMessage::BidiAudioStream { .. }) {
            return Ok(());
        }
        self.heard(&message);
        self.turns.state(&message, self.audio_on, Instant::now());
        self.lines.sent(&message, &self.agent.core.spec().workflow.spec);
        match self.outbound.try_send(message) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Exit::ClientGone),
            Err(mpsc::error::TrySendError::Full(message)) => {
                match tokio::time::timeout(SLOW_CLIENT, self.outbound.send(message)).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(_)) => Err(Exit::ClientGone),
                    Err(_) => {
                        self.shared.metrics.errors.with_label_values(&[self.agent.core.name(), "slow_client"]).inc();
                        Err(Exit::Failed(
                            close_code::SLOW_CLIENT,
                            format!(
                                "the client did not read the session's audio for {} s; closing",
                                SLOW_CLIENT.as_secs()
                            ),
                        ))
                    }
                }
            }
        }
    }

    async fn error(&mut self, code: ErrorCode, message: String) -> Option<Exit> {
        self.shared.metrics.errors.with_label_values(&[self.agent.core.name(), code.metric_label()]).inc();
        self.send(ServerMessage::error(code, message, true)).await.err()
    }

    async fn audio(&mut self, session: &mut Session, pcm: Bytes) -> Option<Exit> {
        self.turns.caller_audio(Instant::now());
        if !self.audio_on {
            return None;
        }
        let pcm = self.turns.clean(pcm);
        let voiced = audio::rms(&pcm) >= audio::VOICED_RMS;
        if voiced {
            self.relay.user_input(Instant::now());
        }
        let mut speech = self.speech.push_frame((pcm.len() / 2) as u64, voiced);
        match self.gated_audio(pcm, voiced).await {
            // The model will not hear it: the caller's speech is over for the client too.
            Ok(true) => speech = self.speech.end().map(|_| audio::Speech::Faded).or(speech),
            Ok(false) => {}
            Err(exit) => return Some(exit),
        }
        self.speech_changed(session, speech).await
    }

    /// Tells the core that the caller started or stopped speaking.
    async fn speech_changed(&mut self, session: &mut Session, speech: Option<audio::Speech>) -> Option<Exit> {
        let activity = match speech? {
            audio::Speech::Started => Activity::SpeechStarted,
            audio::Speech::Stopped => Activity::SpeechStopped,
            audio::Speech::Faded => Activity::SpeechFaded,
        };
        let effects = session.handle(Input::Voice(VoiceInput::Activity(activity)), Instant::now());
        self.apply(session, effects).await
    }

    async fn model_event(
        &mut self,
        session: &mut Session,
        event: switchboard_models::sonic::SonicEvent,
    ) -> Option<Exit> {
        let relayed = self.relay.event(event);
        let (agent, shared) = (self.agent, self.shared);
        let metrics = &shared.metrics;
        let spec = agent.core.spec();
        let labels = [spec.agent.name.as_str(), spec.mode.as_str(), spec.model.voice_model_id.as_str()];
        if let Some(after) = relayed.first_audio_after {
            metrics.time_to_first_audio.with_label_values(&labels).observe(after.as_secs_f64());
            // A client that reads text only heard no silence.
            if after > filler::SILENCE && self.audio_on {
                metrics.silences.with_label_values(&[labels[0]]).inc();
            }
        }
        if let Some(tokens) = relayed.usage {
            let counter = |direction: &str, modality: &str, count: u64| {
                if count > 0 {
                    metrics
                        .tokens
                        .with_label_values(&[labels[0], labels[1], labels[2], direction, modality])
                        .inc_by(count);
                }
            };
            counter("input", "speech", tokens.input_speech);
            counter("input", "text", tokens.input_text);
            counter("output", "speech", tokens.output_speech);
            counter("output", "text", tokens.output_text);
            let (input, output) = (tokens.input_speech + tokens.input_text, tokens.output_speech + tokens.output_text);
            metrics.token_usage(ModelLabels::voice(spec), input, output);
        }
        if let Some(reason) = relayed.restart {
            metrics.stream_restarts.with_label_values(&[labels[0], reason]).inc();
        }
        if let Some(reasked) = relayed.reply_cut {
            let outcome = if reasked { "asked_again" } else { "unanswered" };
            metrics.replies_cut.with_label_values(&[labels[0], outcome]).inc();
        }
        for message in relayed.send {
            if let Err(exit) = self.send(message).await {
                return Some(exit);
            }
        }
        if let Some((code, label, message)) = relayed.failed {
            metrics.errors.with_label_values(&[labels[0], code.metric_label()]).inc();
            tracing::warn!(
                agent = labels[0],
                session_id = self.trace.session_id(),
                "the voice model failed: {message}"
            );
            let _ = self.send(ServerMessage::error(code, format!("the voice model failed: {message}"), false)).await;
            session.handle(Input::End, Instant::now());
            return Some(Exit::Failed(close_code::INTERNAL, format!("the voice model failed ({label})")));
        }
        for input in relayed.inputs {
            if matches!(input, Input::Voice(VoiceInput::Activity(Activity::SpeechStopped))) {
                self.speech.heard_end();
            }
            if matches!(input, Input::Voice(VoiceInput::Interrupted)) {
                self.count_interruption("taken");
            }
            self.turns.observe(&input, Instant::now());
            self.lines.heard(&input);
            if matches!(&input, Input::Voice(VoiceInput::UserFinal(text)) if filler::is_instruction(text)) {
                continue;
            }
            if let Input::Voice(VoiceInput::UserFinal(text)) = &input
                && let Some(exit) = self.heard_language(text).await
            {
                return Some(exit);
            }
            let (greeted, pass) = self.greeting.on_input(&input);
            if !greeted.is_empty()
                && let Some(exit) = self.apply(session, greeted).await
            {
                return Some(exit);
            }
            if !pass {
                continue;
            }
            let effects = session.handle(input, Instant::now());
            if let Some(exit) = self.apply(session, effects).await {
                return Some(exit);
            }
        }
        if let Some(exit) = self.line_ended(session).await {
            return Some(exit);
        }
        // A line played whole that just ended lets the caller's speech over it through.
        self.release_withheld().await
    }

    /// Performs `effects`; returns how the session ended if it did. A state change that
    /// changed the system prompt (memory, workflow step) is passed on for the streams
    /// that replace the current one — first, so that a notice of it for the live stream
    /// ([`VoiceEffect::StateChanged`]) that finds none to take it is in the next one's prompt.
    async fn apply(&mut self, session: &mut Session, effects: Vec<Effect>) -> Option<Exit> {
        if session.system_prompt_ref() != self.prompt {
            self.prompt = session.system_prompt();
            if self.stream.update_system_prompt(self.stream_prompt()).await.is_err() {
                return Some(Exit::model_gone());
            }
        }
        let mut exit = None;
        for effect in effects {
            if let Effect::ExecuteTool { tool_use_id, tool, .. } = &effect {
                self.fillers.started(tool_use_id.clone(), tool.clone(), Instant::now());
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
                Medium::Voice(VoiceEffect::SendToolResult(result)) => {
                    if self.stream.send_tool_result(result.tool_use_id, result.content).await.is_err() {
                        return Some(Exit::model_gone());
                    }
                }
                Medium::Voice(VoiceEffect::SendText(text)) => {
                    if self.stream.send_text(text).await.is_err() {
                        return Some(Exit::model_gone());
                    }
                }
                Medium::Voice(VoiceEffect::StateChanged(notice)) => {
                    if self.stream.tell(notice).await.is_err() {
                        return Some(Exit::model_gone());
                    }
                    self.shared.metrics.state_notices.with_label_values(&[self.agent.core.name()]).inc();
                }
                Medium::Cancel => {
                    self.tools.cancel();
                    self.fillers.clear();
                }
                Medium::Voice(VoiceEffect::ForgetHistory { bytes }) => {
                    if self.stream.forget_history(bytes).await.is_err() {
                        return Some(Exit::model_gone());
                    }
                }
                Medium::CallModel(_) => tracing::warn!("a voice session asked for a text model call; ignored"),
            }
        }
        self.relay.set_muted(session.output_muted());
        if exit.is_some() {
            return exit;
        }
        self.say_line(session).await
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
