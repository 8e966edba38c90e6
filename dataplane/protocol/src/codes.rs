//! The protocol's catalogues of codes, one place each: the WebSocket close codes servers
//! send ([`close_code`]), the `bidi_error` codes ([`ErrorCode`]) and why a turn ended
//! (`bidi_response_complete.stop_reason`, [`StopReason`]). Each code is written on the wire
//! as the snake_case string of its name, as it always was; a name a newer peer sends that
//! this version does not know decodes as `Other`, so old clients and gateways read new
//! runtimes' messages. Comparing one with a string (`code == "busy"`) compares its name.

use std::fmt;

use serde::{Deserialize, Serialize};

/// WebSocket close codes a server sends, with the reason text saying what to do.
pub mod close_code {
    /// The session ended normally (the client sent `close`, or the agent ended it).
    pub const NORMAL: u16 = 1000;
    /// The server is shutting down and the drain period is over; reconnect elsewhere.
    pub const GOING_AWAY: u16 = 1001;
    /// The `session_start` was invalid (unknown or unexposed agent, bad context).
    pub const BAD_START: u16 = 4400;
    /// The client sent messages faster than the per-session rate allows.
    pub const RATE_LIMITED: u16 = 1008;
    /// A message was larger than the maximum message size.
    pub const TOO_BIG: u16 = 1009;
    /// The server failed; the reason says how.
    pub const INTERNAL: u16 = 1011;
    /// The server is at its session limit or draining; try again later (or another pod).
    pub const TRY_AGAIN_LATER: u16 = 1013;
    /// The session moved to another agent (runtime pods: the gateway performs the handoff).
    pub const HANDOFF: u16 = 4000;
    /// The client did not authenticate (gateway: a missing or unknown API key).
    pub const UNAUTHORIZED: u16 = 4401;
    /// The agent is not open to this client: not exposed (`gateway.expose: false`), or
    /// outside its credential's scope (`agent_not_allowed`).
    pub const NOT_EXPOSED: u16 = 4403;
    /// No such agent, or a bare name several namespaces have, or no default agent.
    pub const UNKNOWN_AGENT: u16 = 4404;
    /// The page's Origin is not allowed (gateway `--allowed-origin`).
    pub const ORIGIN_NOT_ALLOWED: u16 = 4405;
    /// The API key already has its most concurrent sessions open.
    pub const TOO_MANY_SESSIONS: u16 = 4429;
    /// The agent has no ready pod; try again shortly.
    pub const NO_READY_POD: u16 = 4503;
    /// The client sent nothing for the idle timeout; reconnect (or resume) to go on.
    pub const IDLE_TIMEOUT: u16 = 4408;
    /// The client did not read its messages for too long (they piled up); it is closed so
    /// its session slot is not held forever.
    pub const SLOW_CLIENT: u16 = 4409;
    /// The resume token is unknown, expired (past the resume window) or another key's;
    /// start a new session.
    pub const RESUME_REFUSED: u16 = 4410;
    /// The Agent is in outage mode: the `bidi_session_fallback` before the close says
    /// where the caller goes instead (a person, a message) and when to try again.
    pub const OUTAGE: u16 = 4513;
}

/// A catalogue: the enum (snake_case names on the wire, an untagged `Other` for names it
/// does not know), every named variant, the name, a bounded metric label, and conversions.
/// Each variant's wire name is written out beside it, and a test holds serde to it.
macro_rules! catalogue {
    ($(#[doc = $edoc:literal])* $name:ident { $($(#[doc = $doc:literal])* $variant:ident = $wire:literal,)* }) => {
        $(#[doc = $edoc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[doc = $doc])* $variant,)*
            /// A name not in this catalogue, as a newer peer sent it. This version never
            /// sends one of its own; `From<&str>` gives a named variant where there is one.
            #[serde(untagged)]
            Other(String),
        }

        impl $name {
            /// Every named variant.
            pub const ALL: &[Self] = &[$(Self::$variant),*];

            /// The name on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $wire,)*
                    Self::Other(name) => name,
                }
            }

            /// A bounded label for metrics: the name, or `other` for a name not in the
            /// catalogue.
            pub fn metric_label(&self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                    Self::Other(_) => "other",
                }
            }
        }

        /// In the published schema: one `const` per named variant, with its doc as the
        /// description, or any other string (a name newer than this version).
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let mut any_of = vec![$(schemars::json_schema!({
                    "const": $wire,
                    "description": doc_text(&[$($doc),*]),
                })),*];
                any_of.push(schemars::json_schema!({
                    "type": "string",
                    "description": "A name this version of the protocol does not know, from a newer peer: read it as an unknown value, never as an error.",
                }));
                schemars::json_schema!({
                    "description": doc_text(&[$($edoc),*]),
                    "anyOf": any_of,
                })
            }
        }

        impl From<&str> for $name {
            fn from(name: &str) -> Self {
                match name {
                    $($wire => Self::$variant,)*
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, name: &str) -> bool {
                self.as_str() == name
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, name: &&str) -> bool {
                self.as_str() == *name
            }
        }
    };
}

/// Doc comment lines as one text, as the derive writes a type's docs (the published
/// schema's descriptions are tidied in one place, `schema`).
fn doc_text(lines: &[&str]) -> String {
    lines.iter().map(|line| line.strip_prefix(' ').unwrap_or(line)).collect::<Vec<_>>().join("\n")
}

catalogue! {
    /// The code of a `bidi_error`: what went wrong, stable for programs (the message says
    /// it for people). Unless said otherwise an error is recoverable (`recoverable: true`):
    /// the session goes on. A refusal at the start of a session, or one that ends it, comes
    /// with its close code ([`close_code`]).
    ErrorCode {
        /// A frame was not JSON. Send one JSON object per WebSocket text frame.
        InvalidJson = "invalid_json",
        /// A message's `type` is none the server knows. Send one of the client messages.
        UnknownType = "unknown_type",
        /// A known message with missing or wrong fields (the message says which). Fix it.
        MalformedMessage = "malformed_message",
        /// A second `session_start` in a session: ignored. A new session needs a new
        /// connection.
        AlreadyStarted = "already_started",
        /// Audio for an agent that only types, or typed text for one that only speaks.
        /// Use the agent's modality (typed text needs a text or hybrid agent).
        UnsupportedModality = "unsupported_modality",
        /// A binary frame in a text session. Send JSON text frames.
        UnsupportedFrame = "unsupported_frame",
        /// `session_start.voice` names no voice of the agent's model. Pick one the message
        /// lists.
        InvalidVoice = "invalid_voice",
        /// `session_start.model` names a text model the agent does not offer its sessions
        /// (its `textModelId` and `sessionModels`, which the message lists); the session is
        /// closed (4400). Pick one of them, or leave `model` out.
        ModelNotAllowed = "model_not_allowed",
        /// The audio of a `bidi_audio_input` is not base64. Send base64 PCM16.
        InvalidAudioBase64 = "invalid_audio_base64",
        /// An audio frame of an odd number of bytes. Send whole 16-bit samples.
        InvalidAudioLength = "invalid_audio_length",
        /// An empty audio frame. Send 20-100 ms of PCM16 16 kHz mono per frame.
        EmptyAudio = "empty_audio",
        /// An audio frame longer than one second. Send 20-100 ms frames.
        AudioTooLarge = "audio_too_large",
        /// A blank typed input (voice and hybrid agents), named by `input_id`: not taken up.
        /// Type something.
        EmptyText = "empty_text",
        /// A `bidi_dtmf` whose `digits` are empty, longer than 32, or hold a character
        /// that is no keypad key: dropped. Send `0`-`9`, `*`, `#` or `A`-`D`.
        InvalidDtmf = "invalid_dtmf",
        /// Keys pressed faster than a person presses them (a burst of 32, then 10 a
        /// second): the `bidi_dtmf` was dropped. Send keys as they are pressed.
        DtmfRate = "dtmf_rate",
        /// Too many typed inputs wait for the agent's reply: the one named by `input_id` was
        /// refused, not taken up. Wait for the reply, then send it again.
        Busy = "busy",
        /// A `tool_consent` for no tool that waits for one. Answer a `consent_request`'s
        /// `tool_use_id` only.
        NoConsentPending = "no_consent_pending",
        /// A `client_tool_result` for no call that waits for the client (unknown, answered
        /// already, or expired). Answer each `client_tool_call` once, by its `tool_use_id`,
        /// within its `timeout_ms`.
        NoClientToolPending = "no_client_tool_pending",
        /// A `transfer_result` for no transfer under way. Answer a `transfer_request`'s
        /// `tool_use_id` only, once.
        NoTransferPending = "no_transfer_pending",
        /// A `digits_result` for no keys being sent. Answer a `digits_request`'s
        /// `tool_use_id` only, once.
        NoDigitsPending = "no_digits_pending",
        /// The session has ended or moved to another agent; nothing more is taken. Start a
        /// new session.
        SessionOver = "session_over",
        /// An `identity_assertion` from a client (only the gateway sends them), or one the
        /// runtime could not verify: dropped. Clients never send one.
        IdentityRefused = "identity_refused",
        /// The model could not answer this turn (the message says why). Say it again, now
        /// or a little later.
        ModelError = "model_error",
        /// The model answered nothing. Say it again.
        EmptyReply = "empty_reply",
        /// The agent used tools too many times in a row without answering. Ask again.
        ToolRoundsExceeded = "tool_rounds_exceeded",
        /// The voice model was throttled (not recoverable: the session ends). Start a new
        /// session later.
        ModelThrottled = "model_throttled",
        /// The voice model's service was unavailable; the session ends. Try again later.
        ModelServiceUnavailable = "model_service_unavailable",
        /// The voice model's stream broke off; the session ends. Start a new one.
        ModelStreamInterrupted = "model_stream_interrupted",
        /// The voice model did not answer in time; the session ends. Start a new one.
        ModelTimeout = "model_timeout",
        /// The voice model could not be reached; the session ends. Try again later.
        ModelConnection = "model_connection",
        /// The voice model refused the server's credentials; the session ends. The
        /// operator must grant access.
        ModelAccessDenied = "model_access_denied",
        /// The voice model refused a request as invalid; the session ends. Report it.
        ModelValidation = "model_validation",
        /// The agent's voice model does not exist in its region; the session ends. The
        /// operator must fix the Agent's model.
        ModelModelNotFound = "model_model_not_found",
        /// The server has no usable credentials for the voice model; the session ends. The
        /// operator must provide them.
        ModelCredentials = "model_credentials",
        /// The voice model sent a tool call that is not valid JSON; the session ends.
        /// Start a new one.
        ModelInvalidToolInput = "model_invalid_tool_input",
        /// The agent's voice model is not configured; the session ends. The operator must
        /// configure it.
        ModelConfig = "model_config",
        /// The voice model's stream said something the server did not understand; the
        /// session ends. Report it.
        ModelProtocol = "model_protocol",
        /// The `session_start` carried context a client may not set (memory, history,
        /// handoff, context), or a runtime could not verify the gateway's; close 4400.
        /// Leave those fields out; reach runtimes through the gateway.
        ContextRefused = "context_refused",
        /// The page's Origin is not allowed; close 4405. Serve the page from an allowed
        /// origin.
        Origin = "origin",
        /// No API key or token; close 4401. Send one.
        MissingKey = "missing_key",
        /// The token is not valid (signature, expiry, issuer, audience); close 4401. Get a
        /// new one.
        InvalidToken = "invalid_token",
        /// `session_start.app_context` is not a token the gateway trusts: not a JWT, signed
        /// by no key of the gateway's app-context key set (or the signature does not verify),
        /// from another issuer, for another audience, or without the claims it needs; close
        /// 4401. Have the app's backend mint a new one with its configured key.
        AppContextInvalid = "app_context_invalid",
        /// `session_start.app_context` has expired (or is not valid yet), or lives longer
        /// than the gateway accepts; close 4401. Have the app's backend mint a fresh one.
        AppContextExpired = "app_context_expired",
        /// `session_start.app_context` was used already (its `jti`): each token opens one
        /// session; close 4401. Mint one token per session.
        AppContextReplayed = "app_context_replayed",
        /// `session_start.app_context` is larger than the gateway reads (8 KiB); close
        /// 4400. Put less in it.
        AppContextTooLarge = "app_context_too_large",
        /// `session_start.app_context` on a gateway that trusts no app backend, or on a
        /// resumed, continued or outbound-call session (it opens new sessions only); close
        /// 4400. Leave it out, or configure the gateway's app-context keys.
        AppContextNotAccepted = "app_context_not_accepted",
        /// `session_start.app_context` is bound to another client than the one presenting
        /// it: on a gateway that binds tokens to their client (chart
        /// `gateway.appContext.bindSubject`), its `sub` is not the subject of the client's
        /// credential (its JWT's `sub`, its API key's name), or it has no `sub`, or the client
        /// presented no credential; close 4401. Have the app's backend mint the token for
        /// this client.
        AppContextWrongSubject = "app_context_wrong_subject",
        /// The API key is unknown; close 4401. Use a valid key.
        UnknownKey = "unknown_key",
        /// The credential already has its most sessions open; close 4429. Close one, or
        /// wait.
        KeySessions = "key_sessions",
        /// The credential's shared message budget is spent; close 1008. Send fewer
        /// messages.
        KeyRate = "key_rate",
        /// The agent is outside the credential's scope; close 4403. Use an agent the
        /// message lists.
        AgentNotAllowed = "agent_not_allowed",
        /// `session_start.candidate` from a credential that may not open test sessions;
        /// close 4403. Use a credential marked for tests (API key `candidates=test`, or a
        /// token with the candidates scope), or leave `candidate` out.
        CandidateNotAllowed = "candidate_not_allowed",
        /// No agent named and no default agent; close 4404. Name one.
        NoDefault = "no_default",
        /// No such agent; close 4404 (or, for a resumed session, its agent was deleted).
        /// Name an existing agent.
        UnknownAgent = "unknown_agent",
        /// A bare agent name several namespaces have; close 4404. Name `<namespace>/<name>`.
        AmbiguousAgent = "ambiguous_agent",
        /// The agent is reached only by handoff (`gateway.expose: false`); close 4403.
        /// Start with an exposed agent.
        NotExposed = "not_exposed",
        /// The agent has no ready pod; close 4503. Try again shortly.
        NoReadyPod = "no_ready_pod",
        /// A handoff to an agent the source does not list. Start with the agent itself.
        HandoffNotAllowed = "handoff_not_allowed",
        /// More messages a second than a session may send; close 1008. Send fewer.
        SessionRate = "session_rate",
        /// Nothing came either way for the idle timeout: the session ended and cannot be
        /// resumed; close 4408. Start a new session.
        IdleTimeout = "idle_timeout",
        /// The gateway holds as much session memory as it may; close 1013. Try again later.
        MemoryBudget = "memory_budget",
        /// The gateway is at its session limit or draining; close 1013. Try again later.
        AtCapacity = "at_capacity",
        /// The model quota the Agent's streams count against is full and the Agent refuses
        /// rather than queues (`spec.capacity.whenFull: refuse`), or the queue is full;
        /// close 1013. Try again after `retry_after_seconds`.
        CapacityFull = "capacity_full",
        /// No runtime pod could take the session (not recoverable). Try again, or resume,
        /// shortly.
        NoRuntime = "no_runtime",
        /// The session's agent was deleted (not recoverable); close 4404. Start a new
        /// session.
        AgentRemoved = "agent_removed",
        /// A handoff did not happen: the caller stays with the agent that asked, which is
        /// told. Nothing to do.
        HandoffFailed = "handoff_failed",
        /// A resumed client missed messages the gateway no longer holds (the message says
        /// which numbers). The conversation goes on without them.
        ReplayGap = "replay_gap",
        /// The gateway that held the session stopped without parking it (it crashed or its
        /// node was lost): the session resumed from its last snapshot, taken at a turn
        /// boundary, so the agent may not know of the last messages the client received.
        /// Repeat the last request if it went unanswered.
        SessionRestored = "session_restored",
        /// The session is still attached to another connection of the client's; close
        /// 1013. Close that one, or resume again shortly.
        SessionAttached = "session_attached",
        /// The resume token is unknown, expired or another key's, or the parked session
        /// was changed; close 4410. Start a new session without `resume_token`.
        ResumeRefused = "resume_refused",
        /// The gateway's session store does not answer; close 1013. Try again shortly.
        StoreUnavailable = "store_unavailable",
        /// A `bidi_cancel` with nothing under way: no reply, tool call or consent request to
        /// stop. Nothing changed.
        NothingToCancel = "nothing_to_cancel",
        /// A `session_update` naming a setting this server does not know (the message says
        /// which, and which it knows): nothing of that update was applied. Send known
        /// settings only.
        UnknownSetting = "unknown_setting",
        /// A typed or spoken answer to a pending `consent_request` that is neither a clear
        /// yes nor a clear no (named by `input_id` when typed): the tool still waits. Answer
        /// yes or no, or send `tool_consent`.
        ConsentUnclear = "consent_unclear",
        /// `session_start.audio` asked for an encoding or sample rate the server does not
        /// offer (the message says which are: PCM16 at 8, 16 or 24 kHz; G.711 μ-law or
        /// A-law at 8 kHz): that direction stays in the default format. Ask for a supported
        /// one.
        UnsupportedAudioFormat = "unsupported_audio_format",
        /// A `session_update` naming a setting fixed when the session starts (`agent`,
        /// `audio`, `model`, ...; the message says which): nothing of that update was
        /// applied. Start a new session with the setting wanted.
        FixedSetting = "fixed_setting",
    }
}

catalogue! {
    /// Why an answer ended (`bidi_response_complete.stop_reason`).
    StopReason {
        /// The agent finished its answer.
        EndTurn = "end_turn",
        /// The model stopped to use a tool.
        ToolUse = "tool_use",
        /// The answer reached the model's output limit and may be cut short. Ask the agent
        /// to go on.
        MaxTokens = "max_tokens",
        /// The agent handed the session to another agent: a `handoff` follows.
        Handoff = "handoff",
        /// The user spoke over the answer, or a new input began a turn (voice).
        Interrupted = "interrupted",
        /// The voice model ended a completion with more of the turn to come.
        PartialTurn = "partial_turn",
        /// The model answered nothing (with a `bidi_error` `empty_reply`).
        EmptyReply = "empty_reply",
        /// The model failed (with a `bidi_error` `model_error`).
        Error = "error",
        /// The agent used tools too many times in a row (with a `bidi_error`).
        ToolRoundsExceeded = "tool_rounds_exceeded",
        /// The user stopped the answer (`bidi_cancel`).
        Cancelled = "cancelled",
    }
}

#[cfg(test)]
mod tests;
