//! Audio for the simulated Nova Sonic: energy-based turn detection on 16 kHz PCM16 input,
//! the phrase-id convention tests use to say what an utterance means, and the synthetic
//! 24 kHz PCM16 voice of replies.
//!
//! **Phrase ids.** An utterance whose voiced audio is a pure tone of
//! `400 + 100 * id` Hz (id 0..=35) carries phrase id `id`. The detector estimates the
//! frequency from the zero crossings of the voiced frames (with a little hysteresis, so a
//! codec's idle noise is none) and accepts it when it lies
//! within 25 Hz of a phrase tone; noise and speech-like audio carry no id.
//! [`phrase_tone`] makes such audio.

use crate::script::sonic::{MAX_PHRASE_ID, PHRASE_BASE_HZ, PHRASE_STEP_HZ, TurnDetection};

/// The simulator hears its input audio 20 ms at a time, whatever the size of the events
/// it comes in (as the service does not depend on how a client cuts its audio): PCM16 at
/// 16 kHz.
pub const INPUT_FRAME_BYTES: usize = 640;

/// Input sample rate.
pub const INPUT_RATE: u32 = 16_000;

/// The band around zero a sample must leave for its sign to count in the zero crossings
/// (about -72 dBFS): G.722 decodes digital silence to samples of ±1 to ±4, which cross zero
/// at every other sample, so the quiet part of a frame that ends a phrase tone would raise
/// the estimate by tens of Hz; a phrase tone is thousands in amplitude. No wider: a band of
/// 64 also thinned the crossings of quiet noise (what RNNoise leaves of a line's hiss, tens
/// in amplitude) until one read as a phrase tone (`noise::a_noisy_caller...` heard a fourth
/// request).
const CROSSING_BAND: i16 = 8;
/// Output sample rate.
pub const OUTPUT_RATE: u32 = 24_000;

/// A finished utterance.
#[derive(Clone, Debug, PartialEq)]
pub struct Utterance {
    /// Voiced audio in it, in milliseconds.
    pub voiced_ms: u64,
    /// The estimated tone frequency of the voiced audio.
    pub frequency_hz: f64,
    /// The phrase id the frequency encodes, if it is one.
    pub phrase_id: Option<u32>,
}

/// What a frame of audio changed.
#[derive(Clone, Debug, PartialEq)]
pub enum Detection {
    /// Enough voiced audio arrived to count as speech (the moment barge-in happens).
    SpeechStarted,
    /// The silence after speech was long enough: the utterance is over.
    UtteranceEnded(Utterance),
}

/// Energy-based voice activity and end-of-utterance detection.
#[derive(Clone, Debug)]
pub struct TurnDetector {
    threshold: f64,
    min_speech_samples: u64,
    end_silence_samples: u64,
    voiced_samples: u64,
    silence_samples: u64,
    crossings: u64,
    /// Where (in voiced samples) the first and the latest zero crossing were.
    first_crossing: Option<u64>,
    last_crossing: u64,
    last_sign: Option<bool>,
    started: bool,
}

impl TurnDetector {
    /// A detector with `config`, ending utterances after `end_silence_ms` of silence.
    pub fn new(config: &TurnDetection, end_silence_ms: u64) -> Self {
        Self {
            threshold: config.energy_threshold,
            min_speech_samples: samples(config.min_speech_ms),
            end_silence_samples: samples(end_silence_ms).max(1),
            voiced_samples: 0,
            silence_samples: 0,
            crossings: 0,
            first_crossing: None,
            last_crossing: 0,
            last_sign: None,
            started: false,
        }
    }

    /// Feeds one frame of PCM16 little-endian mono audio.
    pub fn push(&mut self, pcm: &[u8]) -> Option<Detection> {
        let frame: Vec<i16> = pcm16(pcm).collect();
        if frame.is_empty() {
            return None;
        }
        let length = frame.len() as u64;
        if rms(&frame) >= self.threshold {
            for (at, sample) in (self.voiced_samples..).zip(&frame) {
                // A sample within the band around zero keeps the last sign: a codec's idle
                // noise in the quiet part of a voiced frame is no crossing.
                let sign = match *sample {
                    s if s > CROSSING_BAND => true,
                    s if s < -CROSSING_BAND => false,
                    _ => continue,
                };
                if self.last_sign.is_some_and(|last| last != sign) {
                    self.crossings += 1;
                    self.first_crossing.get_or_insert(at);
                    self.last_crossing = at;
                }
                self.last_sign = Some(sign);
            }
            self.voiced_samples += length;
            self.silence_samples = 0;
            if !self.started && self.voiced_samples >= self.min_speech_samples {
                self.started = true;
                return Some(Detection::SpeechStarted);
            }
            return None;
        }
        if self.voiced_samples == 0 {
            return None;
        }
        self.silence_samples += length;
        self.last_sign = None;
        if self.silence_samples < self.end_silence_samples {
            return None;
        }
        let finished = self.clone();
        self.reset();
        finished.started.then(|| Detection::UtteranceEnded(finished.utterance()))
    }

    /// Whether speech is under way (started and not yet ended).
    pub fn in_speech(&self) -> bool {
        self.started
    }

    fn reset(&mut self) {
        self.voiced_samples = 0;
        self.silence_samples = 0;
        self.crossings = 0;
        self.first_crossing = None;
        self.last_crossing = 0;
        self.last_sign = None;
        self.started = false;
    }

    fn utterance(&self) -> Utterance {
        let seconds = self.voiced_samples as f64 / f64::from(INPUT_RATE);
        // Half periods between the first and the last crossing: clients that re-chunk audio
        // (LiveKit sends larger frames) pad the end of a tone with silence in a frame that
        // still counts as voiced, so the voiced time alone would lower the estimate.
        let span = self.first_crossing.map_or(0, |first| self.last_crossing - first);
        let frequency_hz = if self.crossings >= 2 && span > 0 {
            (self.crossings - 1) as f64 / 2.0 / (span as f64 / f64::from(INPUT_RATE))
        } else if seconds > 0.0 {
            self.crossings as f64 / 2.0 / seconds
        } else {
            0.0
        };
        Utterance {
            voiced_ms: self.voiced_samples * 1000 / u64::from(INPUT_RATE),
            frequency_hz,
            phrase_id: phrase_id(frequency_hz),
        }
    }
}

fn samples(ms: u64) -> u64 {
    ms * u64::from(INPUT_RATE) / 1000
}

/// The samples of PCM16 little-endian bytes (a trailing odd byte is ignored).
pub fn pcm16(bytes: &[u8]) -> impl Iterator<Item = i16> + '_ {
    bytes.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]]))
}

/// Root mean square of `samples`.
pub fn rms(samples: &[i16]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let sum: f64 = samples.iter().map(|s| f64::from(*s) * f64::from(*s)).sum();
    (sum / samples.len() as f64).sqrt()
}

/// The phrase id whose tone is within 25 Hz of `frequency_hz`.
pub fn phrase_id(frequency_hz: f64) -> Option<u32> {
    let steps = (frequency_hz - PHRASE_BASE_HZ) / PHRASE_STEP_HZ;
    let nearest = steps.round();
    let close = ((steps - nearest) * PHRASE_STEP_HZ).abs() <= 25.0;
    (close && nearest >= 0.0 && nearest <= f64::from(MAX_PHRASE_ID)).then_some(nearest as u32)
}

/// The tone frequency of phrase `id`.
pub fn phrase_frequency(id: u32) -> f64 {
    PHRASE_BASE_HZ + f64::from(id) * PHRASE_STEP_HZ
}

/// `duration_ms` of 16 kHz PCM16 audio carrying phrase `id`: a sine of its frequency at
/// `amplitude` (peak, PCM16 units), little-endian bytes.
pub fn phrase_tone(id: u32, duration_ms: u64, amplitude: i16) -> Vec<u8> {
    sine(phrase_frequency(id), INPUT_RATE, duration_ms, amplitude, 0)
}

/// `duration_ms` of PCM16 little-endian silence at 16 kHz.
pub fn silence(duration_ms: u64) -> Vec<u8> {
    vec![0; usize::try_from(samples(duration_ms) * 2).unwrap_or(0)]
}

/// A sine of `frequency` at `rate`, starting at sample `offset` (so consecutive chunks join
/// without a phase jump), as PCM16 little-endian bytes.
pub fn sine(frequency: f64, rate: u32, duration_ms: u64, amplitude: i16, offset: u64) -> Vec<u8> {
    let count = duration_ms * u64::from(rate) / 1000;
    let mut bytes = Vec::with_capacity(usize::try_from(count * 2).unwrap_or(0));
    for n in offset..offset + count {
        let t = n as f64 / f64::from(rate);
        let value = (f64::from(amplitude) * (2.0 * std::f64::consts::PI * frequency * t).sin()).round() as i16;
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    bytes
}

/// Milliseconds of speech for `text` at `ms_per_char` (at least one character's worth).
pub fn speech_ms(text: &str, ms_per_char: u64) -> u64 {
    (text.chars().count().max(1) as u64) * ms_per_char
}

/// A stable 64-bit fingerprint (FNV-1a) of an audio frame's bytes.
pub fn frame_fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detector(silence_ms: u64) -> TurnDetector {
        TurnDetector::new(&TurnDetection::default(), silence_ms)
    }

    fn feed(detector: &mut TurnDetector, audio: &[u8]) -> Vec<Detection> {
        audio.chunks(640).filter_map(|frame| detector.push(frame)).collect()
    }

    #[test]
    fn a_tone_then_silence_is_one_utterance_carrying_its_phrase_id() {
        let mut detector = detector(300);
        let mut audio = silence(200);
        audio.extend(phrase_tone(7, 600, 8000));
        audio.extend(silence(400));
        let detections = feed(&mut detector, &audio);
        assert_eq!(detections.len(), 2, "{detections:?}");
        assert_eq!(detections[0], Detection::SpeechStarted);
        let Detection::UtteranceEnded(utterance) = &detections[1] else { panic!("{detections:?}") };
        assert_eq!(utterance.phrase_id, Some(7), "{utterance:?}");
        assert_eq!(utterance.voiced_ms, 600);
    }

    #[test]
    fn a_tone_in_large_frames_padded_with_silence_keeps_its_phrase_id() {
        // LiveKit re-chunks input: 600 ms of tone arrives in 64 ms frames, the last one
        // mostly silence but still loud enough to count as voiced.
        for id in [1, 2, 9, 35] {
            let mut detector = detector(300);
            let mut audio = phrase_tone(id, 600, 8000);
            audio.extend(silence(400));
            let utterance = audio
                .chunks(2048)
                .filter_map(|frame| detector.push(frame))
                .find_map(|d| if let Detection::UtteranceEnded(u) = d { Some(u) } else { None })
                .expect("an utterance");
            assert_eq!(utterance.phrase_id, Some(id), "{utterance:?}");
            assert!((utterance.frequency_hz - phrase_frequency(id)).abs() < 2.0, "{utterance:?}");
        }
    }

    #[test]
    fn a_codecs_idle_noise_around_a_tone_is_no_crossing() {
        // A phone's 500 Hz phrase through G.722: the 20 ms frames that start and end the tone
        // are half digital silence, which G.722 decodes to ±1..4 (here ±3 alternating).
        let noise = |ms: usize| -> Vec<u8> {
            (0..ms * 16).flat_map(|i| if i % 2 == 0 { 3i16 } else { -3 }.to_le_bytes()).collect()
        };
        let mut audio = noise(210);
        audio.extend(phrase_tone(1, 1500, 16000));
        audio.extend(noise(410));
        let mut detector = detector(300);
        let utterance = feed(&mut detector, &audio)
            .into_iter()
            .find_map(|d| if let Detection::UtteranceEnded(u) = d { Some(u) } else { None })
            .expect("an utterance");
        assert!((utterance.frequency_hz - 500.0).abs() < 2.0, "{utterance:?}");
        assert_eq!(utterance.phrase_id, Some(1));
    }

    #[test]
    fn short_pauses_do_not_end_an_utterance_and_too_little_silence_never_does() {
        let mut detector = detector(300);
        let mut audio = phrase_tone(2, 300, 8000);
        audio.extend(silence(200));
        audio.extend(phrase_tone(2, 300, 8000));
        audio.extend(silence(280));
        let detections = feed(&mut detector, &audio);
        assert_eq!(detections, vec![Detection::SpeechStarted]);
        assert!(detector.in_speech());
        let ended = feed(&mut detector, &silence(40));
        assert!(matches!(&ended[..], [Detection::UtteranceEnded(u)] if u.phrase_id == Some(2)), "{ended:?}");
        assert!(!detector.in_speech());
    }

    #[test]
    fn quiet_audio_and_short_clicks_are_not_speech() {
        let mut detector = detector(200);
        let mut audio = phrase_tone(3, 1000, 300);
        audio.extend(phrase_tone(3, 40, 8000));
        audio.extend(silence(500));
        assert!(feed(&mut detector, &audio).is_empty());
    }

    #[test]
    fn frequencies_between_phrase_tones_carry_no_id() {
        assert_eq!(phrase_id(500.0), Some(1));
        assert_eq!(phrase_id(3900.0), Some(35));
        assert_eq!(phrase_id(450.0), None);
        assert_eq!(phrase_id(4000.0), None);
        assert_eq!(phrase_id(100.0), None);
    }

    #[test]
    fn fingerprints_tell_frames_apart() {
        assert_ne!(frame_fingerprint(&[0, 1]), frame_fingerprint(&[1, 0]));
        assert_eq!(frame_fingerprint(b"abc"), frame_fingerprint(b"abc"));
    }
}
