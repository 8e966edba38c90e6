//! The voicemail beep: a pure tone at a steady frequency. Each frame's frequency is
//! estimated from its zero crossings (interpolated between samples, so a 20 ms frame gives
//! it to a few hertz), and the frame is a tone when a Goertzel filter at that frequency
//! holds nearly all its energy ([`TONALITY`]); speech and noise spread theirs. A run of
//! tone frames within [`STEADY`] of the run's frequency, inside the beep's band and long
//! enough, is a beep once it ends ([`ToneRun`]).

use std::ops::RangeInclusive;

use super::super::CLOCK_RATE;

/// The share of a frame's energy at its estimated frequency above which it is a tone. A
/// sine gives about 1.0; speech and noise well under 0.5.
pub const TONALITY: f64 = 0.8;

/// How far (a fraction) a frame's frequency may stray from the run's and still extend it.
pub const STEADY: f64 = 0.03;

/// A frame that is a pure tone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tone {
    /// Its frequency, in Hz.
    pub frequency: f64,
    /// The share of its energy at that frequency (0..1).
    pub tonality: f64,
}

impl Tone {
    /// The tone `frame` is, if it is one.
    pub fn of(frame: &[i16]) -> Option<Self> {
        let frequency = zero_crossing_frequency(frame)?;
        let tonality = tonality(frame, frequency);
        (tonality >= TONALITY).then_some(Self { frequency, tonality })
    }
}

/// The frequency of `frame` from the mean distance between its rising zero crossings
/// (positions interpolated linearly); `None` with fewer than two crossings.
pub fn zero_crossing_frequency(frame: &[i16]) -> Option<f64> {
    let mut first = None;
    let mut last = 0.0;
    let mut count = 0u32;
    for (i, pair) in frame.windows(2).enumerate() {
        let (a, b) = (f64::from(pair[0]), f64::from(pair[1]));
        if a < 0.0 && b >= 0.0 {
            let at = i as f64 + (-a / (b - a));
            first.get_or_insert(at);
            last = at;
            count += 1;
        }
    }
    let first = first?;
    if count < 2 || last <= first {
        return None;
    }
    let period = (last - first) / f64::from(count - 1);
    Some(f64::from(CLOCK_RATE) / period)
}

/// The share of `frame`'s energy at `frequency` (Goertzel): 2|X(f)|² / (N·Σx²), about 1
/// for a sine at `frequency`.
pub fn tonality(frame: &[i16], frequency: f64) -> f64 {
    let n = frame.len() as f64;
    let energy: f64 = frame.iter().map(|s| f64::from(*s) * f64::from(*s)).sum();
    if energy <= 0.0 || n == 0.0 {
        return 0.0;
    }
    let coefficient = 2.0 * (2.0 * std::f64::consts::PI * frequency / f64::from(CLOCK_RATE)).cos();
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for sample in frame {
        let s0 = f64::from(*sample) + coefficient * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    let power = s1 * s1 + s2 * s2 - coefficient * s1 * s2;
    (2.0 * power / (n * energy)).clamp(0.0, 1.0)
}

/// A beep heard whole.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Beep {
    /// Its frequency (the mean over its frames), in Hz.
    pub frequency: f64,
    /// Its length, in samples.
    pub samples: u64,
}

/// Consecutive tone frames at one frequency (see the module docs).
#[derive(Debug)]
pub struct ToneRun {
    band: RangeInclusive<f64>,
    min_samples: u64,
    /// The run so far: the sum of its frames' frequencies, their count, and its samples.
    run: Option<(f64, u32, u64)>,
}

impl ToneRun {
    /// Runs in `band` (Hz) of at least `min_samples` are beeps.
    pub fn new(band: RangeInclusive<f64>, min_samples: u64) -> Self {
        Self { band, min_samples, run: None }
    }

    /// Whether a tone is sounding now.
    pub fn is_running(&self) -> bool {
        self.run.is_some()
    }

    /// The next frame (`tone`: what [`Tone::of`] made of it; `samples`: its length);
    /// returns the beep that this frame ended, if one did.
    pub fn push(&mut self, tone: Option<Tone>, samples: u64) -> Option<Beep> {
        let tone = tone.filter(|t| self.band.contains(&t.frequency));
        match (tone, self.run.as_mut()) {
            (Some(tone), Some((sum, count, length))) => {
                let mean = *sum / f64::from(*count);
                if (tone.frequency - mean).abs() <= mean * STEADY {
                    *sum += tone.frequency;
                    *count += 1;
                    *length += samples;
                    return None;
                }
                // Another frequency: the run so far ends here, and a new one begins.
                let ended = self.end();
                self.run = Some((tone.frequency, 1, samples));
                ended
            }
            (Some(tone), None) => {
                self.run = Some((tone.frequency, 1, samples));
                None
            }
            (None, _) => self.end(),
        }
    }

    fn end(&mut self) -> Option<Beep> {
        let (sum, count, length) = self.run.take()?;
        (length >= self.min_samples).then(|| Beep { frequency: sum / f64::from(count), samples: length })
    }
}
