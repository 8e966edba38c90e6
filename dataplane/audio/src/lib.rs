//! Audio formats of sessions with audio, and the conversions between what a client speaks
//! and what the voice model takes: Nova Sonic hears 16 kHz PCM16 and speaks 24 kHz PCM16;
//! a client may send and receive PCM16 at 8, 16 or 24 kHz, or G.711 μ-law or A-law at
//! 8 kHz (telephony). [`negotiate`] reads `session_start.audio` ([`AudioSettings`]);
//! [`Decoder`] turns the caller's audio into the model's input, [`Encoder`] the model's
//! reply audio into the client's format. Pure and I/O-free: the runtime calls them.

pub mod g711;
pub mod gather;
pub mod noise;
pub mod resample;

use resample::Resampler;
use switchboard_protocol::{AudioFormat, AudioSettings};

/// The voice model's input: 16 kHz PCM16.
pub const MODEL_INPUT_RATE: u32 = 16_000;
/// The voice model's output: 24 kHz PCM16.
pub const MODEL_OUTPUT_RATE: u32 = 24_000;

/// How samples are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// 16-bit signed linear, little-endian.
    Pcm16,
    /// G.711 μ-law, one byte a sample.
    Mulaw,
    /// G.711 A-law, one byte a sample.
    Alaw,
}

impl Encoding {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pcm16 => "pcm16",
            Self::Mulaw => "mulaw",
            Self::Alaw => "alaw",
        }
    }

    /// Bytes per sample.
    pub fn sample_bytes(self) -> usize {
        match self {
            Self::Pcm16 => 2,
            Self::Mulaw | Self::Alaw => 1,
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "pcm16" | "pcm" | "lpcm" => Some(Self::Pcm16),
            "mulaw" | "ulaw" | "g711_ulaw" | "pcmu" => Some(Self::Mulaw),
            "alaw" | "g711_alaw" | "pcma" => Some(Self::Alaw),
            _ => None,
        }
    }
}

/// A supported audio format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    /// The encoding.
    pub encoding: Encoding,
    /// Samples per second.
    pub rate: u32,
}

impl Format {
    /// What the voice model hears.
    pub const MODEL_INPUT: Self = Self { encoding: Encoding::Pcm16, rate: MODEL_INPUT_RATE };
    /// What the voice model says.
    pub const MODEL_OUTPUT: Self = Self { encoding: Encoding::Pcm16, rate: MODEL_OUTPUT_RATE };

    /// Bytes of one second of this audio.
    pub fn bytes_per_second(self) -> usize {
        self.rate as usize * self.encoding.sample_bytes()
    }

    /// As the protocol writes it.
    pub fn to_wire(self) -> AudioFormat {
        AudioFormat { encoding: self.encoding.as_str().to_owned(), sample_rate: Some(self.rate) }
    }

    /// Short text for messages: `PCM16 16 kHz`, `μ-law 8 kHz`.
    pub fn describe(self) -> String {
        let name = match self.encoding {
            Encoding::Pcm16 => "PCM16",
            Encoding::Mulaw => "G.711 μ-law",
            Encoding::Alaw => "G.711 A-law",
        };
        format!("{name} {} kHz", self.rate / 1000)
    }
}

/// Which way the audio goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The caller's audio.
    Input,
    /// The reply audio.
    Output,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Output => "output",
        }
    }

    fn default_format(self) -> Format {
        match self {
            Self::Input => Format::MODEL_INPUT,
            Self::Output => Format::MODEL_OUTPUT,
        }
    }
}

/// A format a client asked for that is not supported.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// No such encoding.
    #[error(
        "session_start.audio.{direction}.encoding {encoding:?} is not supported: use pcm16, mulaw or alaw; the {direction} stays {fallback}"
    )]
    UnknownEncoding {
        /// `input` or `output`.
        direction: &'static str,
        /// As sent.
        encoding: String,
        /// The format used instead.
        fallback: String,
    },
    /// A known encoding at a rate it is not offered at.
    #[error(
        "session_start.audio.{direction}: {encoding} at {rate} Hz is not supported: {supported}; the {direction} stays {fallback}"
    )]
    UnsupportedRate {
        /// `input` or `output`.
        direction: &'static str,
        /// The encoding's name.
        encoding: &'static str,
        /// As sent.
        rate: u32,
        /// The rates it has.
        supported: &'static str,
        /// The format used instead.
        fallback: String,
    },
}

/// The format `wanted` names for `direction`, if it is supported.
pub fn resolve(wanted: &AudioFormat, direction: Direction) -> Result<Format, FormatError> {
    let fallback = direction.default_format();
    let Some(encoding) = Encoding::parse(&wanted.encoding) else {
        return Err(FormatError::UnknownEncoding {
            direction: direction.name(),
            encoding: wanted.encoding.chars().take(32).collect(),
            fallback: fallback.describe(),
        });
    };
    let rate = wanted.sample_rate.unwrap_or(match encoding {
        Encoding::Pcm16 => fallback.rate,
        Encoding::Mulaw | Encoding::Alaw => 8000,
    });
    let (ok, supported) = match encoding {
        Encoding::Pcm16 => (matches!(rate, 8000 | 16_000 | 24_000), "PCM16 is offered at 8000, 16000 and 24000 Hz"),
        Encoding::Mulaw | Encoding::Alaw => (rate == 8000, "G.711 runs at 8000 Hz only"),
    };
    if !ok {
        return Err(FormatError::UnsupportedRate {
            direction: direction.name(),
            encoding: encoding.as_str(),
            rate,
            supported,
            fallback: fallback.describe(),
        });
    }
    Ok(Format { encoding, rate })
}

/// The formats a session uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The caller's audio.
    pub input: Format,
    /// The reply audio.
    pub output: Format,
    /// Reply audio as binary frames.
    pub binary_output: bool,
}

impl Default for Negotiated {
    fn default() -> Self {
        Self { input: Format::MODEL_INPUT, output: Format::MODEL_OUTPUT, binary_output: false }
    }
}

/// The formats `settings` ask for; an unsupported one falls back to the default of its
/// direction, with an error to tell the client.
pub fn negotiate(settings: Option<&AudioSettings>) -> (Negotiated, Vec<FormatError>) {
    let mut negotiated = Negotiated::default();
    let mut errors = Vec::new();
    let Some(settings) = settings else { return (negotiated, errors) };
    negotiated.binary_output = settings.binary_output;
    for (wanted, direction, slot) in [
        (&settings.input, Direction::Input, &mut negotiated.input),
        (&settings.output, Direction::Output, &mut negotiated.output),
    ] {
        if let Some(wanted) = wanted {
            match resolve(wanted, direction) {
                Ok(format) => *slot = format,
                Err(error) => errors.push(error),
            }
        }
    }
    (negotiated, errors)
}

/// The caller's audio in some [`Format`] to the model's 16 kHz PCM16, frame by frame.
#[derive(Clone, Debug)]
pub struct Decoder {
    format: Format,
    resampler: Resampler,
    samples: Vec<i16>,
    resampled: Vec<i16>,
}

impl Decoder {
    /// A decoder of `format` (a supported one: see [`resolve`]).
    pub fn new(format: Format) -> Self {
        // Every supported rate converts (ratios of 1, 2 and 3).
        let resampler = Resampler::new(format.rate, MODEL_INPUT_RATE)
            .unwrap_or_else(|| Resampler::new(MODEL_INPUT_RATE, MODEL_INPUT_RATE).expect("identity"));
        Self { format, resampler, samples: Vec::new(), resampled: Vec::new() }
    }

    /// The format it reads.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether it passes audio unchanged (the client sends the model's format).
    pub fn is_passthrough(&self) -> bool {
        self.format == Format::MODEL_INPUT
    }

    /// One frame of whole samples of the format, as 16 kHz PCM16 little-endian bytes.
    pub fn decode(&mut self, frame: &[u8]) -> Vec<u8> {
        if self.is_passthrough() {
            return frame.to_vec();
        }
        to_samples(frame, self.format.encoding, &mut self.samples);
        self.resampled.clear();
        self.resampler.process(&self.samples, &mut self.resampled);
        self.resampled.iter().flat_map(|s| s.to_le_bytes()).collect()
    }
}

/// The model's 24 kHz PCM16 reply audio to the client's [`Format`], chunk by chunk.
#[derive(Clone, Debug)]
pub struct Encoder {
    format: Format,
    resampler: Resampler,
    samples: Vec<i16>,
    resampled: Vec<i16>,
}

impl Encoder {
    /// An encoder to `format` (a supported one: see [`resolve`]).
    pub fn new(format: Format) -> Self {
        let resampler = Resampler::new(MODEL_OUTPUT_RATE, format.rate)
            .unwrap_or_else(|| Resampler::new(MODEL_OUTPUT_RATE, MODEL_OUTPUT_RATE).expect("identity"));
        Self { format, resampler, samples: Vec::new(), resampled: Vec::new() }
    }

    /// The format it writes.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether it passes audio unchanged (the client takes the model's format).
    pub fn is_passthrough(&self) -> bool {
        self.format == Format::MODEL_OUTPUT
    }

    /// One chunk of 24 kHz PCM16 little-endian bytes (a trailing odd byte is dropped) in
    /// the client's format.
    pub fn encode(&mut self, pcm: &[u8]) -> Vec<u8> {
        if self.is_passthrough() {
            return pcm.to_vec();
        }
        to_samples(pcm, Encoding::Pcm16, &mut self.samples);
        self.resampled.clear();
        self.resampler.process(&self.samples, &mut self.resampled);
        from_samples(&self.resampled, self.format.encoding)
    }
}

/// The linear samples of `bytes` in `encoding`, into `out` (cleared first).
pub fn to_samples(bytes: &[u8], encoding: Encoding, out: &mut Vec<i16>) {
    out.clear();
    match encoding {
        Encoding::Pcm16 => out.extend(bytes.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]]))),
        Encoding::Mulaw => out.extend(bytes.iter().map(|&code| g711::ulaw_to_linear(code))),
        Encoding::Alaw => out.extend(bytes.iter().map(|&code| g711::alaw_to_linear(code))),
    }
}

/// `samples` written in `encoding`.
pub fn from_samples(samples: &[i16], encoding: Encoding) -> Vec<u8> {
    match encoding {
        Encoding::Pcm16 => samples.iter().flat_map(|s| s.to_le_bytes()).collect(),
        Encoding::Mulaw => samples.iter().map(|&s| g711::linear_to_ulaw(s)).collect(),
        Encoding::Alaw => samples.iter().map(|&s| g711::linear_to_alaw(s)).collect(),
    }
}

#[cfg(test)]
mod tests;
