//! How a media session turns the phone's payloads into its owner's [`Format`] and back: G.711
//! passes through as it is (the jitter buffer conceals a lost frame by fading the last one);
//! G.722 is decoded to 16 kHz PCM16 as it plays and encoded from it as it is sent, one
//! encoder and one decoder for the stream's life (their state carries from frame to frame),
//! and a lost frame is concealed on the decoded audio with the jitter buffer's [`fade`].

use crate::media::format::Format;
use crate::media::g711::Law;
use crate::media::g722;
use crate::media::jitter::{JitterBuffer, JitterConfig, Playout, fade};
use crate::sdp::Codec;

/// A session's codec state (see the module docs).
#[derive(Debug)]
pub(super) enum Coder {
    G711(Law),
    G722 {
        encoder: Box<g722::Encoder>,
        decoder: Box<g722::Decoder>,
        /// The last frame played, decoded: what a lost one is concealed with.
        last: Vec<u8>,
    },
}

impl Coder {
    pub(super) fn new(codec: Codec) -> Self {
        match Format::of(codec) {
            Format::G711(law) => Self::G711(law),
            Format::Wideband => Self::G722 {
                encoder: Box::new(g722::Encoder::new()),
                decoder: Box::new(g722::Decoder::new()),
                last: Vec::new(),
            },
        }
    }

    /// The owner's side's format.
    pub(super) fn format(&self) -> Format {
        match self {
            Self::G711(law) => Format::G711(*law),
            Self::G722 { .. } => Format::Wideband,
        }
    }

    /// A jitter buffer for the phone's stream.
    pub(super) fn jitter(&self, config: JitterConfig) -> JitterBuffer {
        match self {
            Self::G711(law) => JitterBuffer::new(Some(*law), config),
            Self::G722 { .. } => JitterBuffer::new(None, config),
        }
    }

    /// The phone started a new stream (a new SSRC): decode it from the initial state.
    pub(super) fn restart(&mut self) {
        if let Self::G722 { decoder, last, .. } = self {
            **decoder = g722::Decoder::new();
            last.clear();
        }
    }

    /// What the jitter buffer played, in the owner's format; `concealed` is its count of
    /// frames concealed in a row.
    pub(super) fn play(&mut self, play: Playout, concealed: usize) -> Playout {
        let Self::G722 { decoder, last, .. } = self else { return play };
        match play {
            Playout::Waiting => Playout::Waiting,
            Playout::Frame(codes) => {
                let mut samples = Vec::with_capacity(codes.len() * 2);
                decoder.decode(&codes, &mut samples);
                let frame = Format::Wideband.from_16k(&samples);
                frame.clone_into(last);
                Playout::Frame(frame)
            }
            Playout::Concealed(_) => {
                let mut frame = if last.is_empty() { vec![0; Format::Wideband.frame_bytes()] } else { last.clone() };
                Format::Wideband.scale(&mut frame, fade(concealed));
                Playout::Concealed(frame)
            }
        }
    }

    /// The payload for one frame of the owner's audio.
    pub(super) fn payload(&mut self, frame: Vec<u8>) -> Vec<u8> {
        match self {
            Self::G711(_) => frame,
            Self::G722 { encoder, .. } => {
                let samples = Format::Wideband.to_16k(&frame);
                let mut codes = Vec::with_capacity(samples.len() / 2);
                encoder.encode(&samples, &mut codes);
                codes
            }
        }
    }
}
