//! The audio path's rules: a tone through Opus keeps its pitch, pacing is real time, a
//! flush drops everything at once, loss and DTX pauses are filled, late packets dropped.

use std::time::{Duration, Instant};

use super::*;

/// `seconds` of a `hz` sine at `rate`, amplitude 0.5.
pub(crate) fn tone(hz: f64, rate: u32, seconds: f64) -> Vec<i16> {
    let n = (f64::from(rate) * seconds) as usize;
    (0..n).map(|i| ((2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin() * 16_000.0) as i16).collect()
}

/// The frequency of a tone from its zero crossings.
pub(crate) fn pitch(samples: &[i16], rate: u32) -> f64 {
    let crossings = samples.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
    crossings as f64 / 2.0 / (samples.len() as f64 / f64::from(rate))
}

fn rms(samples: &[i16]) -> f64 {
    (samples.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / samples.len().max(1) as f64).sqrt()
}

/// All frames `outbound` has due by `until`, polled every millisecond from `start`.
fn frames(outbound: &mut Outbound, start: Instant, until: Duration) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut t = Duration::ZERO;
    while t <= until {
        while let Some(frame) = outbound.poll(start + t).expect("encodes") {
            out.push(frame);
        }
        t += Duration::from_millis(1);
    }
    out
}

/// Arrival times of a steady stream, 20 ms apart: packets that reach the call on time.
fn on_time() -> impl FnMut() -> Instant {
    let (start, mut n) = (Instant::now(), 0);
    move || {
        n += 1;
        start + FRAME * n
    }
}

#[test]
fn a_tone_keeps_its_pitch_through_opus_and_both_resamplers() {
    let start = Instant::now();
    let mut outbound = Outbound::new(24_000, false).expect("encoder");
    outbound.push(&tone(440.0, 24_000, 1.0));
    let sent = frames(&mut outbound, start, Duration::from_millis(1100));
    assert_eq!(sent.len(), 50, "one second is 50 frames");
    let mut inbound = Inbound::new(16_000).expect("decoder");
    let mut arrived = on_time();
    for (seq, frame) in sent.iter().enumerate() {
        inbound.packet(arrived(), seq as u64, frame.rtp_time, &frame.packet);
    }
    let pcm = inbound.take();
    assert!((15_800..=16_000).contains(&pcm.len()), "about a second at 16 kHz: {}", pcm.len());
    let steady = &pcm[3_200..15_000];
    let hz = pitch(steady, 16_000);
    assert!((hz - 440.0).abs() < 5.0, "pitch {hz}");
    assert!(rms(steady) > 8_000.0, "loud enough: {}", rms(steady));
}

#[test]
fn reply_audio_leaves_in_real_time() {
    let start = Instant::now();
    let mut outbound = Outbound::new(24_000, false).expect("encoder");
    outbound.push(&tone(300.0, 24_000, 0.1));
    let first = outbound.poll(start).expect("encodes").expect("the first frame is due at once");
    assert_eq!((first.due, first.rtp_time), (start, 0));
    assert!(outbound.poll(start + Duration::from_millis(19)).expect("encodes").is_none(), "not before 20 ms");
    assert_eq!(outbound.timeout(), Some(start + FRAME));
    let second = outbound.poll(start + FRAME).expect("encodes").expect("due");
    assert_eq!(second.rtp_time, 960);
    // Late polling catches up frame by frame, each keeping its own place in time.
    let late = frames(&mut outbound, start + Duration::from_millis(100), Duration::ZERO);
    assert_eq!(late.iter().map(|f| f.rtp_time).collect::<Vec<_>>(), vec![1920, 2880, 3840]);
    assert_eq!(outbound.timeout(), None, "nothing left");
}

#[test]
fn a_flush_drops_queued_audio_at_once() {
    let start = Instant::now();
    let mut outbound = Outbound::new(24_000, false).expect("encoder");
    outbound.push(&tone(300.0, 24_000, 2.0));
    assert!(outbound.poll(start).expect("encodes").is_some());
    assert!(outbound.queued() > 90_000);
    outbound.flush();
    assert_eq!(outbound.queued(), 0);
    assert_eq!(outbound.timeout(), None);
    assert!(outbound.poll(start + Duration::from_secs(1)).expect("encodes").is_none());
    // The next reply starts a new burst at once, its RTP time where real time is.
    outbound.push(&tone(300.0, 24_000, 0.02));
    let next = outbound.poll(start + Duration::from_secs(1)).expect("encodes").expect("due");
    assert_eq!(next.rtp_time, 48_000);
}

#[test]
fn a_partial_frame_waits_one_frame_for_the_rest_then_goes_padded() {
    let start = Instant::now();
    let mut outbound = Outbound::new(24_000, false).expect("encoder");
    outbound.push(&tone(300.0, 24_000, 0.01));
    assert!(outbound.poll(start).expect("encodes").is_none(), "half a frame waits");
    assert_eq!(outbound.timeout(), Some(start + FRAME));
    outbound.push(&tone(300.0, 24_000, 0.01));
    assert!(outbound.poll(start + Duration::from_millis(5)).expect("encodes").is_some(), "whole now");
    outbound.push(&tone(300.0, 24_000, 0.005));
    assert!(outbound.poll(start + Duration::from_millis(39)).expect("encodes").is_none());
    let padded = outbound.poll(start + Duration::from_millis(40)).expect("encodes").expect("padded");
    assert_eq!(padded.rtp_time, 960);
    assert_eq!(outbound.queued(), 0);
}

#[test]
fn dtx_leaves_silence_unsent_but_the_clock_runs() {
    let start = Instant::now();
    let mut outbound = Outbound::new(16_000, true).expect("encoder");
    let mut audio = tone(300.0, 16_000, 0.2);
    audio.extend(std::iter::repeat_n(0, 16_000));
    audio.extend(tone(300.0, 16_000, 0.2));
    outbound.push(&audio);
    let sent = frames(&mut outbound, start, Duration::from_millis(1500));
    assert!(sent.len() < 50, "silence is mostly not sent: {} of 70 frames", sent.len());
    let last = sent.last().expect("frames");
    assert_eq!(last.rtp_time, 69 * 960, "the last frame keeps its place in time");
}

#[test]
fn loss_is_concealed_with_fec_and_plc_keeping_time() {
    let start = Instant::now();
    let mut outbound = Outbound::new(16_000, false).expect("encoder");
    outbound.push(&tone(500.0, 16_000, 1.0));
    let sent = frames(&mut outbound, start, Duration::from_millis(1100));
    let mut inbound = Inbound::new(16_000).expect("decoder");
    let mut arrived = on_time();
    for (seq, frame) in sent.iter().enumerate() {
        // Lose every 10th packet, and three in a row once.
        if seq % 10 == 5 || (20..23).contains(&seq) {
            continue;
        }
        inbound.packet(arrived(), seq as u64, frame.rtp_time, &frame.packet);
    }
    let pcm = inbound.take();
    let stats = inbound.stats();
    assert_eq!(stats.lost, 8);
    assert!(stats.fec_samples > 0 && stats.concealed_samples > 0, "{stats:?}");
    assert!((15_800..=16_000).contains(&pcm.len()), "no time lost: {}", pcm.len());
    let hz = pitch(&pcm[3_200..15_000], 16_000);
    assert!((hz - 500.0).abs() < 15.0, "pitch {hz}");
}

#[test]
fn dtx_pauses_are_filled_long_gaps_are_not_and_late_packets_are_dropped() {
    let mut outbound = Outbound::new(16_000, false).expect("encoder");
    outbound.push(&tone(500.0, 16_000, 0.1));
    let sent = frames(&mut outbound, Instant::now(), Duration::from_millis(100));
    let mut inbound = Inbound::new(16_000).expect("decoder");
    let mut arrived = on_time();
    inbound.packet(arrived(), 10, 0, &sent[0].packet);
    // Consecutive sequence numbers, 200 ms later: a DTX pause, filled.
    inbound.packet(arrived(), 11, 960 + 9_600, &sent[1].packet);
    assert_eq!(inbound.take().len(), 320 * 12);
    assert_eq!(inbound.stats().lost, 0);
    // Two seconds later: not filled, the stream goes on from there.
    inbound.packet(arrived(), 12, 960 * 12 + 96_000, &sent[2].packet);
    assert_eq!(inbound.take().len(), 320);
    // An older packet, and a repeat: dropped.
    inbound.packet(arrived(), 11, 960, &sent[3].packet);
    inbound.packet(arrived(), 12, 960 * 12 + 96_000, &sent[2].packet);
    assert_eq!(inbound.take().len(), 0);
    assert_eq!(inbound.stats().dropped, 2);
    // Garbage is concealed, not fatal.
    inbound.packet(arrived(), 13, 960 * 13 + 96_000, &[0xff; 3]);
    assert_eq!(inbound.take().len(), 320);
}

/// A sender that starts its stream again — its sequence numbers far behind, or its RTP time
/// gone back while the numbers go on (a new SSRC after renegotiation, a restarted encoder) —
/// is heard from its first packet on; before, every packet after it was dropped as late.
#[test]
fn a_stream_started_again_is_heard_at_once() {
    let mut outbound = Outbound::new(16_000, false).expect("encoder");
    outbound.push(&tone(500.0, 16_000, 0.2));
    let sent = frames(&mut outbound, Instant::now(), Duration::from_millis(200));
    let mut inbound = Inbound::new(16_000).expect("decoder");
    let mut arrived = on_time();
    let base = 5_000_000;
    for (i, frame) in sent[..4].iter().enumerate() {
        inbound.packet(arrived(), 40_000 + i as u64, base + frame.rtp_time, &frame.packet);
    }
    assert_eq!(inbound.take().len(), 4 * 320);
    // The numbers go on, the clock went back by a minute.
    inbound.packet(arrived(), 40_004, base - 48_000 * 60, &sent[4].packet);
    inbound.packet(arrived(), 40_005, base - 48_000 * 60 + 960, &sent[5].packet);
    assert_eq!(inbound.take().len(), 2 * 320, "heard at once");
    // Numbers and clock both far behind (a new stream from its own random start).
    inbound.packet(arrived(), 7, 1_000, &sent[6].packet);
    inbound.packet(arrived(), 8, 1_960, &sent[7].packet);
    assert_eq!(inbound.take().len(), 2 * 320, "heard at once");
    let stats = inbound.stats();
    assert_eq!((stats.restarts, stats.lost, stats.dropped), (2, 0, 0), "{stats:?}");
    // Late and repeated packets of the stream as it is now are still dropped.
    inbound.packet(arrived(), 6, 40, &sent[5].packet);
    inbound.packet(arrived(), 8, 1_960, &sent[7].packet);
    assert_eq!(inbound.take().len(), 0);
    assert_eq!(inbound.stats().dropped, 2);
}

/// Where the end of a caller's phrase lands after Opus, in the 20 ms frames the runtime (and
/// the simulator's turn detector) hears: the encoder's look-ahead (6.5 ms, libopus's at every
/// rate, a browser's too) delays the decoded audio, so a phrase that ends on a packet's
/// boundary leaves its last 6.5 ms in the next packet, which a frame-based detector then
/// counts as voiced: the silence that ends the turn starts a packet (20 ms) later than the
/// caller's. A phrase that ends 6.5 ms or more before a boundary keeps its frame. The
/// `webrtc` benchmark's turns ended on a boundary every time (its +20 ms, BENCHMARKS.md).
#[test]
fn the_codec_look_ahead_moves_a_phrase_end_on_a_packet_boundary_into_the_next_packet() {
    const THRESHOLD: f64 = 500.0; // the simulator's default RMS for a voiced frame
    let voiced = |phrase_ms: usize| -> (Vec<bool>, usize) {
        // A browser encodes at 48 kHz; the edge decodes to the runtime's 16 kHz.
        let mut encoder = opus::Encoder::new(48_000, opus::Channels::Mono, opus::Application::Voip).expect("encoder");
        let lookahead = encoder.get_lookahead().expect("look-ahead") as usize;
        let mut pcm: Vec<i16> = tone(500.0, 48_000, phrase_ms as f64 / 1000.0).iter().map(|s| s / 2).collect();
        pcm.resize(48 * 600, 0);
        let mut inbound = Inbound::new(16_000).expect("decoder");
        let mut arrived = on_time();
        for (seq, frame) in pcm.chunks_exact(FRAME_SAMPLES).enumerate() {
            let packet = encoder.encode_vec(frame, 1500).expect("encodes");
            inbound.packet(arrived(), seq as u64, (seq * FRAME_SAMPLES) as u64, &packet);
        }
        let decoded = inbound.take();
        let frames = decoded.chunks_exact(320).map(|f| rms(f) >= THRESHOLD).collect();
        (frames, lookahead)
    };
    let (frames, lookahead) = voiced(300);
    assert_eq!(lookahead, 312, "6.5 ms at 48 kHz");
    let last = frames.iter().rposition(|&v| v).expect("a voiced frame");
    assert_eq!(last, 15, "a 300 ms phrase (frames 0-14) is still heard in frame 15: {frames:?}");
    // Ending 10 ms before the boundary, its tail stays in its own frame.
    let (frames, _) = voiced(290);
    assert_eq!(frames.iter().rposition(|&v| v), Some(14), "{frames:?}");
}

#[test]
fn only_the_protocols_rates_are_taken() {
    assert!(matches!(Inbound::new(44_100), Err(AudioError::Rate { rate: 44_100 })));
    assert!(matches!(Outbound::new(11_025, false), Err(AudioError::Rate { .. })));
    for rate in RUNTIME_RATES {
        assert!(Inbound::new(rate).is_ok() && Outbound::new(rate, false).is_ok());
    }
}

/// The 48 kHz <-> runtime resamplers (the core's polyphase FIR) keep speech and remove
/// what the lower rate cannot hold: their frequency response at a few points.
#[test]
fn the_resamplers_pass_speech_and_stop_aliases() {
    let gain = |from: u32, to: u32, hz: f64| {
        let mut resampler = resampler(from, to).expect("rate");
        let mut out = Vec::new();
        resampler.process(&tone(hz, from, 0.5), &mut out);
        rms(&out[out.len() / 4..]) / (16_000.0 / 2f64.sqrt())
    };
    for (from, to) in [(48_000, 16_000), (48_000, 8_000), (24_000, 48_000), (16_000, 48_000)] {
        let pass = gain(from, to, 1_000.0);
        assert!((0.97..1.03).contains(&pass), "{from}->{to} at 1 kHz: {pass}");
    }
    let stop = gain(48_000, 16_000, 12_000.0);
    assert!(stop < 0.001, "12 kHz folds into 16 kHz audio: {stop}");
    let stop = gain(48_000, 8_000, 6_000.0);
    assert!(stop < 0.001, "6 kHz folds into 8 kHz audio: {stop}");
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// One thing done to an [`Outbound`].
    #[derive(Clone, Debug)]
    enum Op {
        /// PCM of this many milliseconds.
        Push(u16),
        Flush,
        /// Time passes by this many milliseconds, polling every millisecond.
        Wait(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![(1u16..400).prop_map(Op::Push), Just(Op::Flush), (0u16..200).prop_map(Op::Wait)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the agent sends and however barge-in cuts it: frames leave in order, never
        /// before they are due, never two for one 20 ms slot, never after a flush until new audio.
        #[test]
        fn reply_audio_stays_in_real_time(ops in prop::collection::vec(op(), 1..30)) {
            let start = Instant::now();
            let mut now = start;
            let mut outbound = Outbound::new(24_000, false).expect("encoder");
            let mut last: Option<Frame> = None;
            for op in ops {
                match op {
                    Op::Push(ms) => outbound.push(&tone(300.0, 24_000, f64::from(ms) / 1000.0)),
                    Op::Flush => {
                        outbound.flush();
                        prop_assert_eq!(outbound.queued(), 0);
                        prop_assert!(outbound.poll(now).expect("encodes").is_none());
                    }
                    Op::Wait(ms) => for _ in 0..ms {
                        now += Duration::from_millis(1);
                        while let Some(frame) = outbound.poll(now).expect("encodes") {
                            prop_assert!(frame.due <= now);
                            if let Some(last) = &last {
                                prop_assert!(frame.due >= last.due + FRAME, "one frame per slot");
                                prop_assert!(frame.rtp_time >= last.rtp_time + 960);
                            }
                            last = Some(frame);
                        }
                        if let Some(at) = outbound.timeout() {
                            prop_assert!(at + FRAME >= now, "a timeout is never long past");
                        }
                    },
                }
            }
        }

        /// Packets in any order, repeated or missing: no panic, and the caller's audio never
        /// runs ahead of the stream's own time.
        #[test]
        fn caller_audio_never_outruns_the_stream(
            arrivals in prop::collection::vec(0u64..60, 1..80),
            jump in 0u64..3,
        ) {
            let mut outbound = Outbound::new(16_000, false).expect("encoder");
            outbound.push(&tone(500.0, 16_000, 1.2));
            let sent = frames(&mut outbound, Instant::now(), Duration::from_millis(1300));
            let mut inbound = Inbound::new(16_000).expect("decoder");
            let mut arrived = on_time();
            let mut total = 0usize;
            let mut newest = 0u64;
            for index in arrivals {
                let Some(frame) = sent.get(index as usize) else { continue };
                // A DTX-like jump of the sender's clock (0-2 s) after packet 30.
                let time = frame.rtp_time + jump * 48_000 * u64::from(index > 30);
                inbound.packet(arrived(), index, time, &frame.packet);
                total += inbound.take().len();
                newest = newest.max(time + 960);
            }
            // 16 kHz is a third of the RTP clock; one frame of filter and rounding slack.
            prop_assert!(total as u64 <= newest / 3 + 320, "{total} samples for {newest} at 48 kHz");
        }
    }
}
