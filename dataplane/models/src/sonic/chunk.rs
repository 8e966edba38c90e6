//! The caller's audio gathered into fewer, larger `audioInput` events
//! ([`super::SonicConfig::audio_chunk`]).
//!
//! Each event costs the same whatever it carries — its JSON, its event-stream frame, its
//! SigV4 signature, an HTTP/2 frame over TLS, and the wake-ups of the tasks that pass it on
//! — so 20 ms frames sent as they come cost three times the events of 60 ms chunks. A
//! chunk is sent once it holds `audio_chunk` of audio, or once its first frame has waited
//! `audio_chunk` (frames that stop coming are not held), and before any other input of the
//! session (typed text, a tool result, a notice, the close), so the order of input is kept.
//! With real-time 20 ms frames and a 60 ms chunk, a frame reaches the stream at most 40 ms
//! later than it would alone (20 ms on average); with frames that stop, at most 60 ms.

use std::time::Duration;

use bytes::Bytes;
use switchboard_core::audio::gather::Gather;
use tokio::time::Instant;

/// 16 kHz PCM16 mono: bytes per millisecond.
const BYTES_PER_MS: u128 = 32;

/// The audio of the next `audioInput` event.
#[derive(Debug)]
pub struct AudioChunker(Gather<Instant>);

impl AudioChunker {
    /// Chunks of `chunk` of audio (zero or less than a sample: no chunking).
    pub fn new(chunk: Duration) -> Self {
        let target = usize::try_from(chunk.as_millis().saturating_mul(BYTES_PER_MS)).unwrap_or(usize::MAX);
        Self(Gather::new(target, chunk))
    }

    /// Takes a frame that came at `now`; returns what is to be sent now, if anything: the
    /// frame itself when chunking is off (or it alone fills a chunk and none is pending),
    /// else the chunk once full.
    pub fn push(&mut self, pcm: Bytes, now: Instant) -> Option<Bytes> {
        if self.0.target() == 0 || (self.0.is_empty() && pcm.len() >= self.0.target()) {
            return Some(pcm);
        }
        self.0.push(&pcm, now).map(Bytes::from)
    }

    /// When the pending chunk is to be sent however much it holds.
    pub fn deadline(&self) -> Option<Instant> {
        self.0.deadline()
    }

    /// The pending chunk, if any (it is sent now).
    pub fn take(&mut self) -> Option<Bytes> {
        self.0.take().map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(byte: u8) -> Bytes {
        Bytes::from(vec![byte; 640])
    }

    #[test]
    fn off_every_frame_goes_alone() {
        let mut chunker = AudioChunker::new(Duration::ZERO);
        let now = Instant::now();
        assert_eq!(chunker.push(frame(1), now), Some(frame(1)));
        assert_eq!((chunker.deadline(), chunker.take()), (None, None));
    }

    #[test]
    fn three_frames_make_a_60_ms_chunk_in_order() {
        let mut chunker = AudioChunker::new(Duration::from_millis(60));
        let start = Instant::now();
        assert_eq!(chunker.push(frame(1), start), None);
        assert_eq!(chunker.deadline(), Some(start + Duration::from_millis(60)));
        assert_eq!(chunker.push(frame(2), start + Duration::from_millis(20)), None);
        // The deadline is the first frame's: later frames do not push it back.
        assert_eq!(chunker.deadline(), Some(start + Duration::from_millis(60)));
        let chunk = chunker.push(frame(3), start + Duration::from_millis(40)).expect("a full chunk");
        assert_eq!(chunk.len(), 3 * 640);
        assert!(chunk[..640].iter().all(|b| *b == 1) && chunk[1280..].iter().all(|b| *b == 3));
        assert_eq!((chunker.deadline(), chunker.take()), (None, None));
    }

    #[test]
    fn a_partial_chunk_is_taken_whole_and_a_big_frame_is_not_copied() {
        let mut chunker = AudioChunker::new(Duration::from_millis(100));
        let now = Instant::now();
        assert_eq!(chunker.push(frame(1), now), None);
        assert_eq!(chunker.take(), Some(frame(1)));
        assert_eq!(chunker.deadline(), None);
        let big = Bytes::from(vec![7u8; 3200]);
        let sent = chunker.push(big.clone(), now).expect("a whole chunk in one frame");
        assert_eq!(sent.as_ptr(), big.as_ptr());
    }
}
