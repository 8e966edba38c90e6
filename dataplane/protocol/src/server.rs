//! What a server sends a client: [`ServerMessage`] and the types only it carries.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod parts;

use crate::handoff::{HandoffContext, HandoffKind};
use crate::{AudioFormat, Card, ErrorCode, SessionState, StopReason, TranscriptRole, yes};
pub use parts::{FallbackPerson, LinePlayed, TokensByModality};

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
    /// The agent puts the caller through to a person (`transfer_to_person`). The client
    /// performs it — the SIP edge transfers the call (SIP REFER, or it dials and bridges)
    /// — and answers with `transfer_result`. Unanswered for `timeout_seconds` plus 15 s,
    /// the transfer ends as `no_answer`. Cold (the default): `transferred` ends the
    /// session. Warm (`warm: true`): the client holds the caller and dials the person;
    /// `transferred` means the person answered and now hears the agent instead of the
    /// caller: the session goes on while the agent briefs them and ends when its reply is
    /// over, and the client then puts the caller through. A person who hangs up during the
    /// brief is a second `transfer_result` for the same call (`failed`): the caller is back.
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
        /// A warm transfer: the agent briefs the person before the caller is put through.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        warm: bool,
    },
    /// The agent presses keys on the call (`send_digits`, an Agent with
    /// `spec.telephony.sendDigits`, on a phone call only): to navigate another phone
    /// system's menu (an IVR) the call reached. The client sends them — the SIP edge as
    /// RFC 4733 telephone events, each key held 120 ms with 100 ms between keys, `w` a
    /// half-second pause — and answers with `digits_result` when the last key went (or why
    /// none, or not all, did). Unanswered for half a second a character plus 15 s, the call
    /// ends as a `timeout` tool error.
    DigitsRequest {
        /// The tool call; `digits_result` names it.
        tool_use_id: String,
        /// The keys, in order: `0`-`9`, `*`, `#`, `A`-`D`, and `w` for a half-second pause;
        /// 1 to 32 characters.
        digits: String,
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
    /// A workflow node's spoken line (its `say`, e.g. a legal disclosure) is over: said
    /// whole, cut by the caller, or abandoned when it did not end in time. Sent once per
    /// line, after its transcript; the gateway keeps it in the session's record.
    WorkflowLine {
        /// The node whose line it is.
        node: String,
        /// The line's text, as the Workflow has it.
        text: String,
        /// Whether it was to be played whole (the caller cannot cut it).
        uninterruptible: bool,
        /// How it went.
        played: LinePlayed,
        /// Why it was abandoned; absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
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
        /// What to tell the person waiting, a sentence a client shows and a phone edge may
        /// speak: the Agent's `spec.capacity.holdMessage`, or the gateway's own with the
        /// place and the estimate. Empty (and not written) from servers older than it.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
        /// The Agent the session waits for (`namespace/name`): the one `session_start`
        /// named, or the one that claims the number a phone call dialled. A phone edge picks
        /// that Agent's own hold recording by it. Empty (and not written) from servers older
        /// than it.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        agent: String,
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
    /// The Agent serving this session went into outage mode while the session was under
    /// way (`active: true`; an operator turned its switch, or its namespace's, on, or the
    /// gateway's breaker tripped over model failures), or out of it again (`active: false`:
    /// switched off, or the breaker recovered). The session goes on: nobody is cut off
    /// mid-sentence. `message` and `person` are the fallback new sessions now get, for the
    /// client to tell the caller or offer them (put them through to `person.address`). Also
    /// sent after `bidi_connection_start` when a session reaches an Agent already in outage
    /// mode (a handoff, a resume, or a new session served in text: `text_only`). Each
    /// change is told once.
    BidiSessionOutage {
        /// The Agent serving the session (`namespace/name`).
        agent: String,
        /// Whether outage mode is on (`true`) or was switched off again (`false`).
        active: bool,
        /// Why: `switch` (the Agent's own switch or its namespace's) or `breaker` (the
        /// gateway's circuit breaker over model failures and late first audio).
        cause: String,
        /// What to tell the caller while it is on (the Agent's fallback message, the
        /// namespace's, or a default); empty (and not written) once it is off.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
        /// The person new sessions go to, when the Agent names one (only while it is on).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        person: Option<FallbackPerson>,
        /// This session is served in text only because of the outage (the Agent's
        /// `spec.outage.fallback.text`): it started while the voice model was out, so it runs
        /// on the Agent's text model — no audio is played or listened to for the rest of
        /// the session, even once outage mode is over; type with `bidi_text_input` and read
        /// the transcripts. Absent (false) otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        text_only: bool,
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
