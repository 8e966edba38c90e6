use super::*;

/// A deterministic xorshift generator: uniform samples in [-1, 1).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// `ms` of 16 kHz samples: `tone` Hz at `amplitude` (0: none) plus white noise at `noise`
/// RMS.
fn signal(ms: usize, tone: f64, amplitude: f64, noise: f64, seed: u64) -> Vec<i16> {
    let mut rng = Noise(seed);
    (0..ms * 16)
        .map(|n| {
            let t = n as f64 / 16_000.0;
            let value = amplitude * (2.0 * std::f64::consts::PI * tone * t).sin() + noise * 3f64.sqrt() * rng.next();
            value.round().clamp(-32768.0, 32767.0) as i16
        })
        .collect()
}

fn bytes(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

fn samples(bytes: &[u8]) -> Vec<i16> {
    bytes.chunks_exact(2).map(|p| i16::from_le_bytes([p[0], p[1]])).collect()
}

fn rms(samples: &[i16]) -> f64 {
    (samples.iter().map(|&s| f64::from(s) * f64::from(s)).sum::<f64>() / samples.len().max(1) as f64).sqrt()
}

/// Runs `input` through a new suppressor in frames of `frame` samples.
fn denoise(input: &[i16], frame: usize) -> Vec<i16> {
    let mut suppressor = NoiseSuppressor::new();
    let mut out = Vec::new();
    for chunk in input.chunks(frame) {
        let mut pcm = bytes(chunk);
        suppressor.process(&mut pcm);
        out.extend(samples(&pcm));
    }
    out
}

#[test]
fn steady_noise_is_attenuated_and_a_tone_over_it_is_kept() {
    // Two seconds of noise alone, then a second of a phrase tone (900 Hz) over it.
    let mut input = signal(2000, 0.0, 0.0, 1500.0, 7);
    input.extend(signal(1000, 900.0, 8000.0, 1500.0, 8));
    let out = denoise(&input, 320);
    assert_eq!(out.len(), input.len(), "as many samples out as in");
    let noise_in = rms(&input[16_000..32_000]);
    let noise_out = rms(&out[16_000..32_000]);
    let tone_in = rms(&input[36_000..48_000]);
    let tone_out = rms(&out[36_000..48_000]);
    eprintln!("noise {noise_in:.0} -> {noise_out:.0}; tone {tone_in:.0} -> {tone_out:.0}");
    assert!(noise_out < noise_in / 4.0, "noise {noise_in:.0} -> {noise_out:.0}");
    assert!(tone_out > tone_in / 2.0, "tone {tone_in:.0} -> {tone_out:.0}");
}

#[test]
fn frames_of_any_length_come_out_the_same_length_at_a_constant_delay() {
    let input = signal(600, 700.0, 6000.0, 300.0, 3);
    let whole = denoise(&input, 320);
    for frame in [160, 320, 1600, 7, 333, 16_000] {
        let out = denoise(&input, frame);
        assert_eq!(out.len(), input.len(), "frames of {frame}");
        // Frames of whole chunks are not delayed; others by one chunk less a sample.
        let delay = if frame % CHUNK == 0 { 0 } else { CHUNK - 1 };
        assert!(out[..delay].iter().all(|&s| s == 0), "frames of {frame}: silence first");
        assert!(
            out[delay..] == whole[..whole.len() - delay],
            "frames of {frame}: the same audio, {delay} samples later"
        );
    }
}

#[test]
fn silence_stays_silent() {
    let out = denoise(&vec![0; 16_000], 320);
    assert!(out.iter().all(|&s| s.abs() <= 1), "silence in, silence out");
}

/// This thread's CPU time so far (Linux: `/proc/thread-self/schedstat`, nanoseconds on a
/// CPU), so a busy machine's waiting for a core is not counted; `None` elsewhere.
fn thread_cpu() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok().map(std::time::Duration::from_nanos)
}

/// What suppression costs per 20 ms frame (BENCHMARKS.md, `noise_suppression`): a minute
/// of a phrase tone in bursts over noise, in 20 ms frames, through a suppressor, against
/// the same frames with only their loudness measured (what the voice loop does to every
/// frame anyway), alternated three times; CPU time of this thread, and wall time. Run with
/// `--release`.
#[test]
#[ignore = "a benchmark: cargo test -p switchboard-audio --release --lib -- --ignored --nocapture noise_cost"]
fn noise_cost() {
    let mut audio = Vec::new();
    for second in 0..60 {
        let tone = if second % 3 == 0 { 900.0 } else { 0.0 };
        audio.extend(signal(1000, tone, 6000.0, 1200.0, second));
    }
    let frames: Vec<Vec<u8>> = audio.chunks(320).map(bytes).collect();
    let loudness = |pcm: &[u8]| rms(&samples(pcm));
    let count = frames.len() as f64;
    let per_frame = |d: std::time::Duration| d.as_secs_f64() * 1e6 / count;
    for round in 1..=3 {
        let (cpu, wall) = (thread_cpu(), std::time::Instant::now());
        let mut sum = 0.0;
        for frame in &frames {
            let pcm = frame.clone();
            sum += loudness(&pcm);
        }
        let (without_cpu, without_wall) = (thread_cpu().zip(cpu).map(|(b, a)| b - a), wall.elapsed());
        let mut suppressor = NoiseSuppressor::new();
        let (cpu, wall) = (thread_cpu(), std::time::Instant::now());
        let mut denoised = 0.0;
        for frame in &frames {
            let mut pcm = frame.clone();
            suppressor.process(&mut pcm);
            denoised += loudness(&pcm);
        }
        let (with_cpu, with_wall) = (thread_cpu().zip(cpu).map(|(b, a)| b - a), wall.elapsed());
        let cpu = |d: Option<std::time::Duration>| d.map_or("n/a".to_owned(), |d| format!("{:.1}", per_frame(d)));
        let added = with_cpu.zip(without_cpu).map(|(w, o)| per_frame(w) - per_frame(o));
        println!(
            "round {round}: {count} frames of 20 ms; CPU µs/frame without suppression {}, with {} \
             (+{}, {} % of a core per call); wall µs/frame {:.1} / {:.1}; mean loudness {:.0} -> {:.0}",
            cpu(without_cpu),
            cpu(with_cpu),
            added.map_or("n/a".to_owned(), |a| format!("{a:.1}")),
            added.map_or("n/a".to_owned(), |a| format!("{:.2}", a / 20_000.0 * 100.0)),
            per_frame(without_wall),
            per_frame(with_wall),
            sum / count,
            denoised / count,
        );
    }
}

/// `frames` of 20 ms: the line's faint hiss (RMS about 11, as a quiet phone line or the
/// tests' microphone has), then a 700 ms phrase tone of 800 Hz over the same hiss, then
/// 700 ms of hiss.
fn phrase_after(frames: usize, seed: u64) -> Vec<i16> {
    let mut rng = Noise(seed);
    let mut hiss = |n: usize| -> Vec<i16> { (0..n).map(|_| (rng.next() * 20.0) as i16).collect() };
    let mut input = hiss(frames * 320);
    let tone = signal(700, 800.0, 8000.0, 0.0, 1);
    let over = hiss(tone.len());
    input.extend(tone.iter().zip(over).map(|(t, h)| t.saturating_add(h)));
    input.extend(hiss(700 * 16));
    input
}

/// The frequency of the voiced 20 ms frames of `frames` as the simulator estimates it (it
/// hears phrase tones within 25 Hz): zero crossings of frames with RMS >= 500 over the
/// span from the first crossing to the last.
fn estimated_hz(frames: &[&[i16]]) -> f64 {
    let (mut crossings, mut first, mut last, mut voiced) = (0u64, None, 0u64, 0u64);
    let mut last_sign: Option<bool> = None;
    for frame in frames {
        if rms(frame) < 500.0 {
            last_sign = None;
            continue;
        }
        for (at, sample) in (voiced..).zip(frame.iter()) {
            let sign = *sample >= 0;
            if last_sign.is_some_and(|l| l != sign) {
                crossings += 1;
                first.get_or_insert(at);
                last = at;
            }
            last_sign = Some(sign);
        }
        voiced += frame.len() as u64;
    }
    let span = last.saturating_sub(first.unwrap_or(0)).max(1);
    crossings.saturating_sub(1) as f64 / 2.0 / (span as f64 / 16_000.0)
}

#[test]
fn a_calls_first_moments_are_as_quiet_as_its_later_ones() {
    // RNNoise starts cold: it passes a line's faint hiss nearly whole for its first second
    // and takes about two to learn it. What it leaves of a quiet moment is silence from
    // the first frame on, as it is once it has learned the hiss.
    let hiss = phrase_after(100, 9);
    let out = denoise(&hiss, 320);
    assert!(rms(&hiss[..16_000]) > 10.0, "the hiss is there: {:.1}", rms(&hiss[..16_000]));
    assert!(out[..32_000].iter().all(|&s| s == 0), "quiet, from the call's first frame");
}

#[test]
fn a_phrase_at_the_start_of_a_call_keeps_its_pitch() {
    // Issue 42's first request misheard: RNNoise's delay (about 13 ms) moves a phrase off
    // the 20 ms frame grid, so its first and last frames also hold the quiet around it;
    // while RNNoise was cold that quiet was hiss, whose zero crossings raised the pitch
    // the simulator heard from 800 Hz to 840-850 Hz, outside its 25 Hz.
    for frames in [0, 5, 25, 100] {
        let out = denoise(&phrase_after(frames, 9), 320);
        let frames_out: Vec<&[i16]> = out.chunks(320).skip(frames).take(40).collect();
        let hz = estimated_hz(&frames_out);
        assert!((hz - 800.0).abs() < 10.0, "after {frames} frames of hiss: {hz:.1} Hz");
    }
}
