//! The session protocol of DESIGN.md: JSON messages over a WebSocket between a client,
//! the gateway and a runtime, the same for every mode. Every message is an object whose
//! `type` field names it. [`ClientMessage`] flows client -> server, [`ServerMessage`]
//! server -> client. The runtime, the gateway, the edges, local mode and the clients share
//! these types; this crate holds only them (no I/O, no signing), so a client or an edge
//! depends on the protocol without the agent core.
//!
//! Typed inputs are acknowledged by id: a `bidi_text_input` may carry an `id`, and the
//! final user transcript line that takes it up carries the same as `input_id` (a
//! `bidi_error` refusing it too), so a client tells identical inputs apart and knows which
//! were taken up. A client that sends no id gets none back and works as before.
//!
//! The codes — close codes ([`close_code`]), `bidi_error` codes ([`ErrorCode`]) and stop
//! reasons ([`StopReason`]) — are catalogued in one place each (`codes`), their wire names
//! unchanged.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::handoff::{HandoffContext, HandoffKind};

mod audio;
mod card;
mod codes;
mod for_people;
pub mod handoff;
mod kind;
pub mod schema;
mod session;
mod signed;
pub mod transcript;

pub use audio::{AudioFormat, AudioSettings};
pub use card::{Card, CardField, CardLink, card_schema};
pub use codes::{ErrorCode, StopReason, close_code};
pub use for_people::ErrorForPeople;
pub use kind::ServerKind;
pub use session::{Modalities, Refusal, SessionStart, SessionState, SessionUpdate};
pub use signed::SignedContext;
/// Who produced a piece of transcript (defined beside the transcript entries, which the
/// handoff context's history shares without depending on the wire types).
pub use transcript::TranscriptRole;

/// The version of the session protocol these types define, in the published schema's `$id`
/// and title ([`schema`]) and the client libraries built from it. Semantic versioning: a
/// new optional field, message or code is a minor version (peers ignore what they do not
/// know); removing or changing the meaning of one is a major version.
pub const PROTOCOL_VERSION: &str = "1.1.0";

/// A message from the client.
// Messages are decoded and consumed one at a time: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// Opens the session. Must be the first message; a session that sends something else
    /// first is started with defaults.
    SessionStart(SessionStart),
    /// A piece of the user's speech: base64 PCM16, 16 kHz, mono, little-endian (voice and
    /// hybrid only). Binary WebSocket frames may carry the same audio as raw bytes.
    #[schemars(transform = schema::audio_or_data)]
    BidiAudioInput {
        /// Base64-encoded audio; `data` is read as the same field.
        #[serde(alias = "data")]
        audio: String,
    },
    /// Push-to-talk: the caller's turn ends now (sessions with audio). The agent answers
    /// without waiting for the pause that ends a turn; the client may stop sending audio
    /// until the caller speaks again.
    BidiAudioInputEnd {},
    /// Stops what the agent is doing for the current turn: its reply (text: the model call;
    /// audio: its speech, silenced until the user's next input) and the tool calls and
    /// consent requests of the turn (they end as `tool_error` `cancelled`). The turn ends
    /// with `stop_reason: cancelled`. With nothing under way: `bidi_error`
    /// `nothing_to_cancel`.
    BidiCancel {},
    /// After a barge-in (`bidi_interruption`): how much of the interrupted reply's audio
    /// the client really played before it stopped. The conversation keeps the part of the
    /// reply that was heard (without it, all audio sent counts as heard). Text sessions
    /// ignore it.
    BidiAudioPlayed {
        /// Milliseconds of the interrupted reply played.
        audio_played_ms: u64,
    },
    /// Changes settings of the session mid-session ([`SessionUpdate`]).
    SessionUpdate(SessionUpdate),
    /// Something the user typed.
    BidiTextInput {
        /// The text.
        text: String,
        /// The client's name for this input (a UUID, a counter: any string), optional. The
        /// line that takes the input up — its final `bidi_transcript_stream` (role `user`)
        /// — carries it back as `input_id`, and so does a `bidi_error` refusing it (`busy`,
        /// `empty_text`): a client tells two identical inputs apart by it. Through a gateway
        /// the runtime sees the gateway's own id for the input (unique in the session, the
        /// client's after a colon: `7:abc`, or just `7`), and the client gets its own back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// Keys the caller pressed on a phone's keypad (DTMF), in order: `0`-`9`, `*`, `#`
    /// and `A`-`D`, at most 32 a message (the SIP edge sends one message a key, as it is
    /// pressed). The agent is told them as the caller's input ("The caller pressed 1 2 3
    /// #") when the caller ends them with `#`, pauses for 1.5 s, or has pressed 32; the
    /// line that tells them is the session's user transcript line, in the record like
    /// other caller input (the message itself is never recorded). Other characters, an
    /// empty or longer `digits`: `bidi_error` `invalid_dtmf`; more than a person can press
    /// (a burst of 32, then 10 a second): `bidi_error` `dtmf_rate`, the keys dropped.
    BidiDtmf {
        /// The keys, e.g. `"1"` or `"1234#"`.
        digits: String,
    },
    /// The user's answer to a `consent_request`. A typed or spoken clear "yes" or "no"
    /// while one is pending answers it too.
    ToolConsent {
        /// The `tool_use_id` of the `consent_request` answered.
        tool_use_id: String,
        /// True when the user allows the tool to run.
        approved: bool,
    },
    /// The client's answer to a `client_tool_call`: exactly one of `result` (the tool's JSON
    /// result, checked against the tool's `outputSchema` when it has one) and `error` (why
    /// the client could not run it, e.g. it has no handler for the tool). The model gets
    /// either; a result that does not match the schema reaches it as a `client_bad_result`
    /// error. An answer for no waiting call gets `bidi_error` `no_client_tool_pending`.
    ClientToolResult {
        /// The `tool_use_id` of the `client_tool_call` answered.
        tool_use_id: String,
        /// The tool's result (any JSON value).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<serde_json::Value>,
        /// Why the client did not run the tool, for the model (at most 1,000 characters
        /// are kept).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// How a `transfer_request` ended. `transferred`: the caller is with the person and
    /// the session ends (the record says to whom); any other outcome comes back to the
    /// agent's model as a `tool_error` of kind `transfer_<outcome>`, and the session goes
    /// on. A client that cannot transfer calls answers `rejected`.
    TransferResult {
        /// The `tool_use_id` of the `transfer_request` answered.
        tool_use_id: String,
        /// What became of it.
        outcome: TransferOutcome,
        /// What happened, for the model and the record (`486 Busy Here`), optional.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// Ends the session now: the server closes the socket with 1000, and the session cannot
    /// be resumed (a dropped connection can: see `session_start.resume_token`).
    Close {},
    /// Gateway to runtime only: the verified caller's identity assertion
    /// (`switchboard_core::assertion`), sent when a caller is verified during the session (and
    /// refreshed while it lasts). A gateway refuses it from clients; a runtime takes only one
    /// that verifies with its gateway public key and names its session.
    // Not part of the published schema: no client may send it.
    #[schemars(skip)]
    IdentityAssertion {
        /// The compact JWS.
        assertion: String,
    },
}

/// How a transfer to a person ended (`transfer_result.outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransferOutcome {
    /// The caller is with the person: the session ends.
    Transferred,
    /// The person's line is busy (SIP 486, 600).
    Busy,
    /// Nobody answered within the timeout (SIP 408, 480, 487, or no final answer).
    NoAnswer,
    /// The person declined the call (SIP 603).
    Declined,
    /// The person cannot be reached (SIP 404, 410, 484, 5xx, or no route).
    Unreachable,
    /// The transfer was refused before the person was called: the trunk takes no REFER,
    /// or the client cannot transfer calls.
    Rejected,
    /// Anything else.
    Failed,
}

impl TransferOutcome {
    /// Every outcome.
    pub const ALL: [Self; 7] = [
        Self::Transferred,
        Self::Busy,
        Self::NoAnswer,
        Self::Declined,
        Self::Unreachable,
        Self::Rejected,
        Self::Failed,
    ];

    /// The snake_case name (the wire, metric labels).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transferred => "transferred",
            Self::Busy => "busy",
            Self::NoAnswer => "no_answer",
            Self::Declined => "declined",
            Self::Unreachable => "unreachable",
            Self::Rejected => "rejected",
            Self::Failed => "failed",
        }
    }

    /// The outcome of a SIP final status for the person's call (a REFER's NOTIFY, or the
    /// answer to the REFER itself).
    pub fn of_sip_status(status: u16) -> Self {
        match status {
            200..=299 => Self::Transferred,
            486 | 600 => Self::Busy,
            408 | 480 | 487 => Self::NoAnswer,
            603 => Self::Declined,
            404 | 410 | 484 | 485 | 500..=599 | 604 => Self::Unreachable,
            _ => Self::Failed,
        }
    }
}

/// Token counts by direction and modality.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokensByModality {
    /// Speech tokens read.
    pub input_speech: u64,
    /// Text tokens read.
    pub input_text: u64,
    /// Speech tokens generated.
    pub output_speech: u64,
    /// Text tokens generated.
    pub output_text: u64,
}

/// The person an outage fallback puts the caller through to (`bidi_session_fallback`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FallbackPerson {
    /// Their name in the Agent (`spec.telephony.people[].name`).
    pub name: String,
    /// Where they are: an E.164 number or a `sip:`/`sips:` URI.
    pub address: String,
}

/// A message to the client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// The session is open on `agent`: the first message of a session, and again after every
    /// handoff (after the `handoff` message, on the same socket), every move of the session
    /// to another pod, and every resume. Through a gateway it brings a fresh `resume_token`
    /// and the message's number `seq`.
    BidiConnectionStart {
        /// The session's id (logs and transcripts use it).
        session_id: String,
        /// The agent now serving the session.
        agent: String,
        /// The agent's mode: `voice` (speech to speech), `text`, or `hybrid` (speech and typed
        /// text). A session without `audio` in its modalities runs over the text model
        /// whatever the mode.
        mode: String,
        /// The model the agent uses.
        model: String,
        /// Through a gateway: the token that resumes this session on a new connection
        /// within the resume window (`session_start.resume_token`). A new one comes with
        /// every `bidi_connection_start`; the newest is the one to use.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_token: Option<String>,
        /// Through a gateway: this message's number in the session. Every message the
        /// gateway sends a client counts from 1, this one included, across connections:
        /// a client that counts the messages it receives from here knows the last
        /// one's number (`session_start.last_seq` on resume).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        /// Through a gateway, in a test session (`session_start.candidate`): true when the
        /// agent's candidate pods (its held rollout's edited spec) serve it. Absent
        /// otherwise: its live pods do.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        candidate: bool,
    },
    /// Transcript text: streamed deltas of the agent's reply (`delta: true`), then the
    /// whole reply once more with `is_final: true`; the user's own text comes back final
    /// when the agent takes it up (a typed input's with its `input_id`).
    ///
    /// Voice and hybrid sessions: Nova Sonic's SPECULATIVE assistant text (what it plans
    /// to say, sent before the audio) arrives as `delta: true, is_final: false` — a preview
    /// that may differ from what is spoken; its FINAL text (what was really spoken, not
    /// interrupted) arrives as `delta: false, is_final: true`, and only that enters the
    /// conversation. The transcript of the user's speech arrives final only.
    BidiTranscriptStream {
        /// Who said it.
        role: TranscriptRole,
        /// The delta, or the whole text when `is_final`.
        text: String,
        /// True for a streamed piece.
        delta: bool,
        /// True for the complete text of a message.
        is_final: bool,
        /// On the user's final line that takes up a typed input: that input's `id`, when it
        /// had one (`bidi_text_input.id`). Absent on spoken lines and on the agent's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_id: Option<String>,
    },
    /// The agent's answer to a user turn begins (`bidi_response_complete` ends it).
    BidiResponseStart {
        /// Counts the turns of this session from 1.
        turn: u64,
    },
    /// The agent's answer to a user turn is over; `stop_reason` says how it ended.
    BidiResponseComplete {
        /// The turn that completed.
        turn: u64,
        /// Why the answer ended (`end_turn`, `handoff`, `interrupted`, ...).
        stop_reason: StopReason,
    },
    /// Tokens used by one model call (text), or since the previous report (voice).
    BidiUsage {
        /// Tokens read.
        input_tokens: u64,
        /// Tokens generated.
        output_tokens: u64,
        /// Their sum.
        total_tokens: u64,
        /// The same tokens by modality (voice and hybrid sessions; absent in text).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        modality: Option<TokensByModality>,
        /// The model that answered, when a fallback did (text): `model`, or `model@region`
        /// in another region. Absent: the session's model (`bidi_connection_start.model`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// Reply audio (voice and hybrid): base64 of the session's output format
    /// (`session_start.audio.output`; by default PCM16, 24 kHz, mono, little-endian).
    /// With `session_start.audio.binary_output` the same audio comes as binary frames.
    BidiAudioStream {
        /// Base64-encoded audio.
        audio: String,
        /// The audio's format (encoding and sample rate).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<AudioFormat>,
    },
    /// The user spoke over the agent (barge-in), or cancelled its reply (`bidi_cancel`):
    /// stop playback and drop queued audio now.
    BidiInterruption {},
    /// The caller started speaking (sessions with audio): from the runtime's voice activity
    /// detection on the caller's audio, or the voice model hearing the caller speak over it.
    BidiSpeechStarted {},
    /// The caller stopped speaking (sessions with audio): the voice model took the turn as
    /// ended (its transcript of the caller's words follows), the client ended it
    /// (`bidi_audio_input_end`), or the caller fell silent without being heard as speech.
    BidiSpeechStopped {},
    /// The session's state changed ([`SessionState`]).
    BidiSessionState {
        /// The new state.
        state: SessionState,
    },
    /// A `session_update` applied: the settings it changed, now in effect for the rest of
    /// the session — across handoffs, moves and resumes (the gateway carries them).
    BidiSessionUpdated {
        /// The voice now speaking, when the update changed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        voice: Option<String>,
        /// The modalities now in use, when the update changed them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        modalities: Option<Vec<String>>,
    },
    /// The voice model's stream was replaced (proactive rotation before the service's
    /// connection limit, recovery from a stream error, or a voice change). History was
    /// replayed and no audio was lost; nothing for the client to do.
    BidiConnectionRestart {
        /// `rotation`, `voice_change`, `stream_ended`, or the error type (`throttled`, ...).
        reason: String,
        /// The new stream's number in this session (1 is the first).
        generation: u64,
    },
    /// A tool call started (a handoff or a workflow move is one too); `tool_complete` or
    /// `tool_error` with the same `tool_use_id` ends it.
    ToolStart {
        /// The model's id of the call.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// Its input.
        input: serde_json::Value,
        /// What the tool does, for people: the `description` of the Agent's tool spec (or
        /// of the handoff it makes). Absent for a tool the agent does not have.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// A long tool call says how it is going (the tool server's progress notifications).
    ToolProgress {
        /// The call.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// What is happening.
        message: String,
    },
    /// A tool call succeeded; `result` is what the model sees (possibly truncated).
    ToolComplete {
        /// The call.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// The result handed to the model.
        result: serde_json::Value,
        /// True when the result came from the session's cache without running the tool.
        cached: bool,
        /// How long the tool ran, in milliseconds (after any consent); 0 when it did not
        /// run (a cached result, a handoff or workflow move decided in the session).
        #[serde(default)]
        duration_ms: u64,
    },
    /// A tool call failed or was refused; the model gets the error and the session goes on.
    ToolError {
        /// The call.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// Kind of failure, e.g. `invalid_input`, `not_allowed`, `timeout`, `http_status`.
        kind: String,
        /// What went wrong (for developers and the model).
        message: String,
        /// Whether the same request may succeed later (again, or once the suggestion is
        /// followed); false where trying again cannot help (the caller declined, the agent
        /// has no such tool). The session goes on either way.
        #[serde(default = "yes")]
        recoverable: bool,
        /// What went wrong, for the caller: a sentence a client can show or say, from one
        /// table of failure kinds (`switchboard_core::FailureKind::for_people`).
        #[serde(default)]
        user_message: String,
        /// What the caller can do about it.
        #[serde(default)]
        suggestion: String,
    },
    /// A tool needs the user's approval; answer with `tool_consent`, or by typing or saying
    /// a clear yes or no. Unanswered for the tool's `consentTimeoutSeconds`, the request
    /// ends with `tool_error` `consent_timeout` and the tool does not run. Sent again when
    /// an answer was not clear.
    ConsentRequest {
        /// The call to approve.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// What the tool does.
        description: String,
        /// The input it would run with.
        input: serde_json::Value,
    },
    /// A tool the client runs (the Agent's tool has `client`): the client runs it with
    /// `input` and answers with `client_tool_result` within `timeout_ms`, or the call ends
    /// with `tool_error` `client_timeout` (a client without a handler for `name` should
    /// answer with an `error` at once). `tool_start` came before it; `tool_complete` or
    /// `tool_error` ends it.
    ClientToolCall {
        /// The call; the answer names it.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// Its input, valid against the tool's `inputSchema`.
        input: serde_json::Value,
        /// How long the answer is awaited, in milliseconds.
        timeout_ms: u64,
    },
    /// A card for the client to show (display content): the agent called a `showCard`
    /// tool. A client shows it beside the conversation as it sees fit (title, text, the
    /// fields in order, the link); it is not part of what is said.
    DisplayCard {
        /// The call that showed it.
        tool_use_id: String,
        /// The card, every size bounded (see `Card`).
        card: Card,
    },
    /// The agent puts the caller through to a person (`transfer_to_person`, a cold
    /// transfer: the caller leaves the agent). The client performs it — the SIP edge
    /// transfers the call (SIP REFER) — and answers with `transfer_result`. Unanswered
    /// for `timeout_seconds` plus 15 s, the transfer ends as `no_answer`.
    TransferRequest {
        /// The tool call; `transfer_result` names it.
        tool_use_id: String,
        /// The person's name (`spec.telephony.people`).
        person: String,
        /// Where the person is: an E.164 number or a SIP URI.
        address: String,
        /// Why, in the model's words.
        reason: String,
        /// How long the person's phone may ring before the transfer counts as unanswered.
        timeout_seconds: u32,
    },
    /// The session moves to another agent (`transfer`), or back to the agent that
    /// transferred it (`return`); that agent's `bidi_connection_start` follows on the same
    /// socket.
    Handoff {
        /// The agent handing over.
        from: String,
        /// The agent taking over.
        to: String,
        /// Transfer or return.
        kind: HandoffKind,
        /// Everything the next agent needs (memory, history, reason, status, summary).
        context: Box<HandoffContext>,
    },
    /// Session memory changed: a key set, or removed (`null`). A gateway keeps its copy in
    /// sync; a client may show it (the web console does).
    MemoryUpdate {
        /// The key, e.g. `verifiedUser`.
        key: String,
        /// The new value; `null` when removed.
        value: serde_json::Value,
    },
    /// The agent's workflow moved from one node (step) to another.
    WorkflowTransition {
        /// The node left.
        from: String,
        /// The node entered.
        to: String,
        /// `model` (the model chose it) or `condition` (a `when` condition held).
        by: String,
    },
    /// Something went wrong. When `recoverable`, the session continues.
    BidiError {
        /// What happened and what to do.
        message: String,
        /// A stable code, e.g. `invalid_json`, `busy`, `model_error`: see [`ErrorCode`]
        /// for each and what to do.
        code: ErrorCode,
        /// Whether the session continues.
        recoverable: bool,
        /// What went wrong, for the person in the conversation: a sentence a client can show
        /// or say, one per `code` from one table ([`ErrorCode::for_people`]). Empty (and
        /// not written) from servers older than the table.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        user_message: String,
        /// What they can do about it, from the same table.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        suggestion: String,
        /// When the error refuses a typed input (`busy`, `empty_text`): that input's `id`,
        /// when it had one. The input was not taken up; send it again later if it matters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_id: Option<String>,
        /// When trying again later is the remedy (`capacity_full`): how many seconds from
        /// now a new attempt is likely to find room, an estimate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_seconds: Option<u64>,
    },
    /// The gateway's model quota is full and the new session waits for a slot (the Agent
    /// queues rather than refuses, `spec.capacity.whenFull`): sent on arrival and whenever
    /// the position changes. The session starts (`bidi_connection_start`) when its turn
    /// comes; a client that leaves gives up its place.
    BidiSessionQueued {
        /// Sessions ahead of this one, plus one: 1 is next.
        position: u32,
        /// How long the wait is likely to be, in seconds, from how long sessions have held
        /// their slots lately: an estimate, not a promise.
        estimated_wait_seconds: u64,
    },
    /// The Agent is in outage mode (its model service is failing, or an operator switched
    /// it on) and the new session goes to the Agent's fallback instead: a person to put the
    /// caller through to (a SIP edge transfers the call; another client shows or dials
    /// `person.address`) and/or a message for the caller. Sent before any
    /// `bidi_connection_start`; the socket then closes with 4513. Try again after
    /// `retry_after_seconds`, or follow the fallback.
    BidiSessionFallback {
        /// The Agent the session asked for (`namespace/name`).
        agent: String,
        /// Why: `switch` (an operator turned outage mode on) or `breaker` (the model
        /// service failed past the Agent's threshold, or traffic is still ramping back).
        cause: String,
        /// What to tell the caller (the Agent's `spec.outage.fallback.message`, or a default).
        message: String,
        /// The person to put the caller through to, when the Agent names one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        person: Option<FallbackPerson>,
        /// When a new session may be served again, an estimate in seconds (the breaker's
        /// next probe); absent while the switch is on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_seconds: Option<u64>,
    },
    /// The server (a runtime pod) is shutting down and serves this session for at most
    /// `seconds` more. A gateway moves the session to another pod at the next turn
    /// boundary (the client sees `bidi_connection_restart`, reason `runtime_draining`);
    /// a client connected directly should reconnect when convenient.
    BidiConnectionDraining {
        /// The longest the server goes on serving.
        seconds: u64,
    },
    /// The server is ending the session (the agent ended the conversation, or the client
    /// sent `close`); the socket closes after it and the session cannot be resumed.
    BidiConnectionClose {
        /// Why.
        reason: String,
    },
}

impl ServerMessage {
    /// A `bidi_error`, with its words for people ([`ErrorCode::for_people`]).
    pub fn error(code: ErrorCode, message: impl Into<String>, recoverable: bool) -> Self {
        Self::error_for_input(code, message, recoverable, None)
    }

    /// The JSON text of this message.
    pub fn to_json(&self) -> String {
        // Sized up front so reply audio (50 chunks a second per voice session) is written
        // without regrowing the buffer.
        let capacity = match self {
            Self::BidiAudioStream { audio, .. } => audio.len() + 96,
            _ => 128,
        };
        let mut out = Vec::with_capacity(capacity);
        // Every field is a String, number, bool or serde_json::Value: serialisation cannot fail.
        match serde_json::to_writer(&mut out, self) {
            Ok(()) => String::from_utf8(out).unwrap_or_default(),
            Err(e) => format!("{{\"type\":\"bidi_error\",\"message\":\"{e}\"}}"),
        }
    }
}

/// Why a client frame was not a usable [`ClientMessage`].
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON at all.
    #[error("the message is not valid JSON ({0}); send one JSON object per WebSocket text frame")]
    InvalidJson(String),
    /// JSON without a known `type`.
    #[error(
        "unknown message type {0:?}; expected session_start, bidi_text_input, bidi_audio_input, bidi_audio_input_end, bidi_cancel, bidi_audio_played, session_update, tool_consent, client_tool_result, transfer_result or close"
    )]
    UnknownType(String),
    /// A known type with missing or wrong fields.
    #[error("the {kind} message is malformed: {message}")]
    Malformed {
        /// The message's `type`.
        kind: String,
        /// What is wrong.
        message: String,
    },
}

impl DecodeError {
    /// The `bidi_error` code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidJson(_) => ErrorCode::InvalidJson,
            Self::UnknownType(_) => ErrorCode::UnknownType,
            Self::Malformed { .. } => ErrorCode::MalformedMessage,
        }
    }
}

/// The `type` of [`ClientMessage::IdentityAssertion`].
pub const IDENTITY_ASSERTION: &str = "identity_assertion";

const CLIENT_TYPES: &[&str] = &[
    "session_start",
    "bidi_audio_input",
    "bidi_audio_input_end",
    "bidi_text_input",
    "bidi_dtmf",
    "bidi_cancel",
    "bidi_audio_played",
    "session_update",
    "tool_consent",
    "client_tool_result",
    "transfer_result",
    "close",
    IDENTITY_ASSERTION,
];

/// `tool_error.recoverable` from a peer that does not send it: tool errors never ended
/// sessions.
fn yes() -> bool {
    true
}

/// Whether a client frame is a message only the gateway may send a runtime
/// (`identity_assertion`), its `type` read as [`decode_client`] reads it (JSON escapes and
/// repeated keys included). Frames that cannot name it — without the word and without a
/// backslash — are not parsed.
pub fn gateway_only(text: &str) -> bool {
    if !text.contains(IDENTITY_ASSERTION) && !text.contains('\\') {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|value| value.get("type").and_then(serde_json::Value::as_str) == Some(IDENTITY_ASSERTION))
}

/// Whether a client frame is a `session_start`, its `type` read as [`decode_client`] reads
/// it (whitespace, JSON escapes and repeated keys included): a runtime lets a signed start
/// exceed the message limit, and whether one does cannot hang on how its JSON is spaced.
/// Frames that cannot name it — without the word and without a backslash — are not parsed.
pub fn is_session_start(text: &str) -> bool {
    if !text.contains("session_start") && !text.contains('\\') {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|value| value.get("type").and_then(serde_json::Value::as_str) == Some("session_start"))
}

/// Whether a client frame is a `bidi_dtmf` (keys pressed), its `type` read as
/// [`decode_client`] reads it: the gateway never records one (keys may be collected for a
/// tool, a PIN), so whether a frame is one cannot hang on how its JSON is written. Frames
/// that cannot name it — without the word and without a backslash — are not parsed.
pub fn is_dtmf(text: &str) -> bool {
    if !text.contains("bidi_dtmf") && !text.contains('\\') {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|value| value.get("type").and_then(serde_json::Value::as_str) == Some("bidi_dtmf"))
}

/// Parses one client text frame, telling bad JSON, unknown types and malformed messages apart.
pub fn decode_client(text: &str) -> Result<ClientMessage, DecodeError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| DecodeError::InvalidJson(e.to_string()))?;
    let kind = value.get("type").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
    if !CLIENT_TYPES.contains(&kind.as_str()) {
        return Err(DecodeError::UnknownType(kind));
    }
    serde_json::from_value(value).map_err(|e| DecodeError::Malformed { kind, message: e.to_string() })
}

#[cfg(test)]
mod tests;
