//! The agent's reply audio: PCM16 at the runtime's output rate in, one Opus frame every
//! 20 ms out, as time passes.
//!
//! Audio is queued as it comes, at its own rate (a third of 48 kHz's bytes for 16 kHz: the
//! voice model sends replies faster than real time, so seconds of audio may wait here), and
//! resampled to 48 kHz a frame at a time as frames fall due. The first frame of a burst is due at
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

use switchboard_core::audio::resample::Resampler;
use switchboard_opus::{EncoderSettings, VoiceEncoder};

use super::{AudioError, FRAME, FRAME_SAMPLES, OPUS_RATE, resampler};

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

/// Resampler, frame queue, pacing and encoder of one call's reply audio.
#[derive(Debug)]
pub struct Outbound {
    encoder: VoiceEncoder,
    rate: u32,
    resampler: Resampler,
    /// The agent's PCM not yet resampled, at `rate`.
    queue: VecDeque<i16>,
    /// Resampled to 48 kHz, not yet a frame.
    staged: Vec<i16>,
    scratch: Vec<i16>,
    /// When the next frame is due, while a burst is under way.
    due: Option<Instant>,
    /// When the first frame went: the RTP clock's zero.
    epoch: Option<Instant>,
    /// When the last frame sent was due: a new burst starts no earlier than its end, so RTP
    /// times never overlap (a flush or a pause shorter than a frame would make them).
    last: Option<Instant>,
    dtx: bool,
    /// Time spent resampling and encoding.
    transcoding: std::time::Duration,
}

impl Outbound {
    /// An encoder of PCM at `rate` Hz (8, 16 or 24 kHz); `dtx` skips silent frames.
    pub fn new(rate: u32, dtx: bool) -> Result<Self, AudioError> {
        // FEC is only written when the encoder expects loss; 10 % covers a poor mobile link.
        let settings = EncoderSettings { fec: true, expected_loss: 10, dtx, ..EncoderSettings::default() };
        let encoder = VoiceEncoder::new(OPUS_RATE, &settings)?;
        Ok(Self {
            encoder,
            rate,
            resampler: resampler(rate, OPUS_RATE)?,
            queue: VecDeque::new(),
            staged: Vec::with_capacity(2 * FRAME_SAMPLES),
            scratch: Vec::with_capacity(FRAME_SAMPLES),
            due: None,
            epoch: None,
            last: None,
            dtx,
            transcoding: std::time::Duration::ZERO,
        })
    }

    /// Time spent resampling and encoding so far.
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
        self.staged.clear();
        self.due = None;
        // The filter's memory belongs to the interrupted reply.
        if let Ok(fresh) = resampler(self.rate, OPUS_RATE) {
            self.resampler = fresh;
        }
    }

    /// Audio queued, in 48 kHz samples.
    pub fn queued(&self) -> usize {
        self.staged.len() + self.queue.len() * OPUS_RATE as usize / self.rate as usize
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

    /// Resamples queued audio until a frame is staged or the queue is empty.
    fn stage(&mut self) {
        let step = self.rate as usize / 50;
        while self.staged.len() < FRAME_SAMPLES && !self.queue.is_empty() {
            let take = self.queue.len().min(step);
            self.scratch.clear();
            self.scratch.extend(self.queue.drain(..take));
            self.resampler.process(&self.scratch, &mut self.staged);
        }
    }

    /// The next frame, if one is due at `now`. Call until it returns `None`.
    pub fn poll(&mut self, now: Instant) -> Result<Option<Frame>, AudioError> {
        let began = Instant::now();
        let frame = self.next_frame(now);
        self.transcoding += began.elapsed();
        frame
    }

    fn next_frame(&mut self, now: Instant) -> Result<Option<Frame>, AudioError> {
        loop {
            self.stage();
            if self.staged.is_empty() {
                self.due = None;
                return Ok(None);
            }
            let start = self.last.map_or(now, |last| now.max(last + FRAME));
            let due = *self.due.get_or_insert(start);
            let whole = self.staged.len() >= FRAME_SAMPLES;
            if now < due || (!whole && now < due + FRAME) {
                return Ok(None);
            }
            let epoch = *self.epoch.get_or_insert(due);
            let take = self.staged.len().min(FRAME_SAMPLES);
            self.scratch.clear();
            self.scratch.extend(self.staged.drain(..take));
            self.scratch.resize(FRAME_SAMPLES, 0);
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
