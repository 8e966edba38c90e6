//! The agent's reply audio: PCM16 at the runtime's output rate in, one Opus frame every
//! 20 ms out, as time passes.
//!
//! Audio is queued as it comes, at its own rate (the voice model sends replies faster than
//! real time, so seconds of audio may wait here), and cut into 20 ms frames as they fall
//! due. libopus encodes straight from the runtime's rate (it takes 8, 12, 16, 24 or 48 kHz):
//! no resampling to 48 kHz first, which its SILK layer would undo. The RTP clock stays
//! 48 kHz. The first frame of a burst is due at
//! once; each next one 20 ms after the one before, so a reply that arrives faster than real
//! time (as the voice model sends it) leaves in real time, and the client's jitter buffer
//! never overflows. A frame due with less than 20 ms queued waits up to one more frame for
//! the rest (the agent's chunks need not be whole frames), then goes out padded with
//! silence. A burst never starts before the last frame's 20 ms have passed, so RTP times
//! never overlap. [`Outbound::flush`] drops the queue at once: on barge-in nothing more of the
//! interrupted reply is sent. Frames the encoder marks as DTX (silence, 1-2 bytes) are not
//! sent when the peer asked for DTX; the RTP clock runs on regardless.

use std::collections::VecDeque;
use std::time::Instant;

use switchboard_opus::{EncoderSettings, VoiceEncoder};

use super::{AudioError, FRAME, FRAME_SAMPLES, OPUS_RATE, RUNTIME_RATES};

/// The reply encoder's complexity unless the edge is told otherwise (`--webrtc-opus-complexity`):
/// 5, libwebrtc's on phones. libopus's own default is 9 (8 and 10 cost and sound the same at
/// 24 kHz); at 5 a 20 ms frame of voice costs about a quarter less (127 against 169 µs) and
/// its decoded spectrum is as close to the agent's audio (log-spectral distance 3.15 against
/// 3.12 dB); at 4 and below the spectrum drifts (3.7 dB) — BENCHMARKS.md, `webrtc`.
pub const DEFAULT_COMPLEXITY: u8 = 5;

/// One encoded frame, due now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// When it was due: its place in real time.
    pub due: Instant,
    /// Its RTP time in 48 kHz samples since the call's first frame.
    pub rtp_time: u64,
    /// The Opus packet.
    pub packet: Vec<u8>,
}

/// Frame queue, pacing and encoder of one call's reply audio.
#[derive(Debug)]
pub struct Outbound {
    /// Encodes from `rate`.
    encoder: VoiceEncoder,
    rate: u32,
    /// The agent's PCM not yet sent, at `rate`.
    queue: VecDeque<i16>,
    /// One frame's PCM, at `rate`.
    scratch: Vec<i16>,
    /// When the next frame is due, while a burst is under way.
    due: Option<Instant>,
    /// When the first frame went: the RTP clock's zero.
    epoch: Option<Instant>,
    /// When the last frame sent was due: a new burst starts no earlier than its end, so RTP
    /// times never overlap (a flush or a pause shorter than a frame would make them).
    last: Option<Instant>,
    dtx: bool,
    /// Time spent encoding.
    transcoding: std::time::Duration,
}

impl Outbound {
    /// An encoder of PCM at `rate` Hz (8, 16 or 24 kHz) at [`DEFAULT_COMPLEXITY`]; `dtx`
    /// skips silent frames.
    pub fn new(rate: u32, dtx: bool) -> Result<Self, AudioError> {
        Self::with_complexity(rate, dtx, DEFAULT_COMPLEXITY)
    }

    /// [`Outbound::new`] at libopus's `complexity` (0-10, more is 10): the CPU it spends
    /// on each frame for its quality ([`VoiceEncoder::set_complexity`]).
    pub fn with_complexity(rate: u32, dtx: bool, complexity: u8) -> Result<Self, AudioError> {
        // FEC is only written when the encoder expects loss; 10 % covers a poor mobile link.
        if !RUNTIME_RATES.contains(&rate) {
            return Err(AudioError::Rate { rate });
        }
        let settings = EncoderSettings { fec: true, expected_loss: 10, dtx, ..EncoderSettings::default() };
        let mut encoder = VoiceEncoder::new(rate, &settings)?;
        encoder.set_complexity(complexity)?;
        Ok(Self {
            encoder,
            rate,
            queue: VecDeque::new(),
            scratch: Vec::with_capacity(FRAME_SAMPLES),
            due: None,
            epoch: None,
            last: None,
            dtx,
            transcoding: std::time::Duration::ZERO,
        })
    }

    /// Time spent encoding so far.
    pub fn transcoding(&self) -> std::time::Duration {
        self.transcoding
    }

    /// Queues the agent's PCM (at the rate given to [`Outbound::new`]).
    pub fn push(&mut self, pcm: &[i16]) {
        self.queue.extend(pcm.iter().copied());
    }

    /// Drops all queued audio at once (barge-in); the next audio starts a new burst.
    pub fn flush(&mut self) {
        self.queue.clear();
        self.due = None;
    }

    /// Audio queued, in 48 kHz samples.
    pub fn queued(&self) -> usize {
        self.queue.len() * (OPUS_RATE / self.rate) as usize
    }

    /// Samples of one 20 ms frame at `rate`.
    fn frame(&self) -> usize {
        self.rate as usize / 50
    }

    /// When [`Outbound::poll`] next has something to do, if anything is queued.
    pub fn timeout(&self) -> Option<Instant> {
        let queued = self.queued();
        if queued == 0 {
            return None;
        }
        let due = self.due?;
        Some(if queued >= FRAME_SAMPLES { due } else { due + FRAME })
    }

    /// The next frame, if one is due at `now`. Call until it returns `None`.
    pub fn poll(&mut self, now: Instant) -> Result<Option<Frame>, AudioError> {
        let began = Instant::now();
        let frame = self.next_frame(now);
        self.transcoding += began.elapsed();
        frame
    }

    fn next_frame(&mut self, now: Instant) -> Result<Option<Frame>, AudioError> {
        let frame = self.frame();
        loop {
            if self.queue.is_empty() {
                self.due = None;
                return Ok(None);
            }
            let start = self.last.map_or(now, |last| now.max(last + FRAME));
            let due = *self.due.get_or_insert(start);
            let whole = self.queue.len() >= frame;
            if now < due || (!whole && now < due + FRAME) {
                return Ok(None);
            }
            let epoch = *self.epoch.get_or_insert(due);
            let take = self.queue.len().min(frame);
            self.scratch.clear();
            self.scratch.extend(self.queue.drain(..take));
            self.scratch.resize(frame, 0);
            let packet = self.encoder.encode(&self.scratch)?;
            self.due = Some(due + FRAME);
            self.last = Some(due);
            let rtp_time = ((due - epoch).as_micros() * u128::from(OPUS_RATE) / 1_000_000) as u64;
            if self.dtx && packet.len() <= 2 {
                continue;
            }
            return Ok(Some(Frame { due, rtp_time, packet }));
        }
    }
}
