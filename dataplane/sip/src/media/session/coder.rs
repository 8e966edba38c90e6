//! How a media session turns the phone's payloads into its owner's [`Format`] and back: G.711
//! passes through as it is (the jitter buffer conceals a lost frame by fading the last one);
//! G.722 is decoded to 16 kHz PCM16 as it plays and encoded from it as it is sent, one
//! encoder and one decoder for the stream's life (their state carries from frame to frame),
//! and a lost frame is concealed on the decoded audio with the jitter buffer's [`fade`].
//! Opus is decoded by libopus straight at 16 kHz and encoded from it (20 ms frames, the
//! encoder set up from the phone's fmtp: [`encoder_settings`]); a lost packet is rebuilt
//! from the in-band FEC of the packet after it when the jitter buffer already holds that
//! one, by libopus's loss concealment otherwise, and a packet that does not decode is
//! concealed the same way ([`switchboard_opus::VoiceDecoder`]).

use switchboard_opus::{EncoderSettings, VoiceDecoder, VoiceEncoder};

use crate::media::format::Format;
use crate::media::g711::Law;
use crate::media::jitter::{JitterBuffer, JitterConfig, Playout, fade};
use crate::media::{FRAME_MS, g722};
use crate::sdp::{Codec, Negotiated, OpusParams};

/// The rate Opus runs at here: the gateway session's (16 kHz PCM16).
const OPUS_RATE: u32 = 16_000;
/// The bitrate the edge aims at for Opus, unless the phone takes less: 32 kbit/s, wideband
/// voice with room for FEC.
const OPUS_BITRATE: u32 = 32_000;
/// The largest Opus payload the jitter buffer holds (RFC 6716 allows 1275 bytes a frame;
/// a 20 ms voice frame is 40-160): above the G.711-sized default.
const OPUS_MAX_PAYLOAD: usize = 1500;

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
    Opus {
        encoder: Box<VoiceEncoder>,
        decoder: Box<VoiceDecoder>,
    },
}

/// How the edge's Opus encoder writes for a phone whose decoder takes `params` (see
/// [`crate::sdp::opus`]).
pub(crate) fn encoder_settings(params: &OpusParams) -> EncoderSettings {
    EncoderSettings {
        fec: params.use_inband_fec,
        expected_loss: 10,
        dtx: false,
        max_playback_rate: params.max_playback_rate,
        bitrate: Some(params.max_average_bitrate.map_or(OPUS_BITRATE, |max| max.min(OPUS_BITRATE))),
        cbr: params.cbr,
    }
}

impl Coder {
    pub(super) fn new(media: &Negotiated) -> Self {
        match (media.codec, Format::of(media.codec)) {
            (Codec::Opus, _) => {
                let settings = encoder_settings(&media.opus.unwrap_or_default());
                // 16 kHz is a rate libopus runs at and every setting is in its range (the
                // bitrate clamped, the bandwidth one of its five): libopus fails neither but
                // out of memory.
                let encoder = VoiceEncoder::new(OPUS_RATE, &settings).expect("libopus makes a 16 kHz voice encoder");
                let decoder = VoiceDecoder::new(OPUS_RATE).expect("libopus makes a 16 kHz decoder");
                Self::Opus { encoder: Box::new(encoder), decoder: Box::new(decoder) }
            }
            (_, Format::G711(law)) => Self::G711(law),
            (_, Format::Wideband) => Self::G722 {
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
            Self::G722 { .. } | Self::Opus { .. } => Format::Wideband,
        }
    }

    /// A jitter buffer for the phone's stream.
    pub(super) fn jitter(&self, config: JitterConfig) -> JitterBuffer {
        match self {
            Self::G711(law) => JitterBuffer::new(Some(*law), config),
            Self::G722 { .. } => JitterBuffer::new(None, config),
            Self::Opus { .. } => {
                let max_payload = config.max_payload.max(OPUS_MAX_PAYLOAD);
                JitterBuffer::new(None, JitterConfig { max_payload, ..config })
            }
        }
    }

    /// The phone started a new stream (a new SSRC): decode it from the initial state.
    pub(super) fn restart(&mut self) {
        match self {
            Self::G711(_) => {}
            Self::G722 { decoder, last, .. } => {
                **decoder = g722::Decoder::new();
                last.clear();
            }
            Self::Opus { decoder, .. } => decoder.reset(),
        }
    }

    /// What the jitter buffer played, in the owner's format; `concealed` is its count of
    /// frames concealed in a row, `next` the packet it holds after a lost one (Opus's FEC).
    pub(super) fn play(&mut self, play: Playout, concealed: usize, next: Option<&[u8]>) -> Playout {
        match self {
            Self::G711(_) => play,
            Self::G722 { decoder, last, .. } => match play {
                Playout::Waiting => Playout::Waiting,
                Playout::Frame(codes) => {
                    let mut samples = Vec::with_capacity(codes.len() * 2);
                    decoder.decode(&codes, &mut samples);
                    let frame = Format::Wideband.from_16k(&samples);
                    frame.clone_into(last);
                    Playout::Frame(frame)
                }
                Playout::Concealed(_) => {
                    let mut frame =
                        if last.is_empty() { vec![0; Format::Wideband.frame_bytes()] } else { last.clone() };
                    Format::Wideband.scale(&mut frame, fade(concealed));
                    Playout::Concealed(frame)
                }
            },
            Self::Opus { decoder, .. } => match play {
                Playout::Waiting => Playout::Waiting,
                Playout::Frame(packet) => {
                    let decoded = decoder.decode(&packet, FRAME_MS);
                    let frame = Format::Wideband.from_16k(decoded.pcm);
                    if decoded.concealed { Playout::Concealed(frame) } else { Playout::Frame(frame) }
                }
                Playout::Concealed(_) => {
                    let samples = decoder.samples(FRAME_MS);
                    Playout::Concealed(Format::Wideband.from_16k(decoder.recover(next, samples).pcm))
                }
            },
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
            // A whole 20 ms frame at 16 kHz always encodes; were it ever refused, a packet
            // of one TOC byte and no frame (SILK wideband, 20 ms: config 9) is what a
            // decoder conceals as lost.
            Self::Opus { encoder, .. } => {
                encoder.encode(&Format::Wideband.to_16k(&frame)).unwrap_or_else(|_| vec![9 << 3])
            }
        }
    }
}
