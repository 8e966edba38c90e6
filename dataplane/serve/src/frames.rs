//! A WebSocket connection at the frame level (RFC 6455), for relays: the gateway's two legs
//! (the client's, as the server; the runtime's, as the client).
//!
//! Why not tungstenite's connection: a relay reads a frame and writes it on, and the
//! message layer around tungstenite's frames cost about a fifth of the gateway's CPU per
//! relayed voice frame (BENCHMARKS.md, `gateway`, part 4: a bare tokio-tungstenite relay
//! against a frame-level one, in the same run) — a zero-filled read buffer, a copy into a
//! write buffer behind a second buffer, waker proxies at every poll, a per-frame random
//! mask from a reseeding generator. Here a read takes whole frames out of one buffer without
//! a copy (each payload is a `Bytes` split off it, unmasked in place), a write builds the
//! frame once and writes it, and the message type stays tungstenite's, so callers keep theirs.
//!
//! What it enforces, as RFC 6455 says an endpoint must, failing the connection with the
//! close code the RFC names (1002 protocol error, 1007 text that is not UTF-8) and an error
//! that says why:
//! - no reserved bits (no extension is negotiated) and no unknown opcode;
//! - a client's frames masked, a server's not;
//! - control frames whole and at most 125 bytes; a close's code one a peer may send, its
//!   reason UTF-8;
//! - fragments in order (a continuation only within a message, no new message within one),
//!   control frames allowed between them;
//! - text messages UTF-8, checked once, whole;
//! - the frame and message size limits, checked from the header before the payload is
//!   read ([`Error::TooLong`]; the caller closes with 1009, saying why).
//!
//! Pings are answered with a pong at once (queued, and written with the next read or write);
//! a close is answered with a close echoing its code, and after it reading ends. A send after
//! this side's close is refused.
//!
//! Each message read comes with when it could have arrived ([`Conn::arrival`]): after the
//! instant the read last found the socket empty, if it waited for it, or with what was
//! already waiting. A rate limit judges the peer by that, not by when the reader got to it
//! ([`crate::bucket`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::bucket::Arrival;

pub use tokio_tungstenite::tungstenite::Message;
/// A close frame and a text payload, as [`Message`] carries them.
pub use tokio_tungstenite::tungstenite::{Utf8Bytes, protocol::CloseFrame};

mod handshake;
#[cfg(test)]
mod tests;
mod wire;

pub use handshake::{HandshakeError, NotUpgrade, Upgrade, Upgraded, connect};
use wire::{Header, MAX_CONTROL, close_payload, control, data, mask_key, opcode, parse_close, parse_header};
pub use wire::{apply_mask, put_frame};

/// How much the read buffer grows by when it needs room: a voice frame (640 bytes of audio
/// from a client, about 1.3 KB of JSON from a runtime) comes whole in one read; a larger
/// frame grows it to the frame's size, once its header is read.
pub const READ_CHUNK: usize = 2 * 1024;

/// Which end of the connection this is: a server reads masked frames and writes unmasked
/// ones, a client the other way round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The accepting end.
    Server,
    /// The connecting end.
    Client,
}

/// The size limits of what is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest message, all its fragments together.
    pub max_message: usize,
    /// The largest single frame.
    pub max_frame: usize,
}

/// Why a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket failed.
    #[error("the connection failed: {0}")]
    Io(#[from] io::Error),
    /// The peer broke the protocol (the connection was failed with 1002).
    #[error("the peer broke the WebSocket protocol: {0}")]
    Protocol(&'static str),
    /// A text message was not UTF-8 (the connection was failed with 1007).
    #[error("a text message is not valid UTF-8")]
    Utf8,
    /// A frame or message was over its limit; nothing more is read (the caller closes, with
    /// 1009).
    #[error("a {what} of {size} bytes is over the limit of {max} bytes")]
    TooLong {
        /// `frame` or `message`.
        what: &'static str,
        /// Its size, as far as known.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// This side closed the connection: nothing more may be sent.
    #[error("the connection is closed")]
    Closed,
}

/// A WebSocket connection over `IO`, after the handshake.
#[derive(Debug)]
pub struct Conn<IO> {
    io: IO,
    role: Role,
    limits: Limits,
    read: BytesMut,
    /// The message being assembled from fragments: whether it is text, and its bytes.
    partial: Option<(bool, BytesMut)>,
    /// Frames written but not yet taken by the socket.
    out: BytesMut,
    /// Nothing more is read: the peer closed, the socket ended or failed, or a frame broke
    /// the protocol or a limit.
    read_done: bool,
    /// This side sent its close: nothing more is sent.
    sent_close: bool,
    /// Writing failed: nothing more can be sent.
    write_failed: bool,
    /// The answer to the latest ping, waiting for what was queued before it to be written:
    /// only the most recent ping needs one (RFC 6455, 5.5.3), so a peer that pings and does
    /// not read cannot grow what is queued.
    pong: Option<Bytes>,
    /// The first instant a read found the socket empty since the last message.
    empty_since: Option<Instant>,
    /// When the last message read could have arrived.
    arrival: Arrival,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Conn<IO> {
    /// A connection over `io` whose handshake is done; `read` holds what was read past the
    /// handshake.
    pub fn new(io: IO, role: Role, limits: Limits, read: BytesMut) -> Self {
        Self {
            io,
            role,
            limits,
            read,
            partial: None,
            out: BytesMut::new(),
            read_done: false,
            sent_close: false,
            write_failed: false,
            pong: None,
            empty_since: None,
            arrival: Arrival::Queued,
        }
    }

    /// The same connection over `f(io)`: a wrapper of the socket (the gateway's session takes
    /// its clients' sockets and its in-process edges' pipes as one type). What was read and
    /// queued stays.
    pub fn map_io<T>(self, f: impl FnOnce(IO) -> T) -> Conn<T> {
        let Self {
            io,
            role,
            limits,
            read,
            partial,
            out,
            read_done,
            sent_close,
            write_failed,
            pong,
            empty_since,
            arrival,
        } = self;
        Conn {
            io: f(io),
            role,
            limits,
            read,
            partial,
            out,
            read_done,
            sent_close,
            write_failed,
            pong,
            empty_since,
            arrival,
        }
    }

    /// Queues `message` to be written with the next [`Conn::flush`].
    pub fn feed(&mut self, message: Message) -> Result<(), Error> {
        if self.sent_close || self.write_failed {
            return Err(Error::Closed);
        }
        let (opcode, payload) = match message {
            Message::Text(text) => (opcode::TEXT, Bytes::from(text)),
            Message::Binary(data) => (opcode::BINARY, data),
            Message::Ping(data) => (opcode::PING, control(data)),
            Message::Pong(data) => (opcode::PONG, control(data)),
            Message::Close(frame) => {
                self.sent_close = true;
                (opcode::CLOSE, close_payload(frame))
            }
            // Raw frames are not sent through this type.
            Message::Frame(_) => return Err(Error::Protocol("a raw frame cannot be sent")),
        };
        self.put(opcode, &payload);
        Ok(())
    }

    /// Whether the next read takes a message from the read buffer, without the socket: a
    /// whole frame waits there that ends a message (or is a control frame). A relay that
    /// has more to forward at once may hold its writes for it.
    pub fn frame_buffered(&self) -> bool {
        !self.read_done
            && matches!(parse_header(&self.read), Ok(Some(header))
                if self.read.len() >= header.frame_len() && (header.fin || header.is_control()))
    }

    /// When the message read last could have arrived: [`Arrival::After`] the instant a read
    /// first found the socket empty before it (the reader waited for it), or
    /// [`Arrival::Queued`] (it was already there: the reader was behind, or it came in one
    /// read with the one before). A rate limit judges the peer by this
    /// ([`crate::TokenBucket::caught_up`]).
    pub fn arrival(&self) -> Arrival {
        self.arrival
    }

    /// The bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.out.len()
    }

    /// Writes what was queued.
    pub async fn flush(&mut self) -> Result<(), Error> {
        std::future::poll_fn(|cx| self.poll_flush_out(cx)).await
    }

    /// Writes `message` (and anything queued before it).
    pub async fn send(&mut self, message: Message) -> Result<(), Error> {
        self.feed(message)?;
        self.flush().await
    }

    /// Closes this side: a close frame (if none was sent yet) with `frame`, then the socket's
    /// write side. What the peer still sends may be read until its close.
    pub async fn close(&mut self, frame: Option<CloseFrame>) -> Result<(), Error> {
        if !self.sent_close && !self.write_failed {
            self.feed(Message::Close(frame))?;
        }
        self.flush().await?;
        self.io.shutdown().await.map_err(Error::Io)
    }

    /// After [`Conn::close`], reads and drops what the peer still sends until its close
    /// frame or the end of its stream, for at most `wait`. A socket dropped with bytes unread
    /// (a refused client's `session_start`) is reset by the kernel, and the reset can overtake
    /// the close frame the peer has not read yet: the peer then sees an abnormal closure
    /// (1006) instead of the code it was sent. Returns whether the peer closed within `wait`.
    pub async fn linger(&mut self, wait: std::time::Duration) -> bool {
        use futures_util::StreamExt;
        let peer_closed = async {
            while let Some(Ok(message)) = self.next().await {
                if matches!(message, Message::Close(_)) {
                    break;
                }
            }
        };
        tokio::time::timeout(wait, peer_closed).await.is_ok()
    }

    fn put(&mut self, opcode: u8, payload: &[u8]) {
        let mask = (self.role == Role::Client).then(mask_key);
        put_frame(&mut self.out, 0x80 | opcode, payload, mask);
    }

    fn poll_flush_out(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        if self.write_failed {
            return Poll::Ready(Err(Error::Closed));
        }
        let written = ready!(self.poll_write_out(cx));
        let flushed = match written {
            Ok(()) => ready!(Pin::new(&mut self.io).poll_flush(cx)),
            Err(error) => Err(error),
        };
        Poll::Ready(flushed.map_err(|error| {
            self.write_failed = true;
            Error::Io(error)
        }))
    }

    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            while !self.out.is_empty() {
                let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.out))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.out.advance(n);
            }
            match self.pong.take() {
                Some(pong) if !self.sent_close => self.put(opcode::PONG, &pong),
                _ => return Poll::Ready(Ok(())),
            }
        }
    }

    /// Writes what is queued as far as the socket takes it now, without waiting.
    fn write_answers(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.write_failed || (self.out.is_empty() && self.pong.is_none()) {
            return Ok(());
        }
        match self.poll_write_out(cx) {
            Poll::Ready(Err(error)) => {
                self.write_failed = true;
                Err(error)
            }
            _ => Ok(()),
        }
    }

    /// Reads the connection's next message.
    fn poll_read_message(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Message, Error>>> {
        // Answers (pongs, the close echo) go out with reads too: a peer that only sends
        // still gets them.
        if let Err(error) = self.write_answers(cx) {
            self.read_done = true;
            return Poll::Ready(Some(Err(Error::Io(error))));
        }
        loop {
            if self.read_done {
                return Poll::Ready(None);
            }
            match self.next_message() {
                Ok(Some(message)) => {
                    self.arrival = self.empty_since.take().map_or(Arrival::Queued, Arrival::After);
                    return Poll::Ready(Some(Ok(message)));
                }
                Ok(None) => {}
                Err(error) => {
                    self.read_done = true;
                    self.fail(&error);
                    // The error is what the caller needs; a write failure shows at its next send.
                    let _ = self.write_answers(cx);
                    return Poll::Ready(Some(Err(error)));
                }
            }
            // Room for a whole voice frame, so it comes in one read (a read that fills the
            // room leaves the socket readable, and costs another read to learn it is not).
            // With nothing else holding the buffer, this reuses it from its start.
            self.read.reserve(READ_CHUNK);
            let read = tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.read);
            if read.is_pending() && self.empty_since.is_none() {
                // Everything that had arrived is read: what comes next comes after this.
                self.empty_since = Some(Instant::now());
            }
            match ready!(read) {
                Ok(0) => {
                    // An end without a close is the peer gone; one after it, the end.
                    self.read_done = true;
                    return Poll::Ready(None);
                }
                Ok(_) => {}
                Err(error) => {
                    self.read_done = true;
                    return Poll::Ready(Some(Err(Error::Io(error))));
                }
            }
        }
    }

    /// Fails the connection as RFC 6455 says for `error`: a close with its code.
    fn fail(&mut self, error: &Error) {
        let code = match error {
            Error::Protocol(_) => CloseCode::Protocol,
            Error::Utf8 => CloseCode::Invalid,
            // The caller says why (and may still send).
            Error::TooLong { .. } | Error::Io(_) | Error::Closed => return,
        };
        // Refused (and nothing to do) once this side closed or its writes failed.
        let reason = Utf8Bytes::from(error.to_string());
        let _ = self.feed(Message::Close(Some(CloseFrame { code, reason })));
    }

    /// The next whole message in the read buffer, if there is one.
    fn next_message(&mut self) -> Result<Option<Message>, Error> {
        loop {
            let Some(header) = parse_header(&self.read)? else { return Ok(None) };
            self.check(&header)?;
            let whole = header.frame_len();
            if self.read.len() < whole {
                // Room for the rest of the frame, at once.
                self.read.reserve(whole - self.read.len());
                return Ok(None);
            }
            let mut payload = self.read.split_to(whole);
            payload.advance(header.len);
            if let Some(key) = header.mask {
                apply_mask(&mut payload, key);
            }
            if let Some(message) = self.take(header, payload)? {
                return Ok(Some(message));
            }
        }
    }

    /// Whether `header` may come now, from this peer, within the limits.
    fn check(&self, header: &Header) -> Result<(), Error> {
        let control = header.is_control();
        match header.opcode {
            opcode::CONTINUATION if self.partial.is_none() => {
                return Err(Error::Protocol("a continuation frame outside a fragmented message"));
            }
            opcode::TEXT | opcode::BINARY if self.partial.is_some() => {
                return Err(Error::Protocol("a new message within a fragmented one"));
            }
            opcode::CONTINUATION | opcode::TEXT | opcode::BINARY | opcode::CLOSE | opcode::PING | opcode::PONG => {}
            _ => return Err(Error::Protocol("an unknown opcode")),
        }
        match (self.role, header.mask.is_some()) {
            (Role::Server, false) => return Err(Error::Protocol("a client's frame is not masked")),
            (Role::Client, true) => return Err(Error::Protocol("a server's frame is masked")),
            _ => {}
        }
        if control && (!header.fin || header.payload > MAX_CONTROL) {
            return Err(Error::Protocol("a control frame is fragmented or longer than 125 bytes"));
        }
        if header.payload > self.limits.max_frame {
            return Err(Error::TooLong { what: "frame", size: header.payload, max: self.limits.max_frame });
        }
        let so_far = self.partial.as_ref().map_or(0, |(_, bytes)| bytes.len());
        if !control && so_far + header.payload > self.limits.max_message {
            let size = so_far + header.payload;
            return Err(Error::TooLong { what: "message", size, max: self.limits.max_message });
        }
        Ok(())
    }

    /// A frame's payload, unmasked: the message it ends, if any.
    fn take(&mut self, header: Header, payload: BytesMut) -> Result<Option<Message>, Error> {
        Ok(Some(match header.opcode {
            opcode::PING => {
                let payload = payload.freeze();
                // Written with the next read or write, replacing an earlier ping's answer
                // not written yet (none after this side's close).
                if !self.sent_close {
                    self.pong = Some(payload.clone());
                }
                Message::Ping(payload)
            }
            opcode::PONG => Message::Pong(payload.freeze()),
            opcode::CLOSE => {
                let frame = parse_close(payload.freeze())?;
                self.read_done = true;
                // The echo; refused (and nothing to do) if this side closed first.
                let echo = frame.as_ref().map(|f| CloseFrame { code: f.code, reason: Utf8Bytes::default() });
                let _ = self.feed(Message::Close(echo));
                Message::Close(frame)
            }
            opcode::CONTINUATION => {
                let Some((text, mut bytes)) = self.partial.take() else {
                    return Err(Error::Protocol("a continuation frame outside a fragmented message"));
                };
                bytes.unsplit(payload);
                if !header.fin {
                    self.partial = Some((text, bytes));
                    return Ok(None);
                }
                data(text, bytes.freeze())?
            }
            code => {
                let text = code == opcode::TEXT;
                if !header.fin {
                    self.partial = Some((text, payload));
                    return Ok(None);
                }
                data(text, payload.freeze())?
            }
        }))
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Stream for Conn<IO> {
    type Item = Result<Message, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_read_message(cx)
    }
}
