//! The user's audio as it arrives from a client: raw PCM16 in binary WebSocket frames or
//! base64 in `bidi_audio_input`, checked before it goes anywhere (whole 16-bit samples,
//! valid base64, not empty, at most [`MAX_AUDIO_FRAME_BYTES`]) — a bad frame gets a
//! recoverable `bidi_error` and the session goes on — and limited by an [`AudioBucket`]
//! of bytes per second, separate from the message rate limit (audio is sent 50 times a
//! second; the message limit is for typed input).

use std::time::Instant;

use bytes::Bytes;
use switchboard_core::protocol::ErrorCode;

/// Sample rate of user audio.
pub const INPUT_RATE: u32 = 16_000;
/// Bytes per second of real-time 16 kHz PCM16 mono audio.
pub const REAL_TIME_BYTES_PER_SECOND: u32 = INPUT_RATE * 2;
/// Largest audio frame: one second of audio (clients send 20-100 ms frames).
pub const MAX_AUDIO_FRAME_BYTES: usize = REAL_TIME_BYTES_PER_SECOND as usize;
/// Audio a client may send on average, as a multiple of real time...
pub const AUDIO_RATE_FACTOR: u32 = 4;
/// ...and ahead of real time in a burst, in seconds (a client catching up after a stall).
pub const AUDIO_BURST_SECONDS: u32 = 10;

/// Why an audio frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudioError {
    /// Not base64.
    #[error("bidi_audio_input.audio is not valid base64 ({0}); send base64 of PCM16 16 kHz mono")]
    Base64(String),
    /// Half a sample.
    #[error("an audio frame of {0} bytes is not whole 16-bit samples; send PCM16 (an even number of bytes)")]
    OddLength(usize),
    /// Nothing in it.
    #[error("an audio frame is empty; send 20-100 ms of PCM16 16 kHz mono per frame")]
    Empty,
    /// Too much at once.
    #[error(
        "an audio frame of {0} bytes is larger than the limit of {MAX_AUDIO_FRAME_BYTES} bytes (one second); send 20-100 ms frames"
    )]
    TooLarge(usize),
}

impl AudioError {
    /// The `bidi_error` code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Base64(_) => ErrorCode::InvalidAudioBase64,
            Self::OddLength(_) => ErrorCode::InvalidAudioLength,
            Self::Empty => ErrorCode::EmptyAudio,
            Self::TooLarge(_) => ErrorCode::AudioTooLarge,
        }
    }
}

/// Checks a raw PCM16 frame.
pub fn check_pcm(pcm: Bytes) -> Result<Bytes, AudioError> {
    if pcm.is_empty() {
        return Err(AudioError::Empty);
    }
    if pcm.len() > MAX_AUDIO_FRAME_BYTES {
        return Err(AudioError::TooLarge(pcm.len()));
    }
    if !pcm.len().is_multiple_of(2) {
        return Err(AudioError::OddLength(pcm.len()));
    }
    Ok(pcm)
}

/// Decodes and checks the base64 audio of a `bidi_audio_input`.
pub fn decode_base64(audio: &str) -> Result<Bytes, AudioError> {
    // Refuse before decoding what would be too large anyway.
    if audio.len() / 4 * 3 > MAX_AUDIO_FRAME_BYTES + 3 {
        return Err(AudioError::TooLarge(audio.len() / 4 * 3));
    }
    let pcm = aws_smithy_types::base64::decode(audio).map_err(|e| AudioError::Base64(e.to_string()))?;
    check_pcm(Bytes::from(pcm))
}

/// A token bucket over audio bytes.
#[derive(Debug, Clone)]
pub struct AudioBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl Default for AudioBucket {
    fn default() -> Self {
        let rate = f64::from(REAL_TIME_BYTES_PER_SECOND * AUDIO_RATE_FACTOR);
        let burst = f64::from(REAL_TIME_BYTES_PER_SECOND * AUDIO_BURST_SECONDS);
        Self { rate, burst, tokens: burst, last: None }
    }
}

impl AudioBucket {
    /// Takes `bytes` at `now`; false when the client sends faster than allowed.
    pub fn take(&mut self, bytes: usize, now: Instant) -> bool {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn frames_are_checked() {
        assert_eq!(check_pcm(Bytes::from_static(&[0; 640])).map(|b| b.len()), Ok(640));
        assert_eq!(check_pcm(Bytes::from_static(&[0; 3])), Err(AudioError::OddLength(3)));
        assert_eq!(check_pcm(Bytes::new()), Err(AudioError::Empty));
        let big = Bytes::from(vec![0; MAX_AUDIO_FRAME_BYTES + 2]);
        assert_eq!(check_pcm(big), Err(AudioError::TooLarge(MAX_AUDIO_FRAME_BYTES + 2)));
        assert!(matches!(decode_base64("not base64!"), Err(AudioError::Base64(_))));
        assert_eq!(decode_base64(&aws_smithy_types::base64::encode([1u8, 2, 3, 4])).map(|b| b.len()), Ok(4));
        assert_eq!(decode_base64(&aws_smithy_types::base64::encode([1u8, 2, 3])), Err(AudioError::OddLength(3)));
        let huge = aws_smithy_types::base64::encode(vec![0u8; MAX_AUDIO_FRAME_BYTES * 2]);
        assert!(matches!(decode_base64(&huge), Err(AudioError::TooLarge(_))));
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
