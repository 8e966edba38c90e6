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
//! Sonic): [`Session::start_voice`] and the `Voice*` inputs; see the `voice` module.
//!
//! A session is a plain value driven through `&mut self`, so its inputs are handled one
//! at a time; user input that arrives while a turn is in progress is queued and handled
//! when the turn completes (per-session serialized execution).

mod activity;
pub mod agent;
pub mod assertion;
pub mod audio;
pub mod authority;
mod calls;
mod cancel;
mod carry;
mod compaction;
pub mod consent;
pub mod context;
mod events;
pub mod gateway_keys;
pub mod grant;
pub mod handoff;
mod heard;
pub mod memory;
pub mod model;
mod model_call;
pub mod prompt;
pub mod protocol;
pub mod redact;
mod session;
mod skills;
pub mod summary;
pub mod tools;
pub mod transcript;
mod voice;
pub mod workflow;

pub use agent::{AgentCore, ConfigError, GOTO_TOOL};
pub use carry::messages_from_history;
pub use events::Activity;
pub use handoff::{HandoffContext, HandoffKind, HandoffRequest, HistoryTurn, ReturnStatus, WorkflowSnapshot};
pub use session::{Effect, Input, MAX_QUEUED_INPUTS, MAX_TOOL_ROUNDS, ModelReply, Session, SessionInit};
pub use tools::{FailureKind, ForPeople, ToolFailure};
pub use transcript::TranscriptEntry;
