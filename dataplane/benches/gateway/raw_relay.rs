//! The frame-level floor ([`super::relay_floor::Kind::Raw`]): a WebSocket relay without a
//! WebSocket library, doing per frame what a frame-level gateway would have to do and
//! nothing else. The handshake passes through unchanged (the runtime answers the client's
//! key); then each whole frame read from one side is parsed (header, length, mask), a
//! client's frame unmasked and a text frame checked as UTF-8 — what the gateway needs to
//! read a frame — and written to the other side: towards the runtime masked again with a
//! fresh key, as a client must; towards the client as it came. No session, no replay, no
//! limits, no control-frame handling (pings and closes pass through as frames). Frames are
//! written and unmasked with the gateway's own functions (`switchboard_serve::frames`).
//!
//! The mask keys come from `fastrand`, not a cryptographic generator: enough for a floor,
//! not for a product's client leg.

use bytes::{Buf, Bytes, BytesMut};
use switchboard_serve::frames::{apply_mask, put_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest HTTP head passed through.
const MAX_HEAD: usize = 16 * 1024;
/// Read buffer growth, as the gateway reads.
const READ: usize = 2048;

/// Relays `client` to the runtime at `runtime` (`host:port`) frame by frame.
pub async fn relay(mut client: TcpStream, runtime: String) {
    let _ = client.set_nodelay(true);
    let Ok(mut upstream) = TcpStream::connect(&runtime).await else { return };
    let _ = upstream.set_nodelay(true);
    let (mut from_client, mut from_runtime) = (BytesMut::with_capacity(READ), BytesMut::with_capacity(READ));
    let Some(n) = head(&mut client, &mut from_client).await else { return };
    if upstream.write_all(&from_client.split_to(n)).await.is_err() {
        return;
    }
    let Some(n) = head(&mut upstream, &mut from_runtime).await else { return };
    if client.write_all(&from_runtime.split_to(n)).await.is_err() {
        return;
    }
    let mut out = BytesMut::with_capacity(READ);
    loop {
        while let Some((first, payload)) = take_frame(&mut from_client) {
            if !readable(first, &payload) {
                return;
            }
            out.clear();
            put_frame(&mut out, first, &payload, Some(fastrand::u32(..).to_ne_bytes()));
            if upstream.write_all(&out).await.is_err() {
                return;
            }
        }
        while let Some((first, payload)) = take_frame(&mut from_runtime) {
            if !readable(first, &payload) {
                return;
            }
            out.clear();
            put_frame(&mut out, first, &payload, None);
            if client.write_all(&out).await.is_err() {
                return;
            }
        }
        from_client.reserve(READ);
        from_runtime.reserve(READ);
        tokio::select! {
            read = client.read_buf(&mut from_client) => if !matches!(read, Ok(n) if n > 0) { return },
            read = upstream.read_buf(&mut from_runtime) => if !matches!(read, Ok(n) if n > 0) { return },
        }
    }
}

/// Reads through the blank line that ends an HTTP head; its length.
async fn head(from: &mut TcpStream, buf: &mut BytesMut) -> Option<usize> {
    loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(at + 4);
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        buf.reserve(READ);
        if from.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
}

/// The next whole frame in `buf`: its first byte (FIN, opcode) and its payload, unmasked.
fn take_frame(buf: &mut BytesMut) -> Option<(u8, Bytes)> {
    if buf.len() < 2 {
        return None;
    }
    let (first, second) = (buf[0], buf[1]);
    let (len, at) = match second & 0x7f {
        126 if buf.len() >= 4 => (usize::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() >= 10 => (usize::try_from(u64::from_be_bytes(buf[2..10].try_into().ok()?)).ok()?, 10),
        126 | 127 => return None,
        n => (usize::from(n), 2),
    };
    let key_len = if second & 0x80 != 0 { 4 } else { 0 };
    if buf.len() < at + key_len + len {
        return None;
    }
    let mut frame = buf.split_to(at + key_len + len);
    let key = (key_len == 4).then(|| [frame[at], frame[at + 1], frame[at + 2], frame[at + 3]]);
    frame.advance(at + key_len);
    if let Some(key) = key {
        apply_mask(&mut frame, key);
    }
    Some((first, frame.freeze()))
}

/// A text frame must be UTF-8 (the gateway reads them).
fn readable(first: u8, payload: &[u8]) -> bool {
    first & 0x0f != 1 || std::str::from_utf8(payload).is_ok()
}
