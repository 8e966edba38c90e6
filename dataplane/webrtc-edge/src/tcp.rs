//! ICE-TCP, the fallback where a client's network lets no UDP through (RFC 6544): beside its
//! UDP port the edge listens on one TCP port, offered in every answer as a `tcptype passive`
//! host candidate. A client's ICE agent connects (`tcptype active`) and sends on the
//! connection what it would send as datagrams, each framed by a 16-bit length (RFC 4571):
//! STUN checks, then DTLS, SRTP and SCTP, both ways.
//!
//! A connection belongs to no call until its first frame, a STUN binding request whose
//! `USERNAME` names a call's ICE ufrag ([`Demux::call_for`]); anything else, or nothing
//! within [`FIRST_FRAME`], closes it. From then on every frame goes to that call's queue (as
//! a datagram from the connection's peer, [`Protocol::Tcp`]), and what the call sends to that
//! peer over TCP goes back framed ([`TcpSide::send`]). The call's `str0m` checks the
//! request's integrity and answers it; here bytes only find their way.
//!
//! Bounded: [`TcpSide::new`]'s connection slots (a connection over them is closed at once),
//! frames of at most [`MAX_FRAME`] bytes (a longer one closes the connection: WebRTC keeps
//! its packets under the path's MTU), [`WRITE_QUEUE`] frames queued to send (more are dropped,
//! as a network drops them), and [`IDLE`] without a frame (a client's consent checks come
//! every few seconds) ends a connection. It ends with its call too.
//!
//! [`Demux::call_for`]: crate::demux::Demux::call_for

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use switchboard_webrtc::Protocol;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::demux::{Demux, Incoming};

/// The largest frame taken (RFC 4571 allows 65535; WebRTC packets are kept under the MTU).
pub const MAX_FRAME: usize = 4096;
/// How long a new connection may take to send its first frame (a STUN check).
pub const FIRST_FRAME: Duration = Duration::from_secs(10);
/// How long a connection may stay silent (ICE consent checks come every 5 s or so).
pub const IDLE: Duration = Duration::from_secs(30);
/// How long a connection that ends may take to send what is queued for it.
pub const FLUSH: Duration = Duration::from_secs(1);
/// Frames queued for one connection to send; more are dropped.
pub const WRITE_QUEUE: usize = 256;

/// Why a connection's frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket.
    #[error("reading the connection: {0}")]
    Io(#[from] std::io::Error),
    /// A frame over [`MAX_FRAME`].
    #[error("a frame of {0} bytes, over the limit of {MAX_FRAME}")]
    TooLarge(usize),
}

/// The next RFC 4571 frame of `reader` into `buffer`; `None` at the end of the stream.
/// Empty frames are skipped.
pub async fn read_frame<'a, R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &'a mut [u8; MAX_FRAME],
) -> Result<Option<&'a [u8]>, FrameError> {
    loop {
        let mut length = [0u8; 2];
        match reader.read_exact(&mut length).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let length = usize::from(u16::from_be_bytes(length));
        if length > MAX_FRAME {
            return Err(FrameError::TooLarge(length));
        }
        if length == 0 {
            continue;
        }
        reader.read_exact(&mut buffer[..length]).await?;
        return Ok(Some(&buffer[..length]));
    }
}

/// `contents` as one RFC 4571 frame; `None` when it is too long for one.
pub fn frame(contents: &[u8]) -> Option<Vec<u8>> {
    let length = u16::try_from(contents.len()).ok()?;
    let mut out = Vec::with_capacity(2 + contents.len());
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(contents);
    Some(out)
}

/// The edge's TCP port: its listener, and the connections calls send on, by peer.
#[derive(Debug)]
pub struct TcpSide {
    listener: TcpListener,
    /// Where it is bound.
    pub bound: SocketAddr,
    /// Where clients reach it: the candidate in every answer.
    pub advertised: SocketAddr,
    connections: Mutex<HashMap<SocketAddr, mpsc::Sender<Vec<u8>>>>,
    slots: Arc<Semaphore>,
}

impl TcpSide {
    /// Around a bound `listener`, advertised at `advertised`, with `max_connections` slots.
    pub fn new(listener: TcpListener, bound: SocketAddr, advertised: SocketAddr, max_connections: usize) -> Self {
        Self {
            listener,
            bound,
            advertised,
            connections: Mutex::default(),
            slots: Arc::new(Semaphore::new(max_connections)),
        }
    }

    /// Sends `contents` to the connection of `destination`; dropped where there is none, or
    /// its queue is full.
    pub fn send(&self, destination: SocketAddr, contents: &[u8]) {
        let Some(frame) = frame(contents) else { return };
        let connection = self.connections().get(&destination).cloned();
        match connection {
            Some(queue) => {
                if queue.try_send(frame).is_err() {
                    tracing::debug!(%destination, "an ICE-TCP frame was not sent: the connection is full or gone");
                }
            }
            None => tracing::debug!(%destination, "an ICE-TCP frame for no connection"),
        }
    }

    /// Accepts connections until `stop`, each served on its own task until it, its call or
    /// the edge ends.
    pub async fn accept(self: Arc<Self>, demux: Arc<Demux>, stop: CancellationToken) {
        loop {
            let accepted = tokio::select! {
                () = stop.cancelled() => return,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, or a connection reset before it was taken: wait a
                    // little rather than spin.
                    tracing::debug!(%error, "ICE-TCP accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(slot) = self.slots.clone().try_acquire_owned() else {
                tracing::debug!(%peer, "ICE-TCP: every connection slot is taken; a connection closed");
                continue;
            };
            let (side, demux, stop) = (self.clone(), demux.clone(), stop.clone());
            tokio::spawn(async move {
                side.serve(stream, peer, &demux, stop).await;
                drop(slot);
            });
        }
    }

    /// One connection: its first frame finds its call, the rest follow.
    async fn serve(&self, stream: TcpStream, peer: SocketAddr, demux: &Demux, stop: CancellationToken) {
        let _ = stream.set_nodelay(true);
        let (mut reader, writer) = stream.into_split();
        let mut buffer = Box::new([0u8; MAX_FRAME]);
        let first = tokio::select! {
            () = stop.cancelled() => return,
            first = tokio::time::timeout(FIRST_FRAME, read_frame(&mut reader, &mut buffer)) => first,
        };
        let first = match first {
            Ok(Ok(Some(first))) => first.to_vec(),
            Ok(Ok(None)) => return,
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "ICE-TCP: a connection's first frame");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "ICE-TCP: no first frame in time; the connection closed");
                return;
            }
        };
        let Some(call) = demux.call_for(&first) else {
            tracing::debug!(%peer, "ICE-TCP: the first frame is no STUN check for a call; the connection closed");
            return;
        };
        let (queue, frames) = mpsc::channel(WRITE_QUEUE);
        self.connections().insert(peer, queue.clone());
        let written = tokio::spawn(write_frames(writer, frames));
        let _ = call.try_send(Incoming { proto: Protocol::Tcp, source: peer, contents: first });
        loop {
            let read = tokio::select! {
                () = stop.cancelled() => break,
                () = call.closed() => break,
                () = queue.closed() => break,
                read = tokio::time::timeout(IDLE, read_frame(&mut reader, &mut buffer)) => read,
            };
            match read {
                Ok(Ok(Some(contents))) => {
                    let incoming = Incoming { proto: Protocol::Tcp, source: peer, contents: contents.to_vec() };
                    if let Err(mpsc::error::TrySendError::Closed(_)) = call.try_send(incoming) {
                        break;
                    }
                }
                Ok(Ok(None)) => break,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "ICE-TCP: the connection closed");
                    break;
                }
                Err(_) => {
                    tracing::debug!(%peer, "ICE-TCP: the connection was idle too long");
                    break;
                }
            }
        }
        {
            let mut connections = self.connections();
            if connections.get(&peer).is_some_and(|q| q.same_channel(&queue)) {
                connections.remove(&peer);
            }
        }
        // What the call sent last (its DTLS close among it) still goes out, for a moment.
        drop(queue);
        let mut written = written;
        if tokio::time::timeout(FLUSH, &mut written).await.is_err() {
            written.abort();
        }
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, mpsc::Sender<Vec<u8>>>> {
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes the queued frames until the queue closes or the socket fails.
async fn write_frames<W: AsyncWrite + Unpin>(mut writer: W, mut frames: mpsc::Receiver<Vec<u8>>) {
    while let Some(frame) = frames.recv().await {
        if let Err(error) = writer.write_all(&frame).await {
            tracing::debug!(%error, "ICE-TCP: writing the connection");
            return;
        }
    }
    let _ = writer.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_are_read_as_written_and_bounded() {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let mut buffer = Box::new([0u8; MAX_FRAME]);
        client.write_all(&frame(b"stun").expect("short")).await.expect("writes");
        client.write_all(&[0, 0]).await.expect("an empty frame");
        client.write_all(&frame(&[7; MAX_FRAME]).expect("short")).await.expect("writes");
        let over = u16::try_from(MAX_FRAME + 1).expect("small");
        client.write_all(&over.to_be_bytes()).await.expect("writes");
        assert_eq!(read_frame(&mut server, &mut buffer).await.expect("a frame"), Some(&b"stun"[..]));
        let full = read_frame(&mut server, &mut buffer).await.expect("a frame").expect("not the end");
        assert_eq!(full.len(), MAX_FRAME, "the empty frame skipped");
        assert!(
            matches!(read_frame(&mut server, &mut buffer).await, Err(FrameError::TooLarge(n)) if n == MAX_FRAME + 1)
        );
        drop(client);
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(&[0, 10, 1, 2]).await.expect("a cut frame");
        drop(client);
        assert!(read_frame(&mut server, &mut buffer).await.is_err(), "a frame cut short");
        assert!(read_frame(&mut server, &mut buffer).await.expect("the end").is_none());
        assert_eq!(frame(&vec![0; 70_000]), None, "no frame over 65535");
    }
}
