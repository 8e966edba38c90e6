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
//! its packets under the path's MTU), [`WRITE_QUEUE_BYTES`] of frames queued to send (more
//! are dropped, as a network drops them), the kernel's buffers of each connection held at
//! [`SOCKET_BUFFER`] (set on the listener, whose connections inherit them: left alone, the
//! kernel grows them with the traffic to megabytes), and [`IDLE`] without a frame (a
//! client's consent checks come every few seconds) ends a connection. It ends with its call
//! too.
//!
//! Counted: each open connection holds [`CONNECTION_BYTES`] of the gateway's memory budget
//! (its buffers at their bounds, user space and kernel) from its accept to its end, beside
//! what the sessions hold, so ICE-TCP clients make new sessions and calls be refused
//! (`memory_budget`) as sessions do. A connection that would pass the budget is refused:
//! closed at once, counted in `switchboard_gateway_webrtc_tcp_refused_total{reason=
//! "memory_budget"}` and logged (a warning at most every [`WARN_EVERY`]); its client's ICE
//! goes on over UDP or fails that pair. Connections open and their bytes are metrics too
//! ([`crate::metrics`]).
//!
//! [`Demux::call_for`]: crate::demux::Demux::call_for

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus::{IntCounter, IntGauge};
use switchboard_gateway::Gateway;
use switchboard_gateway::budget::{Account, MemoryBudget};
use switchboard_webrtc::Protocol;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::Metrics;
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
/// Bytes of frames queued for one connection to send (about a second of a call's audio and
/// data over a link that stalls); more are dropped.
pub const WRITE_QUEUE_BYTES: usize = 32 * 1024;
/// The kernel's send and receive buffer sizes asked for each connection (Linux doubles the
/// value it is given, for its bookkeeping). A call sends some 10-20 kB a second.
pub const SOCKET_BUFFER: u32 = 16 * 1024;
/// What one connection may hold, counted toward the gateway's memory budget while it is open:
/// its read buffer, its write queue, its socket's kernel buffers (twice [`SOCKET_BUFFER`]
/// each way), and its two tasks, channel and map entry (an estimate that errs high).
pub const CONNECTION_BYTES: usize = MAX_FRAME + WRITE_QUEUE_BYTES + 4 * SOCKET_BUFFER as usize + 4 * 1024;
/// The backlog of the listener.
const BACKLOG: u32 = 1024;
/// At most one warning about refused connections this often.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

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

/// A TCP listener on `address` whose connections' kernel buffers are [`SOCKET_BUFFER`] (they
/// inherit the listener's).
pub fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.set_send_buffer_size(SOCKET_BUFFER)?;
    socket.set_recv_buffer_size(SOCKET_BUFFER)?;
    socket.bind(address)?;
    socket.listen(BACKLOG)
}

/// A connection's queue of frames to send, bounded in frames and bytes.
#[derive(Clone, Debug)]
struct Outgoing {
    frames: mpsc::Sender<Vec<u8>>,
    /// Bytes of the frames queued and not yet written.
    queued: Arc<AtomicUsize>,
}

impl Outgoing {
    /// Queues `frame`, unless it would pass a bound.
    fn push(&self, frame: Vec<u8>) -> bool {
        let size = frame.len();
        if self.queued.load(Ordering::Relaxed).saturating_add(size) > WRITE_QUEUE_BYTES {
            return false;
        }
        self.queued.fetch_add(size, Ordering::Relaxed);
        if self.frames.try_send(frame).is_err() {
            self.queued.fetch_sub(size, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// What an open connection holds until it ends: its slot, its bytes of the memory budget, and
/// its place in the gauge.
#[derive(Debug)]
struct Held {
    _slot: OwnedSemaphorePermit,
    _account: Account,
    open: IntGauge,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.open.dec();
    }
}

/// The edge's TCP port: its listener, and the connections calls send on, by peer.
#[derive(Debug)]
pub struct TcpSide {
    listener: TcpListener,
    /// Where it is bound.
    pub bound: SocketAddr,
    /// Where clients reach it: the candidate in every answer.
    pub advertised: SocketAddr,
    connections: Mutex<HashMap<SocketAddr, Outgoing>>,
    slots: Arc<Semaphore>,
    metrics: Metrics,
    bytes_in: IntCounter,
    bytes_out: IntCounter,
    /// When the last warning about refused connections was logged (ms since `started`).
    warned: AtomicU64,
    started: Instant,
}

impl TcpSide {
    /// Around a bound `listener` ([`listen`]), advertised at `advertised`, with
    /// `max_connections` slots, counting in the edge's `metrics`.
    pub fn new(
        listener: TcpListener,
        bound: SocketAddr,
        advertised: SocketAddr,
        max_connections: usize,
        metrics: Metrics,
    ) -> Self {
        Self {
            listener,
            bound,
            advertised,
            connections: Mutex::default(),
            slots: Arc::new(Semaphore::new(max_connections)),
            bytes_in: metrics.tcp_bytes.with_label_values(&["in"]),
            bytes_out: metrics.tcp_bytes.with_label_values(&["out"]),
            metrics,
            warned: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    /// Sends `contents` to the connection of `destination`; dropped where there is none, or
    /// its queue is full.
    pub fn send(&self, destination: SocketAddr, contents: &[u8]) {
        let Some(frame) = frame(contents) else { return };
        let connection = self.connections().get(&destination).cloned();
        match connection {
            Some(queue) => {
                if !queue.push(frame) {
                    tracing::debug!(%destination, "an ICE-TCP frame was not sent: the connection is full or gone");
                }
            }
            None => tracing::debug!(%destination, "an ICE-TCP frame for no connection"),
        }
    }

    /// Accepts connections until `stop`, each served on its own task until it, its call or
    /// the edge ends; each holds [`CONNECTION_BYTES`] of the `gateway`'s memory budget while it
    /// is open. `stop`: the gateway's shutdown.
    pub async fn accept(self: Arc<Self>, demux: Arc<Demux>, gateway: Arc<Gateway>) {
        let stop = gateway.shutdown.clone();
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
            let Some(held) = self.admit(peer, &gateway.budget) else { continue };
            let (side, demux, stop) = (self.clone(), demux.clone(), stop.clone());
            tokio::spawn(async move {
                side.serve(stream, peer, &demux, stop).await;
                drop(held);
            });
        }
    }

    /// A slot and the connection's bytes of `budget`, or the refusal (the caller drops the
    /// stream: it closes).
    fn admit(&self, peer: SocketAddr, budget: &MemoryBudget) -> Option<Held> {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            self.refuse(peer, "slots", "every ICE-TCP connection slot is taken");
            return None;
        };
        let fits = budget.limit().is_none_or(|limit| budget.held().saturating_add(CONNECTION_BYTES) <= limit);
        if !fits {
            self.refuse(peer, "memory_budget", "its buffers would pass the gateway's memory budget");
            return None;
        }
        let mut account = budget.account();
        account.set(CONNECTION_BYTES);
        self.metrics.tcp_connections.inc();
        Some(Held { _slot: slot, _account: account, open: self.metrics.tcp_connections.clone() })
    }

    /// Counts a refused connection, with a warning now and then (a flood must not flood the log).
    fn refuse(&self, peer: SocketAddr, reason: &'static str, why: &str) {
        let refused = self.metrics.tcp_refused.with_label_values(&[reason]);
        refused.inc();
        if reason == "no_call" {
            tracing::debug!(%peer, "ICE-TCP: a connection closed: {why}");
            return;
        }
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.warned.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64;
        if due && self.warned.compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            tracing::warn!(%peer, reason, refused = refused.get(), "ICE-TCP connection refused: {why}");
        } else {
            tracing::debug!(%peer, reason, "ICE-TCP connection refused: {why}");
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
            Ok(Ok(None)) => return self.refuse(peer, "no_call", "it ended before its first frame"),
            Ok(Err(error)) => return self.refuse(peer, "no_call", &format!("its first frame: {error}")),
            Err(_) => return self.refuse(peer, "no_call", "no first frame in time"),
        };
        let Some(call) = demux.call_for(&first) else {
            return self.refuse(peer, "no_call", "its first frame is no STUN check for a live call");
        };
        self.bytes_in.inc_by(first.len() as u64);
        let (frames_tx, frames) = mpsc::channel(WRITE_QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        let queue = Outgoing { frames: frames_tx, queued: queued.clone() };
        self.connections().insert(peer, queue.clone());
        let written = tokio::spawn(write_frames(writer, frames, queued, self.bytes_out.clone()));
        let _ = call.try_send(Incoming { proto: Protocol::Tcp, source: peer, contents: first });
        loop {
            let read = tokio::select! {
                () = stop.cancelled() => break,
                () = call.closed() => break,
                () = queue.frames.closed() => break,
                read = tokio::time::timeout(IDLE, read_frame(&mut reader, &mut buffer)) => read,
            };
            match read {
                Ok(Ok(Some(contents))) => {
                    self.bytes_in.inc_by(contents.len() as u64);
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
            if connections.get(&peer).is_some_and(|q| q.frames.same_channel(&queue.frames)) {
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

    fn connections(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Outgoing>> {
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes the queued frames until the queue closes or the socket fails, giving back each
/// frame's bytes of `queued` once written and counting its payload in `out`.
async fn write_frames<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut frames: mpsc::Receiver<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    out: IntCounter,
) {
    while let Some(frame) = frames.recv().await {
        let written = writer.write_all(&frame).await;
        queued.fetch_sub(frame.len(), Ordering::Relaxed);
        if let Err(error) = written {
            tracing::debug!(%error, "ICE-TCP: writing the connection");
            return;
        }
        out.inc_by(frame.len().saturating_sub(2) as u64);
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

    #[tokio::test]
    async fn connections_inherit_the_listeners_small_kernel_buffers() {
        let listener = listen(SocketAddr::from(([127, 0, 0, 1], 0))).expect("listens");
        let address = listener.local_addr().expect("addr");
        let _client = TcpStream::connect(address).await.expect("connects");
        let (accepted, _) = listener.accept().await.expect("accepts");
        let socket = TcpSocket::from_std_stream(accepted.into_std().expect("a std stream"));
        // Linux doubles what it is given; its defaults are larger (a receive buffer of 128 KiB,
        // grown further with the traffic).
        let most = 2 * SOCKET_BUFFER;
        assert!(socket.recv_buffer_size().expect("reads") <= most, "the receive buffer");
        assert!(socket.send_buffer_size().expect("reads") <= most, "the send buffer");
    }

    #[test]
    fn the_write_queue_is_bounded_in_bytes() {
        let (frames, mut receiver) = mpsc::channel(WRITE_QUEUE);
        let queue = Outgoing { frames, queued: Arc::default() };
        let packet = frame(&[0; 1198]).expect("short");
        let fit = WRITE_QUEUE_BYTES / packet.len();
        for _ in 0..fit {
            assert!(queue.push(packet.clone()));
        }
        assert!(!queue.push(packet.clone()), "one more would pass {WRITE_QUEUE_BYTES} bytes");
        assert!(queue.push(frame(&[1; 10]).expect("short")), "a small one still fits");
        // Written frames give their bytes back.
        let written = receiver.try_recv().expect("queued");
        queue.queued.fetch_sub(written.len(), Ordering::Relaxed);
        assert!(queue.push(packet));
        drop(receiver);
        assert!(!queue.push(frame(&[2; 10]).expect("short")), "a closed connection takes nothing");
        assert!(queue.queued.load(Ordering::Relaxed) <= WRITE_QUEUE_BYTES);
    }
}
