//! The simulator's voices: reply audio is a pure tone whose pitch depends on the voice id
//! the stream's `promptStart` asked for (`audioOutputConfiguration.voiceId`), so a test can
//! tell from the audio alone which voice spoke — after a handoff, a voice change, or a
//! transcoded telephone call — as a listener tells Nova Sonic's voices apart. A stream that
//! names no voice speaks at [`DEFAULT_HZ`].
//!
//! Each voice's pitch is 24 kHz divided by a whole number of samples, so one period is one
//! precomputed cycle and audio is read from it (a sine per sample was the simulator's
//! largest cost while speaking).

use std::sync::Arc;

use super::audio::{OUTPUT_RATE, sine};

/// The pitch of a stream that names no voice.
pub const DEFAULT_HZ: f64 = 180.0;
/// The reply tone's peak amplitude (PCM16 units).
pub const AMPLITUDE: i16 = 6000;
/// How many distinct pitches voices are spread over.
const PITCHES: u64 = 12;

/// Samples in one cycle of `voice`'s tone (at 24 kHz), and how many periods it holds.
fn cycle_samples(voice: Option<&str>) -> (u64, u64) {
    match voice {
        // 180 Hz repeats exactly every 400 samples (three periods).
        None => (400, 3),
        // 400, 333, 286, 250, 222, 200, 182, 167, 154, 143, 133 or 125 Hz.
        Some(voice) => {
            let hash =
                voice.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
            (60 + 12 * (hash % PITCHES), 1)
        }
    }
}

/// The pitch, in Hz, at which the simulator speaks with `voice` (a Nova Sonic voice id).
pub fn voice_frequency(voice: Option<&str>) -> f64 {
    let (samples, periods) = cycle_samples(voice);
    f64::from(OUTPUT_RATE) * periods as f64 / samples as f64
}

/// One voice's reply tone.
#[derive(Clone, Debug)]
pub struct Voice {
    /// One exact cycle of the tone, PCM16 little-endian at 24 kHz.
    cycle: Arc<[u8]>,
}

impl Default for Voice {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Voice {
    /// The tone of `voice`.
    pub fn new(voice: Option<&str>) -> Self {
        let (samples, _) = cycle_samples(voice);
        let ms = 1000 * samples / u64::from(OUTPUT_RATE) + 1;
        let mut cycle = sine(voice_frequency(voice), OUTPUT_RATE, ms, AMPLITUDE, 0);
        cycle.truncate(usize::try_from(samples * 2).unwrap_or(0));
        Self { cycle: cycle.into() }
    }

    /// `ms` of the tone from sample `offset` (so consecutive chunks join without a jump).
    pub fn tone(&self, offset: u64, ms: u64) -> Vec<u8> {
        let period = (self.cycle.len() / 2).max(1) as u64;
        let count = ms * u64::from(OUTPUT_RATE) / 1000;
        let mut bytes = Vec::with_capacity(usize::try_from(count * 2).unwrap_or(0));
        for n in offset..offset + count {
            let at = usize::try_from(n % period).unwrap_or(0) * 2;
            bytes.extend_from_slice(&self.cycle[at..at + 2]);
        }
        bytes
    }
}

/// The pitch of `samples` at `rate`, in Hz, from zero crossings with hysteresis (a tone
/// well above ±1000 in amplitude, as the simulator's voices are; 0 when there is none).
pub fn pitch(samples: &[i16], rate: u32) -> f64 {
    let (mut crossings, mut first, mut last, mut positive) = (0u32, None, 0usize, None);
    for (n, &s) in samples.iter().enumerate() {
        let now = match s {
            s if s > 1000 => Some(true),
            s if s < -1000 => Some(false),
            _ => positive,
        };
        if positive.is_some() && now != positive {
            crossings += 1;
            first.get_or_insert(n);
            last = n;
        }
        positive = now;
    }
    let span = (last - first.unwrap_or(last)) as f64 / f64::from(rate);
    if span > 0.0 { f64::from(crossings - 1) / 2.0 / span } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sonic::audio::pcm16;

    #[test]
    fn each_voice_tone_from_its_cycle_is_the_computed_sine_at_the_voice_pitch() {
        for voice in [None, Some("tiffany"), Some("matthew"), Some("amy")] {
            let tone = Voice::new(voice);
            let hz = voice_frequency(voice);
            for offset in [0, 1, 59, 123, 399, 400, 401, 24_000, 1_000_003] {
                let (table, computed) = (tone.tone(offset, 20), sine(hz, OUTPUT_RATE, 20, AMPLITUDE, offset));
                assert_eq!(table.len(), computed.len());
                let worst = pcm16(&table).zip(pcm16(&computed)).map(|(a, b)| (a - b).abs()).max();
                assert!(worst <= Some(1), "{voice:?} at offset {offset}: {worst:?}");
            }
            let samples: Vec<i16> = pcm16(&tone.tone(0, 500)).collect();
            let measured = pitch(&samples, OUTPUT_RATE);
            assert!((measured - hz).abs() < 1.0, "{voice:?}: {measured:.1} Hz, spoken at {hz:.1}");
        }
    }

    #[test]
    fn the_banking_example_s_voices_sound_different_and_the_default_keeps_its_pitch() {
        let (tiffany, matthew) = (voice_frequency(Some("tiffany")), voice_frequency(Some("matthew")));
        assert!((tiffany - matthew).abs() > 20.0, "tiffany {tiffany:.1} Hz, matthew {matthew:.1} Hz");
        assert!((voice_frequency(None) - DEFAULT_HZ).abs() < f64::EPSILON);
        assert!((voice_frequency(Some("tiffany")) - tiffany).abs() < f64::EPSILON, "stable");
        assert!(pitch(&[0; 100], OUTPUT_RATE).abs() < f64::EPSILON, "silence has no pitch");
    }
}
