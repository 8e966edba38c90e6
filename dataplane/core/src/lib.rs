//! The agent core: everything an agent does in a session, with no I/O — plus the types it
//! speaks: the provider-neutral model request and events ([`model`]) and the session
//! protocol between clients, the gateway and runtimes ([`protocol`]). This crate depends
//! on no async runtime, HTTP stack or cloud SDK.
//!
//! A [`Session`] takes [`Input`]s (the user's text, a model reply, a tool outcome, a
//! consent answer) and returns [`Effect`]s (messages for the client, a model call to make,
//! a tool to run, a handoff to perform, transcript lines to write). Adapters — the runtime
//! server, local mode and the gateway — perform the effects and feed the outcomes back.
//!
//! Voice and hybrid sessions run the same logic over a streaming voice model (Nova
//! Sonic): [`Session::start_voice`] and the `Voice*` inputs.
//!
//! The session (module `session`) is a coordinator over sub-states that own their fields,
//! each its own module under it: the shared state (agent, memory, workflow, prompt), the
//! conversation (messages, summary, compaction), the tool calls (with the planned handoff
//! and the result cache; they return their effects without seeing the session), the turn
//! (the only place the phase moves), the drive (text, or voice with its own state) and what
//! a client is shown. The modules beside it are what it is built from and know no session:
//! the agent ([`agent`], [`skills`]), the workflow, memory, tools and their [`authority`],
//! prompts ([`prompt`]), the context guard ([`context`], [`summary`]), consent in words
//! ([`consent`]), handoffs ([`handoff`]) and the vocabulary with the adapters (`events`).
//!
//! A session is a plain value driven through `&mut self`, so its inputs are handled one
//! at a time; user input that arrives while a turn is in progress is queued and handled
//! when the turn completes (per-session serialized execution).

pub mod agent;
pub mod assertion;
/// Audio formats and conversions (their own crate, `switchboard-audio`), under the path they always had.
pub use switchboard_audio as audio;
pub mod authority;
pub mod consent;
pub mod context;
pub mod digits;
pub mod dtmf;
mod events;
pub mod gateway_keys;
pub mod grant;
pub mod handoff;
pub mod language;
pub mod memory;
pub mod model;
pub mod outbound;
pub mod phone;
pub mod prompt;
/// The session protocol (its own crate, `switchboard-protocol`), under the path it always had.
pub use switchboard_protocol as protocol;
pub mod redact;
mod session;
mod skills;
pub mod summary;
pub mod tools;
pub mod transcript;
pub mod transfer;
pub mod turn_taking;
pub mod workflow;

pub use agent::{AgentCore, ConfigError, GOTO_TOOL};
pub use events::Activity;
pub use handoff::{HandoffContext, HandoffKind, HandoffRequest, HistoryTurn, ReturnStatus, WorkflowSnapshot};
pub use session::messages_from_history;
pub use session::{
    Effect, Input, MAX_QUEUED_INPUTS, MAX_TOOL_ROUNDS, ModelReply, NOTICE_PREFIX, Session, SessionInit, VoiceEffect,
    VoiceInput,
};
pub use tools::{FailureKind, ForPeople, ToolFailure};
pub use transcript::TranscriptEntry;
