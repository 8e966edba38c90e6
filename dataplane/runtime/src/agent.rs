//! What a driven session runs with and how it ends, shared by the text driver
//! ([`super::driver`]), the voice driver ([`super::voice`]) and their helpers (tool calls,
//! summaries, the session's trace): one agent with its model and tool executor
//! ([`AgentRuntime`]), what every session of the process shares ([`Shared`]: metrics,
//! transcripts, retries, redaction) and the end of a driven session ([`Exit`]).

use std::sync::Arc;

use super::metrics::Metrics;
use super::transcript::TranscriptSink;
use crate::tools::ToolExecutor;
use switchboard_core::redact::Redactor;
use switchboard_core::{AgentCore, HandoffRequest};
use switchboard_models::{RetryPolicy, TextModel};

/// One agent with what its sessions need to run.
#[derive(Debug, Clone)]
pub struct AgentRuntime {
    /// The prepared agent.
    pub core: Arc<AgentCore>,
    /// Its text model.
    pub model: Arc<dyn TextModel>,
    /// Its tool executor.
    pub executor: Arc<dyn ToolExecutor>,
    /// The variant this is (`spec.variants[].name`), when it is one.
    pub variant: Option<String>,
    /// The Agent's variants, by name (each with its own core and text model, the voice
    /// model shared): the gateway names the session's in its grant.
    pub variants: std::collections::BTreeMap<String, Arc<AgentRuntime>>,
}

impl AgentRuntime {
    /// The variant of this agent a session granted for `variant` runs on: that variant's
    /// runtime, or this one (the Agent's own) when the grant names none. A variant this
    /// pod does not know — the routing table names it before a rolling update brought it
    /// here — is served by the Agent's own, and said (`Err`, with this one inside).
    pub fn variant(self: &Arc<Self>, variant: Option<&str>) -> Result<Arc<Self>, Arc<Self>> {
        match variant {
            None => Ok(self.clone()),
            Some(name) => self.variants.get(name).cloned().ok_or_else(|| self.clone()),
        }
    }

    /// Label values `[agent, mode, model]`.
    pub fn labels(&self) -> [&str; 3] {
        let spec = self.core.spec();
        [spec.agent.name.as_str(), spec.mode.as_str(), spec.model.text_model_id.as_str()]
    }
}

/// Shared by every session of a process.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The metrics.
    pub metrics: Metrics,
    /// Where transcripts go, if anywhere.
    pub transcripts: Option<TranscriptSink>,
    /// Retries of model calls.
    pub retry: RetryPolicy,
    /// How what is said is redacted when it goes into traces (opted in): the built-in
    /// detectors and the platform's rules (`--record-redact`, the chart's
    /// `gateway.record.redact`, as the gateway's record has them); each Agent's own rules
    /// are added to them.
    pub redact: Arc<Redactor>,
}

impl Shared {
    /// Counts a handoff of `agent`'s session and says how the session ends.
    pub fn handoff(&self, agent: &AgentRuntime, request: HandoffRequest) -> Exit {
        self.metrics.handoffs.with_label_values(&[agent.core.name()]).inc();
        Exit::Handoff(Box::new(request))
    }

    /// Writes a transcript line, when transcripts are kept.
    pub fn transcript(&self, entry: switchboard_core::TranscriptEntry) {
        if let Some(sink) = &self.transcripts {
            sink.write(entry);
        }
    }
}

/// How a driven session ended.
#[derive(Debug)]
pub enum Exit {
    /// The session closed (the client's `close`, the agent ended it).
    Closed(String),
    /// The session must move to another agent.
    Handoff(Box<HandoffRequest>),
    /// The client went away (its inbound channel closed).
    ClientGone,
    /// The server is shutting down.
    Shutdown,
    /// The session ended on a failure, closed with this code (never 1000: a client must
    /// not read a failure as the conversation's end) and reason.
    Failed(u16, String),
}

impl Exit {
    /// The voice model's stream is gone (its events ended or it takes nothing more): the
    /// session ends as a server failure, 1011.
    pub fn model_gone() -> Self {
        Self::Failed(switchboard_core::protocol::close_code::INTERNAL, "the voice model session ended".into())
    }
}
