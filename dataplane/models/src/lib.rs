//! Switchboard's model clients: the provider-neutral [`TextModel`] trait the runtime
//! calls for the agent core, the classified [`ModelError`], bounded retries, connection
//! pools, and the providers — Amazon Bedrock ConverseStream ([`bedrock`]), OpenAI-compatible
//! chat completions ([`openai`]) and Nova Sonic speech-to-speech over Bedrock's
//! bidirectional stream ([`sonic`]) — plus the HTTP client and TLS trust they share with
//! the runtime's tool executors ([`net`]). The request and event types themselves are the
//! agent core's (`switchboard_core::model`), re-exported here.
//!
//! A call is a [`ModelStream`]: the caller pulls events as they arrive and drops the
//! stream to cancel the call.

pub mod bedrock;
mod error;
pub mod fallback;
pub mod judge;
pub mod net;
pub mod openai;
pub mod pool;
mod retry;
pub mod sonic;

use std::pin::Pin;

use futures_util::Stream;

pub use error::ModelError;
pub use retry::{RetryPolicy, retrying, stream_with_retry};
pub use switchboard_core::model::{
    ContentBlock, Fallback, Message, ModelEvent, ModelRequest, Role, StopReason, ToolDefinition, ToolResult,
    ToolResultStatus, ToolUse, Usage,
};

/// The events of one model call, as they arrive. Errors are items; a stream ends after
/// its first error.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send + 'static>>;

/// A text model that streams its replies.
///
/// Implementations are cheap to share (`Arc<dyn TextModel>`) and safe to call from many
/// sessions at once. A call does no work until its stream is polled, and stops when the
/// stream is dropped.
pub trait TextModel: Send + Sync + std::fmt::Debug {
    /// Starts a call of the model with `request`. Failures to connect or of the request
    /// itself arrive as the stream's first (and last) item.
    fn stream(&self, request: &ModelRequest) -> ModelStream;

    /// The provider's name, for logs and metric labels: `bedrock` or `openai`.
    fn provider(&self) -> &'static str;
}

/// The reply of a whole call, gathered from its stream by [`collect_reply`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CollectedReply {
    /// The reply's text, all deltas joined.
    pub text: String,
    /// Number of text deltas received.
    pub text_deltas: usize,
    /// Tool calls, in order.
    pub tool_uses: Vec<ToolUse>,
    /// Token counts, if reported.
    pub usage: Option<Usage>,
    /// Why the model stopped, if it said.
    pub stop_reason: Option<StopReason>,
    /// Fallbacks the call made before it was answered, in order.
    pub fallbacks: Vec<Fallback>,
}

/// Drains `stream` into a [`CollectedReply`], or returns the first error.
pub async fn collect_reply(mut stream: ModelStream) -> Result<CollectedReply, ModelError> {
    use futures_util::StreamExt;
    let mut reply = CollectedReply::default();
    while let Some(event) = stream.next().await {
        match event? {
            ModelEvent::TextDelta(delta) => {
                reply.text.push_str(&delta);
                reply.text_deltas += 1;
            }
            ModelEvent::ToolUse(tool_use) => reply.tool_uses.push(tool_use),
            ModelEvent::Usage(usage) => reply.usage = Some(usage),
            ModelEvent::Stop(reason) => reply.stop_reason = Some(reason),
            ModelEvent::FellBack(fallback) => reply.fallbacks.push(fallback),
        }
    }
    Ok(reply)
}
