//! AMD on synthetic audio: tones, noise bursts and speech-like signals (harmonics of a
//! voice's pitch under a syllable envelope, words apart by short gaps).

use std::time::Duration;

use super::beep::{Tone, tonality, zero_crossing_frequency};
use super::*;

const RATE: f64 = 8000.0;

fn ms(n: u64) -> usize {
    (n * 8) as usize
}

fn silence(millis: u64) -> Vec<i16> {
    vec![0; ms(millis)]
}

fn sine(hz: f64, millis: u64, amplitude: f64) -> Vec<i16> {
    (0..ms(millis))
        .map(|i| (amplitude * 32767.0 * (2.0 * std::f64::consts::PI * hz * i as f64 / RATE).sin()) as i16)
        .collect()
}

/// Deterministic white noise (an LCG), at `amplitude` of full scale.
fn noise(millis: u64, amplitude: f64, seed: u64) -> Vec<i16> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..ms(millis))
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let unit = ((state >> 33) as f64 / f64::from(u32::MAX >> 1)) * 2.0 - 1.0;
            (unit * amplitude * 32767.0) as i16
        })
        .collect()
}

/// Speech-like sound: harmonics of a 130 Hz voice, the pitch wandering ±15 Hz, under a
/// 4 Hz syllable envelope; words of `word` ms apart by `gap` ms of silence, for `millis`.
fn speech(millis: u64, word: u64, gap: u64) -> Vec<i16> {
    let mut out = Vec::with_capacity(ms(millis));
    let mut phase = 0.0f64;
    let mut t = 0usize;
    while out.len() < ms(millis) {
        let in_word = (out.len() % ms(word + gap)) < ms(word);
        if !in_word {
            out.push(0);
            t += 1;
            continue;
        }
        let seconds = t as f64 / RATE;
        let pitch = 130.0 + 15.0 * (2.0 * std::f64::consts::PI * 0.7 * seconds).sin();
        phase += 2.0 * std::f64::consts::PI * pitch / RATE;
        let envelope = 0.35 + 0.65 * (2.0 * std::f64::consts::PI * 4.0 * seconds).sin().abs();
        let voiced: f64 = [(1.0, 0.5), (2.0, 0.8), (3.0, 0.6), (5.0, 0.35), (7.0, 0.2), (11.0, 0.1)]
            .iter()
            .map(|(h, a)| a * (h * phase).sin())
            .sum();
        out.push((0.2 * 32767.0 * envelope * voiced / 2.5) as i16);
        t += 1;
    }
    out.truncate(ms(millis));
    out
}

fn join(parts: &[Vec<i16>]) -> Vec<i16> {
    parts.concat()
}

/// Feeds `audio` in 20 ms frames; the verdict and when it came (ms after the answer).
fn detect(audio: &[i16]) -> Option<(Verdict, u64)> {
    let mut detector = Detector::new(AmdConfig::default());
    for frame in audio.chunks(160) {
        if let Some(verdict) = detector.push(frame) {
            return Some((verdict, detector.elapsed().as_millis() as u64));
        }
    }
    None
}

/// Feeds `audio` to a waiter; when the message may start (ms after the machine verdict).
fn wait_for_beep(audio: &[i16]) -> Option<(MessageStart, u64)> {
    let mut waiter = BeepWaiter::new(AmdConfig::default());
    for frame in audio.chunks(160) {
        if let Some(start) = waiter.push(frame) {
            return Some((start, waiter.elapsed().as_millis() as u64));
        }
    }
    None
}

#[test]
fn a_frames_frequency_comes_from_its_zero_crossings() {
    for hz in [400.0, 440.0, 1000.0, 1400.0, 1975.0] {
        let frame = sine(hz, 20, 0.5);
        let found = zero_crossing_frequency(&frame).expect("a frequency");
        assert!((found - hz).abs() < hz * 0.005, "{hz} Hz read as {found}");
        assert!(tonality(&frame, found) > 0.95, "{hz} Hz: tonality {}", tonality(&frame, found));
    }
    assert_eq!(zero_crossing_frequency(&silence(20)), None);
}

#[test]
fn a_sine_is_a_tone_and_noise_or_speech_is_not() {
    let tone = Tone::of(&sine(1000.0, 20, 0.3)).expect("a tone");
    assert!((tone.frequency - 1000.0).abs() < 5.0, "{tone:?}");
    for (i, frame) in noise(400, 0.3, 7).chunks(160).enumerate() {
        assert_eq!(Tone::of(frame), None, "noise frame {i} read as a tone");
    }
    let voice = speech(1000, 400, 100);
    let tones = voice.chunks(160).filter(|f| Tone::of(f).is_some()).count();
    assert_eq!(tones, 0, "speech is no tone");
}

#[test]
fn a_short_greeting_then_silence_is_a_person() {
    // "Hello?" (600 ms) after a short pause, then silence: a person waits for the caller.
    let audio = join(&[silence(400), speech(600, 250, 80), silence(3000)]);
    let (verdict, at) = detect(&audio).expect("a verdict");
    assert_eq!(verdict, Verdict::Human);
    // 400 + 600 ms of greeting, then 800 ms of silence settle it.
    assert!((1750..=1900).contains(&at), "decided at {at} ms");
    // A longer greeting with pauses between words shorter than 800 ms is still a person.
    let audio = join(&[speech(1000, 300, 150), silence(500), speech(700, 300, 150), silence(2000)]);
    assert_eq!(detect(&audio).map(|(v, _)| v), Some(Verdict::Human));
    // The phrase tone the test phones say is a short greeting too.
    let audio = join(&[silence(500), sine(500.0, 1500, 0.5), silence(2000)]);
    assert_eq!(detect(&audio).map(|(v, _)| v), Some(Verdict::Human));
}

#[test]
fn a_long_monologue_is_a_machine() {
    // "Hi, you've reached Ada, I can't take your call..." words with short gaps, for 6 s.
    let audio = join(&[silence(300), speech(6000, 350, 120)]);
    let (verdict, at) = detect(&audio).expect("a verdict");
    assert_eq!(verdict, Verdict::Machine);
    assert!((2800..=2900).contains(&at), "decided 2.5 s after the speech began: {at} ms");
    // Noise bursts without pauses count as a long greeting too (music on a machine).
    let audio = join(&[noise(4000, 0.2, 3)]);
    assert_eq!(detect(&audio).map(|(v, _)| v), Some(Verdict::Machine));
}

#[test]
fn silence_or_clicks_are_unknown() {
    let (verdict, at) = detect(&silence(6000)).expect("a verdict");
    assert_eq!((verdict, at), (Verdict::Unknown, 3500));
    // Clicks (40 ms noise bursts) are not words: never a person, unknown at the timeout.
    let mut clicks = Vec::new();
    for seed in 0..10 {
        clicks.extend(noise(40, 0.3, seed));
        clicks.extend(silence(960));
    }
    let (verdict, at) = detect(&clicks).expect("a verdict");
    assert_eq!((verdict, at), (Verdict::Unknown, 5000));
    // Quiet line noise under the threshold is silence.
    assert_eq!(detect(&noise(6000, 0.005, 9)).map(|(v, _)| v), Some(Verdict::Unknown));
}

#[test]
fn the_message_starts_when_the_beep_ends() {
    // The rest of the greeting (1.5 s), a pause, the beep (1000 Hz, 400 ms), then silence.
    let audio = join(&[speech(1500, 350, 120), silence(300), sine(1000.0, 400, 0.4), silence(3000)]);
    let (start, at) = wait_for_beep(&audio).expect("a start");
    match start {
        MessageStart::AfterBeep { frequency, length } => {
            assert!((frequency - 1000.0).abs() < 10.0, "{frequency}");
            assert!((380..=420).contains(&length.as_millis()), "{length:?}");
        }
        other => panic!("expected the beep, got {other:?}"),
    }
    assert!((2200..=2240).contains(&at), "the message starts as the beep ends: {at} ms");
}

#[test]
fn a_beep_needs_a_steady_frequency_in_its_band_and_its_length() {
    let after = |tone: Vec<i16>| wait_for_beep(&join(&[speech(800, 350, 120), tone, silence(3000)]));
    // Too short (100 ms), too low (250 Hz), a sweep (no steady frequency): no beep; the
    // message starts on the silence after them instead.
    for tone in [sine(1000.0, 100, 0.4), sine(250.0, 600, 0.4)] {
        assert!(matches!(after(tone), Some((MessageStart::Silence, _))));
    }
    let sweep: Vec<i16> = (0..10).flat_map(|i| sine(600.0 + 100.0 * f64::from(i), 40, 0.4)).collect();
    assert!(matches!(after(sweep), Some((MessageStart::Silence, _))));
    // Two beeps of another pitch back to back: the first ends when the second begins.
    let (start, _) = after(join(&[sine(800.0, 300, 0.4), sine(1400.0, 300, 0.4)])).expect("a start");
    assert!(
        matches!(start, MessageStart::AfterBeep { frequency, .. } if (frequency - 800.0).abs() < 10.0),
        "{start:?}"
    );
}

#[test]
fn no_beep_and_no_silence_is_the_timeout() {
    let config = AmdConfig { beep_timeout: Duration::from_secs(4), ..AmdConfig::default() };
    let mut waiter = BeepWaiter::new(config);
    let audio = speech(10_000, 350, 120);
    let started = audio.chunks(160).find_map(|f| waiter.push(f).map(|s| (s, waiter.elapsed())));
    assert_eq!(started, Some((MessageStart::Timeout, Duration::from_secs(4))));
}

#[test]
fn settings_that_cannot_work_are_refused() {
    assert_eq!(AmdConfig::default().check(), Ok(()));
    let bad = AmdConfig { speech_threshold: 0.0, ..AmdConfig::default() };
    assert!(matches!(bad.check(), Err(AmdConfigError::Threshold(_))));
    let bad = AmdConfig { beep_frequencies: 2000.0..=400.0, ..AmdConfig::default() };
    assert!(matches!(bad.check(), Err(AmdConfigError::Frequencies(_))));
    let bad = AmdConfig { greeting_max: Duration::from_secs(6), ..AmdConfig::default() };
    assert!(bad.check().unwrap_err().to_string().contains("decision timeout"));
    let bad = AmdConfig { beep_min: Duration::ZERO, ..AmdConfig::default() };
    assert!(matches!(bad.check(), Err(AmdConfigError::Durations(_))));
}
