//! Background noise for tests of a noisy line, made deterministically from a seed: a room
//! full of talk (`babble`), traffic (`street`) and a radio playing (`music`), as 16 kHz
//! PCM16 at a chosen loudness (RMS, PCM16 units). Together with [`super::phrase_tone`] a test
//! makes a recording of a caller in a noisy place; [`wav`] writes it as a WAV file.
//!
//! - **babble**: six talkers at once, each a glottal pulse train (95-230 Hz, with jitter)
//!   through two formant resonators that change vowel every syllable (120-320 ms, with
//!   pauses between) — speech-shaped sound with no words in it;
//! - **street**: brown noise (the rumble of traffic), an engine hum, and cars passing
//!   (band-limited noise swelling and fading over a second or two);
//! - **music**: triads of notes with six harmonics each, a new chord every half second,
//!   a kick drum on each chord and a hi-hat between.

use std::f64::consts::PI;

/// Sample rate of the noise (what the voice model hears).
pub const RATE: u32 = 16_000;

/// A kind of background noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A room full of talk.
    Babble,
    /// Traffic.
    Street,
    /// A radio playing.
    Music,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 3] = [Kind::Babble, Kind::Street, Kind::Music];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Babble => "babble",
            Kind::Street => "street",
            Kind::Music => "music",
        }
    }
}

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [low, high).
    fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// Uniform in [-1, 1).
    fn signed(&mut self) -> f64 {
        2.0 * self.unit() - 1.0
    }
}

/// A two-pole resonator at `hz` with `bandwidth` Hz.
#[derive(Clone, Copy, Default)]
struct Resonator {
    a1: f64,
    a2: f64,
    gain: f64,
    y1: f64,
    y2: f64,
}

impl Resonator {
    fn tune(&mut self, hz: f64, bandwidth: f64) {
        let r = (-PI * bandwidth / f64::from(RATE)).exp();
        self.a1 = 2.0 * r * (2.0 * PI * hz / f64::from(RATE)).cos();
        self.a2 = -r * r;
        self.gain = 1.0 - r;
    }

    fn next(&mut self, x: f64) -> f64 {
        let y = self.gain * x + self.a1 * self.y1 + self.a2 * self.y2;
        self.y2 = self.y1;
        self.y1 = y;
        y
    }
}

fn samples(ms: u64) -> usize {
    usize::try_from(ms * u64::from(RATE) / 1000).unwrap_or(0)
}

/// Vowel formants (F1, F2) in Hz.
const VOWELS: [(f64, f64); 6] =
    [(730.0, 1090.0), (270.0, 2290.0), (530.0, 1840.0), (660.0, 1720.0), (300.0, 870.0), (440.0, 1020.0)];

/// One talker's speech-shaped sound.
fn talker(count: usize, rng: &mut Rng, out: &mut [f64]) {
    let f0 = rng.range(95.0, 230.0);
    let (mut f1, mut f2) = (Resonator::default(), Resonator::default());
    let (mut phase, mut n) = (rng.unit(), samples(rng.range(0.0, 300.0) as u64));
    while n < count {
        let syllable = samples(rng.range(120.0, 320.0) as u64);
        let (a, b) = VOWELS[(rng.unit() * VOWELS.len() as f64) as usize % VOWELS.len()];
        f1.tune(a * rng.range(0.9, 1.1), 90.0);
        f2.tune(b * rng.range(0.9, 1.1), 130.0);
        let pitch = f0 * rng.range(0.85, 1.15);
        for k in 0..syllable.min(count - n) {
            let envelope = (PI * k as f64 / syllable as f64).sin();
            phase += pitch * rng.range(0.98, 1.02) / f64::from(RATE);
            // A glottal pulse train: a falling sawtooth, plus a breath of noise.
            let source = 2.0 * (1.0 - phase.fract()) - 1.0 + 0.1 * rng.signed();
            out[n + k] += envelope * (f1.next(source) + 0.6 * f2.next(source));
        }
        n += syllable + samples(rng.range(40.0, 200.0) as u64);
    }
}

fn babble(count: usize, rng: &mut Rng) -> Vec<f64> {
    let mut out = vec![0.0; count];
    for _ in 0..6 {
        talker(count, rng, &mut out);
    }
    out
}

fn street(count: usize, rng: &mut Rng) -> Vec<f64> {
    let mut out = vec![0.0; count];
    let mut brown = 0.0;
    let mut car = Resonator::default();
    car.tune(350.0, 400.0);
    // Cars: each passes over `length` samples from `start`.
    let mut cars = Vec::new();
    let mut at = 0;
    while at < count {
        let length = samples(rng.range(1000.0, 2200.0) as u64);
        cars.push((at, length, rng.range(0.5, 1.0)));
        at += samples(rng.range(500.0, 1500.0) as u64);
    }
    let hum = rng.range(45.0, 70.0);
    for (n, value) in out.iter_mut().enumerate() {
        brown = 0.995 * brown + 0.05 * rng.signed();
        let t = n as f64 / f64::from(RATE);
        let engine = 0.15 * (2.0 * PI * hum * t).sin() + 0.07 * (2.0 * PI * 2.0 * hum * t).sin();
        let passing: f64 = cars
            .iter()
            .filter(|(start, length, _)| n >= *start && n < start + length)
            .map(|(start, length, level)| level * (PI * (n - start) as f64 / *length as f64).sin().powi(2))
            .sum();
        *value = brown + engine + passing * car.next(rng.signed()) * 4.0;
    }
    out
}

fn music(count: usize, rng: &mut Rng) -> Vec<f64> {
    const SCALE: [f64; 7] = [261.63, 293.66, 329.63, 349.23, 392.0, 440.0, 493.88];
    let mut out = vec![0.0; count];
    let beat = samples(500);
    let mut hat = Resonator::default();
    hat.tune(6000.0, 2000.0);
    for start in (0..count).step_by(beat) {
        let root = (rng.unit() * 7.0) as usize % 7;
        let notes = [SCALE[root], SCALE[(root + 2) % 7] * 1.0, SCALE[(root + 4) % 7]];
        let end = (start + beat).min(count);
        for (i, sample) in out[start..end].iter_mut().enumerate() {
            let t = i as f64 / f64::from(RATE);
            let decay = (-t * 2.0).exp();
            let chord: f64 = notes
                .iter()
                .map(|f| (1..=6).map(|h| (2.0 * PI * f * f64::from(h) * t).sin() / f64::from(h)).sum::<f64>())
                .sum();
            let kick = (-t * 30.0).exp() * (2.0 * PI * 60.0 * t).sin() * 3.0;
            let off = t - 0.25;
            let hihat = if off >= 0.0 { (-off * 60.0).exp() * hat.next(rng.signed()) * 8.0 } else { 0.0 };
            *sample = 0.4 * decay * chord + kick + hihat;
        }
    }
    out
}

/// `duration_ms` of `kind` noise from `seed`, scaled to `rms` (PCM16 units), as PCM16
/// samples.
pub fn noise(kind: Kind, duration_ms: u64, rms: f64, seed: u64) -> Vec<i16> {
    let count = samples(duration_ms);
    let mut rng = Rng::new(seed);
    let raw = match kind {
        Kind::Babble => babble(count, &mut rng),
        Kind::Street => street(count, &mut rng),
        Kind::Music => music(count, &mut rng),
    };
    let power = raw.iter().map(|x| x * x).sum::<f64>() / count.max(1) as f64;
    let scale = if power > 0.0 { rms / power.sqrt() } else { 0.0 };
    raw.iter().map(|x| (x * scale).round().clamp(-32768.0, 32767.0) as i16).collect()
}

/// Adds `noise` into `pcm` (PCM16 little-endian) from sample `at`, saturating.
pub fn mix(pcm: &mut [u8], noise: &[i16], at: usize) {
    for (pair, n) in pcm.chunks_exact_mut(2).skip(at).zip(noise) {
        let value = i16::from_le_bytes([pair[0], pair[1]]).saturating_add(*n);
        pair.copy_from_slice(&value.to_le_bytes());
    }
}

/// PCM16 samples as little-endian bytes.
pub fn to_bytes(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// A 16 kHz mono PCM16 WAV file of `pcm` (little-endian bytes).
pub fn wav(pcm: &[u8]) -> Vec<u8> {
    let len = u32::try_from(pcm.len()).unwrap_or(u32::MAX - 36);
    let mut out = Vec::with_capacity(44 + pcm.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&RATE.to_le_bytes());
    out.extend_from_slice(&(RATE * 2).to_le_bytes()); // bytes per second
    out.extend_from_slice(&2u16.to_le_bytes()); // block align
    out.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(pcm);
    out
}

/// The PCM16 audio of a WAV file [`wav`] wrote (16 kHz mono PCM16); `None` for another.
pub fn read_wav(file: &[u8]) -> Option<&[u8]> {
    let header = file.get(..44)?;
    let format_ok = &header[..4] == b"RIFF"
        && &header[8..16] == b"WAVEfmt "
        && header[20..24] == [1, 0, 1, 0]
        && header[24..28] == RATE.to_le_bytes()
        && header[34..36] == [16, 0]
        && &header[36..40] == b"data";
    let len = usize::try_from(u32::from_le_bytes([header[40], header[41], header[42], header[43]])).ok()?;
    format_ok.then(|| file.get(44..44 + len)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rms(samples: &[i16]) -> f64 {
        (samples.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / samples.len() as f64).sqrt()
    }

    #[test]
    fn each_kind_is_deterministic_at_the_asked_loudness_and_differs_by_seed() {
        for kind in Kind::ALL {
            let a = noise(kind, 2000, 1500.0, 1);
            assert_eq!(a.len(), 32_000);
            assert!((rms(&a) - 1500.0).abs() < 5.0, "{}: {}", kind.name(), rms(&a));
            assert_eq!(a, noise(kind, 2000, 1500.0, 1), "{}: the same from the same seed", kind.name());
            assert_ne!(a, noise(kind, 2000, 1500.0, 2), "{}: another seed, other noise", kind.name());
        }
    }

    #[test]
    fn a_wav_round_trips_and_others_are_refused() {
        let pcm = to_bytes(&noise(Kind::Music, 100, 1000.0, 3));
        let file = wav(&pcm);
        assert_eq!(read_wav(&file), Some(&pcm[..]));
        assert_eq!(read_wav(&file[..40]), None);
        let mut stereo = file.clone();
        stereo[22] = 2;
        assert_eq!(read_wav(&stereo), None);
        let mut mixed = vec![0u8; 8];
        mix(&mut mixed, &[1, 2, 3, 4, 5], 1);
        assert_eq!(mixed, [0, 0, 1, 0, 2, 0, 3, 0]);
    }
}
