//! SIP over TCP (RFC 3261 §18): one task per connection cuts its bytes into messages with
//! the sans-I/O [`StreamDecoder`] (at most one message's worth held) and hands them to the
//! SIP task, which feeds the same endpoint as UDP; keep-alives (CRLF CRLF) get their CRLF
//! at once. Everything the endpoint sends to a TCP peer goes back on that peer's
//! connection (the call machines send to the address a request came from). Bounded:
//! connections at once ([`MAX_CONNECTIONS`], more are closed on accept), each one's queue of
//! writes (a peer that does not read is disconnected), an idle connection's life
//! ([`IDLE`]), and a stream that loses its framing is answered (when its head reads) and
//! closed. SIP over TLS ([`crate::tls`]) serves its connections with the same [`serve`]
//! once their handshake is done, in a [`Connections`] of its own that also bounds the
//! connections from one address.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use switchboard_sip::call::Transport;
use switchboard_sip::sip::parse::StreamItem;
use switchboard_sip::sip::{Limits, Message, ParseError, StreamDecoder};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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
    Message(Transport, SocketAddr, Result<Message, ParseError>),
    /// The connection is gone.
    Closed(Transport, SocketAddr),
}

/// Why a connection just accepted was closed at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// [`MAX_CONNECTIONS`] are open.
    TooMany,
    /// Its address has as many open as [`Connections::per_address`] allows.
    TooManyFromAddress,
}

/// The SIP task's side of its TCP (or TLS) connections: where to write to each peer.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    writers: HashMap<SocketAddr, mpsc::Sender<Vec<u8>>>,
    /// Connections open from each address, when they are bounded per address.
    per_ip: HashMap<IpAddr, usize>,
    /// The most connections one address may hold; `None`: only [`MAX_CONNECTIONS`] bounds.
    per_address: Option<usize>,
    /// The local address of each connection the edge opened itself (to an outbound trunk,
    /// [`crate::connect`]): what its dialogues name in Via and Contact.
    opened: HashMap<SocketAddr, SocketAddr>,
}

impl Connections {
    /// Connections bounded per address too: at most `limit` from one IP address.
    pub(crate) fn per_address(limit: usize) -> Self {
        Self { per_address: Some(limit), ..Self::default() }
    }

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
        match self.open(peer) {
            Ok(writes) => {
                tasks.spawn(serve(stream, Transport::Tcp, peer, limits, inbound, writes, shutdown));
            }
            Err(_) => {
                tracing::warn!(%peer, limit = MAX_CONNECTIONS, "too many SIP connections: closing the new one");
            }
        }
    }

    /// Counts a connection from `peer` in, when there is room for it: the queue its writes
    /// come from, for its task.
    pub(crate) fn open(&mut self, peer: SocketAddr) -> Result<mpsc::Receiver<Vec<u8>>, Refused> {
        if self.writers.len() >= MAX_CONNECTIONS {
            return Err(Refused::TooMany);
        }
        if let Some(limit) = self.per_address {
            let open = self.per_ip.entry(peer.ip()).or_default();
            if *open >= limit {
                return Err(Refused::TooManyFromAddress);
            }
            *open += 1;
        }
        let (writer, writes) = mpsc::channel(WRITE_QUEUE);
        if self.writers.insert(peer, writer).is_some() {
            // The same address and port again: the old connection's count goes with it.
            self.uncount(peer.ip());
            self.opened.remove(&peer);
        }
        Ok(writes)
    }

    fn uncount(&mut self, ip: IpAddr) {
        if let Some(open) = self.per_ip.get_mut(&ip) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }

    /// Counts in a connection the edge opened to `peer` from `local` ([`Connections::open`]'s
    /// bounds apply).
    pub(crate) fn open_to(&mut self, peer: SocketAddr, local: SocketAddr) -> Result<mpsc::Receiver<Vec<u8>>, Refused> {
        let writes = self.open(peer)?;
        self.opened.insert(peer, local);
        Ok(writes)
    }

    /// The local address of the open connection the edge opened to `peer`, if there is one.
    pub(crate) fn opened_to(&self, peer: SocketAddr) -> Option<SocketAddr> {
        self.opened.get(&peer).copied().filter(|_| self.writers.get(&peer).is_some_and(|w| !w.is_closed()))
    }

    /// Whether a connection to `peer` is open (its task still reads what is written).
    pub(crate) fn is_open(&self, peer: SocketAddr) -> bool {
        self.writers.get(&peer).is_some_and(|w| !w.is_closed())
    }

    /// Sends `bytes` on the connection to `peer`; false when there is none (or it is not
    /// keeping up, and is dropped).
    pub(crate) fn send(&mut self, peer: SocketAddr, bytes: Vec<u8>) -> bool {
        let Some(writer) = self.writers.get(&peer) else { return false };
        if writer.try_send(bytes).is_ok() {
            return true;
        }
        tracing::warn!(%peer, "a SIP connection is not reading: closing it");
        self.forget(peer);
        false
    }

    /// Forgets a connection whose task said it closed: unless a newer connection to the
    /// same address took its place meanwhile (a trunk's, opened again), whose writes are
    /// still read.
    pub(crate) fn closed(&mut self, peer: SocketAddr) {
        if self.writers.get(&peer).is_some_and(mpsc::Sender::is_closed) {
            self.forget(peer);
        }
    }

    fn forget(&mut self, peer: SocketAddr) {
        self.opened.remove(&peer);
        if self.writers.remove(&peer).is_some() {
            self.uncount(peer.ip());
        }
    }
}

/// The SIP task's stream connections: TCP's and TLS's, each its own map (a peer's address
/// names one connection per transport).
#[derive(Debug)]
pub(crate) struct Streams {
    pub(crate) tcp: Connections,
    pub(crate) tls: Connections,
}

impl Streams {
    /// The connections of `transport` (UDP has none: TCP's, unused).
    pub(crate) fn of(&mut self, transport: Transport) -> &mut Connections {
        match transport {
            Transport::Tls => &mut self.tls,
            Transport::Tcp | Transport::Udp => &mut self.tcp,
        }
    }
}

/// Reads and writes one connection (TCP, or TLS once its handshake is done) until either
/// side ends it, it idles past [`IDLE`], its framing is lost, or the edge shuts down; then
/// tells the SIP task it is closed.
pub(crate) async fn serve<S: AsyncRead + AsyncWrite>(
    stream: S,
    transport: Transport,
    peer: SocketAddr,
    limits: Limits,
    inbound: mpsc::Sender<FromConnection>,
    mut writes: mpsc::Receiver<Vec<u8>>,
    shutdown: CancellationToken,
) {
    let (mut reader, mut writer) = tokio::io::split(stream);
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
                            if send_all(&mut writer, b"\r\n").await.is_err() {
                                failed = Some(ParseError::Empty);
                            }
                        }
                        Some(Ok(StreamItem::Message(message))) => {
                            if inbound.send(FromConnection::Message(transport, peer, Ok(message))).await.is_err() {
                                failed = Some(ParseError::Empty);
                            }
                        }
                        Some(Err(error)) => failed = Some(error),
                    }
                }
                if let Some(error) = failed {
                    if !matches!(error, ParseError::Empty) {
                        tracing::debug!(%peer, %error, "SIP stream unreadable: answering and closing it");
                        let _ = inbound.send(FromConnection::Message(transport, peer, Err(error))).await;
                        // Let the answer go out before the connection closes.
                        if let Ok(Some(answer)) = tokio::time::timeout(Duration::from_secs(1), writes.recv()).await {
                            let _ = send_all(&mut writer, &answer).await;
                        }
                    }
                    break;
                }
            }
            write = writes.recv() => match write {
                Some(bytes) => {
                    if send_all(&mut writer, &bytes).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            () = shutdown.cancelled() => {
                // Let the BYEs of the calls being hung up go out first.
                while let Ok(Some(bytes)) = tokio::time::timeout(Duration::from_secs(2), writes.recv()).await {
                    if send_all(&mut writer, &bytes).await.is_err() {
                        break;
                    }
                }
                break;
            }
        }
    }
    let _ = writer.shutdown().await;
    // Its queue closes first: the SIP task tells this connection's end from a newer one's.
    drop(writes);
    let _ = inbound.send(FromConnection::Closed(transport, peer)).await;
}

/// Writes `bytes` and flushes them: over TLS a write may leave records in the session's
/// buffer until the stream is flushed (over TCP flushing is free).
async fn send_all(writer: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> std::io::Result<()> {
    writer.write_all(bytes).await?;
    writer.flush().await
}
