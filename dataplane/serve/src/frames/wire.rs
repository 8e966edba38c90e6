//! The wire format (RFC 6455, 5): frame headers, close payloads, masking. No I/O.

use bytes::{BufMut, Bytes, BytesMut};
use tokio_tungstenite::tungstenite::Utf8Bytes;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::{Error, Message};

/// The longest control frame payload (RFC 6455, 5.5).
pub(super) const MAX_CONTROL: usize = 125;

/// A frame's first two bytes and length, read from the buffer's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) fin: bool,
    pub(super) opcode: u8,
    pub(super) mask: Option<[u8; 4]>,
    /// Header bytes (with the mask key).
    pub(super) len: usize,
    pub(super) payload: usize,
}

impl Header {
    /// Close, ping or pong (opcodes 8 and up).
    pub(super) fn is_control(&self) -> bool {
        self.opcode >= opcode::CLOSE
    }

    /// The whole frame's length: header and payload.
    pub(super) fn frame_len(&self) -> usize {
        self.len + self.payload
    }
}

/// The frame types (RFC 6455, 5.2).
pub(super) mod opcode {
    pub const CONTINUATION: u8 = 0;
    pub const TEXT: u8 = 1;
    pub const BINARY: u8 = 2;
    pub const CLOSE: u8 = 8;
    pub const PING: u8 = 9;
    pub const PONG: u8 = 10;
}

/// A whole data message.
pub(super) fn data(text: bool, payload: Bytes) -> Result<Message, Error> {
    if !text {
        return Ok(Message::Binary(payload));
    }
    Utf8Bytes::try_from(payload).map(Message::Text).map_err(|_| Error::Utf8)
}

/// The header at the start of `buf`, once all of it is there.
pub(super) fn parse_header(buf: &[u8]) -> Result<Option<Header>, Error> {
    let [first, second, ..] = *buf else { return Ok(None) };
    if first & 0x70 != 0 {
        return Err(Error::Protocol("reserved bits are set, and no extension was agreed"));
    }
    let (payload, mut len) = match second & 0x7f {
        126 => {
            let Some(bytes) = buf.get(2..4) else { return Ok(None) };
            (usize::from(u16::from_be_bytes([bytes[0], bytes[1]])), 4)
        }
        127 => {
            let Some(bytes) = buf.get(2..10) else { return Ok(None) };
            let length = u64::from_be_bytes(bytes.try_into().map_err(|_| Error::Protocol("a frame's length"))?);
            if length >> 63 != 0 {
                return Err(Error::Protocol("a frame's length has its most significant bit set"));
            }
            (usize::try_from(length).unwrap_or(usize::MAX), 10)
        }
        n => (usize::from(n), 2),
    };
    let mask = if second & 0x80 != 0 {
        let Some(key) = buf.get(len..len + 4) else { return Ok(None) };
        len += 4;
        Some([key[0], key[1], key[2], key[3]])
    } else {
        None
    };
    Ok(Some(Header { fin: first & 0x80 != 0, opcode: first & 0x0f, mask, len, payload }))
}

/// A close frame's code and reason (none when its payload is empty).
pub(super) fn parse_close(payload: Bytes) -> Result<Option<CloseFrame>, Error> {
    match payload.len() {
        0 => return Ok(None),
        1 => return Err(Error::Protocol("a close frame's payload is one byte")),
        _ => {}
    }
    let code = CloseCode::from(u16::from_be_bytes([payload[0], payload[1]]));
    if !code.is_allowed() {
        return Err(Error::Protocol("a close frame's code is not one a peer may send"));
    }
    let reason = Utf8Bytes::try_from(payload.slice(2..)).map_err(|_| Error::Utf8)?;
    Ok(Some(CloseFrame { code, reason }))
}

/// A close frame's payload: its code and reason, the reason cut (at a character) to fit.
pub(super) fn close_payload(frame: Option<CloseFrame>) -> Bytes {
    let Some(CloseFrame { code, reason }) = frame else { return Bytes::new() };
    let mut reason = reason.as_str();
    while reason.len() > MAX_CONTROL - 2 {
        let mut end = MAX_CONTROL - 2;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason = &reason[..end];
    }
    let mut payload = BytesMut::with_capacity(2 + reason.len());
    payload.put_u16(u16::from(code));
    payload.put_slice(reason.as_bytes());
    payload.freeze()
}

/// A control frame's payload, cut to what one may carry.
pub(super) fn control(mut data: Bytes) -> Bytes {
    data.truncate(MAX_CONTROL);
    data
}

/// Appends a frame to `out`: its first byte (FIN, reserved bits, opcode) as given, its length,
/// and its payload, masked with `mask` when given (a client's frame). Public for relays and
/// tools that pass frames on without this type (the `gateway` bench's frame-level floor).
pub fn put_frame(out: &mut BytesMut, first: u8, payload: &[u8], mask: Option<[u8; 4]>) {
    out.reserve(14 + payload.len());
    out.put_u8(first);
    let masked = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.put_u8(masked | n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.put_u8(masked | 126);
            out.put_u16(n as u16);
        }
        n => {
            out.put_u8(masked | 127);
            out.put_u64(n as u64);
        }
    }
    let Some(key) = mask else {
        out.put_slice(payload);
        return;
    };
    out.put_slice(&key);
    let start = out.len();
    out.put_slice(payload);
    apply_mask(&mut out[start..], key);
}

/// A client's mask key: unpredictable, as RFC 6455 (10.3) asks, from the thread's
/// cryptographic generator (a ChaCha stream seeded from the OS, as tungstenite's).
pub(super) fn mask_key() -> [u8; 4] {
    rand::random()
}

/// XORs `data` with the repeating `key` (masking and unmasking are the same).
pub fn apply_mask(data: &mut [u8], key: [u8; 4]) {
    let word = u64::from_ne_bytes([key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3]]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(bytes) ^ word).to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= key[i % 4];
    }
}
