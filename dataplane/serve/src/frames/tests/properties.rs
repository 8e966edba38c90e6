//! The frame layer's reader as a property: any messages, however fragmented (pings
//! between fragments) and however the bytes are delivered, come whole and in order.

use std::pin::pin;
use std::task::{Context, Poll, Waker};

use proptest::prelude::*;

use super::*;

/// A data message as a peer may send it: text or binary, cut into fragments at the
/// given points, with a ping after the fragments named.
#[derive(Clone, Debug)]
struct Sent {
    text: bool,
    payload: Vec<u8>,
    cuts: Vec<usize>,
    ping_after: Vec<usize>,
}

fn sent() -> impl Strategy<Value = Sent> {
    (any::<bool>(), 0usize..3000).prop_flat_map(|(text, len)| {
        let payload = if text {
            // UTF-8 of any kind, cut to about `len` bytes at a character.
            "\\PC{0,1000}".prop_map(|s: String| s.into_bytes()).boxed()
        } else {
            proptest::collection::vec(any::<u8>(), len).boxed()
        };
        (payload, proptest::collection::vec(0usize..3000, 0..4), proptest::collection::vec(0usize..4, 0..3))
            .prop_map(move |(payload, cuts, ping_after)| Sent { text, payload, cuts, ping_after })
    })
}

/// The bytes a client writes for `messages`, fragments and pings included.
fn wire(messages: &[Sent]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for (i, message) in messages.iter().enumerate() {
        let mut cuts: Vec<usize> = message.cuts.iter().map(|c| c % (message.payload.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut bounds = vec![0];
        bounds.extend(cuts);
        bounds.push(message.payload.len());
        bounds.dedup();
        let parts: Vec<&[u8]> = if bounds.len() < 2 {
            vec![&message.payload[..]]
        } else {
            bounds.windows(2).map(|w| &message.payload[w[0]..w[1]]).collect()
        };
        for (n, part) in parts.iter().enumerate() {
            let opcode = if n > 0 {
                0
            } else if message.text {
                1
            } else {
                2
            };
            let fin = if n + 1 == parts.len() { 0x80 } else { 0 };
            let key = [i as u8, n as u8, 0x5a, 0xc3];
            put_frame(&mut out, fin | opcode, part, Some(key));
            if message.ping_after.contains(&n) && n + 1 < parts.len() {
                put_frame(&mut out, 0x80 | opcode::PING, b"between", Some(key));
            }
        }
    }
    out.to_vec()
}

/// Reads `bytes`, delivered in chunks of the given sizes, as a server: every message.
fn read(bytes: &[u8], chunks: &[usize]) -> Vec<Message> {
    let (ours, mut theirs) = tokio::io::duplex(1 << 22);
    let mut conn = Conn::new(ours, Role::Server, BIG, BytesMut::new());
    let mut cx = Context::from_waker(Waker::noop());
    let mut got = Vec::new();
    let mut at = 0;
    let mut sizes = chunks.iter().copied().cycle();
    loop {
        match pin!(conn.next()).poll(&mut cx) {
            Poll::Ready(Some(Ok(message))) => got.push(message),
            Poll::Ready(other) => panic!("the stream ended: {other:?}"),
            Poll::Pending if at == bytes.len() => return got,
            Poll::Pending => {
                let n = sizes.next().unwrap_or(1).clamp(1, bytes.len() - at);
                let mut write = pin!(theirs.write_all(&bytes[at..at + n]));
                assert!(write.as_mut().poll(&mut cx).is_ready(), "room in the pipe");
                at += n;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn messages_come_whole_and_in_order_however_they_are_fragmented_and_delivered(
        messages in proptest::collection::vec(sent(), 1..6),
        chunks in proptest::collection::vec(1usize..2000, 1..8),
    ) {
        let got: Vec<Message> = read(&wire(&messages), &chunks)
            .into_iter()
            .filter(|m| !matches!(m, Message::Ping(_)))
            .collect();
        let want: Vec<Message> = messages
            .iter()
            .map(|m| if m.text {
                Message::text(String::from_utf8(m.payload.clone()).expect("utf-8"))
            } else {
                Message::binary(m.payload.clone())
            })
            .collect();
        prop_assert_eq!(got.len(), want.len());
        for (got, want) in got.iter().zip(&want) {
            prop_assert!(got == want, "a {}-byte {} message came as a {}-byte {}", want.len(), kind(want), got.len(), kind(got));
        }
    }
}
