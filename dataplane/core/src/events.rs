//! The vocabulary between the core and its adapters: what a session starts with
//! ([`SessionInit`]), what happens to it ([`Input`]) and what it asks for ([`Effect`]).

use super::grant::Carried;
use super::handoff::HandoffRequest;
use super::transcript::TranscriptEntry;
use crate::model::{ModelRequest, StopReason, ToolResult, ToolUse, Usage};
use crate::protocol::ServerMessage;

/// What a session is given when it starts.
#[derive(Clone, Debug, Default)]
pub struct SessionInit {
    /// The session's id.
    pub session_id: String,
    /// Today's date (ISO 8601), for `{date}`.
    pub today: String,
    /// The text model this session uses instead of the Agent's `textModelId`
    /// (`session_start.model`); the caller has checked it with
    /// `ModelSettings::allows_session_model`.
    pub model: Option<String>,
    /// What the session carries from before (by a gateway): memory, conversation, the
    /// handoff it arrives by, where it may return, its place in the workflow, a summary.
    pub carried: Carried,
}

/// Something that happened to the session.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// The user typed (or said) something.
    UserText {
        /// What the user typed.
        text: String,
        /// The input's id (`bidi_text_input.id`): the line that takes it up carries it
        /// back (`input_id`), as does an error refusing it.
        id: Option<String>,
    },
    /// The caller pressed keys on a phone's keypad (`bidi_dtmf`): unchecked as they came;
    /// the session checks them ([`crate::dtmf`]) and tells the agent at `#`, a pause, or
    /// [`crate::dtmf::MAX_DIGITS`] keys.
    Dtmf {
        /// The keys, in order.
        digits: String,
    },
    /// The model call asked for by [`Effect::CallModel`] finished.
    ModelReply(ModelReply),
    /// The model call failed; `code` is a short label, `message` says what to do.
    ModelFailed {
        /// e.g. `throttled`, `timeout`.
        code: String,
        /// What happened.
        message: String,
    },
    /// A tool asked for by [`Effect::ExecuteTool`] finished.
    ToolFinished {
        /// The call.
        tool_use_id: String,
        /// Its result or failure.
        outcome: Result<serde_json::Value, super::tools::ToolFailure>,
    },
    /// The user answered a consent request.
    Consent {
        /// The call.
        tool_use_id: String,
        /// Whether the user approved.
        approved: bool,
    },
    /// The client answered a `client_tool_call` (`client_tool_result`): exactly one of
    /// `result` and `error` is expected; an answer with neither or both is refused
    /// (`malformed_message`) and the call goes on waiting.
    ClientToolResult {
        /// The call.
        tool_use_id: String,
        /// The tool's result.
        result: Option<serde_json::Value>,
        /// Why the client could not run it.
        error: Option<String>,
    },
    /// The client says how a `transfer_request` ended (`transfer_result`).
    TransferResult {
        /// The call of `transfer_to_person`.
        tool_use_id: String,
        /// How it ended.
        outcome: crate::protocol::TransferOutcome,
        /// What happened, in the client's words (untrusted; cut to 300 characters).
        message: String,
    },
    /// The client says how a `digits_request` ended (`digits_result`).
    DigitsResult {
        /// The call of `send_digits`.
        tool_use_id: String,
        /// How it ended.
        outcome: crate::protocol::DigitsOutcome,
        /// How many keys went, by the client's count (untrusted).
        sent: u32,
        /// What happened, in the client's words (untrusted; cut to 300 characters).
        message: String,
    },
    /// What a voice model and the audio say (voice sessions; a text session ignores them).
    Voice(VoiceInput),
    /// The model call asked for by [`Effect::CallModel`] was refused because its context
    /// is longer than the model takes (Bedrock's `ValidationException` "Input is too long
    /// for requested model" and its kin): the session compacts harder and calls again, once.
    ContextTooLong {
        /// The provider's explanation.
        message: String,
    },
    /// The summary asked for by [`Effect::Summarize`] `id` was written (`Ok`: the model's
    /// text, untrusted) or not (`Err`: why; the extractive summary stands).
    Summary {
        /// The request's id.
        id: u64,
        /// The model's text, or why there is none.
        outcome: Result<String, String>,
    },
    /// The user asked to stop the current reply or tool wait (`bidi_cancel`).
    Cancel,
    /// Time passed: what was due by now (an unanswered consent request) expires. Adapters
    /// send it at [`crate::Session::next_deadline`].
    Tick,
    /// The session ends (the client closed it, or the server is stopping).
    End,
    /// The agent ends the call itself (a silent caller, the call's time limit — see
    /// [`crate::turn_taking`]): `reason` goes in the record's `end` entry and the close.
    Hangup {
        /// Why, for the record.
        reason: String,
    },
}

/// What happened in a voice session's stream or audio: inputs only a session driven by a
/// streaming voice model (`Drive::Voice`) takes; a text session ignores them (its adapter
/// sends none).
#[derive(Clone, Debug, PartialEq)]
pub enum VoiceInput {
    /// The voice model's FINAL transcript of what the user said. Typed text the model
    /// echoes back is recognised and not recorded twice.
    UserFinal(String),
    /// The assistant's FINAL text — what was really spoken, not interrupted. SPECULATIVE
    /// text never enters the session (the adapter relays it).
    AssistantFinal(String),
    /// The voice model called a tool inside its stream. It goes through the same pipeline
    /// as a text model's call; the result comes back as [`VoiceEffect::SendToolResult`]
    /// instead of a new model call.
    ToolUse(ToolUse),
    /// The user spoke over the assistant (barge-in).
    Interrupted,
    /// A reply was cut off by a barge-in before its FINAL text: the text it was to say
    /// (SPECULATIVE) and how much of its audio went to the client. The part the caller
    /// heard enters the conversation (see `heard`).
    ReplyCut {
        /// What the reply was to say.
        text: String,
        /// Milliseconds of its audio sent to the client.
        sent_ms: u64,
        /// How long the voice takes to say one character, in microseconds.
        us_per_char: u64,
    },
    /// The client played this many milliseconds of the interrupted reply's audio
    /// (`bidi_audio_played`).
    AudioPlayed {
        /// Milliseconds played.
        ms: u64,
    },
    /// What is audible changed — the caller's speech, the reply's audio.
    Activity(Activity),
    /// The voice model finished a completion (`end_turn`, `interrupted`, `tool_use`, ...).
    CompletionEnd {
        /// Why it ended.
        stop_reason: crate::protocol::StopReason,
    },
}

impl From<VoiceInput> for Input {
    fn from(input: VoiceInput) -> Self {
        Self::Voice(input)
    }
}

/// What became audible or stopped being so in a voice session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// The caller started speaking (voice activity in their audio).
    SpeechStarted,
    /// The caller stopped and their turn went to the model: the voice model took it as
    /// ended (its transcript follows), or the client ended it (push-to-talk).
    SpeechStopped,
    /// The caller fell silent without the model taking it as a turn (it was noise).
    SpeechFaded,
    /// The voice model started the audio of a reply.
    ReplyAudioStarted,
    /// The reply's audio ended (finished, or cut off).
    ReplyAudioEnded,
}

impl Input {
    /// [`Input::UserText`] without an id.
    pub fn user_text(text: String) -> Self {
        Self::UserText { text, id: None }
    }
}

/// A whole model reply.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelReply {
    /// The reply's text.
    pub text: String,
    /// Tool calls, in order.
    pub tool_uses: Vec<ToolUse>,
    /// Tokens used.
    pub usage: Option<Usage>,
    /// Why the model stopped.
    pub stop_reason: Option<StopReason>,
    /// The model that answered when a fallback did (`model`, or `model@region`).
    pub model: Option<String>,
}

/// Something the adapter must do.
// Effects are created and consumed at once, never stored in bulk: boxing would only add allocations.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Send a message to the client.
    Send(ServerMessage),
    /// Call the model; answer with [`Input::ModelReply`] or [`Input::ModelFailed`].
    CallModel(ModelRequest),
    /// Run one of the agent's tools; answer with [`Input::ToolFinished`].
    ExecuteTool {
        /// The call.
        tool_use_id: String,
        /// The tool's name.
        tool: String,
        /// The validated input.
        input: serde_json::Value,
    },
    /// Move the session to another agent. The session is over here.
    Handoff(HandoffRequest),
    /// Append a line to the transcript.
    Transcript(TranscriptEntry),
    /// What only a voice stream does (voice sessions).
    Voice(VoiceEffect),
    /// Ask the session's text model for a summary of compacted turns (a request made by
    /// [`crate::summary::request`]) beside the conversation — nothing waits for it; answer
    /// with [`Input::Summary`] carrying `id`. Until then (and if it fails) the extractive
    /// summary stands.
    Summarize {
        /// Which compaction it summarises (only the latest one's answer is used).
        id: u64,
        /// The request.
        request: ModelRequest,
    },
    /// Stop what the cancelled turn had under way: drop the model call in flight (text),
    /// stop the running tool calls (the session already gave them their results), and —
    /// voice — silence the voice model's output (audio, text) until the user's next input.
    Cancel,
    /// Close the session.
    Close {
        /// Why.
        reason: String,
    },
}

/// What a voice session asks of its stream: effects only a session driven by a streaming
/// voice model ([`crate::Session::start_voice`]) returns.
#[derive(Clone, Debug, PartialEq)]
pub enum VoiceEffect {
    /// Send this tool result into the voice stream (the model goes on speaking from it).
    SendToolResult(ToolResult),
    /// Send the user's typed text (or a question the model is to put to the caller) into
    /// the voice stream as text content.
    SendText(String),
    /// The session's state changed under the live stream (a memory value set, a step the
    /// workflow took): tell the stream now, as text it takes in without answering (Nova 2
    /// Sonic: a `TEXT` content, role `USER`, `interactive: false`). The stream's SYSTEM
    /// prompt is fixed for its life; streams opened later are given the new prompt instead,
    /// so a notice that finds no stream to take it may be dropped. See `session::notice`.
    StateChanged(String),
    /// The conversation's oldest turns were compacted into the summary (in the system
    /// prompt from now on): streams opened from now on replay the history without its
    /// oldest `bytes` of text (about what the session cut off).
    ForgetHistory {
        /// Bytes of user and assistant text cut off.
        bytes: usize,
    },
}

impl From<VoiceEffect> for Effect {
    fn from(effect: VoiceEffect) -> Self {
        Self::Voice(effect)
    }
}
