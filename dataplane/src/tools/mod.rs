//! Tool executors: how the runtime runs the tools the core asks for. [`ToolExecutor`] is
//! the seam; [`Executor`] runs HTTP tool servers ([`http`]) and built-ins ([`builtin`]).
//! MCP tools are not supported yet and fail with an `unsupported` error result.

pub mod builtin;
pub mod http;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use switchboard_crds::agent::{ToolSpec, ToolTarget};

use crate::core::{FailureKind, ToolFailure};

/// The future of one tool call.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<serde_json::Value, ToolFailure>> + Send + 'static>>;

/// Runs tools. Implementations are shared by all sessions.
pub trait ToolExecutor: Send + Sync + std::fmt::Debug {
    /// Runs `tool` with `input` (already validated by the core).
    fn execute(&self, tool: &ToolSpec, input: serde_json::Value) -> ToolFuture;
}

/// The runtime's executor: HTTP tool servers and built-ins.
#[derive(Debug, Clone, Default)]
pub struct Executor {
    http: http::HttpToolClient,
}

impl Executor {
    /// An executor whose HTTP calls resolve the host names in `aliases` (name ->
    /// `host:port`) to other addresses, as local mode does for the example's tool servers.
    pub fn with_aliases(aliases: BTreeMap<String, String>) -> Self {
        Self { http: http::HttpToolClient::with_aliases(aliases) }
    }
}

impl ToolExecutor for Executor {
    fn execute(&self, tool: &ToolSpec, input: serde_json::Value) -> ToolFuture {
        match tool.target() {
            Some(ToolTarget::Http(spec)) => self.http.call(spec, input),
            Some(ToolTarget::Builtin(spec)) => {
                let kind = spec.kind;
                Box::pin(async move { builtin::run(kind) })
            }
            Some(ToolTarget::Mcp(_)) => {
                let name = tool.name.clone();
                Box::pin(async move {
                    Err(ToolFailure::new(
                        FailureKind::Unsupported,
                        format!("tool {name:?} is an MCP tool, and this runtime does not support MCP tools yet"),
                    ))
                })
            }
            None => {
                let name = tool.name.clone();
                Box::pin(async move {
                    Err(ToolFailure::new(
                        FailureKind::Unsupported,
                        format!("tool {name:?} has no http, mcp or builtin target"),
                    ))
                })
            }
        }
    }
}
