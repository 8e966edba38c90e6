//! Noise suppression of a caller's audio on its way to the barge-in gate and the voice
//! model (the Persona's `turnTaking.noiseSuppression`): RNNoise, by its pure-Rust port
//! `nnnoiseless` — a small recurrent network that estimates, every 10 ms, how much of each
//! of 22 frequency bands is noise, and attenuates it.
//!
//! RNNoise works on 48 kHz audio in frames of [`DenoiseState::FRAME_SIZE`] (480) samples,
//! with sample values in the PCM16 range. The model hears 16 kHz, so each 10 ms of the
//! caller's audio (160 samples, [`CHUNK`]) is upsampled by 3 ([`Resampler`], a low-pass
//! polyphase filter, so the band above 8 kHz stays empty instead of holding images),
//! denoised, and downsampled by 3 again. Frames of any length go in; the same number of
//! samples comes out, in place: audio not yet a whole 10 ms waits for the next frame. Frames
//! of whole chunks (20 ms, the common size) are not delayed by this; the first time a frame
//! would come out short, the output is put one chunk less a sample (159 samples, ~10 ms)
//! behind for the rest of the call, which no later frame can run short of. Add the filters'
//! and RNNoise's own delay (about 3 ms and 10 ms).
//!
//! **Quiet is silence** ([`QUIET_RMS`]): RNNoise starts a call cold — for its first second
//! it passes a line's faint hiss nearly whole, and it takes about two to learn it and leave
//! nothing of it. So what it leaves of a quiet moment, every 2.5 ms below -60 dBFS, is made
//! silence: the same from the call's first frame as later. Without it the first words of a
//! call came out wrong: the delay above moves them off the caller's 20 ms frames, so their
//! first and last frames also hold the quiet before and after — hiss, while RNNoise was
//! cold — and a phrase tone heard by the simulator by its zero crossings was heard 40 to 50
//! Hz too high (issue 42: the call's first request was "(inaudible)" with suppression on).
//!
//! One [`NoiseSuppressor`] per call (the network's state is the call's recent audio); the
//! network's weights are shared by every call. After the first frames it allocates
//! nothing: its buffers are reused.

use std::collections::VecDeque;
use std::sync::LazyLock;

use nnnoiseless::{DenoiseState, RnnModel};

use super::MODEL_INPUT_RATE;
use super::resample::Resampler;

/// The rate RNNoise works at.
pub const DENOISE_RATE: u32 = 48_000;
/// 10 ms at 48 kHz: one RNNoise frame.
const FRAME: usize = DenoiseState::FRAME_SIZE;
/// The same 10 ms at the model's 16 kHz.
pub const CHUNK: usize = FRAME * MODEL_INPUT_RATE as usize / DENOISE_RATE as usize;

/// Samples (2.5 ms at 16 kHz) of denoised audio judged quiet or not as one.
const QUIET_BLOCK: usize = 40;

/// Denoised audio whose RMS over a block (PCM16 units) is below this is made silent: -60 dBFS, far below
/// speech (the voice loop counts 500 as voiced) and what RNNoise leaves of a line's hiss
/// once it has learned it — but not in a call's first seconds (see the module docs).
pub const QUIET_RMS: f64 = 32.0;

/// RNNoise's trained weights (built into the crate), parsed once for every call.
static MODEL: LazyLock<RnnModel> = LazyLock::new(RnnModel::default);

/// One call's noise suppressor over 16 kHz PCM16 audio.
#[derive(Clone)]
pub struct NoiseSuppressor {
    state: Box<DenoiseState<'static>>,
    up: Resampler,
    down: Resampler,
    /// Input samples not yet a whole [`CHUNK`].
    pending: Vec<i16>,
    /// One chunk at 48 kHz, then denoised (reused).
    wide: Vec<i16>,
    denoised: Vec<i16>,
    /// RNNoise's input and output frames.
    input: Box<[f32; FRAME]>,
    output: Box<[f32; FRAME]>,
    /// The chunk back at 16 kHz (reused).
    narrow: Vec<i16>,
    /// Denoised samples not yet handed out.
    ready: VecDeque<i16>,
    /// The speech probability RNNoise gave the latest 10 ms.
    speech: f32,
    /// Whether the output was delayed (a frame was short once), and the samples of silence
    /// still to go out before `ready`.
    delayed: bool,
    silence: usize,
}

impl std::fmt::Debug for NoiseSuppressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoiseSuppressor")
            .field("pending", &self.pending.len())
            .field("ready", &self.ready.len())
            .finish()
    }
}

impl Default for NoiseSuppressor {
    fn default() -> Self {
        Self::new()
    }
}

impl NoiseSuppressor {
    /// A suppressor for a new call.
    pub fn new() -> Self {
        // 16 <-> 48 kHz is a ratio of 3, which the resampler supports.
        let resampler = |from, to| Resampler::new(from, to).unwrap_or_else(|| unreachable!("a ratio of 3"));
        Self {
            state: DenoiseState::with_model(&MODEL),
            up: resampler(MODEL_INPUT_RATE, DENOISE_RATE),
            down: resampler(DENOISE_RATE, MODEL_INPUT_RATE),
            pending: Vec::with_capacity(CHUNK),
            wide: Vec::with_capacity(FRAME + 8),
            denoised: Vec::with_capacity(FRAME),
            input: Box::new([0.0; FRAME]),
            output: Box::new([0.0; FRAME]),
            narrow: Vec::with_capacity(CHUNK + 8),
            // 100 ms frames (what clients send at most, usually) without growing.
            ready: VecDeque::with_capacity(CHUNK * 12),
            speech: 0.0,
            delayed: false,
            silence: 0,
        }
    }

    /// Denoises one frame of 16 kHz PCM16 little-endian audio in place (a trailing odd
    /// byte is left as it is).
    pub fn process(&mut self, pcm: &mut [u8]) {
        for pair in pcm.chunks_exact(2) {
            self.pending.push(i16::from_le_bytes([pair[0], pair[1]]));
            if self.pending.len() == CHUNK {
                self.chunk();
            }
        }
        let count = pcm.len() / 2;
        if !self.delayed && count > self.ready.len() {
            // Short for the first time (a frame that is not whole chunks): from now on the
            // audio is one chunk less a sample behind, the most that can wait in `pending`,
            // so no later frame is ever short (see the module docs).
            self.delayed = true;
            self.silence = CHUNK - 1;
        }
        for pair in pcm.chunks_exact_mut(2) {
            let sample = if self.silence > 0 {
                self.silence -= 1;
                0
            } else {
                self.ready.pop_front().unwrap_or(0)
            };
            pair.copy_from_slice(&sample.to_le_bytes());
        }
    }

    /// The probability, 0 to 1, that the latest 10 ms held speech (RNNoise's voice activity
    /// estimate).
    pub fn speech_probability(&self) -> f32 {
        self.speech
    }

    /// Denoises the pending chunk into `ready`.
    fn chunk(&mut self) {
        self.wide.clear();
        self.up.process(&self.pending, &mut self.wide);
        self.pending.clear();
        // The resampler's output is exactly three samples per input sample.
        for (into, &sample) in self.input.iter_mut().zip(&self.wide) {
            *into = f32::from(sample);
        }
        self.speech = self.state.process_frame(&mut self.output[..], &self.input[..]);
        self.denoised.clear();
        self.denoised.extend(self.output.iter().map(|&value| value.round().clamp(-32768.0, 32767.0) as i16));
        self.narrow.clear();
        self.down.process(&self.denoised, &mut self.narrow);
        // What RNNoise left of a quiet moment: silence (see the module docs).
        for block in self.narrow.chunks_mut(QUIET_BLOCK) {
            if quiet(block) {
                block.fill(0);
            }
        }
        self.ready.extend(self.narrow.iter().copied());
    }
}

/// Whether a block of denoised audio is below [`QUIET_RMS`].
fn quiet(chunk: &[i16]) -> bool {
    let sum: f64 = chunk.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    sum < QUIET_RMS * QUIET_RMS * chunk.len() as f64
}

#[cfg(test)]
#[path = "noise_tests.rs"]
mod tests;
