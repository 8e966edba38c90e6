//! Stale caller audio: a packet that reaches the decoder more than [`MAX_LATENESS`] (2 s) behind
//! the stream is dropped undecoded, a shorter burst is decoded whole, a path that became
//! slower for good is followed, and the jitter is measured.

use std::time::{Duration, Instant};

use super::tests::tone;
use super::*;

/// `count` Opus packets of a tone, 20 ms each.
fn packets(count: usize) -> Vec<Vec<u8>> {
    let mut outbound = Outbound::new(16_000, false).expect("encoder");
    outbound.push(&tone(500.0, 16_000, count as f64 * 0.02));
    let start = Instant::now();
    let mut out = Vec::new();
    let mut t = Duration::ZERO;
    while out.len() < count {
        while let Some(frame) = outbound.poll(start + t).expect("encodes") {
            out.push(frame.packet);
        }
        t += Duration::from_millis(1);
    }
    out
}

/// Packet `k` of the stream: its RTP time (48 kHz) and when it is due (its place in real time).
fn due(start: Instant, k: usize) -> (u64, Instant) {
    (k as u64 * FRAME_SAMPLES as u64, start + FRAME * k as u32)
}

/// A gateway that fell behind: four seconds of the caller's packets waited in its queues and
/// reach the decoder at once. Those more than two seconds behind are dropped undecoded
/// (nothing filled in for them), the rest of the burst is decoded, and the stream goes on.
#[test]
fn audio_past_the_bound_is_dropped_undecoded_and_the_stream_catches_up() {
    assert_eq!(MAX_LATENESS, Duration::from_secs(2));
    let sent = packets(400);
    let start = Instant::now();
    let mut inbound = Inbound::new(16_000).expect("decoder");
    for (k, packet) in sent.iter().enumerate().take(50) {
        let (time, at) = due(start, k);
        inbound.packet(at, k as u64, time, packet);
    }
    assert_eq!(inbound.take().len(), 50 * 320);
    // Packets 50..250 (4 s of the stream) all reach the decoder 5.5 s in.
    let late = start + Duration::from_millis(5_500);
    for (k, packet) in sent.iter().enumerate().take(250).skip(50) {
        inbound.packet(late, k as u64, due(start, k).0, packet);
    }
    let stats = inbound.stats();
    // Packet k is 5.5 s - 20 ms * k behind: stale up to packet 174 (the 2 s mark).
    assert_eq!(stats.stale, 125, "{stats:?}");
    assert_eq!(inbound.take().len(), 75 * 320, "the rest of the burst, and no gap filled for the stale: {stats:?}");
    // On time again.
    for (k, packet) in sent.iter().enumerate().skip(250) {
        let (time, at) = due(start, k);
        inbound.packet(at, k as u64, time, packet);
    }
    let stats = inbound.stats();
    assert_eq!(inbound.take().len(), 150 * 320);
    assert_eq!((stats.packets, stats.stale, stats.lost, stats.concealed_samples), (275, 125, 0, 0), "{stats:?}");
}

/// A network's burst or a busy node's pause shorter than the bound (1.2 s of packets held,
/// then let go) is decoded whole: every word is heard, a little late.
#[test]
fn a_burst_within_the_bound_is_decoded_whole() {
    let sent = packets(150);
    let start = Instant::now();
    let mut inbound = Inbound::new(16_000).expect("decoder");
    for (k, packet) in sent.iter().enumerate() {
        let (time, at) = due(start, k);
        // Packets 40..100 are held until packet 100 is due.
        let at = if (40..100).contains(&k) { due(start, 100).1 } else { at };
        inbound.packet(at, k as u64, time, packet);
    }
    let stats = inbound.stats();
    assert_eq!((stats.packets, stats.stale), (150, 0), "{stats:?}");
    assert_eq!(inbound.take().len(), 150 * 320);
}

/// A path that became slower for good (every packet 2.5 s later than before, from some
/// moment on): its packets are stale while the faster past is the reference, then followed.
#[test]
fn a_path_slower_for_good_is_followed() {
    let sent = packets(1_000);
    let start = Instant::now();
    let mut inbound = Inbound::new(16_000).expect("decoder");
    let slower = Duration::from_millis(2_500);
    let mut stale_at = Vec::new();
    for (k, packet) in sent.iter().enumerate() {
        let (time, at) = due(start, k);
        let at = if k >= 100 { at + slower } else { at };
        let before = inbound.stats().stale;
        inbound.packet(at, k as u64, time, packet);
        if inbound.stats().stale > before {
            stale_at.push(k);
        }
    }
    let stats = inbound.stats();
    assert!(stats.stale > 0, "the step is stale at first: {stats:?}");
    // Followed within two windows of the lateness reference (10 s: 500 packets).
    let last = *stale_at.last().expect("some stale");
    assert!(last < 100 + 500, "still stale at packet {last}: {stats:?}");
    assert_eq!(stats.packets + stats.stale, 1_000, "{stats:?}");
}

/// The interarrival jitter (RFC 3550): none for a steady stream, about the swing for one
/// whose packets come 10 ms early and late in turn.
#[test]
fn the_jitter_is_measured() {
    let sent = packets(300);
    let start = Instant::now();
    let mut steady = Inbound::new(16_000).expect("decoder");
    let mut swinging = Inbound::new(16_000).expect("decoder");
    for (k, packet) in sent.iter().enumerate() {
        let (time, at) = due(start, k);
        steady.packet(at, k as u64, time, packet);
        let swing = if k % 2 == 0 { Duration::ZERO } else { Duration::from_millis(20) };
        swinging.packet(at + swing, k as u64, time, packet);
    }
    assert_eq!(steady.stats().jitter, 0);
    // |D| is 20 ms every packet: the estimate converges on 20 ms (960 samples at 48 kHz).
    let jitter = swinging.stats().jitter;
    assert!((900..=960).contains(&jitter), "{jitter}");
    assert_eq!(swinging.stats().stale, 0);
    assert!(steady.stats().transcoding > Duration::ZERO);
}
