//! The Amazon Nova Sonic client: speech-to-speech over Bedrock's
//! `InvokeModelWithBidirectionalStream`, through the real `aws-sdk-bedrockruntime`
//! client (build it with [`crate::bedrock::build_client`]).
//!
//! A [`SonicSession`] is one conversation. Its input side takes 16 kHz PCM16 audio frames,
//! typed text (hybrid mode), tool results, notices of the session's state (non-interactive
//! text the model takes in without answering), a voice change and close; its output is a
//! stream of typed [`SonicEvent`]s (transcripts with SPECULATIVE/FINAL stage, 24 kHz
//! audio, tool calls, interruptions, usage, restarts, a fatal error).
//!
//! **Connection lifetime.** Nova Sonic ends a stream after about 8 minutes. The session
//! rotates before that ([`SonicConfig::rotate_after`], default 6 minutes): it opens the
//! next stream in the background, and at a turn boundary (no reply under way, no tool
//! call pending, the user not mid-utterance) replays the history there, moves the audio
//! over and closes the old stream — every input frame goes to exactly one stream, and the
//! new stream never answers replayed history, so no reply is spoken twice. A stream that
//! fails with a retryable error, or that the service ends, is replaced the same way at
//! once, with the user's audio buffered meanwhile; streams that fail before they ever
//! worked count as attempts, and after [`SonicConfig::retry`]'s attempts in a row the
//! session fails. Fatal errors (credentials, access denied, unknown model, invalid
//! input) are not retried: [`SonicSession::start`] returns them, or a
//! [`SonicEvent::Failed`] ends the session. Each switch is reported as
//! [`SonicEvent::Restarted`] with its [`RestartReason`].
//!
//! **A question is not left unanswered by a lost stream.** A stream lost that way may owe
//! the user a reply: their words were heard (a FINAL USER transcript, or typed text) and
//! no reply to them finished — it was planned, or cut mid-sentence. Then the session
//! reports [`SonicEvent::ReplyCut`] (a client stops playing what it holds of the reply)
//! and asks the replacement to answer: after the history replay it sends those words as
//! interactive USER text — Nova 2 Sonic's cross-modal text input, the way typed text goes
//! in (`contentStart` type `TEXT`, role `USER`, `interactive: true`; `textInput`;
//! `contentEnd`) — and the replacement's reply is the answer, said whole. The replay ends
//! before those words (they are the input now, not history the model would take as
//! handled), and **the cut reply is left out of it**, even the FINAL text of sentences
//! already spoken: replayed as the assistant's, a part-answer would read as the answer
//! given, and the model would say the rest or nothing — not the whole reply the caller
//! is owed; the caller heard the start, then hears it whole (a client that showed the FINAL
//! text of sentences said before the cut sees them again in the whole reply). Nothing is
//! asked twice: a reply that finished before the stream went (its end of turn came)
//! settles the words heard before it started, as do a tool call (asked again, the tool
//! would run twice), a barge-in (new words follow) and words the model left unanswered for
//! 15 s (a backchannel). Each utterance is
//! asked again at most once: when the replacement is lost mid-reply too, the words are let
//! go ([`SonicEvent::ReplyCut`] with `reasked: false`: the turn is over) and stay in the
//! history as said. The proactive switches never need this: they wait for a turn
//! boundary. Should the replacement echo the words as a USER transcript, the echo is held
//! back, so the user's words are reported once. The rules are in `reask.rs`, each with its
//! unit test.

mod chunk;
mod connection;
pub mod events;
pub mod history;
mod reask;
mod session;
mod turn;
pub mod wire;

use std::time::Duration;

use aws_sdk_bedrockruntime::Client;
use bytes::Bytes;
use switchboard_crds::agent::{ModelSettings, TurnDetection};
use tokio::sync::mpsc;

use crate::{ModelError, RetryPolicy, ToolDefinition};
pub use events::{
    ContentKind, EncodedAudio, GenerationStage, RestartReason, Role, SonicEvent, StopReason, TokenCounts, UsageReport,
};
pub use history::{HistoryEntry, Speaker};

/// The default model: Amazon Nova 2 Sonic.
pub const DEFAULT_MODEL: &str = "amazon.nova-2-sonic-v1:0";
/// The default voice.
pub const DEFAULT_VOICE: &str = "matthew";

/// Nova 2 Sonic's end-of-turn sensitivity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointingSensitivity {
    /// Responds soonest after the user stops.
    High,
    /// Balanced.
    Medium,
    /// Waits longest.
    Low,
}

impl EndpointingSensitivity {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::High => "HIGH",
            Self::Medium => "MEDIUM",
            Self::Low => "LOW",
        }
    }
}

/// How to run a Sonic session.
#[derive(Clone, Debug)]
pub struct SonicConfig {
    /// The model id. Default [`DEFAULT_MODEL`].
    pub model_id: String,
    /// The voice (from the Persona). Default [`DEFAULT_VOICE`].
    pub voice_id: String,
    /// The system prompt.
    pub system_prompt: String,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// History to replay on the first stream (e.g. after a handoff).
    pub history: Vec<HistoryEntry>,
    /// `inferenceConfiguration.maxTokens`. Default 1024.
    pub max_tokens: u32,
    /// `inferenceConfiguration.topP`. Default 0.9.
    pub top_p: f32,
    /// `inferenceConfiguration.temperature`. Default 0.7.
    pub temperature: f32,
    /// Nova 2 turn detection; `None` leaves the service's default.
    pub endpointing_sensitivity: Option<EndpointingSensitivity>,
    /// Age at which a stream is replaced proactively. Default 6 minutes.
    pub rotate_after: Duration,
    /// How long past `rotate_after` to wait for a turn boundary before switching anyway.
    /// Default 60 s (well within the service's ~8 minute limit).
    pub boundary_wait: Duration,
    /// When the user spoke and no transcript came back (the model took it for noise),
    /// the silence after which a turn boundary is assumed anyway. Default 2.5 s (longer
    /// than the service's end-of-turn pause plus its response time).
    pub boundary_quiet: Duration,
    /// RMS amplitude (PCM16) from which an input frame counts as voiced. Default 500.
    pub voice_threshold: f64,
    /// Attempts to (re)open a stream in a row, and the backoff between them.
    pub retry: RetryPolicy,
    /// A stream that lived this long (or produced output) counts as working; one that
    /// fails sooner counts against `retry.max_attempts`. Default 10 s.
    pub stable_after: Duration,
    /// Longest wait for a stream to open. Default 10 s.
    pub open_timeout: Duration,
    /// Most audio frames buffered while no stream is usable; older ones are dropped
    /// beyond it (and logged). Default 3,000 (a minute of 20 ms frames).
    pub max_buffered_frames: usize,
    /// Audio per `audioInput` event: the caller's frames are gathered and sent together
    /// once this much has arrived, or once the first of them has waited this long, and
    /// before any other input (fewer events, the same audio in the same order). A frame
    /// reaches the stream at most this much later than alone. Zero (the default): each
    /// frame is its own event.
    pub audio_chunk: Duration,
}

impl SonicConfig {
    /// Defaults with `system_prompt`.
    pub fn new(system_prompt: impl Into<String>) -> Self {
        Self {
            model_id: DEFAULT_MODEL.to_owned(),
            voice_id: DEFAULT_VOICE.to_owned(),
            system_prompt: system_prompt.into(),
            tools: Vec::new(),
            history: Vec::new(),
            max_tokens: 1024,
            top_p: 0.9,
            temperature: 0.7,
            endpointing_sensitivity: None,
            rotate_after: Duration::from_secs(6 * 60),
            boundary_wait: Duration::from_secs(60),
            boundary_quiet: Duration::from_millis(2500),
            voice_threshold: 500.0,
            retry: RetryPolicy::default(),
            stable_after: Duration::from_secs(10),
            open_timeout: Duration::from_secs(10),
            max_buffered_frames: 3000,
            audio_chunk: Duration::ZERO,
        }
    }

    /// The settings of an Agent's `model` section (Sonic model id, inference settings,
    /// turn detection) with `system_prompt` and the Persona's `voice_id`.
    pub fn from_settings(
        settings: &ModelSettings,
        system_prompt: impl Into<String>,
        voice_id: impl Into<String>,
    ) -> Self {
        let mut config = Self::new(system_prompt);
        config.model_id = settings.voice_model_id.clone();
        config.voice_id = voice_id.into();
        config.max_tokens = settings.max_tokens;
        config.temperature = settings.temperature;
        config.top_p = settings.top_p;
        config.endpointing_sensitivity = Some(match settings.turn_detection {
            TurnDetection::High => EndpointingSensitivity::High,
            TurnDetection::Medium => EndpointingSensitivity::Medium,
            TurnDetection::Low => EndpointingSensitivity::Low,
        });
        config
    }
}

/// How an interactive USER text that asks the model to speak first begins; the greeting
/// follows in double quotes ([`speak_first_prompt`]).
pub const SPEAK_FIRST_PREFIX: &str = "The caller has just joined the call and has not said anything yet. Speak first: greet them now by saying exactly the following, then wait for their reply: ";

/// The text that asks Nova Sonic to open the conversation with `greeting`.
///
/// Nova Sonic never speaks unprompted and refuses a history that starts with an ASSISTANT
/// message, so an assistant-first turn is asked for the way Nova 2 Sonic supports: an
/// interactive USER text content (text input, sent into the open prompt after the SYSTEM
/// content and the audio content's start) that tells the model what to say. The model then
/// answers it like typed text — reply audio, SPECULATIVE and FINAL assistant text — and
/// the caller hears the greeting in the session's voice. The instruction is not the
/// caller's words: a runtime never shows it as theirs (nor an echo of it as a USER
/// transcript), and it is replayed, like any typed text, only as the USER message before the
/// greeting when a stream is replaced.
pub fn speak_first_prompt(greeting: &str) -> String {
    format!("{SPEAK_FIRST_PREFIX}\"{}\"", greeting.trim())
}

/// The session is gone (closed, or failed: its last event says why).
#[derive(Debug, thiserror::Error)]
#[error("the Nova Sonic session has ended; start a new one")]
pub struct SessionClosed;

/// What the session's input side carries.
#[derive(Debug)]
enum Command {
    Audio(Bytes),
    Text(String),
    Notice(String),
    ToolResult { tool_use_id: String, result: serde_json::Value },
    ChangeVoice(String),
    SystemPrompt(String),
    ForgetHistory(usize),
    Close,
}

/// A running Nova Sonic conversation (the input side). Cheap to clone.
#[derive(Clone, Debug)]
pub struct SonicSession {
    commands: mpsc::Sender<Command>,
}

/// The output side of a [`SonicSession`]: its events, in order. It ends after
/// [`SonicEvent::Failed`] or once the session is closed.
#[derive(Debug)]
pub struct SonicEvents {
    events: mpsc::Receiver<SonicEvent>,
}

impl SonicEvents {
    /// The next event; `None` when the session has ended.
    pub async fn recv(&mut self) -> Option<SonicEvent> {
        self.events.recv().await
    }
}

impl futures_util::Stream for SonicEvents {
    type Item = SonicEvent;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<SonicEvent>> {
        self.events.poll_recv(cx)
    }
}

impl SonicSession {
    /// Opens the first stream (retrying retryable failures as `config.retry` allows) and
    /// starts the session. Fatal errors are returned at once.
    pub async fn start(client: Client, config: SonicConfig) -> Result<(SonicSession, SonicEvents), ModelError> {
        let (commands, command_rx) = mpsc::channel(256);
        let (events_tx, events) = mpsc::channel(256);
        session::Supervisor::start(client, config, command_rx, events_tx).await?;
        Ok((SonicSession { commands }, SonicEvents { events }))
    }

    async fn command(&self, command: Command) -> Result<(), SessionClosed> {
        self.commands.send(command).await.map_err(|_| SessionClosed)
    }

    /// Sends a frame of user audio: 16 kHz, 16-bit, mono PCM, little-endian. Each call is
    /// one `audioInput` event (20-100 ms frames are typical), or part of one when
    /// [`SonicConfig::audio_chunk`] gathers frames.
    pub async fn send_audio(&self, pcm: Bytes) -> Result<(), SessionClosed> {
        self.command(Command::Audio(pcm)).await
    }

    /// Sends typed user text into the conversation (hybrid mode).
    pub async fn send_text(&self, text: impl Into<String>) -> Result<(), SessionClosed> {
        self.command(Command::Text(text.into())).await
    }

    /// Tells the live stream something it takes in without answering (the session's state
    /// changed under it: a memory value, a workflow step): a non-interactive USER text
    /// content, sent between the stream's other input. It is not history — a stream opened
    /// later is given the state in its SYSTEM prompt ([`SonicSession::update_system_prompt`],
    /// to be sent first) — so while no stream takes input (one is being replaced) the
    /// notice is dropped: the replacement opens with the new prompt.
    pub async fn tell(&self, notice: impl Into<String>) -> Result<(), SessionClosed> {
        self.command(Command::Notice(notice.into())).await
    }

    /// Asks the model to speak first, saying `greeting` as the assistant's opening turn
    /// (see [`speak_first_prompt`]). Meant once, before the caller speaks.
    pub async fn speak_first(&self, greeting: &str) -> Result<(), SessionClosed> {
        self.command(Command::Text(speak_first_prompt(greeting))).await
    }

    /// Answers the model's tool call `tool_use_id` (from [`SonicEvent::ToolUse`]). A JSON
    /// string is sent as is; other values as their JSON text.
    pub async fn send_tool_result(
        &self,
        tool_use_id: impl Into<String>,
        result: serde_json::Value,
    ) -> Result<(), SessionClosed> {
        self.command(Command::ToolResult { tool_use_id: tool_use_id.into(), result }).await
    }

    /// Switches to `voice_id`: a new stream with that voice takes over at the next turn
    /// boundary, with the history replayed.
    pub async fn change_voice(&self, voice_id: impl Into<String>) -> Result<(), SessionClosed> {
        self.command(Command::ChangeVoice(voice_id.into())).await
    }

    /// Sets the SYSTEM prompt of the streams opened from now on (a rotation, a recovery, a
    /// voice change). The current stream keeps the prompt it opened with — the service
    /// fixes it for a stream's life — so a session whose state changed (a verified caller,
    /// a workflow step) does not fall back to an outdated prompt when its stream is
    /// replaced. A stream already prepared with the old prompt is prepared again.
    pub async fn update_system_prompt(&self, prompt: impl Into<String>) -> Result<(), SessionClosed> {
        self.command(Command::SystemPrompt(prompt.into())).await
    }

    /// Forgets about the oldest `bytes` of the history's text (whole messages, erring
    /// towards keeping): the conversation they held was compacted into a summary that the
    /// SYSTEM prompt carries from now on ([`SonicSession::update_system_prompt`]), so the
    /// streams opened from now on replay the summary and the recent turns instead of the
    /// newest 40 KB of everything. The current stream is not touched.
    pub async fn forget_history(&self, bytes: usize) -> Result<(), SessionClosed> {
        self.command(Command::ForgetHistory(bytes)).await
    }

    /// Ends the session: the stream is closed politely and the event stream ends.
    pub async fn close(&self) -> Result<(), SessionClosed> {
        self.command(Command::Close).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_settings_map_onto_the_session_config() {
        let settings = ModelSettings {
            voice_model_id: "amazon.nova-sonic-v1:0".into(),
            max_tokens: 256,
            temperature: 0.2,
            top_p: 0.5,
            turn_detection: TurnDetection::High,
            ..ModelSettings::default()
        };
        let config = SonicConfig::from_settings(&settings, "be brief", "amy");
        assert_eq!((config.model_id.as_str(), config.voice_id.as_str()), ("amazon.nova-sonic-v1:0", "amy"));
        assert_eq!((config.max_tokens, config.temperature, config.top_p), (256, 0.2, 0.5));
        assert_eq!(config.endpointing_sensitivity, Some(EndpointingSensitivity::High));
        assert_eq!(SonicConfig::new("x").model_id, DEFAULT_MODEL);
        assert_eq!(ModelSettings::default().voice_model_id, DEFAULT_MODEL);
    }

    #[test]
    fn the_speak_first_prompt_quotes_the_greeting_after_the_fixed_instruction() {
        let prompt = speak_first_prompt("  Hello, you're through to Example Bank. ");
        assert!(prompt.starts_with(SPEAK_FIRST_PREFIX));
        assert!(prompt.ends_with("\"Hello, you're through to Example Bank.\""), "{prompt}");
    }
}
