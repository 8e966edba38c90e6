//! The pure parts of the tool pipeline: classified failures, the per-session result
//! cache, truncation to `maxOutputBytes`, and `remember` (storing part of a result in
//! memory; who may write which key is [`crate::authority`]'s). Execution itself happens outside the core, behind
//! `ToolExecutor` (in the `switchboard-dataplane` crate's `tools` module).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchboard_crds::agent::ToolMemory;

/// Why a tool call produced no result. The model receives it as an error result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ToolFailure {
    /// The class of failure.
    pub kind: FailureKind,
    /// What happened, for the model and the client: never where the tool server is nor
    /// what it answered (that is `detail`).
    pub message: String,
    /// What happened, for the operator's logs only: the tool server's address, its answer.
    #[serde(skip)]
    pub detail: Option<String>,
}

impl ToolFailure {
    /// A failure of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), detail: None }
    }

    /// With `detail` for the operator's logs, which neither the model nor the client sees.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The JSON the model receives.
    pub fn to_content(&self) -> serde_json::Value {
        serde_json::json!({ "error": { "kind": self.kind.as_str(), "message": self.message } })
    }
}

/// Classes of tool failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The model called a tool the agent does not have.
    UnknownTool,
    /// The tool is not allowed at this point of the workflow.
    NotAllowed,
    /// The input does not match the tool's schema.
    InvalidInput,
    /// The user declined the consent request.
    ConsentDeclined,
    /// Nobody answered the consent request in time (`consentTimeoutSeconds`).
    ConsentTimeout,
    /// The tool did not answer in time.
    Timeout,
    /// The tool server answered with a non-success HTTP status.
    HttpStatus,
    /// The tool server's answer was not usable (not JSON, ...).
    BadResponse,
    /// The tool server could not be reached.
    Connection,
    /// The tool kind is not supported by this runtime.
    Unsupported,
    /// The session ended before the tool finished.
    Cancelled,
    /// The tool ran and reported an error of its own (an MCP result with `isError`).
    ToolReported,
    /// A memory key the tool requires (its `requires`, or the source of a `bind`) is not
    /// set in this session, e.g. no verified caller yet.
    RequirementUnmet,
    /// The model gave a value for an input the session fills in (`bind`).
    BoundInput,
    /// A client tool: the client did not answer in time (it may have no handler for it).
    ClientTimeout,
    /// A client tool: the client's result does not match the tool's `outputSchema`.
    ClientBadResult,
    /// A client tool: the client answered that it could not run it (`error`).
    ClientReported,
    /// A transfer to a person: the line was busy.
    TransferBusy,
    /// A transfer to a person: nobody answered in time.
    TransferNoAnswer,
    /// A transfer to a person: the person declined the call.
    TransferDeclined,
    /// A transfer to a person: the person could not be reached.
    TransferUnreachable,
    /// A transfer to a person: refused before the person was called (the trunk or the
    /// client cannot transfer).
    TransferRejected,
    /// A transfer to a person failed otherwise.
    TransferFailed,
    /// Sending keys (`send_digits`): the far end of the call takes no telephone events.
    DigitsUnsupported,
    /// Sending keys: sending stopped part-way (the call went on hold, its media changed).
    DigitsInterrupted,
    /// Sending keys: refused before any key went (the call's media not under way, or the
    /// client cannot send keys).
    DigitsRejected,
    /// A keypad input (`keypad`): the caller typed nothing within its time.
    KeypadTimeout,
    /// A keypad input: the caller typed fewer keys than it takes (`minDigits`).
    KeypadTooShort,
    /// A keypad input: the keys typed do not match the input's schema (its pattern, say).
    KeypadInvalid,
}

impl FailureKind {
    /// The snake_case label (events, metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownTool => "unknown_tool",
            Self::NotAllowed => "not_allowed",
            Self::InvalidInput => "invalid_input",
            Self::ConsentDeclined => "consent_declined",
            Self::ConsentTimeout => "consent_timeout",
            Self::Timeout => "timeout",
            Self::HttpStatus => "http_status",
            Self::BadResponse => "bad_response",
            Self::Connection => "connection",
            Self::Unsupported => "unsupported",
            Self::Cancelled => "cancelled",
            Self::ToolReported => "tool_failed",
            Self::RequirementUnmet => "requirement_unmet",
            Self::BoundInput => "bound_input",
            Self::ClientTimeout => "client_timeout",
            Self::ClientBadResult => "client_bad_result",
            Self::ClientReported => "client_error",
            Self::TransferBusy => "transfer_busy",
            Self::TransferNoAnswer => "transfer_no_answer",
            Self::TransferDeclined => "transfer_declined",
            Self::TransferUnreachable => "transfer_unreachable",
            Self::TransferRejected => "transfer_rejected",
            Self::TransferFailed => "transfer_failed",
            Self::DigitsUnsupported => "digits_unsupported",
            Self::DigitsInterrupted => "digits_interrupted",
            Self::DigitsRejected => "digits_rejected",
            Self::KeypadTimeout => "keypad_timeout",
            Self::KeypadTooShort => "keypad_too_short",
            Self::KeypadInvalid => "keypad_invalid",
        }
    }

    /// The failure of a transfer that ended with `outcome`; `None` for `transferred`.
    pub fn of_transfer(outcome: crate::protocol::TransferOutcome) -> Option<Self> {
        use crate::protocol::TransferOutcome as O;
        Some(match outcome {
            O::Transferred => return None,
            O::Busy => Self::TransferBusy,
            O::NoAnswer => Self::TransferNoAnswer,
            O::Declined => Self::TransferDeclined,
            O::Unreachable => Self::TransferUnreachable,
            O::Rejected => Self::TransferRejected,
            O::Failed => Self::TransferFailed,
        })
    }
}

/// A tool failure as the caller is told it (`tool_error`'s `recoverable`, `user_message`
/// and `suggestion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForPeople {
    /// Whether the same request may succeed later, or once the suggestion is followed.
    pub recoverable: bool,
    /// What went wrong, in words a caller understands (no tool names, codes or URLs).
    pub message: &'static str,
    /// What the caller can do.
    pub suggestion: &'static str,
}

impl FailureKind {
    /// The one table of what each kind of tool failure means to the caller: a sentence a
    /// client can show or say, a suggestion, and whether trying again can help.
    pub fn for_people(self) -> ForPeople {
        let (recoverable, message, suggestion) = match self {
            Self::UnknownTool => {
                (false, "The assistant tried to do something it cannot do here.", "Ask for it in another way.")
            }
            Self::NotAllowed => {
                (true, "That can't be done at this point of the conversation.", "Finish the current step first.")
            }
            Self::InvalidInput => (
                true,
                "Some of the details were missing or not in the expected form.",
                "Check the details and give them again.",
            ),
            Self::ConsentDeclined => {
                (false, "You did not allow it, so nothing was done.", "Ask again if you change your mind.")
            }
            Self::ConsentTimeout => {
                (true, "No answer came in time, so nothing was done.", "Ask again when you are ready.")
            }
            Self::Timeout => (true, "Our system took too long to answer.", "Try again in a moment."),
            Self::HttpStatus => (true, "Our system could not complete that request.", "Try again in a moment."),
            Self::BadResponse => (true, "Our system gave an answer that could not be used.", "Try again in a moment."),
            Self::Connection => (true, "Our system could not be reached.", "Try again in a moment."),
            Self::Unsupported => {
                (false, "That is not available here.", "Ask for something else, or contact us another way.")
            }
            Self::Cancelled => (false, "It was stopped before it finished.", "Ask again if you still want it."),
            Self::ToolReported => {
                (true, "Our system could not do that with the details given.", "Check the details and try again.")
            }
            Self::RequirementUnmet => (
                true,
                "That needs another step first, such as confirming who you are.",
                "Complete that step, then ask again.",
            ),
            Self::BoundInput => {
                (true, "Some details are filled in for you and cannot be given here.", "Try again without them.")
            }
            Self::ClientTimeout => {
                (true, "Your app did not answer in time.", "Make sure the app is open and up to date, then try again.")
            }
            Self::ClientBadResult => {
                (true, "Your app gave an answer that could not be used.", "Try again, or update the app.")
            }
            Self::ClientReported => (true, "Your app could not do that.", "Try again, or do it in the app yourself."),
            Self::TransferBusy => (true, "The person you asked for is on another call.", "Try again in a few minutes."),
            Self::TransferNoAnswer => {
                (true, "Nobody answered that line in time.", "Try again later, or ask for a call back.")
            }
            Self::TransferDeclined => {
                (true, "The person could not take your call just now.", "Try again later, or ask for a call back.")
            }
            Self::TransferUnreachable => {
                (true, "That line could not be reached.", "Ask for someone else, or try again later.")
            }
            Self::TransferRejected => {
                (false, "Your call cannot be put through from here.", "Ask how else to reach a person.")
            }
            Self::TransferFailed => (true, "Your call could not be put through.", "Try again in a moment."),
            Self::DigitsUnsupported => (false, "Keys cannot be pressed on this call.", "Say the choice aloud instead."),
            Self::DigitsInterrupted => {
                (true, "Only some of the keys were pressed.", "Listen to the menu, then press the rest.")
            }
            Self::DigitsRejected => (true, "The keys could not be pressed just now.", "Try again in a moment."),
            Self::KeypadTimeout => {
                (true, "No keys were pressed in time.", "Type the number on your keypad when asked.")
            }
            Self::KeypadTooShort => {
                (true, "Fewer keys were pressed than are needed.", "Type the whole number, then press hash.")
            }
            Self::KeypadInvalid => {
                (true, "The keys pressed are not in the expected form.", "Check the number and type it again.")
            }
        };
        ForPeople { recoverable, message, suggestion }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Successful results of cacheable tools, by tool and input, for one session.
#[derive(Clone, Debug, Default)]
pub struct ToolCache {
    entries: HashMap<(String, String), (Instant, serde_json::Value)>,
}

impl ToolCache {
    /// The key of a call: the tool and its input as canonical JSON (serde_json sorts keys).
    fn key(tool: &str, input: &serde_json::Value) -> (String, String) {
        (tool.to_owned(), input.to_string())
    }

    /// A result stored less than `ttl` before `now`.
    pub fn get(
        &self,
        tool: &str,
        input: &serde_json::Value,
        ttl: Duration,
        now: Instant,
    ) -> Option<&serde_json::Value> {
        let (stored, value) = self.entries.get(&Self::key(tool, input))?;
        (now.saturating_duration_since(*stored) < ttl).then_some(value)
    }

    /// Stores a result, dropping entries older than `ttl`.
    pub fn put(
        &mut self,
        tool: &str,
        input: &serde_json::Value,
        value: serde_json::Value,
        ttl: Duration,
        now: Instant,
    ) {
        self.entries.retain(|_, (stored, _)| now.saturating_duration_since(*stored) < ttl);
        self.entries.insert(Self::key(tool, input), (now, value));
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `value` made to fit `max_bytes` of JSON: returned as is when it fits, else as a JSON
/// string holding the start of its JSON text and a note of how much was cut. The result's
/// JSON text is never longer than `max_bytes` (for `max_bytes` >= 64).
pub fn truncate(value: serde_json::Value, max_bytes: usize) -> (serde_json::Value, bool) {
    let text = value.to_string();
    if text.len() <= max_bytes {
        return (value, false);
    }
    let note = format!(" ...[truncated, {} bytes total]", text.len());
    // Escaping in the JSON string may grow the text; shrink until it fits.
    let mut budget = max_bytes.saturating_sub(note.len() + 2);
    loop {
        let mut cut = budget.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let candidate = serde_json::Value::String(format!("{}{note}", &text[..cut]));
        if candidate.to_string().len() <= max_bytes || cut == 0 {
            return (candidate, true);
        }
        budget = cut.saturating_sub((candidate.to_string().len() - max_bytes).max(1));
    }
}

/// The memory value a `remember` rule takes from a successful `result`, if any.
pub fn remembered(rule: &ToolMemory, result: &serde_json::Value) -> Option<serde_json::Value> {
    if !rule.when.is_empty() && result.pointer(&rule.when) != Some(&serde_json::Value::Bool(true)) {
        return None;
    }
    let value = if rule.value.is_empty() { Some(result) } else { result.pointer(&rule.value) };
    value.filter(|v| !v.is_null()).cloned()
}
