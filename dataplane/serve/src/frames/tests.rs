//! The frame layer: its rules on hand-made bytes; whole conversations with tungstenite's
//! client and server (the library the gateway's clients and runtimes use) in `peers`, and
//! the reader's property in `properties`.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;

mod arrival;
mod peers;
mod properties;

const LIMITS: Limits = Limits { max_message: 64 * 1024, max_frame: 32 * 1024 };
/// For whole conversations, every length form included.
const BIG: Limits = Limits { max_message: 1 << 20, max_frame: 1 << 20 };
const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A frame as a peer writes it: FIN and opcode in `first`, masked with `mask`.
fn frame(first: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = BytesMut::new();
    put_frame(&mut out, first, payload, mask);
    out.to_vec()
}

/// A server-side connection and the client's end of its socket.
fn server() -> (Conn<DuplexStream>, DuplexStream) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    (Conn::new(ours, Role::Server, LIMITS, BytesMut::new()), theirs)
}

async fn next(conn: &mut Conn<DuplexStream>) -> Option<Result<Message, Error>> {
    tokio::time::timeout(Duration::from_secs(5), conn.next()).await.expect("an answer")
}

/// What the peer has been sent so far, parsed as unmasked frames: (first byte, payload).
async fn sent(peer: &mut DuplexStream) -> Vec<(u8, Vec<u8>)> {
    let mut bytes = vec![0; 1 << 16];
    let n = tokio::time::timeout(Duration::from_secs(5), peer.read(&mut bytes)).await.expect("bytes").expect("read");
    let mut buf = &bytes[..n];
    let mut frames = Vec::new();
    while let Some(header) = parse_header(buf).expect("a valid header") {
        assert!(header.mask.is_none(), "a server masks nothing");
        frames.push((buf[0], buf[header.len..header.len + header.payload].to_vec()));
        buf = &buf[header.len + header.payload..];
    }
    assert!(buf.is_empty(), "whole frames");
    frames
}

#[test]
fn masking_twice_gives_the_bytes_back_at_every_length_and_offset() {
    for len in 0..40 {
        let data: Vec<u8> = (0..len as u8).collect();
        let mut masked = data.clone();
        apply_mask(&mut masked, KEY);
        for (i, (m, d)) in masked.iter().zip(&data).enumerate() {
            assert_eq!(*m, d ^ KEY[i % 4]);
        }
        apply_mask(&mut masked, KEY);
        assert_eq!(masked, data);
    }
}

#[test]
fn headers_of_every_length_form_parse_once_whole_and_wait_while_partial() {
    for (len, header_len) in [(0, 2), (125, 2), (126, 4), (65_535, 4), (65_536, 10)] {
        let bytes = frame(0x82, &vec![7; len], Some(KEY));
        for cut in 0..header_len + 4 {
            assert_eq!(parse_header(&bytes[..cut]).expect("valid"), None, "{len} bytes cut at {cut}");
        }
        let header = parse_header(&bytes).expect("valid").expect("whole");
        assert_eq!((header.len, header.payload, header.mask, header.fin), (header_len + 4, len, Some(KEY), true));
    }
    let mut huge = vec![0x82, 127];
    huge.extend_from_slice(&u64::MAX.to_be_bytes());
    assert!(matches!(parse_header(&huge), Err(Error::Protocol(_))));
}

#[test]
fn a_close_reason_is_cut_to_fit_at_a_character() {
    let reason = "é".repeat(100);
    let payload = close_payload(Some(CloseFrame { code: CloseCode::Again, reason: reason.into() }));
    assert!(payload.len() <= MAX_CONTROL);
    let frame = parse_close(payload).expect("valid").expect("a frame");
    assert_eq!(frame.code, CloseCode::Again);
    assert!(frame.reason.chars().all(|c| c == 'é'));
}

#[tokio::test]
async fn fragments_come_as_one_message_with_a_ping_between_them_answered() {
    let (mut conn, mut peer) = server();
    let mut bytes = frame(0x01, b"hel", Some(KEY));
    bytes.extend(frame(0x89, b"are you there", Some(KEY)));
    bytes.extend(frame(0x00, "lo, wö".as_bytes(), Some(KEY)));
    bytes.extend(frame(0x80, b"rld", Some(KEY)));
    bytes.extend(frame(0x82, &[1, 2, 3], Some(KEY)));
    peer.write_all(&bytes).await.expect("write");
    assert_eq!(next(&mut conn).await.expect("a message").expect("valid"), Message::Ping("are you there".into()));
    assert_eq!(next(&mut conn).await.expect("a message").expect("valid"), Message::text("hello, wörld"));
    assert_eq!(next(&mut conn).await.expect("a message").expect("valid"), Message::binary(vec![1, 2, 3]));
    assert_eq!(sent(&mut peer).await, vec![(0x8a, b"are you there".to_vec())]);
}

#[tokio::test]
async fn a_whole_message_or_control_frame_first_in_the_read_buffer_counts_as_buffered() {
    let (mut conn, mut peer) = server();
    assert!(!conn.frame_buffered(), "nothing read yet");
    let mut bytes = frame(0x82, &[9], Some(KEY));
    bytes.extend(frame(0x89, b"ping", Some(KEY)));
    bytes.extend(frame(0x01, b"hel", Some(KEY)));
    bytes.extend(frame(0x80, b"lo", Some(KEY)));
    let half = frame(0x82, &[1, 2, 3, 4], Some(KEY));
    bytes.extend(&half[..half.len() - 2]);
    peer.write_all(&bytes).await.expect("write");
    assert_eq!(next(&mut conn).await.expect("a message").expect("valid"), Message::binary(vec![9]));
    assert!(conn.frame_buffered(), "a ping comes next");
    assert_eq!(next(&mut conn).await.expect("a message").expect("valid"), Message::Ping("ping".into()));
    assert!(!conn.frame_buffered(), "a fragment that ends no message comes next");
    assert_eq!(next(&mut conn).await.expect("a message").expect("valid"), Message::text("hello"));
    assert!(!conn.frame_buffered(), "half a frame");
    peer.write_all(&half[half.len() - 2..]).await.expect("write");
    assert_eq!(next(&mut conn).await.expect("a message").expect("valid"), Message::binary(vec![1, 2, 3, 4]));
    assert!(!conn.frame_buffered());

    // What is fed waits until a flush (the pong went out with the next read).
    conn.feed(Message::text("one")).expect("open");
    conn.feed(Message::text("two")).expect("open");
    assert_eq!(conn.queued(), 2 * (2 + 3), "two frames");
    conn.flush().await.expect("flushed");
    assert_eq!(conn.queued(), 0);
    let got = sent(&mut peer).await;
    assert_eq!(got, vec![(0x8a, b"ping".to_vec()), (0x81, b"one".to_vec()), (0x81, b"two".to_vec())]);
}

#[tokio::test]
async fn each_protocol_violation_fails_the_connection_with_its_close_code() {
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (frame(0x82, b"x", None), 1002, "not masked"),
        (frame(0xc2, b"x", Some(KEY)), 1002, "reserved bits"),
        (frame(0x83, b"x", Some(KEY)), 1002, "unknown opcode"),
        (frame(0x80, b"x", Some(KEY)), 1002, "continuation frame outside"),
        ([frame(0x01, b"x", Some(KEY)), frame(0x81, b"y", Some(KEY))].concat(), 1002, "new message within"),
        (frame(0x09, b"x", Some(KEY)), 1002, "control frame"),
        (frame(0x89, &[0; 126], Some(KEY)), 1002, "control frame"),
        (frame(0x81, &[0xff, 0xfe], Some(KEY)), 1007, "not valid UTF-8"),
        ([frame(0x01, &[0xe2, 0x82], Some(KEY)), frame(0x80, b"x", Some(KEY))].concat(), 1007, "not valid UTF-8"),
        (frame(0x88, &[3], Some(KEY)), 1002, "one byte"),
        (frame(0x88, &1005u16.to_be_bytes(), Some(KEY)), 1002, "code"),
        (frame(0x88, &[0x03, 0xe8, 0xff], Some(KEY)), 1007, "not valid UTF-8"),
    ];
    for (bytes, code, why) in cases {
        let (mut conn, mut peer) = server();
        peer.write_all(&bytes).await.expect("write");
        let error = next(&mut conn).await.expect("an error").expect_err(why).to_string();
        assert!(error.contains(why), "{why}: {error}");
        let frames = sent(&mut peer).await;
        assert_eq!(frames.len(), 1, "{why}: one close");
        assert_eq!((frames[0].0, u16::from_be_bytes([frames[0].1[0], frames[0].1[1]])), (0x88, code), "{why}");
        assert!(next(&mut conn).await.is_none(), "{why}: nothing more is read");
        assert!(matches!(conn.send(Message::text("late")).await, Err(Error::Closed)), "{why}");
    }
}

#[tokio::test]
async fn a_frame_over_the_limit_is_refused_from_its_header_and_the_caller_may_still_close() {
    let (mut conn, mut peer) = server();
    // Only the header: the limit is known before any payload comes.
    let header = frame(0x82, &vec![0; LIMITS.max_frame + 1], Some(KEY));
    peer.write_all(&header[..14]).await.expect("write");
    let error = next(&mut conn).await.expect("an error").expect_err("too long");
    assert!(matches!(error, Error::TooLong { what: "frame", .. }), "{error}");
    assert!(next(&mut conn).await.is_none());
    conn.close(Some(CloseFrame { code: CloseCode::Size, reason: "too big".into() })).await.expect("closes");
    assert_eq!(sent(&mut peer).await, vec![(0x88, [&1009u16.to_be_bytes()[..], b"too big"].concat())]);

    let (mut conn, mut peer) = server();
    let part = vec![b'a'; LIMITS.max_frame];
    let bytes = [frame(0x01, &part, Some(KEY)), frame(0x00, &part, Some(KEY)), frame(0x80, b"a", Some(KEY))].concat();
    peer.write_all(&bytes).await.expect("write");
    let error = next(&mut conn).await.expect("an error").expect_err("too long");
    assert!(matches!(error, Error::TooLong { what: "message", size, .. } if size == LIMITS.max_message + 1), "{error}");
}

#[tokio::test]
async fn a_close_is_echoed_once_and_reading_ends_after_it() {
    let (mut conn, mut peer) = server();
    peer.write_all(&frame(0x88, &[&1001u16.to_be_bytes()[..], b"bye"].concat(), Some(KEY))).await.expect("write");
    let close = next(&mut conn).await.expect("a message").expect("valid");
    assert_eq!(close, Message::Close(Some(CloseFrame { code: CloseCode::Away, reason: "bye".into() })));
    // The caller's own close sends nothing more: the echo went already.
    conn.close(Some(CloseFrame { code: CloseCode::Normal, reason: "".into() })).await.expect("closes");
    assert_eq!(sent(&mut peer).await, vec![(0x88, 1001u16.to_be_bytes().to_vec())]);
    assert!(next(&mut conn).await.is_none());
}

#[tokio::test]
async fn lingering_after_a_close_reads_what_the_peer_sent_until_its_close_and_no_longer() {
    // A refused client had already sent its first message: lingering reads it (so the
    // socket is not dropped with bytes unread) and returns as soon as the peer's close comes.
    let (mut conn, mut peer) = server();
    peer.write_all(&frame(0x81, br#"{"type":"session_start"}"#, Some(KEY))).await.expect("write");
    conn.close(Some(CloseFrame { code: CloseCode::from(4401), reason: "missing key".into() })).await.expect("closes");
    assert_eq!(sent(&mut peer).await[0].0, 0x88, "the close frame went first");
    peer.write_all(&frame(0x88, &4401u16.to_be_bytes(), Some(KEY))).await.expect("write");
    let started = std::time::Instant::now();
    assert!(conn.linger(Duration::from_secs(30)).await, "the peer's close ends the wait");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());

    // A peer that never closes is waited for `wait`, not longer.
    let (mut conn, _peer) = server();
    conn.close(None).await.expect("closes");
    assert!(!conn.linger(Duration::from_millis(200)).await, "no close came");

    // A peer whose stream ends without a close ends the wait too.
    let (mut conn, peer) = server();
    drop(peer);
    let _ = conn.close(None).await;
    assert!(conn.linger(Duration::from_secs(30)).await, "the end of the stream ends the wait");
}

#[tokio::test]
async fn a_peer_that_pings_and_does_not_read_gets_one_pong_queued_not_one_per_ping() {
    // Room for a few frames each way: the peer's reads are what let pongs out.
    let (ours, mut theirs) = tokio::io::duplex(256);
    let mut conn = Conn::new(ours, Role::Server, LIMITS, BytesMut::new());
    let pings: Vec<u8> =
        (0..2000u32).flat_map(|i| frame(0x89, format!("ping {i:>14}").as_bytes(), Some(KEY))).collect();
    let writer = tokio::spawn(async move {
        theirs.write_all(&pings).await.expect("write");
        theirs
    });
    for i in 0..2000u32 {
        let message = next(&mut conn).await.expect("a ping").expect("valid");
        assert_eq!(message, Message::Ping(format!("ping {i:>14}").into()));
        // At most one pong (2 bytes of header, 20 of payload) waits, however many came.
        assert!(conn.out.len() <= 22, "ping {i}: {} bytes queued", conn.out.len());
    }
    let mut theirs = writer.await.expect("the peer wrote every ping");
    // The peer reads now: the pongs that fit while it did not, then the latest ping's.
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        theirs.read_to_end(&mut got).await.expect("read");
        got
    });
    assert!(tokio::time::timeout(Duration::from_millis(300), conn.next()).await.is_err(), "nothing more to read");
    drop(conn);
    let got = reader.await.expect("the peer read");
    let mut frames = Vec::new();
    let mut buf = &got[..];
    while let Some(header) = parse_header(buf).expect("valid") {
        frames.push(buf[header.len..header.len + header.payload].to_vec());
        buf = &buf[header.len + header.payload..];
    }
    assert_eq!(
        frames.last().map(Vec::as_slice),
        Some(format!("ping {:>14}", 1999).as_bytes()),
        "the latest is answered"
    );
    assert!(frames.len() < 50, "{} pongs for 2000 pings", frames.len());
}

#[tokio::test]
async fn a_socket_that_ends_without_a_close_ends_the_stream() {
    let (mut conn, peer) = server();
    drop(peer);
    assert!(next(&mut conn).await.is_none());
}

fn kind(message: &Message) -> &'static str {
    match message {
        Message::Text(_) => "text",
        Message::Binary(_) => "binary",
        Message::Close(_) => "close",
        _ => "control",
    }
}
