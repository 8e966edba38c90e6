//! The encoder's complexity and look-ahead: what lower complexities cost in quality, on a
//! synthetic voice (pitch, formants, syllables and pauses, a fricative now and then), and
//! what they save in CPU (an `--ignored` benchmark, BENCHMARKS.md's `webrtc` section).
//!
//! Quality is measured as the segmental SNR of the decoded audio against what was encoded
//! (the decoder's output shifted back by the encoder's look-ahead): a waveform measure,
//! which a speech codec's perceptual tuning does not maximise, so it says whether a
//! complexity loses accuracy, not how a listener would score it. SILK at voice bitrates
//! gives 10-20 dB here.

use super::*;

/// A synthetic voice at `rate`, `seconds` long, peak about 12,000: a glottal pulse train
/// (pitch gliding 110-230 Hz) through three formant resonators that move between five
/// vowels, in syllables of 200 ms with 60 ms pauses; every fifth syllable is a fricative
/// (noise through a high resonance). Deterministic.
pub(crate) fn voice(rate: u32, seconds: f64) -> Vec<i16> {
    const VOWELS: [[f64; 3]; 5] = [
        [730.0, 1090.0, 2440.0],
        [270.0, 2290.0, 3010.0],
        [300.0, 870.0, 2240.0],
        [530.0, 1840.0, 2480.0],
        [660.0, 1720.0, 2410.0],
    ];
    let fs = f64::from(rate);
    let n = (fs * seconds) as usize;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut noise = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    // Two-pole resonators: (state y1, y2).
    let mut states = [[0.0f64; 2]; 4];
    let resonate = |state: &mut [f64; 2], x: f64, hz: f64, bandwidth: f64| {
        let r = (-std::f64::consts::PI * bandwidth / fs).exp();
        let (a1, a2) = (2.0 * r * (2.0 * std::f64::consts::PI * hz / fs).cos(), -r * r);
        let y = x * (1.0 - r) * 2.0 + a1 * state[0] + a2 * state[1];
        state[1] = state[0];
        state[0] = y;
        y
    };
    let (syllable, pause) = (0.2, 0.06);
    let mut phase = 0.0;
    let mut glottis = 0.0;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = i as f64 / fs;
        let index = (t / (syllable + pause)) as usize;
        let within = t - index as f64 * (syllable + pause);
        let envelope = if within < syllable { (std::f64::consts::PI * within / syllable).sin().powf(0.5) } else { 0.0 };
        let x = if index % 5 == 4 {
            resonate(&mut states[3], noise(), 4_000.0_f64.min(fs * 0.4), 1_500.0) * 0.6
        } else {
            let pitch = 170.0 + 60.0 * (2.0 * std::f64::consts::PI * 0.7 * t).sin();
            phase += pitch / fs;
            // A pulse per period, smoothed (the glottis is no impulse), and a breath of noise.
            let pulse = if phase >= 1.0 {
                phase -= 1.0;
                1.0
            } else {
                0.0
            };
            glottis = 0.7 * glottis + pulse;
            let (from, to) = (VOWELS[index % 5], VOWELS[(index + 1) % 5]);
            let blend = within / (syllable + pause);
            let mut y = glottis * 40.0 + noise() * 0.02;
            for (k, state) in states.iter_mut().take(3).enumerate() {
                let hz = from[k] + (to[k] - from[k]) * blend;
                y = resonate(state, y, hz, 80.0 + 40.0 * k as f64);
            }
            y
        };
        out.push(x * envelope);
    }
    let peak = out.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-9);
    out.iter().map(|x| (x / peak * 12_000.0) as i16).collect()
}

/// `pcm` at its encoder's rate through `complexity` and back: the decoded audio and the
/// encoder's look-ahead in samples.
fn through(rate: u32, complexity: u8, pcm: &[i16]) -> (Vec<i16>, usize) {
    let mut encoder = VoiceEncoder::new(rate, &EncoderSettings::default()).expect("encoder");
    encoder.set_complexity(complexity).expect("complexity");
    assert_eq!(encoder.complexity().expect("complexity"), complexity);
    let lookahead = encoder.lookahead().expect("look-ahead");
    let mut decoder = VoiceDecoder::new(rate).expect("decoder");
    let mut out = Vec::with_capacity(pcm.len());
    for frame in pcm.chunks_exact(rate as usize / 50) {
        let packet = encoder.encode(frame).expect("encodes");
        out.extend_from_slice(decoder.decode(&packet, 20).pcm);
    }
    (out, lookahead)
}

/// Segmental SNR (dB) of `decoded` against `source`, `decoded` shifted back by `lag`
/// samples: the mean over 20 ms segments that are not near silence of each segment's SNR,
/// clamped to [-10, 35] dB (the usual bounds, so a silent or perfect segment does not
/// dominate).
fn segmental_snr(source: &[i16], decoded: &[i16], lag: usize, rate: u32) -> f64 {
    let segment = rate as usize / 50;
    let decoded = &decoded[lag.min(decoded.len())..];
    let length = source.len().min(decoded.len());
    let (mut sum, mut count) = (0.0, 0);
    for start in (0..length.saturating_sub(segment)).step_by(segment) {
        let (x, y) = (&source[start..start + segment], &decoded[start..start + segment]);
        let signal: f64 = x.iter().map(|&s| f64::from(s).powi(2)).sum();
        if signal / segment as f64 <= 300.0f64.powi(2) {
            continue;
        }
        let error: f64 = x.iter().zip(y).map(|(&a, &b)| (f64::from(a) - f64::from(b)).powi(2)).sum();
        sum += (10.0 * (signal / error.max(1.0)).log10()).clamp(-10.0, 35.0);
        count += 1;
    }
    sum / f64::from(count.max(1))
}

/// Log-spectral distance (dB) of `decoded` against `source` (`decoded` shifted back by
/// `lag`): over the 20 ms frames that are not near silence, the RMS over frequency of the
/// difference of their Hann-windowed power spectra in dB (each floored 40 dB below the
/// frame's peak), averaged. Blind to phase, which a speech codec does not keep: what it
/// measures is how far the spectrum a listener hears is from the source's. Lower is better.
fn log_spectral_distance(source: &[i16], decoded: &[i16], lag: usize, rate: u32) -> f64 {
    let n = rate as usize / 50;
    let decoded = &decoded[lag.min(decoded.len())..];
    let length = source.len().min(decoded.len());
    let window: Vec<f64> =
        (0..n).map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos()).collect();
    // Twiddles for a plain DFT of the lower half (the frames are short; no FFT needed).
    let bins = n / 2;
    let (cos, sin): (Vec<f64>, Vec<f64>) = (0..n * bins)
        .map(|k| {
            let angle = 2.0 * std::f64::consts::PI * (k / n) as f64 * (k % n) as f64 / n as f64;
            (angle.cos(), angle.sin())
        })
        .unzip();
    let power = |frame: &[i16]| -> Vec<f64> {
        (0..bins)
            .map(|bin| {
                let (mut re, mut im) = (0.0, 0.0);
                for (i, (&s, w)) in frame.iter().zip(&window).enumerate() {
                    let x = f64::from(s) * w;
                    re += x * cos[bin * n + i];
                    im -= x * sin[bin * n + i];
                }
                re * re + im * im
            })
            .collect()
    };
    let (mut sum, mut count) = (0.0, 0);
    for start in (0..length.saturating_sub(n)).step_by(n) {
        let x = &source[start..start + n];
        if x.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / n as f64 <= 300.0f64.powi(2) {
            continue;
        }
        let (px, py) = (power(x), power(&decoded[start..start + n]));
        let floor = px.iter().fold(0.0f64, |m, &p| m.max(p)) * 1e-4;
        let squares: f64 =
            px.iter().zip(&py).map(|(&a, &b)| (10.0 * (a.max(floor) / b.max(floor)).log10()).powi(2)).sum();
        sum += (squares / bins as f64).sqrt();
        count += 1;
    }
    sum / f64::from(count.max(1))
}

#[test]
fn the_look_ahead_is_six_and_a_half_milliseconds_at_every_rate() {
    for rate in [16_000, 24_000, 48_000] {
        let mut encoder = VoiceEncoder::new(rate, &EncoderSettings::default()).expect("encoder");
        let samples = encoder.lookahead().expect("look-ahead");
        assert_eq!(samples * 2_000, 13 * rate as usize, "{rate} Hz: {samples} samples");
        assert_eq!(encoder.complexity().expect("complexity"), 9, "libopus 1.6's default");
        // More than 10 is 10.
        encoder.set_complexity(42).expect("clamped");
        assert_eq!(encoder.complexity().expect("complexity"), MAX_COMPLEXITY);
    }
}

/// The decoded audio lags the source by the look-ahead: the voice lines up best there.
#[test]
fn decoded_audio_lags_by_the_look_ahead() {
    let source = voice(24_000, 2.0);
    let (decoded, lookahead) = through(24_000, MAX_COMPLEXITY, &source);
    let best = (0..240).max_by(|&a, &b| {
        let snr = |lag| segmental_snr(&source, &decoded, lag, 24_000);
        snr(a).total_cmp(&snr(b))
    });
    let best = best.expect("a lag");
    assert!(best.abs_diff(lookahead) <= 4, "the decoded voice lines up at the look-ahead ({lookahead}): {best}");
}

/// Quality by complexity at the reply's rate (24 kHz) and a caller's (16 kHz), printed:
/// segmental SNR (a waveform measure: SILK's noise shaping at higher complexities trades it
/// away on purpose, so it is no ranking) and log-spectral distance (what the spectrum keeps).
/// The edge's default ([`DEFAULT_TEST_COMPLEXITY`]) keeps the voice's spectrum within
/// 0.5 dB of complexity 10's.
#[test]
fn lower_complexities_keep_a_voice() {
    for rate in [24_000, 16_000] {
        let source = voice(rate, 3.0);
        let measure = |complexity| {
            let (decoded, lookahead) = through(rate, complexity, &source);
            let snr = segmental_snr(&source, &decoded, lookahead, rate);
            (snr, log_spectral_distance(&source, &decoded, lookahead, rate))
        };
        let figures: Vec<(u8, (f64, f64))> = COMPLEXITIES.iter().copied().map(|c| (c, measure(c))).collect();
        println!(
            "{rate} Hz, complexity: segmental SNR / log-spectral distance: {}",
            figures.iter().map(|(c, (s, l))| format!("{c}: {s:.2} / {l:.2} dB")).collect::<Vec<_>>().join(", ")
        );
        let at = |c: u8| figures.iter().find(|(k, _)| *k == c).map_or((0.0, f64::MAX), |(_, f)| *f);
        assert!(at(10).1 < 6.0, "{rate} Hz: complexity 10 keeps the voice's spectrum: {:?}", at(10));
        let chosen = at(DEFAULT_TEST_COMPLEXITY);
        assert!(
            chosen.1 < at(10).1 + 0.5,
            "{rate} Hz: complexity {DEFAULT_TEST_COMPLEXITY} {chosen:?} against 10's {:?}",
            at(10)
        );
    }
}

/// The complexities measured: every one when `SWITCHBOARD_OPUS_ALL_COMPLEXITIES` is set (the
/// figures in BENCHMARKS.md), else a few (the test's own).
static COMPLEXITIES: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    if std::env::var_os("SWITCHBOARD_OPUS_ALL_COMPLEXITIES").is_some() {
        (0..=10).rev().collect()
    } else {
        vec![10, 9, 5, 4, 0]
    }
});

/// The complexity the WebRTC edge encodes replies at by default (its crate holds the
/// setting; this crate does not depend on it).
const DEFAULT_TEST_COMPLEXITY: u8 = 5;

/// CPU time of this thread (Linux's schedstat), if it can be read.
fn thread_cpu() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok().map(std::time::Duration::from_nanos)
}

/// What encoding a 20 ms frame costs by complexity (BENCHMARKS.md, `webrtc`): a minute of the
/// synthetic voice at 24 kHz (the reply's rate) with the edge's settings (FEC for 10 % loss),
/// each complexity three times in turn; CPU time of this thread. Run with `--release`.
#[test]
#[ignore = "a benchmark: cargo test -p switchboard-opus --release --lib -- --ignored --nocapture encoder_cost"]
fn encoder_cost() {
    let rate = 24_000;
    let source = voice(rate, 60.0);
    let frames: Vec<&[i16]> = source.chunks_exact(rate as usize / 50).collect();
    let complexities = [10u8, 9, 8, 7, 6, 5, 3, 1, 0];
    for round in 1..=3 {
        let mut line = Vec::new();
        for &complexity in &complexities {
            let mut encoder = VoiceEncoder::new(rate, &EncoderSettings::default()).expect("encoder");
            encoder.set_complexity(complexity).expect("complexity");
            let (cpu, wall) = (thread_cpu(), std::time::Instant::now());
            let mut bytes = 0;
            for frame in &frames {
                bytes += encoder.encode(frame).expect("encodes").len();
            }
            let spent = thread_cpu().zip(cpu).map_or(wall.elapsed(), |(b, a)| b - a);
            let per_frame = spent.as_secs_f64() * 1e6 / frames.len() as f64;
            let kbits = bytes as f64 * 8.0 / 60.0 / 1000.0;
            line.push(format!(
                "{complexity}: {per_frame:.1} µs ({:.3} % of a core, {kbits:.1} kbit/s)",
                per_frame / 200.0
            ));
        }
        println!("round {round}: CPU per 20 ms frame at 24 kHz by complexity: {}", line.join("; "));
    }
}
