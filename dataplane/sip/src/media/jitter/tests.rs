//! Unit and property tests of the jitter buffer.

use super::*;
use proptest::prelude::*;

fn frame(n: u8) -> Vec<u8> {
    vec![n; 160]
}

fn buffer() -> JitterBuffer {
    JitterBuffer::new(Some(Law::Ulaw), JitterConfig { depth: 2, capacity: 8, max_payload: 320, max_concealed: 3 })
}

/// The first byte of each tick's frame; `None` for waiting, `Some(None)` for concealed.
fn drain(b: &mut JitterBuffer, ticks: usize) -> Vec<Option<Option<u8>>> {
    (0..ticks)
        .map(|_| match b.pop() {
            Playout::Waiting => None,
            Playout::Frame(f) => Some(Some(f[0])),
            Playout::Concealed(_) => Some(None),
        })
        .collect()
}

#[test]
fn it_waits_for_its_depth_then_plays_in_order() {
    let mut b = buffer();
    assert_eq!(b.pop(), Playout::Waiting);
    assert_eq!(b.push(10, &frame(10)), Pushed::Held);
    assert_eq!(b.pop(), Playout::Waiting);
    assert_eq!(b.push(12, &frame(12)), Pushed::Held);
    assert_eq!(b.push(11, &frame(11)), Pushed::Held);
    assert_eq!(drain(&mut b, 3), [Some(Some(10)), Some(Some(11)), Some(Some(12))]);
}

#[test]
fn an_earlier_packet_that_came_second_still_plays_first() {
    let mut b = buffer();
    b.push(21, &frame(21));
    assert_eq!(b.push(20, &frame(20)), Pushed::Held);
    assert_eq!(drain(&mut b, 2), [Some(Some(20)), Some(Some(21))]);
}

#[test]
fn duplicates_and_late_packets_are_dropped() {
    let mut b = buffer();
    b.push(1, &frame(1));
    b.push(2, &frame(2));
    assert_eq!(b.push(2, &frame(2)), Pushed::Duplicate);
    assert_eq!(drain(&mut b, 1), [Some(Some(1))]);
    assert_eq!(b.push(1, &frame(1)), Pushed::Late);
    assert_eq!(b.push(3, &[]), Pushed::Refused);
    assert_eq!(b.push(3, &[0; 321]), Pushed::Refused);
}

#[test]
fn a_lost_frame_is_concealed_by_the_last_one_fading() {
    let mut b = JitterBuffer::new(Some(Law::Ulaw), JitterConfig { depth: 1, ..JitterConfig::default() });
    let loud = vec![g711::linear_to_ulaw(20000); 160];
    b.push(1, &loud);
    b.push(4, &loud);
    assert_eq!(b.pop(), Playout::Frame(loud.clone()));
    let Playout::Concealed(first) = b.pop() else { panic!("not concealed") };
    assert_eq!(first, loud, "the first lost frame repeats the last");
    let Playout::Concealed(second) = b.pop() else { panic!("not concealed") };
    let level = g711::ulaw_to_linear(second[0]);
    assert!((12000..16000).contains(&level), "faded to 70 %: {level}");
    assert_eq!(b.pop(), Playout::Frame(loud));
}

use super::super::g711;

#[test]
fn concealment_fades_to_silence_then_it_buffers_again() {
    let mut b = buffer();
    b.push(1, &frame(0x80));
    b.push(2, &frame(0x80));
    let out = drain(&mut b, 6);
    assert_eq!(out, [Some(Some(0x80)), Some(Some(0x80)), Some(None), Some(None), Some(None), None]);
    // The phone speaks again with the next sequence numbers: buffered to depth, then played.
    b.push(3, &frame(3));
    assert_eq!(b.pop(), Playout::Waiting);
    b.push(4, &frame(4));
    assert_eq!(drain(&mut b, 2), [Some(Some(3)), Some(Some(4))]);
}

#[test]
fn the_sequence_wraps() {
    let mut b = buffer();
    for seq in [65534u16, 0, 65535, 1] {
        assert_eq!(b.push(seq, &frame(seq as u8)), Pushed::Held, "{seq}");
    }
    assert_eq!(drain(&mut b, 4), [Some(Some(254)), Some(Some(255)), Some(Some(0)), Some(Some(1))]);
}

#[test]
fn a_jump_past_the_window_restarts_the_stream() {
    let mut b = buffer();
    b.push(100, &frame(1));
    b.push(101, &frame(2));
    drain(&mut b, 1);
    assert_eq!(b.push(5000, &frame(9)), Pushed::Restarted);
    assert_eq!(b.len(), 1);
    b.push(5001, &frame(10));
    assert_eq!(drain(&mut b, 2), [Some(Some(9)), Some(Some(10))]);
}

fn number(frame: &[u8]) -> usize {
    u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize
}

proptest! {
    /// Packets shuffled within the window, some repeated: what plays is in order, each
    /// frame at most once, and the buffer never holds more than its capacity.
    #[test]
    fn order_and_bounds_hold(
        start: u16,
        count in 1usize..60,
        swaps in proptest::collection::vec((0usize..60, 0usize..3), 0..40),
        repeats in proptest::collection::vec(0usize..60, 0..10),
    ) {
        let config = JitterConfig { depth: 3, capacity: 8, max_payload: 160, max_concealed: 20 };
        let mut b = JitterBuffer::new(Some(Law::Alaw), config);
        let mut order: Vec<usize> = (0..count).collect();
        for (i, d) in swaps {
            let (i, j) = (i % count, (i + d) % count);
            if i.abs_diff(j) <= 2 {
                order.swap(i, j);
            }
        }
        for r in repeats {
            let r = r % count;
            order.insert(r, order[r]);
        }
        let mut played: Vec<usize> = Vec::new();
        for (n, &i) in order.iter().enumerate() {
            let seq = start.wrapping_add(i as u16);
            b.push(seq, &(i as u32).to_be_bytes());
            prop_assert!(b.len() <= config.capacity);
            if n % 2 == 1 && let Playout::Frame(f) = b.pop() {
                played.push(number(&f));
            }
        }
        for _ in 0..count + 5 {
            if let Playout::Frame(f) = b.pop() {
                played.push(number(&f));
            }
        }
        prop_assert!(played.windows(2).all(|w| w[0] < w[1]), "out of order or repeated: {:?}", played);
        prop_assert!(played.len() <= count);
    }
}
