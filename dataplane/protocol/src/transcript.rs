//! Transcript entries: one JSON object per line (JSONL) for each thing said or done in a
//! session, and who said a thing ([`TranscriptRole`], which the protocol and the handoff
//! context share). The core produces them; an adapter writes them (see
//! the `switchboard-dataplane` crate's `runtime::transcript`).

use serde::{Deserialize, Serialize};

/// Who produced a piece of transcript.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TranscriptRole {
    /// The person.
    User,
    /// The agent.
    Assistant,
}

/// One line of a transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// The session.
    pub session_id: String,
    /// The agent serving it.
    pub agent: String,
    /// What happened: `user`, `assistant`, `tool_call`, `tool_result`, `handoff`,
    /// `memory`, `transition`, `compaction` (turns cut off), `summary` (the model summary of
    /// them arrived), `end`.
    pub event: String,
    /// The details.
    pub data: serde_json::Value,
}
