//! The frame-level floor ([`super::relay_floor::Kind::Raw`]): a WebSocket relay without a
//! WebSocket library, doing per frame what a frame-level gateway would have to do and
//! nothing else. The handshake passes through unchanged (the runtime answers the client's
//! key); then each whole frame read from one side is parsed (header, length, mask), a
//! client's frame unmasked and a text frame checked as UTF-8 — what the gateway needs to
//! read a frame — and written to the other side: towards the runtime masked again with a
//! fresh key, as a client must; towards the client as it came. No session, no replay, no
//! limits, no control-frame handling (pings and closes pass through as frames).
//!
//! The mask keys come from `fastrand`, not a cryptographic generator: enough for a floor,
//! not for a product's client leg.

use bytes::{Buf, BufMut, Bytes, BytesMut};
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

fn put_frame(out: &mut BytesMut, first: u8, payload: &[u8], key: Option<[u8; 4]>) {
    out.put_u8(first);
    let masked = if key.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.put_u8(masked | n as u8),
        n if n <= 0xffff => {
            out.put_u8(masked | 126);
            out.put_u16(n as u16);
        }
        n => {
            out.put_u8(masked | 127);
            out.put_u64(n as u64);
        }
    }
    let Some(key) = key else {
        out.put_slice(payload);
        return;
    };
    out.put_slice(&key);
    let start = out.len();
    out.put_slice(payload);
    apply_mask(&mut out[start..], key);
}

fn apply_mask(data: &mut [u8], key: [u8; 4]) {
    let word = u32::from_ne_bytes(key);
    let mut chunks = data.chunks_exact_mut(4);
    for chunk in &mut chunks {
        let masked = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) ^ word;
        chunk.copy_from_slice(&masked.to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= key[i];
    }
}
