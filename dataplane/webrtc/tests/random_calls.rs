//! Random sequences of what can happen to a connected call — agent audio, barge-in, client
//! messages good and bad, stray datagrams, trickled candidates, time — against the real
//! client: the call never panics or ends, messages arrive in order, refused ones are told,
//! and the reply audio the client gets never overlaps in RTP time.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Harness, tone};
use proptest::prelude::*;
use switchboard_webrtc::{CallConfig, CallEvent, Fragment, Protocol};

#[derive(Clone, Debug)]
enum Op {
    /// The agent speaks this many milliseconds.
    Speak(u16),
    /// Barge-in.
    Flush,
    /// The client sends a good message.
    Good,
    /// The client sends text that is not JSON.
    Bad,
    /// A datagram of these bytes from a stranger, and the same from the client's address.
    Stray(Vec<u8>),
    /// A trickled candidate.
    Trickle(u16),
    /// Time passes.
    Wait(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (20u16..600).prop_map(Op::Speak),
        Just(Op::Flush),
        Just(Op::Good),
        Just(Op::Bad),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(Op::Stray),
        (1024u16..65_000).prop_map(Op::Trickle),
        (1u16..300).prop_map(Op::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_call_takes_whatever_comes(ops in prop::collection::vec(op(), 1..25)) {
        let mut h = Harness::new(CallConfig::default());
        h.connect();
        let (mut good, mut bad) = (0usize, 0usize);
        for op in ops {
            let now = h.now;
            match op {
                Op::Speak(ms) => h.call.send_audio(now, &tone(300.0, 24_000, f64::from(ms) / 1000.0)),
                Op::Flush => {
                    h.call.flush_audio();
                    prop_assert_eq!(h.call.queued_audio(), 0);
                }
                Op::Good => {
                    good += 1;
                    h.client_sends(format!(r#"{{"type":"bidi_text_input","text":"{good}"}}"#).as_bytes(), false);
                }
                Op::Bad => {
                    bad += 1;
                    h.client_sends(b"{not json", false);
                }
                Op::Stray(bytes) => {
                    let server = common::addr(common::SERVER);
                    h.call.handle_datagram(now, Protocol::Udp, common::addr("198.51.100.7:9"), server, &bytes);
                    h.call.handle_datagram(now, Protocol::Udp, common::addr(common::CLIENT), server, &bytes);
                }
                Op::Trickle(port) => {
                    let body = format!("a=candidate:9 1 udp 2113937151 192.0.2.12 {port} typ host\r\n");
                    prop_assert_eq!(h.call.patch(now, &Fragment::parse(body.as_bytes()).unwrap()).unwrap(), None);
                }
                Op::Wait(ms) => h.run(Duration::from_millis(u64::from(ms))),
            }
            h.drain();
        }
        h.run(Duration::from_millis(300));
        prop_assert!(!h.call.is_closed());
        let texts = h.call_texts();
        prop_assert_eq!(texts.len(), good);
        for (i, text) in texts.iter().enumerate() {
            prop_assert!(text.contains(&format!("\"text\":\"{}\"", i + 1)), "in order: {texts:?}");
        }
        let refused = h.call_events.iter().filter(|(_, e)| matches!(e, CallEvent::Refused(_))).count();
        prop_assert_eq!(refused, bad);
        let times: Vec<u64> = h.client_packets().iter().map(|(_, time, _)| *time).collect();
        prop_assert!(times.windows(2).all(|w| w[1] >= w[0] + 960), "RTP times overlap: {times:?}");
    }
}
