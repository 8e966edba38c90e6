//! The tool calls of one session, for the text driver and the voice relay alike: started
//! from the core's `ExecuteTool` effects, run concurrently, their progress lines and their
//! ends delivered one at a time by [`ToolCalls::next`], their durations recorded. Each
//! HTTP and MCP call carries the session's identity assertion ([`super::identity`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;

use super::agent::{AgentRuntime, Shared};
use super::identity::{self, IdentityWatch};
use crate::tools::{CallContext, Progress, ProgressUpdate};
use switchboard_core::protocol::ServerMessage;
use switchboard_core::{FailureKind, ToolFailure};
use switchboard_crds::agent::ToolTarget;

/// Tool progress lines queued towards the client; more are dropped (they are advisory).
const PROGRESS_BUFFER: usize = 16;

/// A finished call: its id, tool, duration and outcome.
pub type ToolDone = (String, String, Duration, Result<serde_json::Value, ToolFailure>);

type Running = std::pin::Pin<Box<dyn std::future::Future<Output = ToolDone> + Send>>;

/// What happened to a session's tool calls.
#[derive(Debug)]
pub enum ToolEvent {
    /// A running call reported progress: send it to the client.
    Progress(ServerMessage),
    /// A call ended: hand it to the core.
    Done(ToolDone),
}

fn progress(update: ProgressUpdate) -> ToolEvent {
    let ProgressUpdate { tool_use_id, name, message } = update;
    ToolEvent::Progress(ServerMessage::ToolProgress { tool_use_id, name, message })
}

/// The running calls of one session.
pub struct ToolCalls {
    running: FuturesUnordered<Running>,
    finished: VecDeque<ToolDone>,
    progress: mpsc::Sender<ProgressUpdate>,
    updates: mpsc::Receiver<ProgressUpdate>,
    identity: IdentityWatch,
}

impl std::fmt::Debug for ToolCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCalls").field("running", &self.running.len()).finish_non_exhaustive()
    }
}

impl Default for ToolCalls {
    fn default() -> Self {
        Self::new(IdentityWatch::none())
    }
}

impl ToolCalls {
    /// The calls of a session whose identity assertion `identity` follows.
    pub fn new(identity: IdentityWatch) -> Self {
        let (progress, updates) = Progress::channel(PROGRESS_BUFFER);
        Self { running: FuturesUnordered::new(), finished: VecDeque::new(), progress, updates, identity }
    }

    /// Starts call `id` of `tool` with `input` on `agent`'s executor, its span's
    /// `traceparent` going to the tool server; an unknown tool ends at once with an
    /// `unknown_tool` failure.
    pub fn start(
        &mut self,
        agent: &AgentRuntime,
        id: String,
        tool: String,
        input: serde_json::Value,
        traceparent: Option<String>,
    ) {
        let Some(spec) = agent.core.tool(&tool).cloned() else {
            let failure = ToolFailure::new(FailureKind::UnknownTool, format!("there is no tool called {tool:?}"));
            self.running.push(Box::pin(async move { (id, tool, Duration::ZERO, Err(failure)) }));
            return;
        };
        let progress = Some(Progress::new(self.progress.clone(), id.clone(), tool.clone()));
        // Built-ins reach no server: no identity for them.
        let identity = (!matches!(spec.target(), Some(ToolTarget::Builtin(_)))).then(|| self.identity.clone());
        let executor = agent.executor.clone();
        self.running.push(Box::pin(async move {
            let started = Instant::now();
            let identity = match identity {
                Some(watch) => watch.assertion(identity::PATIENCE).await,
                None => None,
            };
            let outcome = executor.call(&spec, input, CallContext { progress, identity, traceparent }).await;
            // Where the tool server is and what it answered: the operator's, not the model's or
            // the client's.
            if let Err(ToolFailure { kind, detail: Some(detail), .. }) = &outcome {
                tracing::warn!(%tool, %kind, "tool call failed: {detail}");
            }
            (id, tool, started.elapsed(), outcome)
        }));
    }

    /// The next progress line or end; pending while nothing runs. A call's progress lines
    /// all come before its end, even those it reported in the poll that finished it.
    /// Cancel-safe: an end received while the caller stops waiting is kept for the next call.
    pub async fn next(&mut self) -> ToolEvent {
        loop {
            if let Ok(update) = self.updates.try_recv() {
                return progress(update);
            }
            if let Some(done) = self.finished.pop_front() {
                return ToolEvent::Done(done);
            }
            tokio::select! {
                biased;
                Some(update) = self.updates.recv() => return progress(update),
                Some(done) = self.running.next(), if !self.running.is_empty() => self.finished.push_back(done),
                else => std::future::pending::<()>().await,
            }
        }
    }

    /// Stops every running call (the session gave them their results already): their
    /// futures, HTTP requests included, are dropped, and their ends and progress lines
    /// not yet delivered are forgotten.
    pub fn cancel(&mut self) {
        self.running = FuturesUnordered::new();
        self.finished.clear();
        while self.updates.try_recv().is_ok() {}
    }

    /// Records `done`'s duration by outcome in `shared`'s metrics.
    pub fn record(shared: &Shared, agent: &AgentRuntime, done: &ToolDone) {
        let (_, tool, elapsed, outcome) = done;
        let label = if outcome.is_ok() { "success" } else { "error" };
        shared
            .metrics
            .tool_duration
            .with_label_values(&[agent.core.name(), tool, label])
            .observe(elapsed.as_secs_f64());
    }
}
