//! A session's WebSocket, on the shared frame layer ([`switchboard_serve::frames`], as the
//! gateway's): one task reads the client's frames through the [`Reader`] and writes the
//! session's messages and the connection's own (errors about frames, the close) in order.
//! Writes are queued without a flush each and flushed once nothing more is waiting (or
//! [`FLUSH_BYTES`] are queued): one socket write for a burst (audio chunks), none held
//! back. A flush that waits longer than `slow` (the client does not read) ends the
//! connection with 4409, so the session's next send fails and its slot is freed. Reply
//! audio goes as binary frames of raw bytes when the session asked for them
//! (`session_start.audio.binary_output`, [`BinaryAudio`]); everything else is JSON.
//!
//! When the session's audio queue is full (the session is behind), the frame waits for room
//! and reading pauses: the client's frames wait in its socket, as TCP holds them, and the
//! rate limits judge them by when they arrived, not by when they are read.
//!
//! After a close this side sent (a broken limit, the session's end), the client's frames
//! are read and dropped until it acknowledges the close, for at most [`CLOSE_DRAIN`], so the
//! TCP connection is not reset under frames the client already sent (which would lose the
//! close frame).

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use switchboard_serve::Arrival;
use switchboard_serve::frames::{CloseFrame, Conn, Message, Upgraded, Utf8Bytes};
use switchboard_serve::ws::within;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::metrics::Metrics;
use super::reader::{Reader, Verdict};
use super::voice::BinaryAudio;
use switchboard_core::protocol::{ServerMessage, close_code};

/// How long to read (and drop) frames after a close, waiting for the client's answer.
pub const CLOSE_DRAIN: Duration = Duration::from_secs(2);

/// Bytes queued at most between two flushes: without a bound a burst from the session
/// would be held back, and a client that does not read would not be noticed.
const FLUSH_BYTES: usize = 64 * 1024;

/// What the connection sends besides the session's messages.
pub(super) enum Out {
    /// A message of the connection's own (an error about a frame, the closing notice).
    Message(ServerMessage),
    /// The close frame: code and reason; nothing is sent after it.
    Close(u16, String),
}

/// The socket's two sources of what it writes.
pub(super) struct Outgoing {
    /// The session's messages: written first while it has any, so everything the session
    /// queued goes out before the close that follows it.
    pub messages: mpsc::Receiver<ServerMessage>,
    /// The connection's own.
    pub out: mpsc::Receiver<Out>,
}

/// What happened next on the connection.
enum Event {
    /// Something to write.
    Send(ServerMessage),
    /// The close to send.
    Close(u16, String),
    /// A frame (or the end) from the client.
    Frame(Option<Result<Message, switchboard_serve::frames::Error>>),
    /// The idle timer went off (the client may have sent something since it was set).
    Idle,
    /// Nothing more will be written (the connection's senders are gone).
    Done,
    /// The session took no more audio: it is gone.
    Gone,
}

/// Serves the socket until the session's close is sent (or the client is gone, or does
/// not read): the client's frames to `reader`, the session's messages to the client.
pub(super) async fn run(
    mut conn: Conn<Upgraded>,
    reader: Reader,
    mut outgoing: Outgoing,
    slow: Duration,
    binary: BinaryAudio,
    metrics: Metrics,
) {
    let idle = reader.idle_timeout();
    // `None` once reading stopped: the client closed or went away, or the session is gone;
    // dropping the reader tells the session.
    let mut reader = Some(reader);
    let mut session_open = true;
    // The idle timer is set once per idle period, not once per frame: when it goes off,
    // the client's last frame says whether it really was idle.
    let mut last_frame = Instant::now();
    let idle_timer = tokio::time::sleep(idle);
    tokio::pin!(idle_timer);
    // An audio frame waiting for room in the session's queue ([`Verdict::Hold`]): nothing
    // more is read until it is taken, while the session's messages still go out.
    let mut held: Option<Bytes> = None;
    let closed = loop {
        let event = tokio::select! {
            biased;
            message = outgoing.messages.recv(), if session_open => match message {
                Some(message) => Event::Send(message),
                None => {
                    session_open = false;
                    continue;
                }
            },
            next = outgoing.out.recv() => match next {
                Some(Out::Message(message)) => Event::Send(message),
                Some(Out::Close(code, reason)) => Event::Close(code, reason),
                None => Event::Done,
            },
            room = async { reader.as_ref().expect("reading").audio_queue().reserve().await },
                if held.is_some() && reader.is_some() =>
            {
                match room {
                    Ok(permit) => {
                        permit.send(held.take().expect("a held frame"));
                        continue;
                    }
                    Err(mpsc::error::SendError(())) => Event::Gone,
                }
            }
            frame = conn.next(), if reader.is_some() && held.is_none() => Event::Frame(frame),
            () = &mut idle_timer, if reader.is_some() => Event::Idle,
        };
        let verdict = match event {
            Event::Send(message) => {
                if conn.feed(frame(message, &binary)).is_err() {
                    break false;
                }
                Verdict::Next
            }
            Event::Close(code, reason) => break close(&mut conn, code, reason, slow).await,
            Event::Done => break false,
            Event::Gone => {
                held = None;
                Verdict::Stop
            }
            Event::Idle => {
                let due = last_frame + idle;
                if Instant::now() < due {
                    idle_timer.as_mut().reset(due);
                    continue;
                }
                reader.as_ref().map_or(Verdict::Stop, Reader::idle)
            }
            Event::Frame(frame) => {
                last_frame = Instant::now();
                if let (Arrival::After(at), Some(reader)) = (conn.arrival(), reader.as_mut()) {
                    reader.caught_up(at);
                }
                match (frame, reader.as_mut()) {
                    (Some(Ok(frame)), Some(reader)) => reader.frame(frame),
                    (Some(Err(error)), Some(reader)) => reader.read_error(&error),
                    _ => Verdict::Stop,
                }
            }
        };
        match verdict {
            Verdict::Next => {}
            Verdict::Tell(message) => {
                if conn.feed(frame(message, &binary)).is_err() {
                    break false;
                }
            }
            // The session sees its client gone; what it still sends is written while the
            // socket takes it.
            Verdict::Stop => reader = None,
            Verdict::Hold(pcm) => held = Some(pcm),
            Verdict::Fatal(code, reason, kind) => {
                if let Some(reader) = &reader {
                    reader.fatal(kind);
                }
                // What the session queued goes out before the close.
                while let Ok(message) = outgoing.messages.try_recv() {
                    let _ = conn.feed(frame(message, &binary));
                }
                let sent = close(&mut conn, code, reason, slow).await;
                // Only now the session learns that its client is gone.
                reader = None;
                break sent;
            }
        }
        let waiting = (session_open && !outgoing.messages.is_empty()) || !outgoing.out.is_empty();
        if conn.queued() == 0 || (waiting && conn.queued() < FLUSH_BYTES) {
            continue;
        }
        match within(slow, conn.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => break false,
            Err(_) => {
                metrics.errors.with_label_values(&["", "slow_client"]).inc();
                let reason = "the client does not read its messages".to_owned();
                // The socket is full: the close frame goes out only if the client reads again.
                let _ = close(&mut conn, close_code::SLOW_CLIENT, reason, Duration::from_secs(1)).await;
                break false;
            }
        }
    };
    // Nothing more is written: senders see the socket gone at once.
    drop(outgoing);
    drop(reader);
    if closed {
        // The client's frames are dropped until it answers the close.
        let _ = conn.linger(CLOSE_DRAIN).await;
    } else {
        let _ = tokio::time::timeout(Duration::from_secs(1), conn.close(None)).await;
    }
}

/// Sends the close frame and shuts the write side, within `slow`; whether it was sent.
async fn close(conn: &mut Conn<Upgraded>, code: u16, reason: String, slow: Duration) -> bool {
    let frame = CloseFrame { code: code.into(), reason: Utf8Bytes::from(reason) };
    matches!(tokio::time::timeout(slow, conn.close(Some(frame))).await, Ok(Ok(())))
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
