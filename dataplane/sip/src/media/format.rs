//! The audio a call's media session hands its owner and takes from it ([`Format`]): G.711
//! as it came (a G.711 call is never transcoded on its way to the gateway), or, on a G.722
//! or Opus call, 16 kHz PCM16 (what G.722 decodes to, what the edge decodes Opus at, and
//! what the gateway's session protocol takes as `pcm16` at 16000), so that the wideband
//! audio reaches the agent whole. Conversions
//! between formats are for where two sides differ: a bridge between a G.722 leg and a G.711
//! one, the edge's own 8 kHz sounds (announcements, the hold chime) on a G.722 call, or a
//! re-INVITE that changed the codec mid-call. They work frame by frame, without state:
//! 8 kHz to 16 kHz interpolates between samples, 16 kHz to 8 kHz averages each pair.

use super::g711::Law;
use crate::sdp::Codec;

/// The audio format on the owner's side of a media session (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// G.711 in this law at 8 kHz, a byte a sample.
    G711(Law),
    /// PCM16 little-endian at 16 kHz (a G.722 or Opus call's audio), two bytes a sample.
    Wideband,
}

impl Format {
    /// The format of a call whose phone speaks `codec`.
    pub fn of(codec: Codec) -> Self {
        match codec {
            Codec::Pcmu => Self::G711(Law::Ulaw),
            Codec::Pcma => Self::G711(Law::Alaw),
            Codec::G722 | Codec::Opus => Self::Wideband,
        }
    }

    /// The gateway session protocol's encoding and sample rate for this format
    /// (`session_start.audio`).
    pub fn session_encoding(self) -> (&'static str, u32) {
        match self {
            Self::G711(Law::Ulaw) => ("mulaw", 8000),
            Self::G711(Law::Alaw) => ("alaw", 8000),
            Self::Wideband => ("pcm16", 16_000),
        }
    }

    /// Bytes of audio in a millisecond: 8 for G.711, 32 for 16 kHz PCM16.
    pub fn bytes_per_ms(self) -> usize {
        match self {
            Self::G711(_) => 8,
            Self::Wideband => 32,
        }
    }

    /// Bytes in one frame ([`FRAME_MS`](super::FRAME_MS)): 160 or 640.
    pub fn frame_bytes(self) -> usize {
        self.bytes_per_ms() * super::FRAME_MS as usize
    }

    /// One byte of silence (G.711's code for zero), or 0 for PCM.
    pub fn silence_byte(self) -> u8 {
        match self {
            Self::G711(law) => law.silence(),
            Self::Wideband => 0,
        }
    }

    /// How many 8 kHz samples `bytes` of this format last.
    pub fn samples_8k(self, bytes: usize) -> usize {
        bytes * 8 / self.bytes_per_ms()
    }

    /// Scales audio in place by `gain` (0.0 to 1.0).
    pub fn scale(self, audio: &mut [u8], gain: f32) {
        match self {
            Self::G711(law) => law.scale(audio, gain),
            Self::Wideband => {
                for pair in audio.chunks_exact_mut(2) {
                    let sample = f32::from(i16::from_le_bytes([pair[0], pair[1]])) * gain;
                    pair.copy_from_slice(&(sample as i16).to_le_bytes());
                }
            }
        }
    }

    /// The audio as 8 kHz linear samples (16 kHz PCM averaged pairwise).
    pub fn to_8k(self, audio: &[u8]) -> Vec<i16> {
        match self {
            Self::G711(law) => audio.iter().map(|c| law.decode(*c)).collect(),
            Self::Wideband => audio
                .chunks_exact(4)
                .map(|b| {
                    let (first, second) = (i16::from_le_bytes([b[0], b[1]]), i16::from_le_bytes([b[2], b[3]]));
                    ((i32::from(first) + i32::from(second)) / 2) as i16
                })
                .collect(),
        }
    }

    /// 8 kHz linear samples in this format (interpolated to 16 kHz for PCM).
    pub fn from_8k(self, samples: &[i16]) -> Vec<u8> {
        match self {
            Self::G711(law) => samples.iter().map(|s| law.encode(*s)).collect(),
            Self::Wideband => {
                let mut out = Vec::with_capacity(samples.len() * 4);
                let mut previous = samples.first().copied().unwrap_or(0);
                for &sample in samples {
                    let between = ((i32::from(previous) + i32::from(sample)) / 2) as i16;
                    out.extend_from_slice(&between.to_le_bytes());
                    out.extend_from_slice(&sample.to_le_bytes());
                    previous = sample;
                }
                out
            }
        }
    }

    /// 16 kHz samples as this format's bytes (16 kHz PCM as it is; G.711 at 8 kHz).
    pub fn from_16k(self, samples: &[i16]) -> Vec<u8> {
        match self {
            Self::Wideband => samples.iter().flat_map(|s| s.to_le_bytes()).collect(),
            Self::G711(_) => self.from_8k(&Self::Wideband.to_8k(&Self::Wideband.from_16k(samples))),
        }
    }

    /// The audio in this format as 16 kHz samples (G.711 interpolated).
    pub fn to_16k(self, audio: &[u8]) -> Vec<i16> {
        let wide;
        let bytes = match self {
            Self::Wideband => audio,
            Self::G711(_) => {
                wide = Self::Wideband.from_8k(&self.to_8k(audio));
                &wide
            }
        };
        bytes.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect()
    }

    /// `audio` in this format converted to `to` (a copy when they are the same).
    pub fn convert(self, to: Self, audio: &[u8]) -> Vec<u8> {
        match (self, to) {
            (from, to) if from == to => audio.to_vec(),
            (Self::G711(from), Self::G711(to)) => audio.iter().map(|c| to.encode(from.decode(*c))).collect(),
            (from, to) => to.from_8k(&from.to_8k(audio)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f64, rate: f64, n: usize) -> Vec<i16> {
        (0..n).map(|i| (8000.0 * (2.0 * std::f64::consts::PI * hz * i as f64 / rate).sin()) as i16).collect()
    }

    #[test]
    fn every_codec_has_its_format_and_session_encoding() {
        assert_eq!(Format::of(Codec::Pcmu).session_encoding(), ("mulaw", 8000));
        assert_eq!(Format::of(Codec::Pcma).session_encoding(), ("alaw", 8000));
        assert_eq!(Format::of(Codec::G722).session_encoding(), ("pcm16", 16_000));
        assert_eq!(Format::of(Codec::Opus).session_encoding(), ("pcm16", 16_000));
        assert_eq!((Format::Wideband.frame_bytes(), Format::G711(Law::Ulaw).frame_bytes()), (640, 160));
        assert_eq!(Format::Wideband.samples_8k(640), 160);
    }

    #[test]
    fn narrowband_to_wideband_and_back_keeps_the_tone() {
        let narrow = Format::G711(Law::Ulaw).from_8k(&tone(500.0, 8000.0, 160));
        let wide = Format::G711(Law::Ulaw).convert(Format::Wideband, &narrow);
        assert_eq!(wide.len(), 640);
        let back = Format::Wideband.convert(Format::G711(Law::Alaw), &wide);
        assert_eq!(back.len(), 160);
        let (a, b) = (Format::G711(Law::Ulaw).to_8k(&narrow), Format::G711(Law::Alaw).to_8k(&back));
        // Averaging a pair of the interpolated samples delays by a quarter sample: small.
        let error: f64 = a.iter().zip(&b).skip(1).map(|(x, y)| f64::from(x - y).abs()).sum::<f64>() / 159.0;
        assert!(error < 600.0, "mean error {error}");
    }

    #[test]
    fn wideband_scales_and_converts_to_itself_unchanged() {
        let mut wide = Format::Wideband.from_16k(&tone(1000.0, 16_000.0, 320));
        assert_eq!(Format::Wideband.convert(Format::Wideband, &wide), wide);
        assert_eq!(Format::Wideband.to_16k(&wide), tone(1000.0, 16_000.0, 320));
        Format::Wideband.scale(&mut wide, 0.0);
        assert!(wide.iter().all(|b| *b == 0));
    }
}
