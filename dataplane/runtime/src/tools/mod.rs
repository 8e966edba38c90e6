//! Tool executors: how the runtime runs the tools the core asks for. [`ToolExecutor`] is
//! the seam; [`Executor`] runs HTTP tool servers ([`http`]), MCP servers ([`mcp`]) and
//! built-ins ([`builtin`]), over `http://` or `https://`. While a call runs, [`Progress`]
//! carries what the tool reports (MCP progress notifications) and, for a call still running
//! after [`ExecutorOptions::heartbeat`], a periodic "still running" line — the client's
//! `tool_progress` events. A call of a session with a verified caller carries the gateway's
//! identity assertion to HTTP and MCP servers as header `X-Switchboard-Identity` (see
//! `IDENTITY.md` beside this file, for tool-server authors).

pub mod builtin;
pub mod http;
pub mod mcp;
pub mod secrets;
pub mod target;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use switchboard_crds::agent::{ToolSpec, ToolTarget};
use tokio::sync::mpsc;

use switchboard_core::{FailureKind, ToolFailure};
use switchboard_models::net::{Trust, TrustError};
pub use target::Aliases;

/// The future of one tool call.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<serde_json::Value, ToolFailure>> + Send + 'static>>;

/// One progress line of a running call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgressUpdate {
    /// The call.
    pub tool_use_id: String,
    /// The tool.
    pub name: String,
    /// What is happening.
    pub message: String,
}

/// Where a running call reports progress. Lossy by design: when the session's progress
/// queue is full (a slow client), updates are dropped rather than buffered.
#[derive(Clone, Debug)]
pub struct Progress {
    tx: mpsc::Sender<ProgressUpdate>,
    tool_use_id: String,
    name: String,
}

impl Progress {
    /// A progress queue for one session, holding at most `capacity` unsent updates.
    pub fn channel(capacity: usize) -> (mpsc::Sender<ProgressUpdate>, mpsc::Receiver<ProgressUpdate>) {
        mpsc::channel(capacity)
    }

    /// The reporter of call `tool_use_id` of `name`, sending into `tx`.
    pub fn new(tx: mpsc::Sender<ProgressUpdate>, tool_use_id: impl Into<String>, name: impl Into<String>) -> Self {
        Self { tx, tool_use_id: tool_use_id.into(), name: name.into() }
    }

    /// Reports `message`.
    pub fn report(&self, message: impl Into<String>) {
        let update =
            ProgressUpdate { tool_use_id: self.tool_use_id.clone(), name: self.name.clone(), message: message.into() };
        if self.tx.try_send(update).is_err() {
            tracing::debug!(tool = %self.name, "dropping a tool progress update: the queue is full or closed");
        }
    }
}

/// What one call carries besides its input.
#[derive(Clone, Debug, Default)]
pub struct CallContext {
    /// Where the call reports progress; none: it reports nothing.
    pub progress: Option<Progress>,
    /// The session's identity assertion (a compact JWS), sent to HTTP and MCP servers as
    /// [`switchboard_core::assertion::HEADER`]; none: no such header.
    pub identity: Option<String>,
    /// The W3C `traceparent` of the call's span, sent to HTTP and MCP servers as header
    /// `traceparent` so that their spans join the session's trace; none when not traced.
    pub traceparent: Option<String>,
}

/// Runs tools. Implementations are shared by all sessions.
pub trait ToolExecutor: Send + Sync + std::fmt::Debug {
    /// Runs `tool` with `input` (already validated by the core) and what `call` carries.
    fn call(&self, tool: &ToolSpec, input: serde_json::Value, call: CallContext) -> ToolFuture;

    /// Runs `tool` with `input`, without progress or identity.
    fn execute(&self, tool: &ToolSpec, input: serde_json::Value) -> ToolFuture {
        self.call(tool, input, CallContext::default())
    }

    /// Runs `tool` with `input`, reporting progress to `progress`, without identity.
    fn execute_reporting(&self, tool: &ToolSpec, input: serde_json::Value, progress: Progress) -> ToolFuture {
        self.call(tool, input, CallContext { progress: Some(progress), ..CallContext::default() })
    }
}

/// How the runtime's executor reaches tool servers.
#[derive(Clone, Debug)]
pub struct ExecutorOptions {
    /// Certificates trusted for `https://` tool and MCP servers.
    pub trust: Trust,
    /// Host name -> `host:port` overrides (local mode's example tool servers).
    pub aliases: BTreeMap<String, String>,
    /// How often a call still running reports so. Default 2 s.
    pub heartbeat: Duration,
    /// Where the Secrets of tools' `secretHeaders` are mounted.
    pub secrets: secrets::SecretFiles,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        Self {
            trust: Trust::system(),
            aliases: BTreeMap::new(),
            heartbeat: Duration::from_secs(2),
            secrets: secrets::SecretFiles::default(),
        }
    }
}

/// The runtime's executor: HTTP tool servers, MCP servers and built-ins.
#[derive(Debug, Clone)]
pub struct Executor {
    http: http::HttpToolClient,
    mcp: mcp::McpClient,
    heartbeat: Duration,
}

impl Executor {
    /// An executor with `options`.
    pub fn new(options: ExecutorOptions) -> Result<Self, TrustError> {
        let client = options.trust.client()?;
        let aliases = Aliases::new(options.aliases);
        Ok(Self {
            http: http::HttpToolClient::new(client.clone(), aliases.clone()).with_secrets(options.secrets.clone()),
            mcp: mcp::McpClient::new(client, aliases).with_secrets(options.secrets),
            heartbeat: options.heartbeat,
        })
    }

    fn run(&self, tool: &ToolSpec, input: serde_json::Value, call: CallContext) -> ToolFuture {
        let CallContext { progress, identity, traceparent } = call;
        match tool.target() {
            Some(ToolTarget::Http(spec)) => self.http.call(spec, input, identity, traceparent),
            Some(ToolTarget::Mcp(spec)) => {
                let (mcp, spec, name) = (self.mcp.clone(), spec.clone(), tool.name.clone());
                Box::pin(async move { mcp.call(&spec, &name, input, progress, identity, traceparent).await })
            }
            Some(ToolTarget::Builtin(spec)) => {
                let kind = spec.kind;
                Box::pin(async move { builtin::run(kind) })
            }
            // The session asks the client for a client tool's result: it never reaches here.
            Some(ToolTarget::Client(_)) => {
                let name = tool.name.clone();
                Box::pin(async move {
                    Err(ToolFailure::new(
                        FailureKind::Unsupported,
                        format!("tool {name:?} runs in the client, not in the runtime"),
                    ))
                })
            }
            None => {
                let name = tool.name.clone();
                Box::pin(async move {
                    Err(ToolFailure::new(
                        FailureKind::Unsupported,
                        format!("tool {name:?} has no http, mcp, builtin or client target"),
                    ))
                })
            }
        }
    }
}

impl ToolExecutor for Executor {
    fn call(&self, tool: &ToolSpec, input: serde_json::Value, call: CallContext) -> ToolFuture {
        let progress = call.progress.clone();
        let running = self.run(tool, input, call);
        match progress {
            Some(progress) => with_heartbeat(running, progress, self.heartbeat),
            None => running,
        }
    }
}

/// `call`, reporting "still running after N s" every `every` until it finishes.
pub fn with_heartbeat(call: ToolFuture, progress: Progress, every: Duration) -> ToolFuture {
    if every.is_zero() {
        return call;
    }
    Box::pin(async move {
        let started = tokio::time::Instant::now();
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(call);
        loop {
            tokio::select! {
                result = &mut call => return result,
                _ = ticks.tick() => progress.report(format!("still running after {} s", started.elapsed().as_secs())),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_long_call_reports_that_it_is_still_running() {
        let (tx, mut rx) = Progress::channel(16);
        let call: ToolFuture = Box::pin(async {
            tokio::time::sleep(Duration::from_millis(4500)).await;
            Ok(serde_json::json!("done"))
        });
        let result = with_heartbeat(call, Progress::new(tx, "t1", "report"), Duration::from_secs(2)).await;
        assert_eq!(result.expect("ok"), serde_json::json!("done"));
        let first = rx.recv().await.expect("an update");
        assert_eq!((first.tool_use_id.as_str(), first.name.as_str()), ("t1", "report"));
        assert_eq!(first.message, "still running after 2 s");
        assert_eq!(rx.recv().await.expect("a second update").message, "still running after 4 s");
        assert!(rx.try_recv().is_err(), "no update after the call finished");
    }

    #[test]
    fn a_full_queue_drops_updates_instead_of_blocking() {
        let (tx, mut rx) = Progress::channel(1);
        let progress = Progress::new(tx, "t", "n");
        progress.report("one");
        progress.report("two");
        assert_eq!(rx.try_recv().expect("first").message, "one");
        assert!(rx.try_recv().is_err());
    }
}
