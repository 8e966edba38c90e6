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

mod audio;
mod card;
mod codes;
mod for_people;
pub mod handoff;
mod kind;
pub mod schema;
mod server;
mod session;
mod signed;
pub mod transcript;

pub use audio::{AudioFormat, AudioSettings};
pub use card::{Card, CardField, CardLink, card_schema};
pub use codes::{ErrorCode, StopReason, close_code};
pub use for_people::ErrorForPeople;
pub use kind::ServerKind;
pub use server::{FallbackPerson, LinePlayed, ServerMessage, TokensByModality};
pub use session::{Modalities, Refusal, SessionStart, SessionState, SessionUpdate};
pub use signed::SignedContext;
/// Who produced a piece of transcript (defined beside the transcript entries, which the
/// handoff context's history shares without depending on the wire types).
pub use transcript::TranscriptRole;

/// The version of the session protocol these types define, in the published schema's `$id`
/// and title ([`schema`]) and the client libraries built from it. Semantic versioning: a
/// new optional field, message or code is a minor version (peers ignore what they do not
/// know); removing or changing the meaning of one is a major version.
pub const PROTOCOL_VERSION: &str = "1.2.0";

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
    /// How a `digits_request` ended: `sent` (every key went; `sent` counts them), or why
    /// not. Any outcome but `sent` comes back to the agent's model as a `tool_error` of
    /// kind `digits_<outcome>`; the session goes on either way. A client that cannot send
    /// keys on its call answers `rejected`.
    DigitsResult {
        /// The `tool_use_id` of the `digits_request` answered.
        tool_use_id: String,
        /// What became of it.
        outcome: DigitsOutcome,
        /// How many keys went (pauses not counted): all of them for `sent`, those before
        /// the interruption for `interrupted`, none otherwise.
        #[serde(default)]
        sent: u32,
        /// What happened, for the model and the record, optional (at most 300 characters
        /// are kept).
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

/// How a `digits_request` ended (`digits_result.outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DigitsOutcome {
    /// Every key went to the far end, with its gaps and pauses.
    Sent,
    /// The call settled no telephone events (RFC 4733) with the far end: keys cannot be
    /// sent on it.
    Unsupported,
    /// Sending stopped part-way: the call was put on hold, its media changed or it ended.
    Interrupted,
    /// Refused before any key went: the call's media is not under way (on hold, not yet
    /// settled), another sequence is being sent, the digits do not read, or the client
    /// cannot send keys.
    Rejected,
}

impl DigitsOutcome {
    /// Every outcome.
    pub const ALL: [Self; 4] = [Self::Sent, Self::Unsupported, Self::Interrupted, Self::Rejected];

    /// The snake_case name (the wire, metric labels).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Unsupported => "unsupported",
            Self::Interrupted => "interrupted",
            Self::Rejected => "rejected",
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
        "unknown message type {0:?}; expected session_start, bidi_text_input, bidi_audio_input, bidi_audio_input_end, bidi_cancel, bidi_audio_played, session_update, tool_consent, client_tool_result, transfer_result, digits_result or close"
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
    "digits_result",
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
