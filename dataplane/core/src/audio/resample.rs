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

/// Sinc lobes each side of the filter's centre.
pub const ZERO_CROSSINGS: usize = 24;
/// The Kaiser window's β.
pub const KAISER_BETA: f64 = 8.6;
/// The cut-off as a fraction of the lower Nyquist frequency.
pub const ROLLOFF: f64 = 0.9;

/// A conversion from one sample rate to another.
#[derive(Clone, Debug)]
pub struct Resampler {
    up: usize,
    down: usize,
    taps: usize,
    /// Coefficients by phase: `phases[p][k]` weighs the input sample `k` before the newest.
    phases: Vec<Vec<f32>>,
    /// The last `taps - 1` input samples, then the input not yet consumed.
    buffer: Vec<f32>,
    /// The next output's position, in input samples times `up`, from the buffer's start.
    position: usize,
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
        // Cut-off in cycles per sample of the upsampled signal.
        let cutoff = 0.5 / up.max(down) as f64 * ROLLOFF;
        let half = (ZERO_CROSSINGS as f64 / (2.0 * cutoff)).ceil() as usize;
        let taps = (2 * half + 1).div_ceil(up);
        let length = taps * up;
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
        // Unit gain at 0 Hz: every phase sums to one (zeros between samples cost 1/up).
        let sum: f64 = filter.iter().sum();
        filter.iter_mut().for_each(|c| *c *= up as f64 / sum);
        let phases = (0..up).map(|p| (0..taps).map(|k| filter[p + k * up] as f32).collect()).collect();
        Some(Self { up, down, taps, phases, buffer: vec![0.0; taps - 1], position: (taps - 1) * up })
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
        self.buffer.extend(input.iter().map(|&s| f32::from(s)));
        out.reserve(input.len() * self.up / self.down + 1);
        while self.position / self.up < self.buffer.len() {
            let newest = self.position / self.up;
            let phase = &self.phases[self.position % self.up];
            let window = &self.buffer[newest + 1 - self.taps..=newest];
            let value: f32 = window.iter().rev().zip(phase).map(|(x, h)| x * h).sum();
            out.push(value.round().clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i16);
            self.position += self.down;
        }
        let consumed = self.buffer.len() - (self.taps - 1);
        self.buffer.drain(..consumed);
        self.position -= consumed * self.up;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(frequency: f64, rate: u32, seconds: f64, amplitude: f64) -> Vec<i16> {
        let count = (f64::from(rate) * seconds) as usize;
        (0..count)
            .map(|n| (amplitude * (2.0 * std::f64::consts::PI * frequency * n as f64 / f64::from(rate)).sin()) as i16)
            .collect()
    }

    /// The amplitude of the `frequency` component of `samples` (a single DFT bin over a
    /// whole number of its periods, after the filter's start-up).
    fn amplitude(samples: &[i16], rate: u32, frequency: f64) -> f64 {
        let skip = rate as usize / 20;
        let period = f64::from(rate) / frequency;
        let periods = ((samples.len() - 2 * skip) as f64 / period).floor();
        let count = (periods * period).round() as usize;
        let (mut re, mut im) = (0.0, 0.0);
        for (n, &s) in samples[skip..skip + count].iter().enumerate() {
            let phase = 2.0 * std::f64::consts::PI * frequency * n as f64 / f64::from(rate);
            re += f64::from(s) * phase.cos();
            im += f64::from(s) * phase.sin();
        }
        2.0 * (re * re + im * im).sqrt() / count as f64
    }

    fn convert(from: u32, to: u32, input: &[i16]) -> Vec<i16> {
        let mut resampler = Resampler::new(from, to).expect("a supported ratio");
        let mut out = Vec::new();
        resampler.process(input, &mut out);
        out
    }

    const RATES: [(u32, u32); 6] =
        [(8000, 16000), (16000, 8000), (16000, 24000), (24000, 16000), (8000, 24000), (24000, 8000)];

    #[test]
    fn speech_frequencies_pass_at_unit_gain() {
        for (from, to) in RATES {
            for frequency in [300.0, 1000.0, 3000.0] {
                let input = sine(frequency, from, 0.5, 10_000.0);
                let out = convert(from, to, &input);
                let expected = input.len() * to as usize / from as usize;
                assert!(out.len().abs_diff(expected) <= 1, "{from}->{to}: {} samples, expected {expected}", out.len());
                let gain = amplitude(&out, to, frequency) / 10_000.0;
                let db = 20.0 * gain.log10();
                assert!(db.abs() < 0.1, "{from}->{to} at {frequency} Hz: {db:.3} dB");
            }
        }
    }

    #[test]
    fn frequencies_above_the_new_nyquist_do_not_fold_back() {
        // (from, to, input tone, where it would alias to)
        for (from, to, tone, alias) in
            [(24000, 8000, 6000.0, 2000.0), (16000, 8000, 5000.0, 3000.0), (24000, 16000, 10_000.0, 6000.0)]
        {
            let out = convert(from, to, &sine(tone, from, 0.5, 20_000.0));
            let rejection = 20.0 * (amplitude(&out, to, alias) / 20_000.0).log10();
            assert!(rejection < -70.0, "{from}->{to}: a {tone} Hz tone folds to {alias} Hz at {rejection:.1} dB");
        }
    }

    #[test]
    fn upsampling_leaves_no_images() {
        // 1 kHz has images at the input rate ± 1 kHz once zeros are stuffed between samples
        // (16 -> 24 kHz: 15 and 17 kHz at 48 kHz, folding to 9 and 7 kHz).
        for (from, to, image) in [(8000, 16000, 7000.0), (8000, 24000, 9000.0), (16000, 24000, 7000.0)] {
            let out = convert(from, to, &sine(1000.0, from, 0.5, 20_000.0));
            let level = 20.0 * (amplitude(&out, to, image) / 20_000.0).log10();
            assert!(level < -70.0, "{from}->{to}: image at {image} Hz at {level:.1} dB");
        }
    }

    #[test]
    fn frame_by_frame_is_the_same_as_all_at_once() {
        for (from, to) in RATES {
            let input = sine(440.0, from, 0.3, 12_000.0);
            let whole = convert(from, to, &input);
            let mut resampler = Resampler::new(from, to).expect("supported");
            let mut framed = Vec::new();
            for frame in input.chunks(from as usize / 50 + 3) {
                resampler.process(frame, &mut framed);
            }
            assert_eq!(framed, whole, "{from}->{to}");
        }
    }

    #[test]
    fn the_same_rate_passes_unchanged_and_odd_ratios_are_refused() {
        let mut same = Resampler::new(16000, 16000).expect("identity");
        let mut out = Vec::new();
        same.process(&[1, -2, 3], &mut out);
        assert_eq!(out, vec![1, -2, 3]);
        assert!(Resampler::new(44100, 16000).is_none());
        assert!(Resampler::new(0, 16000).is_none());
        // Full-scale input does not wrap around.
        let loud = convert(8000, 16000, &[i16::MAX, i16::MIN].repeat(100));
        assert!(loud.len() == 400);
    }
}
