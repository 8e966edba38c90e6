//! A streaming sample-rate converter for 16-bit mono audio between rates in a small
//! integer ratio (8, 16 and 24 kHz: 2/1, 3/1, 3/2 and their inverses): polyphase FIR,
//! a Kaiser-windowed sinc low-pass designed per conversion.
//!
//! Conceptually the input is upsampled by `L` (zeros between samples), low-pass filtered
//! below the lower of the two Nyquist frequencies, and downsampled by `M`; the polyphase
//! form computes only the output samples, each from `taps` input samples. The cut-off sits
//! at 90 % of the lower Nyquist frequency (3.6 kHz between 8 kHz and anything, 7.2 kHz
//! between 16 and 24 kHz) with [`ZERO_CROSSINGS`] sinc lobes each side and a Kaiser window
//! of β = [`KAISER_BETA`] (about 85 dB of stop-band attenuation): speech keeps its band
//! (telephony's 300-3400 Hz at 8 kHz) at unit gain, and what lies above the new Nyquist
//! frequency is removed instead of folding back as aliases.
//!
//! State carries over between calls (the last `taps - 1` input samples and the phase), so
//! audio converted frame by frame is the same as converted at once. The filter delays the
//! audio by half its length (about 1.5 ms at these rates).
//!
//! Each output sample is one contiguous dot product of the newest input samples with one
//! phase's taps, stored oldest sample first and zero-padded to a multiple of [`LANES`], summed
//! in [`LANES`] independent partial sums: the compiler turns that into SIMD multiply-adds
//! (strict IEEE arithmetic, no fast-math), several times faster than one ordered sum. The
//! rounding of the sum therefore differs from a sequential sum in the last bits of an `f32`.

/// Sinc lobes each side of the filter's centre.
pub const ZERO_CROSSINGS: usize = 24;
/// The Kaiser window's β.
pub const KAISER_BETA: f64 = 8.6;
/// The cut-off as a fraction of the lower Nyquist frequency.
pub const ROLLOFF: f64 = 0.9;
/// Independent partial sums of each output's dot product (and what each phase's taps are
/// padded to a multiple of): two SSE registers' worth. 16 was slower on this project's
/// x86-64 VM (more zero padding: 55 taps become 64 instead of 56).
pub const LANES: usize = 8;

/// A conversion from one sample rate to another.
#[derive(Clone, Debug)]
pub struct Resampler {
    up: usize,
    down: usize,
    /// Taps per phase, padded with zeros (at the oldest end) to a multiple of [`LANES`].
    taps: usize,
    /// Coefficients, phase after phase, `taps` each: `coefficients[p * taps + j]` weighs the
    /// input sample `taps - 1 - j` before the newest (oldest first, so a window of the buffer
    /// lines up with them).
    coefficients: Vec<f32>,
    /// The last `taps - 1` input samples, then the input not yet consumed.
    buffer: Vec<f32>,
    /// The next output's newest input sample (an index into `buffer`) and phase.
    newest: usize,
    phase: usize,
    /// By phase: how many input samples the next output moves on, and its phase (the
    /// output position advances by `down` in steps of `1 / up` of an input sample; a table
    /// instead of a division per output sample).
    steps: Vec<(usize, usize)>,
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The zeroth-order modified Bessel function of the first kind (power series).
fn bessel_i0(x: f64) -> f64 {
    let (mut sum, mut term, mut k) = (1.0, 1.0, 1.0);
    while term > sum * 1e-12 {
        term *= (x / (2.0 * k)).powi(2);
        sum += term;
        k += 1.0;
    }
    sum
}

/// The low-pass filter at the upsampled rate for a conversion by `up / down`: a multiple of
/// `up` coefficients, scaled so that every phase sums to one (unit gain at 0 Hz).
fn prototype(up: usize, down: usize) -> Vec<f64> {
    // Cut-off in cycles per sample of the upsampled signal.
    let cutoff = 0.5 / up.max(down) as f64 * ROLLOFF;
    let half = (ZERO_CROSSINGS as f64 / (2.0 * cutoff)).ceil() as usize;
    let length = (2 * half + 1).div_ceil(up) * up;
    let centre = (length - 1) as f64 / 2.0;
    let norm = bessel_i0(KAISER_BETA);
    let mut filter: Vec<f64> = (0..length)
        .map(|n| {
            let t = n as f64 - centre;
            let sinc = if t == 0.0 {
                1.0
            } else {
                (2.0 * std::f64::consts::PI * cutoff * t).sin() / (std::f64::consts::PI * t) / (2.0 * cutoff)
            };
            let r = t / (centre + 1.0);
            let window = bessel_i0(KAISER_BETA * (1.0 - r * r).max(0.0).sqrt()) / norm;
            sinc * window
        })
        .collect();
    // Zeros between samples cost 1/up of the gain.
    let sum: f64 = filter.iter().sum();
    filter.iter_mut().for_each(|c| *c *= up as f64 / sum);
    filter
}

/// `Σ window[j] · coefficients[j]` over slices of the same length, a multiple of [`LANES`],
/// in [`LANES`] partial sums added pairwise at the end.
fn dot(window: &[f32], coefficients: &[f32]) -> f32 {
    let (window, _) = window.as_chunks::<LANES>();
    let (coefficients, _) = coefficients.as_chunks::<LANES>();
    let mut sums = [0.0f32; LANES];
    for (x, h) in window.iter().zip(coefficients) {
        for lane in 0..LANES {
            sums[lane] += x[lane] * h[lane];
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for lane in 0..width {
            sums[lane] += sums[lane + width];
        }
    }
    sums[0]
}

/// `value` rounded half away from zero and saturated to `i16` (what
/// `value.round().clamp(..) as i16` gives, without a `roundf` call where SSE4.1 is not
/// assumed): an `f32` plus one half is exact in `f64`, and `as` truncates and saturates.
fn to_sample(value: f32) -> i16 {
    let value = f64::from(value);
    (value + 0.5f64.copysign(value)) as i16
}

impl Resampler {
    /// A converter from `from` Hz to `to` Hz; `None` unless both are positive and their
    /// ratio reduces to numbers of at most 8 (the filter bank stays small).
    pub fn new(from: u32, to: u32) -> Option<Self> {
        if from == 0 || to == 0 {
            return None;
        }
        let divisor = gcd(from, to);
        let (up, down) = ((to / divisor) as usize, (from / divisor) as usize);
        if up > 8 || down > 8 {
            return None;
        }
        let filter = prototype(up, down);
        let taps = (filter.len() / up).next_multiple_of(LANES);
        let mut coefficients = vec![0.0f32; up * taps];
        for (p, phase) in coefficients.chunks_exact_mut(taps).enumerate() {
            // Tap k (k samples before the newest) sits at `taps - 1 - k`; the padding stays 0.
            for (k, &c) in filter.iter().skip(p).step_by(up).enumerate() {
                phase[taps - 1 - k] = c as f32;
            }
        }
        let steps = (0..up).map(|p| ((p + down) / up, (p + down) % up)).collect();
        Some(Self { up, down, taps, coefficients, buffer: vec![0.0; taps - 1], newest: taps - 1, phase: 0, steps })
    }

    /// Whether the rates are the same (the audio passes unchanged).
    pub fn is_identity(&self) -> bool {
        self.up == self.down
    }

    /// Converts the next `input` samples; appends the output to `out` (about
    /// `input.len() * to / from` samples; the exact count depends on the phase).
    pub fn process(&mut self, input: &[i16], out: &mut Vec<i16>) {
        if self.is_identity() {
            out.extend_from_slice(input);
            return;
        }
        out.reserve(input.len() * self.up / self.down + 1);
        self.convert_each(input, |value| out.push(to_sample(value)));
    }

    /// Converts the next `input` samples (rates that differ), handing each output sample to
    /// `emit` before rounding.
    fn convert_each(&mut self, input: &[i16], mut emit: impl FnMut(f32)) {
        self.buffer.extend(input.iter().map(|&s| f32::from(s)));
        let taps = self.taps;
        let (mut newest, mut phase) = (self.newest, self.phase);
        while newest < self.buffer.len() {
            let window = &self.buffer[newest + 1 - taps..=newest];
            emit(dot(window, &self.coefficients[phase * taps..(phase + 1) * taps]));
            let (advance, next) = self.steps[phase];
            newest += advance;
            phase = next;
        }
        let consumed = self.buffer.len() - (taps - 1);
        self.buffer.drain(..consumed);
        (self.newest, self.phase) = (newest - consumed, phase);
    }
}

#[cfg(test)]
mod tests;
