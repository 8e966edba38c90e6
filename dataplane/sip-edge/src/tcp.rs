//! SIP over TCP (RFC 3261 §18): one task per connection cuts its bytes into messages with
//! the sans-I/O [`StreamDecoder`] (at most one message's worth held) and hands them to the
//! SIP task, which feeds the same endpoint as UDP; keep-alives (CRLF CRLF) get their CRLF
//! at once. Everything the endpoint sends to a TCP peer goes back on that peer's
//! connection (the call machines send to the address a request came from). Bounded:
//! connections at once ([`MAX_CONNECTIONS`], more are closed on accept), each one's queue of
//! writes (a peer that does not read is disconnected), an idle connection's life
//! ([`IDLE`]), and a stream that loses its framing is answered (when its head reads) and
//! closed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use switchboard_sip::sip::parse::StreamItem;
use switchboard_sip::sip::{Limits, Message, ParseError, StreamDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// TCP connections at once; more are closed as they are accepted.
pub const MAX_CONNECTIONS: usize = 1024;
/// A connection with nothing read for this long is closed (a call's connection carries
/// little between its INVITE and its BYE, so this is generous).
pub const IDLE: Duration = Duration::from_secs(3600);
/// Writes queued for one connection at most.
const WRITE_QUEUE: usize = 64;

/// What a connection hands the SIP task.
#[derive(Debug)]
pub(crate) enum FromConnection {
    /// A message, or why the stream could not be read (then the connection is closing).
    Message(SocketAddr, Result<Message, ParseError>),
    /// The connection is gone.
    Closed(SocketAddr),
}

/// The SIP task's side of its TCP connections: where to write to each peer.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    writers: HashMap<SocketAddr, mpsc::Sender<Vec<u8>>>,
}

impl Connections {
    /// Starts the task of a connection just accepted, or closes it when there are too many.
    pub(crate) fn accept(
        &mut self,
        stream: TcpStream,
        peer: SocketAddr,
        limits: Limits,
        inbound: mpsc::Sender<FromConnection>,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) {
        if self.writers.len() >= MAX_CONNECTIONS {
            tracing::warn!(%peer, limit = MAX_CONNECTIONS, "too many SIP connections: closing the new one");
            return;
        }
        let (writer, writes) = mpsc::channel(WRITE_QUEUE);
        self.writers.insert(peer, writer);
        tasks.spawn(serve(stream, peer, limits, inbound, writes, shutdown));
    }

    /// Sends `bytes` on the connection to `peer`; false when there is none (or it is not
    /// keeping up, and is dropped).
    pub(crate) fn send(&mut self, peer: SocketAddr, bytes: Vec<u8>) -> bool {
        let Some(writer) = self.writers.get(&peer) else { return false };
        if writer.try_send(bytes).is_ok() {
            return true;
        }
        tracing::warn!(%peer, "a SIP connection is not reading: closing it");
        self.writers.remove(&peer);
        false
    }

    /// Forgets a connection that closed.
    pub(crate) fn closed(&mut self, peer: SocketAddr) {
        self.writers.remove(&peer);
    }

    /// Connections open.
    pub(crate) fn len(&self) -> usize {
        self.writers.len()
    }
}

/// Reads and writes one connection until either side ends it, it idles past [`IDLE`], its
/// framing is lost, or the edge shuts down.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    limits: Limits,
    inbound: mpsc::Sender<FromConnection>,
    mut writes: mpsc::Receiver<Vec<u8>>,
    shutdown: CancellationToken,
) {
    let (mut reader, mut writer) = stream.into_split();
    let mut decoder = StreamDecoder::new(limits);
    let mut buf = vec![0u8; 8192];
    loop {
        tokio::select! {
            read = tokio::time::timeout(IDLE, reader.read(&mut buf)) => {
                let n = match read {
                    Ok(Ok(0)) | Ok(Err(_)) => break,
                    Ok(Ok(n)) => n,
                    Err(_) => {
                        tracing::debug!(%peer, "SIP connection idle too long: closing it");
                        break;
                    }
                };
                let mut failed = decoder.push(&buf[..n]).err();
                while failed.is_none() {
                    match decoder.next_item() {
                        None => break,
                        Some(Ok(StreamItem::Ping)) => {
                            if writer.write_all(b"\r\n").await.is_err() {
                                failed = Some(ParseError::Empty);
                            }
                        }
                        Some(Ok(StreamItem::Message(message))) => {
                            if inbound.send(FromConnection::Message(peer, Ok(message))).await.is_err() {
                                failed = Some(ParseError::Empty);
                            }
                        }
                        Some(Err(error)) => failed = Some(error),
                    }
                }
                if let Some(error) = failed {
                    if !matches!(error, ParseError::Empty) {
                        tracing::debug!(%peer, %error, "SIP stream unreadable: answering and closing it");
                        let _ = inbound.send(FromConnection::Message(peer, Err(error))).await;
                        // Let the answer go out before the connection closes.
                        if let Ok(Some(answer)) = tokio::time::timeout(Duration::from_secs(1), writes.recv()).await {
                            let _ = writer.write_all(&answer).await;
                        }
                    }
                    break;
                }
            }
            write = writes.recv() => match write {
                Some(bytes) => {
                    if writer.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            () = shutdown.cancelled() => {
                // Let the BYEs of the calls being hung up go out first.
                while let Ok(Some(bytes)) = tokio::time::timeout(Duration::from_secs(2), writes.recv()).await {
                    if writer.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                break;
            }
        }
    }
    let _ = writer.shutdown().await;
    let _ = inbound.send(FromConnection::Closed(peer)).await;
}
