//! A call whose connection to the gateway drops mid-call: starting the resume of its
//! session ([`gateway::resume`]), waiting for it inside the call's loop, the frames the
//! gateway replays before the resumed start, and the counting of every message received.

use std::collections::VecDeque;
use std::sync::Arc;

use futures_util::StreamExt;
use switchboard_core::protocol::ServerMessage;
use switchboard_sip::media::format::Format;
use tokio_tungstenite::tungstenite::Message;

use super::Call;
use crate::gateway;

/// A resume under way ([`gateway::resume`]).
pub(super) type Resuming =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<gateway::Resumed, String>> + Send>>;

impl Call {
    /// Starts resuming the call's session after its connection ended with `close` (its code;
    /// `None`: lost), when that is one to resume and the session can be.
    pub(super) fn resume(&self, position: &gateway::Position, close: Option<u16>, format: Format) -> Option<Resuming> {
        let config = Arc::clone(&self.gateway);
        if config.resume_for.is_zero() || !position.resumable() || !gateway::resumes_after(close) {
            return None;
        }
        tracing::info!(call = %self.call_id, ?close, "the connection to the gateway ended mid-call: resuming the session");
        let position = position.clone();
        Some(Box::pin(async move { gateway::resume(&config, &position, format).await }))
    }
}

/// The resume under way's outcome, once it has one (never, when none is).
pub(super) async fn resumed(resuming: &mut Option<Resuming>) -> Result<gateway::Resumed, String> {
    match resuming {
        Some(resuming) => resuming.await,
        None => std::future::pending().await,
    }
}

/// The next frame from the gateway: a replayed one first, then the socket's.
pub(super) async fn next_frame(
    replayed: &mut VecDeque<Message>,
    stream: &mut futures_util::stream::SplitStream<gateway::Socket>,
) -> Option<Result<Message, tokio_tungstenite::tungstenite::Error>> {
    match replayed.pop_front() {
        Some(message) => Some(Ok(message)),
        None => stream.next().await,
    }
}

/// `parsed` (a text message from the gateway), counted in the session's `position`.
pub(super) fn counted<E>(
    position: &mut gateway::Position,
    parsed: Result<ServerMessage, E>,
) -> Result<ServerMessage, E> {
    position.text(parsed.as_ref().ok());
    parsed
}
