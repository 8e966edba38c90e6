//! The user's audio as it arrives from a client: raw samples in binary WebSocket frames or
//! base64 in `bidi_audio_input`, in the session's input format (`session_start.audio`;
//! PCM16 16 kHz by default), checked before it goes anywhere (whole samples, valid
//! base64, not empty, at most one second) — a bad frame gets a recoverable `bidi_error`
//! and the session goes on — then converted to the voice model's 16 kHz PCM16
//! ([`switchboard_core::audio::Decoder`]) and limited by an [`AudioBucket`]
//! of bytes per second, separate from the message rate limit (audio is sent 50 times a
//! second; the message limit is for typed input). [`SpeechDetector`] notices when the
//! caller starts speaking (and, failing the voice model's word, stops).

use std::time::Instant;

use bytes::Bytes;
use switchboard_core::audio::{Encoding, Format};
use switchboard_core::protocol::ErrorCode;
use switchboard_serve::TokenBucket;

/// Sample rate of user audio.
pub const INPUT_RATE: u32 = 16_000;
/// Bytes per second of real-time 16 kHz PCM16 mono audio.
pub const REAL_TIME_BYTES_PER_SECOND: u32 = INPUT_RATE * 2;
/// Largest audio frame of the default format: one second of audio (clients send 20-100 ms
/// frames); other formats allow one second of theirs.
pub const MAX_AUDIO_FRAME_BYTES: usize = REAL_TIME_BYTES_PER_SECOND as usize;
/// Audio a client may send on average, as a multiple of real time...
pub const AUDIO_RATE_FACTOR: u32 = 4;
/// ...and ahead of real time in a burst, in seconds (a client catching up after a stall).
pub const AUDIO_BURST_SECONDS: u32 = 10;

/// Why an audio frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudioError {
    /// Not base64.
    #[error("bidi_audio_input.audio is not valid base64 ({0}); send base64 of the session's input audio ({1})")]
    Base64(String, String),
    /// Half a sample.
    #[error("an audio frame of {0} bytes is not whole 16-bit samples; send PCM16 (an even number of bytes)")]
    OddLength(usize),
    /// Nothing in it.
    #[error("an audio frame is empty; send 20-100 ms of {0} per frame")]
    Empty(String),
    /// Too much at once.
    #[error(
        "an audio frame of {0} bytes is larger than the limit of {1} bytes (one second of {2}); send 20-100 ms frames"
    )]
    TooLarge(usize, usize, String),
}

impl AudioError {
    /// The `bidi_error` code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Base64(..) => ErrorCode::InvalidAudioBase64,
            Self::OddLength(_) => ErrorCode::InvalidAudioLength,
            Self::Empty(_) => ErrorCode::EmptyAudio,
            Self::TooLarge(..) => ErrorCode::AudioTooLarge,
        }
    }
}

/// Checks a raw frame of `format` (whole samples, not empty, at most one second).
pub fn check_frame(frame: Bytes, format: Format) -> Result<Bytes, AudioError> {
    if frame.is_empty() {
        return Err(AudioError::Empty(format.describe()));
    }
    let limit = format.bytes_per_second();
    if frame.len() > limit {
        return Err(AudioError::TooLarge(frame.len(), limit, format.describe()));
    }
    if format.encoding == Encoding::Pcm16 && !frame.len().is_multiple_of(2) {
        return Err(AudioError::OddLength(frame.len()));
    }
    Ok(frame)
}

/// Checks a raw PCM16 16 kHz frame.
pub fn check_pcm(pcm: Bytes) -> Result<Bytes, AudioError> {
    check_frame(pcm, Format::MODEL_INPUT)
}

/// Decodes and checks the base64 audio of a `bidi_audio_input` in `format`.
pub fn decode_base64(audio: &str, format: Format) -> Result<Bytes, AudioError> {
    // Refuse before decoding what would be too large anyway.
    let limit = format.bytes_per_second();
    if audio.len() / 4 * 3 > limit + 3 {
        return Err(AudioError::TooLarge(audio.len() / 4 * 3, limit, format.describe()));
    }
    let bytes =
        aws_smithy_types::base64::decode(audio).map_err(|e| AudioError::Base64(e.to_string(), format.describe()))?;
    check_frame(Bytes::from(bytes), format)
}

/// A token bucket over audio bytes ([`TokenBucket`] in bytes): [`AUDIO_RATE_FACTOR`] times
/// real time on average, [`AUDIO_BURST_SECONDS`] ahead in a burst.
#[derive(Debug, Clone)]
pub struct AudioBucket(TokenBucket);

impl Default for AudioBucket {
    fn default() -> Self {
        Self(TokenBucket::new(
            REAL_TIME_BYTES_PER_SECOND * AUDIO_RATE_FACTOR,
            REAL_TIME_BYTES_PER_SECOND * AUDIO_BURST_SECONDS,
        ))
    }
}

impl AudioBucket {
    /// Takes `bytes` at `now`; false when the client sends faster than allowed.
    pub fn take(&mut self, bytes: usize, now: Instant) -> bool {
        self.0.take_n(bytes as f64, now)
    }

    /// The client's socket was found empty at `at`: what is read next came after it.
    pub fn caught_up(&mut self, at: Instant) {
        self.0.caught_up(at);
    }

    /// Takes `bytes` read from the socket at `now`, judged by the time since the socket was
    /// last found empty ([`TokenBucket::take_read`]): a reader behind on it is no flood.
    pub fn take_read(&mut self, bytes: usize, now: Instant) -> bool {
        self.0.take_read_n(bytes as f64, now)
    }
}

/// RMS amplitude (PCM16) from which an input frame counts as voiced, for time to first
/// audio (the same default as the Sonic client's boundary detection).
pub const VOICED_RMS: f64 = 500.0;

/// RMS amplitude of PCM16 little-endian audio (0 for an empty frame).
pub fn rms(pcm: &[u8]) -> f64 {
    let samples = pcm.len() / 2;
    if samples == 0 {
        return 0.0;
    }
    let sum: f64 = pcm
        .chunks_exact(2)
        .map(|pair| {
            let value = f64::from(i16::from_le_bytes([pair[0], pair[1]]));
            value * value
        })
        .sum();
    (sum / samples as f64).sqrt()
}

/// Voiced audio that counts as the caller speaking (shorter bursts are clicks and noise):
/// the simulator's and common VADs' 100 ms.
pub const MIN_SPEECH_MS: u64 = 100;
/// Silence after speech that ends it when the voice model said nothing (it took the sound
/// for noise): longer than the service's longest end-of-turn pause.
pub const QUIET_STOP_MS: u64 = 2500;
/// Silence that pushes back to the caller's turn after `bidi_audio_input_end`: more than
/// the voice model's longest end-of-turn pause, so it answers at once.
pub const END_OF_TURN_SILENCE_MS: u64 = 2000;

/// The caller's speech, from the energy of their audio (measured in audio time, not wall
/// time, so a burst of frames reads as what it holds). Speech starts after
/// [`MIN_SPEECH_MS`] of voiced audio; it stops when the voice model takes the turn as
/// ended ([`SpeechDetector::heard_end`]), the client ends it ([`SpeechDetector::end`]), or
/// after [`QUIET_STOP_MS`] of silence.
#[derive(Clone, Debug, Default)]
pub struct SpeechDetector {
    speaking: bool,
    /// Voiced samples since speech (or the last silence) began.
    voiced: u64,
    /// Silent samples since the last voiced frame.
    quiet: u64,
}

/// A change of the caller's speech.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speech {
    /// They started.
    Started,
    /// They stopped, and their turn goes to the model (push-to-talk).
    Stopped,
    /// They fell silent and the model took it for no turn (noise).
    Faded,
}

fn samples(ms: u64) -> u64 {
    ms * u64::from(INPUT_RATE) / 1000
}

impl SpeechDetector {
    /// Feeds one checked PCM16 frame.
    pub fn push(&mut self, pcm: &[u8]) -> Option<Speech> {
        self.push_frame((pcm.len() / 2) as u64, rms(pcm) >= VOICED_RMS)
    }

    /// Feeds one frame of `count` samples already found voiced (its RMS at least
    /// [`VOICED_RMS`]) or not: the voice loop measures each frame once for the barge-in gate
    /// and this detector.
    pub fn push_frame(&mut self, count: u64, voiced: bool) -> Option<Speech> {
        if voiced {
            self.quiet = 0;
            self.voiced += count;
            if !self.speaking && self.voiced >= samples(MIN_SPEECH_MS) {
                self.speaking = true;
                return Some(Speech::Started);
            }
            return None;
        }
        self.quiet += count;
        if !self.speaking {
            // A click followed by a pause is not the start of speech.
            if self.quiet >= samples(MIN_SPEECH_MS) {
                self.voiced = 0;
            }
            return None;
        }
        (self.quiet >= samples(QUIET_STOP_MS)).then(|| self.reset())
    }

    /// The voice model took the caller's turn as ended (its transcript began).
    pub fn heard_end(&mut self) {
        self.speaking = false;
        self.voiced = 0;
        self.quiet = 0;
    }

    /// The client ended the caller's turn (push-to-talk): `Stopped` if they were speaking.
    pub fn end(&mut self) -> Option<Speech> {
        let was = self.speaking;
        self.heard_end();
        was.then_some(Speech::Stopped)
    }

    fn reset(&mut self) -> Speech {
        self.heard_end();
        Speech::Faded
    }
}

/// `ms` of PCM16 silence in frames of at most 100 ms, for [`END_OF_TURN_SILENCE_MS`].
pub fn silence_frames(ms: u64) -> Vec<Bytes> {
    let frame = vec![0u8; usize::try_from(samples(100) * 2).unwrap_or(3200)];
    (0..ms.div_ceil(100)).map(|_| Bytes::from(frame.clone())).collect()
}

/// `ms` of PCM16 16 kHz silence in frames of at most 100 ms (in place of caller audio the
/// barge-in gate kept from the model, so the model's audio time goes on).
pub fn silence_frames_ms(ms: u64) -> Vec<Bytes> {
    let mut left = usize::try_from(samples(ms) * 2).unwrap_or(0);
    let mut frames = Vec::with_capacity(left.div_ceil(3200));
    while left > 0 {
        let take = left.min(3200);
        frames.push(Bytes::from(vec![0u8; take]));
        left -= take;
    }
    frames
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn frames_are_checked() {
        assert_eq!(check_pcm(Bytes::from_static(&[0; 640])).map(|b| b.len()), Ok(640));
        assert_eq!(check_pcm(Bytes::from_static(&[0; 3])), Err(AudioError::OddLength(3)));
        assert!(matches!(check_pcm(Bytes::new()), Err(AudioError::Empty(_))));
        let big = Bytes::from(vec![0; MAX_AUDIO_FRAME_BYTES + 2]);
        assert!(
            matches!(check_pcm(big), Err(AudioError::TooLarge(n, MAX_AUDIO_FRAME_BYTES, _)) if n == MAX_AUDIO_FRAME_BYTES + 2)
        );
        let pcm = Format::MODEL_INPUT;
        assert!(matches!(decode_base64("not base64!", pcm), Err(AudioError::Base64(..))));
        assert_eq!(decode_base64(&aws_smithy_types::base64::encode([1u8, 2, 3, 4]), pcm).map(|b| b.len()), Ok(4));
        assert_eq!(decode_base64(&aws_smithy_types::base64::encode([1u8, 2, 3]), pcm), Err(AudioError::OddLength(3)));
        let huge = aws_smithy_types::base64::encode(vec![0u8; MAX_AUDIO_FRAME_BYTES * 2]);
        assert!(matches!(decode_base64(&huge, pcm), Err(AudioError::TooLarge(..))));
        // G.711: one byte a sample, so odd lengths are whole; one second is 8000 bytes.
        let mulaw = Format { encoding: Encoding::Mulaw, rate: 8000 };
        assert_eq!(check_frame(Bytes::from_static(&[0xFF; 161]), mulaw).map(|b| b.len()), Ok(161));
        let error = check_frame(Bytes::from(vec![0xFF; 8001]), mulaw).expect_err("over a second");
        assert!(error.to_string().contains("8000 bytes (one second of G.711 μ-law 8 kHz)"), "{error}");
    }

    fn tone(ms: u64) -> Vec<u8> {
        (0..samples(ms)).flat_map(|n| if n % 8 < 4 { 4000i16 } else { -4000i16 }.to_le_bytes()).collect()
    }

    #[test]
    fn speech_starts_after_enough_voiced_audio_and_stops_once() {
        let mut detector = SpeechDetector::default();
        let quiet = vec![0u8; 640];
        assert_eq!(detector.push(&tone(40)), None, "a click");
        assert_eq!(detector.push(&quiet), None);
        for _ in 0..5 {
            assert_eq!(detector.push(&quiet), None);
        }
        assert_eq!(detector.push(&tone(60)), None, "the click was forgotten after a pause");
        assert_eq!(detector.push(&tone(60)), Some(Speech::Started));
        assert_eq!(detector.push(&tone(20)), None, "once");
        detector.heard_end();
        assert_eq!(detector.push(&vec![0u8; 2 * samples(QUIET_STOP_MS) as usize]), None, "heard: no second stop");
        assert_eq!(detector.push(&tone(100)), Some(Speech::Started));
        assert_eq!(detector.end(), Some(Speech::Stopped), "push-to-talk");
        assert_eq!(detector.end(), None);
        assert_eq!(detector.push(&tone(100)), Some(Speech::Started));
        assert_eq!(detector.push(&vec![0u8; 2 * samples(QUIET_STOP_MS - 20) as usize]), None);
        assert_eq!(detector.push(&quiet), Some(Speech::Faded), "long silence unheard by the model");
        assert_eq!(silence_frames(END_OF_TURN_SILENCE_MS).iter().map(Bytes::len).sum::<usize>(), 64_000);
        let held = silence_frames_ms(460);
        assert_eq!((held.len(), held.iter().map(Bytes::len).sum::<usize>()), (5, 14_720));
        assert!(silence_frames_ms(0).is_empty());
    }

    #[test]
    fn the_bucket_allows_real_time_and_refuses_a_flood() {
        let mut bucket = AudioBucket::default();
        let start = Instant::now();
        // A minute of real-time 20 ms frames passes.
        for i in 0..3000u64 {
            assert!(bucket.take(640, start + Duration::from_millis(20 * i)));
        }
        // Eleven seconds of audio at once do not.
        let now = start + Duration::from_secs(61);
        let mut refused = false;
        for _ in 0..550 {
            refused |= !bucket.take(640, now);
        }
        assert!(refused);
        assert!(rms(&[0; 64]) == 0.0 && rms(&1000i16.to_le_bytes().repeat(10)) > 999.0);
    }
}
