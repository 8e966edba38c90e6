//! The writing half of a session's WebSocket: the session's messages and the
//! connection's own (errors about frames, the close) go out in order, fed without a flush
//! each and flushed once nothing more is queued; a client that does not read is closed
//! with 4409. Reply audio goes as binary frames of raw bytes when the session asked for
//! them (`session_start.audio.binary_output`, [`BinaryAudio`]); everything else is JSON.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use bytes::Bytes;
use futures_util::SinkExt;
use tokio::sync::mpsc;

use super::metrics::Metrics;
use super::voice::BinaryAudio;
use switchboard_core::protocol::{ServerMessage, close_code};

/// What the connection's writer sends besides the session's messages.
pub(super) enum Out {
    /// A message of the connection's own (an error about a frame, the closing notice).
    Message(ServerMessage),
    /// The close frame: code and reason; the writer stops after it.
    Close(u16, String),
}

/// Writes the session's messages (`messages`, first while it has any, so everything the
/// session queued goes out before the close that follows it) and the connection's own
/// (`out`) to the socket. Messages are fed without a flush each, and flushed once nothing
/// more is queued (or [`FLUSH_EVERY`] are waiting): one socket write for a burst (audio
/// chunks), none held back. A write
/// that waits longer than `slow` (the client does not read) ends the connection with
/// 4409: the writer stops, so the session's next send fails and its slot is freed.
pub(super) async fn write_loop(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    mut messages: mpsc::Receiver<ServerMessage>,
    mut out: mpsc::Receiver<Out>,
    slow: Duration,
    binary: BinaryAudio,
    metrics: Metrics,
) {
    let mut session_open = true;
    let mut unflushed = 0usize;
    loop {
        let next = tokio::select! {
            biased;
            message = messages.recv(), if session_open => match message {
                Some(message) => Out::Message(message),
                None => {
                    session_open = false;
                    continue;
                }
            },
            next = out.recv() => match next {
                Some(next) => next,
                None => break,
            },
        };
        let fed = match next {
            Out::Message(message) => within(slow, sink.feed(frame(message, &binary))).await,
            Out::Close(code, reason) => {
                let frame = CloseFrame { code, reason: Utf8Bytes::from(reason) };
                let _ = within(slow, sink.send(Message::Close(Some(frame)))).await;
                break;
            }
        };
        unflushed += 1;
        // Flushed when nothing more is queued, and at least every FLUSH_EVERY messages:
        // tungstenite buffers writes without bound, so without a flush a client that does
        // not read would grow this buffer forever and never be noticed.
        let due = unflushed >= FLUSH_EVERY || (messages.is_empty() && out.is_empty());
        let written = match fed {
            Written::Done(Ok(())) if due => {
                unflushed = 0;
                within(slow, sink.flush()).await
            }
            other => other,
        };
        match written {
            Written::Done(Ok(())) => {}
            Written::Done(Err(_)) => break,
            Written::Stuck => {
                metrics.errors.with_label_values(&["", "slow_client"]).inc();
                let frame = CloseFrame {
                    code: close_code::SLOW_CLIENT,
                    reason: Utf8Bytes::from_static("the client does not read its messages"),
                };
                // The socket is full: the close frame goes out only if the client reads again.
                let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(Message::Close(Some(frame)))).await;
                break;
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
}

/// The WebSocket frame of `message`: JSON text, or for reply audio with [`BinaryAudio`] on,
/// its raw bytes in a binary frame.
fn frame(message: ServerMessage, binary: &BinaryAudio) -> Message {
    if let ServerMessage::BidiAudioStream { audio, .. } = &message
        && binary.get()
    {
        // The session wrote this base64 itself (checked when it came from the model).
        if let Ok(bytes) = aws_smithy_types::base64::decode(audio) {
            return Message::Binary(Bytes::from(bytes));
        }
    }
    Message::Text(Utf8Bytes::from(message.to_json()))
}

/// Messages written at most between two flushes.
const FLUSH_EVERY: usize = 32;

/// A socket write's outcome.
enum Written<E> {
    Done(Result<(), E>),
    /// It waited longer than allowed.
    Stuck,
}

/// Runs a write; only one that does not complete at once gets a timer (a timer per frame
/// would cost more than the write).
async fn within<E>(limit: Duration, write: impl std::future::Future<Output = Result<(), E>>) -> Written<E> {
    let mut write = std::pin::pin!(write);
    match futures_util::poll!(write.as_mut()) {
        std::task::Poll::Ready(result) => Written::Done(result),
        std::task::Poll::Pending => match tokio::time::timeout(limit, write).await {
            Ok(result) => Written::Done(result),
            Err(_) => Written::Stuck,
        },
    }
}
