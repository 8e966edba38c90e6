//! The audio formats of a session with audio, as the protocol writes them:
//! `session_start.audio` ([`AudioSettings`]) asks for the caller's audio format (`input`),
//! the reply audio's (`output`) and reply audio as binary frames (`binary_output`);
//! `bidi_audio_stream.format` says what a chunk holds ([`AudioFormat`]). What is supported
//! and the conversions are in [`crate::audio`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `session_start.audio`: the formats a client sends and wants, and how it wants reply
/// audio. Every field is optional; without it audio is PCM16 at 16 kHz in and 24 kHz out,
/// as base64 in JSON.
///
/// ```json
/// {"input": {"encoding": "mulaw", "sample_rate": 8000},
///  "output": {"encoding": "mulaw", "sample_rate": 8000},
///  "binary_output": true}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AudioSettings {
    /// The caller's audio (`bidi_audio_input` and binary frames). Default PCM16 16 kHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<AudioFormat>,
    /// The reply audio (`bidi_audio_stream`, or binary frames). Default PCM16 24 kHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<AudioFormat>,
    /// Reply audio as binary WebSocket frames of raw samples in the output format, instead
    /// of base64 in `bidi_audio_stream` (a third less traffic). Every other message stays
    /// JSON.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary_output: bool,
}

/// An audio format: an encoding and a sample rate, mono.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AudioFormat {
    /// `pcm16` (16-bit signed little-endian linear), `mulaw` (G.711 μ-law; also `ulaw`,
    /// `g711_ulaw`) or `alaw` (G.711 A-law; also `g711_alaw`).
    #[serde(default = "pcm16")]
    pub encoding: String,
    /// Samples per second: PCM16 at 8000, 16000 or 24000; G.711 at 8000. Absent: the
    /// encoding's usual rate (G.711 8000; PCM16 16000 in and 24000 out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_rate: Option<u32>,
}

fn pcm16() -> String {
    "pcm16".to_owned()
}
