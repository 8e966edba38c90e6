//! Hold audio: what a caller hears while the edge puts them through to a person with a
//! warm transfer (the agent briefs the person first). The edge has no recordings of its
//! own, so it makes a soft two-note chime — [`LOW_HZ`] (C5) for [`NOTE_MS`], then
//! [`HIGH_HZ`] (E5) for as long, then [`QUIET_MS`] of silence, every [`PERIOD_MS`] —
//! at about -18 dBFS ([`AMPLITUDE`]), each note faded in and out over [`FADE_MS`] so it
//! does not click. [`HoldTone::frame`] gives it one 20 ms frame at a time, in the call's
//! G.711 law, carrying on where the last frame stopped.

use super::g711::Law;
use super::{CLOCK_RATE, FRAME_SAMPLES};

/// The first note (C5).
pub const LOW_HZ: f64 = 523.25;
/// The second note (E5).
pub const HIGH_HZ: f64 = 659.25;
/// How long each note lasts.
pub const NOTE_MS: u32 = 500;
/// The quiet after the two notes.
pub const QUIET_MS: u32 = 2000;
/// One chime and its quiet.
pub const PERIOD_MS: u32 = 2 * NOTE_MS + QUIET_MS;
/// Each note's fade in and out.
pub const FADE_MS: u32 = 20;
/// The notes' peak (PCM16 units): about -18 dBFS.
pub const AMPLITUDE: f64 = 4000.0;

/// The chime, frame by frame (see the module docs).
#[derive(Clone, Debug)]
pub struct HoldTone {
    law: Law,
    /// Samples played since the start.
    sample: u64,
}

impl HoldTone {
    /// The chime in `law`, from its start.
    pub fn new(law: Law) -> Self {
        Self { law, sample: 0 }
    }

    /// The law of its frames.
    pub fn law(&self) -> Law {
        self.law
    }

    /// The next 20 ms, G.711 in its law.
    pub fn frame(&mut self) -> Vec<u8> {
        let frame = (0..FRAME_SAMPLES as u64).map(|n| self.law.encode(sample_at(self.sample + n))).collect();
        self.sample += FRAME_SAMPLES as u64;
        frame
    }
}

/// The chime's sample `n` (at 8 kHz), PCM16.
pub fn sample_at(n: u64) -> i16 {
    let per_ms = u64::from(CLOCK_RATE / 1000);
    let position = n % (u64::from(PERIOD_MS) * per_ms);
    let note = u64::from(NOTE_MS) * per_ms;
    let (hz, into) = if position < note {
        (LOW_HZ, position)
    } else if position < 2 * note {
        (HIGH_HZ, position - note)
    } else {
        return 0;
    };
    let fade = u64::from(FADE_MS) * per_ms;
    let envelope = (into.min(note - 1 - into) as f64 / fade as f64).min(1.0);
    let t = into as f64 / f64::from(CLOCK_RATE);
    (AMPLITUDE * envelope * (2.0 * std::f64::consts::PI * hz * t).sin()).round() as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The amplitude of `hz` in `samples` (Goertzel), 0..1 of full scale.
    fn strength(samples: &[i16], hz: f64) -> f64 {
        let w = 2.0 * std::f64::consts::PI * hz / f64::from(CLOCK_RATE);
        let (mut s1, mut s2) = (0.0f64, 0.0f64);
        for x in samples {
            let s0 = f64::from(*x) / 32768.0 + 2.0 * w.cos() * s1 - s2;
            s2 = s1;
            s1 = s0;
        }
        let power = s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2;
        2.0 * power.max(0.0).sqrt() / samples.len() as f64
    }

    fn decoded(tone: &mut HoldTone, ms: u32) -> Vec<i16> {
        let law = tone.law();
        (0..ms / 20).flat_map(|_| tone.frame()).map(|code| law.decode(code)).collect()
    }

    #[test]
    fn the_chime_is_its_two_notes_then_quiet_and_repeats() {
        for law in [Law::Ulaw, Law::Alaw] {
            let mut tone = HoldTone::new(law);
            let low = decoded(&mut tone, NOTE_MS);
            let high = decoded(&mut tone, NOTE_MS);
            let quiet = decoded(&mut tone, QUIET_MS);
            let again = decoded(&mut tone, NOTE_MS);
            assert!(strength(&low, LOW_HZ) > 0.08, "{law:?}: {}", strength(&low, LOW_HZ));
            assert!(strength(&low, HIGH_HZ) < 0.01, "only the low note first");
            assert!(strength(&high, HIGH_HZ) > 0.08 && strength(&high, LOW_HZ) < 0.01);
            assert!(quiet.iter().all(|s| s.abs() < 16), "quiet between chimes");
            assert_eq!(again, low, "the chime repeats exactly");
        }
    }

    #[test]
    fn it_is_soft_and_fades_in_and_out_without_a_click() {
        let samples: Vec<i16> = (0..u64::from(PERIOD_MS) * 8).map(sample_at).collect();
        let peak = samples.iter().map(|s| s.unsigned_abs()).max().unwrap_or(0);
        assert!(peak <= 4000 && peak > 3500, "peak {peak}: about -18 dBFS");
        assert_eq!(samples[0], 0, "starts from silence");
        let note_end = (NOTE_MS * 8) as usize;
        assert!(samples[note_end - 1].abs() < 300 && samples[2 * note_end - 1].abs() < 300, "fades out");
        let steps = samples.windows(2).map(|w| (i32::from(w[1]) - i32::from(w[0])).abs()).max().unwrap_or(0);
        assert!(steps < 2700, "no jump bigger than the notes' own slope: {steps}");
    }
}
