//! The gateway's WebSocket frame layer (`switchboard_serve::frames`): every byte a client
//! sends the gateway, and every byte a runtime sends it, goes through it. Properties: no
//! input panics it; what it reads is within its limits; it reads nothing after an error or a
//! close; and a text message is UTF-8 (its type says so; the layer checked it).
#![no_main]

use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use futures_util::StreamExt;
use libfuzzer_sys::fuzz_target;
use switchboard_serve::frames::{Conn, Limits, Message, Role};

const LIMITS: Limits = Limits { max_message: 4096, max_frame: 1024 };

fuzz_target!(|data: &[u8]| {
    let Some((&first, bytes)) = data.split_first() else { return };
    let role = if first & 1 == 0 { Role::Server } else { Role::Client };
    // Nothing more to read past the input; what is written goes nowhere.
    let io = tokio::io::join(tokio::io::empty(), tokio::io::sink());
    let mut conn = Conn::new(io, role, LIMITS, BytesMut::from(bytes));
    let mut cx = Context::from_waker(Waker::noop());
    let mut ended = false;
    for _ in 0..=bytes.len() {
        match pin!(conn.next()).poll(&mut cx) {
            Poll::Ready(Some(Ok(message))) => {
                assert!(!ended, "a message after the end: {message:?}");
                match &message {
                    Message::Text(text) => assert!(text.len() <= LIMITS.max_message),
                    Message::Binary(data) => assert!(data.len() <= LIMITS.max_message),
                    Message::Ping(data) | Message::Pong(data) => assert!(data.len() <= 125),
                    Message::Close(_) => ended = true,
                    Message::Frame(_) => panic!("a raw frame"),
                }
            }
            Poll::Ready(Some(Err(error))) => {
                assert!(!ended, "an error after the end: {error}");
                ended = true;
            }
            Poll::Ready(None) => return,
            Poll::Pending => panic!("an empty reader never waits"),
        }
    }
    panic!("more messages than bytes");
});
