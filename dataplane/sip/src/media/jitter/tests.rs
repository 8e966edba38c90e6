//! Unit and property tests of the jitter buffer.

use super::*;
use proptest::prelude::*;

fn frame(n: u8) -> Vec<u8> {
    vec![n; 160]
}

fn buffer() -> JitterBuffer {
    JitterBuffer::new(
        Some(Law::Ulaw),
        JitterConfig { depth: 2, capacity: 8, max_payload: 320, max_concealed: 3, backlog: 3, reorder: None },
    )
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
        let config =
            JitterConfig { depth: 3, capacity: 8, max_payload: 160, max_concealed: 20, backlog: 3, reorder: None };
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

#[test]
fn a_paced_playout_that_fell_behind_drops_its_backlog_and_counts_it() {
    let mut b = buffer();
    b.push(1, &frame(1));
    b.push(2, &frame(2));
    assert_eq!(drain(&mut b, 1), [Some(Some(1))]);
    // The owner's ticks came late: six frames wait where two (the depth) should.
    for seq in 3..=8u16 {
        b.push(seq, &frame(seq as u8));
    }
    assert_eq!(drain(&mut b, 3), [Some(Some(7)), Some(Some(8)), Some(None)], "back to the depth's delay");
    assert_eq!(b.take_dropped(), 5, "frames 2 to 6 skipped");
    assert_eq!(b.take_dropped(), 0);
    // Within depth + backlog nothing is dropped.
    let mut b = buffer();
    for seq in 1..=5u16 {
        b.push(seq, &frame(seq as u8));
    }
    assert_eq!(drain(&mut b, 5).iter().flatten().flatten().count(), 5);
    assert_eq!(b.take_dropped(), 0);
}

const WINDOW: std::time::Duration = std::time::Duration::from_millis(40);

fn forwarding() -> JitterBuffer {
    JitterBuffer::new(Some(Law::Ulaw), JitterConfig { backlog: 3, ..JitterConfig::forwarding(WINDOW) })
}

/// Every frame ready at `now`, as [`drain`] writes them.
fn ready(b: &mut JitterBuffer, now: Instant) -> Vec<Option<u8>> {
    std::iter::from_fn(|| match b.pop_ready(now) {
        Playout::Waiting => None,
        Playout::Frame(f) => Some(Some(f[0])),
        Playout::Concealed(_) => Some(None),
    })
    .collect()
}

#[test]
fn forwarding_sends_packets_in_order_at_once() {
    let t0 = Instant::now();
    let mut b = forwarding();
    assert!(b.forwards());
    assert!(ready(&mut b, t0).is_empty());
    for seq in 100..105u16 {
        assert_eq!(b.push(seq, &frame(seq as u8)), Pushed::Held);
        assert_eq!(ready(&mut b, t0), [Some(seq as u8)], "no delay, not even for the first");
    }
    assert!(b.is_empty());
}

#[test]
fn forwarding_puts_a_reordered_packet_back_within_the_window() {
    let t0 = Instant::now();
    let mut b = forwarding();
    b.push(1, &frame(1));
    assert_eq!(ready(&mut b, t0), [Some(1)]);
    b.push(3, &frame(3));
    assert!(ready(&mut b, t0 + Duration::from_millis(20)).is_empty(), "3 waits for 2");
    b.push(2, &frame(2));
    assert_eq!(ready(&mut b, t0 + Duration::from_millis(25)), [Some(2), Some(3)]);
    assert_eq!(b.concealed(), 0);
}

#[test]
fn forwarding_conceals_a_loss_once_the_window_has_passed_and_the_late_packet_is_dropped() {
    let t0 = Instant::now();
    let mut b = forwarding();
    let loud = vec![g711::linear_to_ulaw(20000); 160];
    b.push(1, &loud);
    assert_eq!(b.pop_ready(t0), Playout::Frame(loud.clone()));
    b.push(4, &frame(4));
    assert!(ready(&mut b, t0 + Duration::from_millis(60)).is_empty(), "the gap's wait starts now");
    assert!(ready(&mut b, t0 + Duration::from_millis(99)).is_empty(), "within the window");
    let after = t0 + Duration::from_millis(100);
    assert_eq!(b.pop_ready(after), Playout::Concealed(loud.clone()), "the last frame repeated");
    let Playout::Concealed(second) = b.pop_ready(after) else { panic!("not concealed") };
    assert!((12000..16000).contains(&g711::ulaw_to_linear(second[0])), "then faded");
    assert_eq!(ready(&mut b, after), [Some(4)]);
    assert_eq!(b.concealed(), 0);
    assert_eq!(b.push(2, &frame(2)), Pushed::Late, "its place was concealed");
    assert_eq!(b.push(5, &frame(5)), Pushed::Held);
    assert_eq!(ready(&mut b, after), [Some(5)]);
}

#[test]
fn forwarding_conceals_at_once_when_more_than_the_backlog_waits_behind_a_gap() {
    let t0 = Instant::now();
    let mut b = forwarding();
    b.push(10, &frame(10));
    assert_eq!(ready(&mut b, t0), [Some(10)]);
    // 11 is lost; the edge was busy and reads 12..=15 at once, all in the same instant.
    for seq in 12..=14u16 {
        b.push(seq, &frame(seq as u8));
        assert!(ready(&mut b, t0).is_empty(), "{seq}: still within the backlog");
    }
    b.push(15, &frame(15));
    assert_eq!(ready(&mut b, t0), [None, Some(12), Some(13), Some(14), Some(15)], "no wait for the window");
}

#[test]
fn forwarding_waits_for_nothing_when_the_phone_is_silent() {
    let t0 = Instant::now();
    let mut b = forwarding();
    b.push(1, &frame(1));
    assert_eq!(ready(&mut b, t0), [Some(1)]);
    assert!(ready(&mut b, t0 + Duration::from_secs(5)).is_empty(), "nothing held: nothing concealed");
    b.push(2, &frame(2));
    assert_eq!(ready(&mut b, t0 + Duration::from_secs(5)), [Some(2)]);
}

use std::time::{Duration, Instant};

proptest! {
    /// Forwarding, packets shuffled and some lost or repeated, arriving 20 ms apart: what
    /// goes out is in order, each frame at most once, and no frame waits longer than the
    /// reorder window plus one tick (the owner calls `pop_ready` on each packet and tick).
    #[test]
    fn forwarding_keeps_order_and_its_window(
        start: u16,
        count in 1usize..60,
        swaps in proptest::collection::vec((0usize..60, 0usize..3), 0..40),
        lost in proptest::collection::vec(0usize..60, 0..10),
        repeats in proptest::collection::vec(0usize..60, 0..10),
    ) {
        let t0 = Instant::now();
        let mut b = JitterBuffer::new(Some(Law::Alaw), JitterConfig::forwarding(WINDOW));
        let mut order: Vec<usize> = (0..count).collect();
        for (i, d) in swaps {
            let (i, j) = (i % count, (i + d) % count);
            order.swap(i, j);
        }
        for r in repeats {
            let r = r % count;
            order.insert(r, order[r]);
        }
        order.retain(|i| !lost.contains(i) || *i == 0);
        let mut out: Vec<(usize, Duration)> = Vec::new();
        let mut arrived = std::collections::HashMap::new();
        let take = |b: &mut JitterBuffer, now: Duration, out: &mut Vec<(usize, Duration)>| {
            loop {
                match b.pop_ready(t0 + now) {
                    Playout::Waiting => break,
                    Playout::Frame(f) => out.push((number(&f), now)),
                    Playout::Concealed(_) => {}
                }
            }
        };
        for (n, &i) in order.iter().enumerate() {
            let now = Duration::from_millis(20 * n as u64);
            arrived.entry(i).or_insert(now);
            b.push(start.wrapping_add(i as u16), &(i as u32).to_be_bytes());
            take(&mut b, now, &mut out);
            // The tick, halfway to the next packet.
            take(&mut b, now + Duration::from_millis(10), &mut out);
        }
        for k in 0..10u64 {
            take(&mut b, Duration::from_millis(20 * order.len() as u64 + 10 * k), &mut out);
        }
        prop_assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "out of order or repeated: {:?}", out);
        prop_assert!(b.is_empty(), "everything went out");
        for (i, at) in &out {
            let waited = *at - arrived[i];
            prop_assert!(waited <= WINDOW + Duration::from_millis(20), "frame {} waited {:?}", i, waited);
        }
    }
}
