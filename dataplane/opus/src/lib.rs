//! Opus (RFC 6716) as Switchboard's media edges speak it: [`VoiceEncoder`], a voice encoder
//! set up from what the peer asked for ([`EncoderSettings`]: in-band FEC, the bandwidth it
//! plays, a bitrate cap, constant bitrate), and [`VoiceDecoder`], a decoder that never
//! fails a call: a packet that does not decode is concealed, a lost one is rebuilt from the
//! next packet's in-band FEC when that packet is at hand, by libopus's packet loss
//! concealment (PLC) otherwise, and what it did is counted ([`DecoderStats`]).
//!
//! Both run at any rate libopus runs at (8, 12, 16, 24 or 48 kHz): the WebRTC edge at the
//! runtime's rates (the caller's audio decoded to 16 kHz, the reply encoded from 24 kHz),
//! the SIP edge at 16 kHz (a phone's Opus goes to the gateway as 16 kHz PCM16, as G.722's
//! does). The encoder's complexity is the caller's to choose
//! ([`VoiceEncoder::set_complexity`]): it is most of what Opus costs a call. On the wire Opus's RTP clock is
//! always 48 kHz ([`RTP_CLOCK`], RFC 7587 §4.1), whatever the rate of the audio.
//! Mono both ways: a stereo packet decodes to its downmix.
//!
//! Both are `Sync` (libopus's states are `Send` only): each state sits in a [`Mutex`] that
//! is never locked, only reached through `&mut self` ([`Mutex::get_mut`], no locking), so an
//! async owner may hold a reference to a call's media across an `.await`.

use std::sync::{Mutex, PoisonError};

use opus::{Application, Bandwidth, Bitrate, Channels, Decoder, Encoder};

/// Opus's RTP clock rate (RFC 7587 §4.1), whatever the audio's own rate.
pub const RTP_CLOCK: u32 = 48_000;
/// The rates libopus encodes and decodes at.
pub const RATES: [u32; 5] = [8_000, 12_000, 16_000, 24_000, 48_000];
/// The largest packet the encoder writes (a 20 ms voice frame is 40-160 bytes; RFC 6716
/// allows 1275 bytes a frame).
pub const MAX_PACKET_BYTES: usize = 1500;
/// libopus's highest encoder complexity, and its default ([`VoiceEncoder::set_complexity`]).
pub const MAX_COMPLEXITY: u8 = 10;
/// The longest packet there is: 120 ms (RFC 6716 §3.2.5).
const MAX_PACKET_MS: usize = 120;

/// A codec failure.
#[derive(Debug, thiserror::Error)]
pub enum OpusError {
    /// libopus refused to make an encoder or decoder, to set one up, or to encode.
    #[error("Opus {what} failed: {source}")]
    Codec {
        /// What was being done.
        what: &'static str,
        /// libopus's error.
        #[source]
        source: opus::Error,
    },
    /// A rate libopus does not run at.
    #[error("{rate} Hz is not a rate Opus runs at (8000, 12000, 16000, 24000 or 48000)")]
    Rate {
        /// The rate asked for.
        rate: u32,
    },
}

impl OpusError {
    /// A closure that wraps libopus's error for `what` was being done.
    pub fn codec(what: &'static str) -> impl FnOnce(opus::Error) -> Self {
        move |source| Self::Codec { what, source }
    }
}

fn checked(rate: u32) -> Result<u32, OpusError> {
    if RATES.contains(&rate) { Ok(rate) } else { Err(OpusError::Rate { rate }) }
}

/// How the encoder writes, from what the peer's decoder asked for (RFC 7587 §6.1's fmtp
/// parameters, or WebRTC's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderSettings {
    /// Write in-band FEC (the peer's `useinbandfec=1`): each packet carries a coarse copy of
    /// the one before, which the peer's decoder rebuilds a lost packet from.
    pub fec: bool,
    /// The loss the encoder expects, in percent: libopus writes FEC only when it expects
    /// loss, and more of it the more it expects.
    pub expected_loss: u8,
    /// Discontinuous transmission: silence is written as 1-2 byte packets the sender may
    /// leave out.
    pub dtx: bool,
    /// The highest rate the peer plays (`maxplaybackrate`): the encoder's bandwidth stays
    /// below half of it (8000: narrowband; 16000: wideband; ...).
    pub max_playback_rate: Option<u32>,
    /// The average bitrate to aim at, in bits a second (6000 to 510000; at most the peer's
    /// `maxaveragebitrate`); `None`: libopus's choice for the rate (about 19 kbit/s at
    /// 16 kHz, which FEC then shares).
    pub bitrate: Option<u32>,
    /// Constant bitrate (`cbr=1`).
    pub cbr: bool,
}

impl Default for EncoderSettings {
    /// FEC for 10 % loss (a poor mobile link), no DTX, no limits, variable bitrate.
    fn default() -> Self {
        Self { fec: true, expected_loss: 10, dtx: false, max_playback_rate: None, bitrate: None, cbr: false }
    }
}

/// The widest Opus bandwidth a peer that plays at most `rate` Hz can use (RFC 7587 §6.1).
pub fn bandwidth_for(rate: u32) -> Bandwidth {
    match rate {
        0..=8_000 => Bandwidth::Narrowband,
        8_001..=12_000 => Bandwidth::Mediumband,
        12_001..=16_000 => Bandwidth::Wideband,
        16_001..=24_000 => Bandwidth::Superwideband,
        _ => Bandwidth::Fullband,
    }
}

/// A mono voice encoder (libopus's VoIP application) of PCM16 at one rate.
#[derive(Debug)]
pub struct VoiceEncoder {
    /// Never locked: see the crate docs.
    encoder: Mutex<Encoder>,
    rate: u32,
}

impl VoiceEncoder {
    /// An encoder of PCM16 at `rate` Hz, set up as `settings` say.
    pub fn new(rate: u32, settings: &EncoderSettings) -> Result<Self, OpusError> {
        let mut encoder =
            Encoder::new(checked(rate)?, Channels::Mono, Application::Voip).map_err(OpusError::codec("encoder"))?;
        encoder.set_inband_fec(settings.fec).map_err(OpusError::codec("in-band FEC"))?;
        if settings.fec {
            let loss = i32::from(settings.expected_loss.min(100));
            encoder.set_packet_loss_perc(loss).map_err(OpusError::codec("expected loss"))?;
        }
        encoder.set_dtx(settings.dtx).map_err(OpusError::codec("DTX"))?;
        if let Some(playback) = settings.max_playback_rate {
            encoder.set_max_bandwidth(bandwidth_for(playback)).map_err(OpusError::codec("bandwidth"))?;
        }
        if let Some(bits) = settings.bitrate {
            let bits = i32::try_from(bits.clamp(6_000, 510_000)).unwrap_or(510_000);
            encoder.set_bitrate(Bitrate::Bits(bits)).map_err(OpusError::codec("bitrate"))?;
        }
        if settings.cbr {
            encoder.set_vbr(false).map_err(OpusError::codec("constant bitrate"))?;
        }
        Ok(Self { encoder: Mutex::new(encoder), rate })
    }

    /// The rate of the PCM it takes.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Sets how much work libopus does for each frame, 0 to [`MAX_COMPLEXITY`] (more is
    /// taken as 10): libopus's default is 10, its best quality for the bitrate and by far
    /// its largest cost at voice rates (the SILK layer's delayed-decision noise shaping and
    /// warped analysis, which lower complexities simplify or leave out). libwebrtc encodes
    /// at 9 on desktops and 5 on phones.
    pub fn set_complexity(&mut self, complexity: u8) -> Result<(), OpusError> {
        let encoder = self.encoder.get_mut().unwrap_or_else(PoisonError::into_inner);
        let complexity = i32::from(complexity.min(MAX_COMPLEXITY));
        encoder.set_complexity(complexity).map_err(OpusError::codec("complexity"))
    }

    /// The complexity it encodes at (see [`VoiceEncoder::set_complexity`]).
    pub fn complexity(&mut self) -> Result<u8, OpusError> {
        let encoder = self.encoder.get_mut().unwrap_or_else(PoisonError::into_inner);
        let complexity = encoder.get_complexity().map_err(OpusError::codec("complexity"))?;
        Ok(u8::try_from(complexity).unwrap_or(MAX_COMPLEXITY))
    }

    /// The encoder's look-ahead, in samples at its rate: how far the decoded audio lags the
    /// audio encoded. libopus's is 6.5 ms for voice at every rate (2.5 ms of the CELT
    /// layer's overlap and 4 ms of delay compensation that keeps its modes aligned).
    pub fn lookahead(&mut self) -> Result<usize, OpusError> {
        let encoder = self.encoder.get_mut().unwrap_or_else(PoisonError::into_inner);
        let samples = encoder.get_lookahead().map_err(OpusError::codec("look-ahead"))?;
        Ok(usize::try_from(samples).unwrap_or(0))
    }

    /// One frame of PCM (2.5, 5, 10, 20, 40 or 60 ms at the encoder's rate) as one packet.
    pub fn encode(&mut self, pcm: &[i16]) -> Result<Vec<u8>, OpusError> {
        let encoder = self.encoder.get_mut().unwrap_or_else(PoisonError::into_inner);
        encoder.encode_vec(pcm, MAX_PACKET_BYTES).map_err(OpusError::codec("encode"))
    }
}

/// What a [`VoiceDecoder`] did so far, in samples at its rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Packets decoded.
    pub packets: u64,
    /// Packets that did not decode (concealed instead).
    pub malformed: u64,
    /// Samples rebuilt from in-band FEC.
    pub fec_samples: u64,
    /// Samples made up by packet loss concealment (loss, DTX pauses, malformed packets).
    pub concealed_samples: u64,
}

/// What one call of [`VoiceDecoder::decode`] or [`VoiceDecoder::recover`] gave.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// The PCM, at the decoder's rate.
    pub pcm: &'a [i16],
    /// Whether it was made up by concealment (the packet did not decode, or no FEC was at
    /// hand) rather than decoded.
    pub concealed: bool,
}

/// A mono decoder at one rate that conceals rather than fails (see the crate docs).
#[derive(Debug)]
pub struct VoiceDecoder {
    /// Never locked: see the crate docs.
    decoder: Mutex<Decoder>,
    rate: u32,
    /// Room for the longest packet (120 ms).
    scratch: Vec<i16>,
    stats: DecoderStats,
}

impl VoiceDecoder {
    /// A decoder whose PCM comes out at `rate` Hz.
    pub fn new(rate: u32) -> Result<Self, OpusError> {
        let decoder = Decoder::new(checked(rate)?, Channels::Mono).map_err(OpusError::codec("decoder"))?;
        let scratch = vec![0; rate as usize * MAX_PACKET_MS / 1000];
        Ok(Self { decoder: Mutex::new(decoder), rate, scratch, stats: DecoderStats::default() })
    }

    /// The rate of the PCM it gives.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// What it did so far.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Samples in `ms` milliseconds at the decoder's rate.
    pub fn samples(&self, ms: u32) -> usize {
        (self.rate * ms / 1000) as usize
    }

    /// Forgets the stream so far (the sender started a new one).
    pub fn reset(&mut self) {
        // Resetting a valid decoder does not fail; a fresh one replaces it if it ever did.
        let decoder = self.decoder.get_mut().unwrap_or_else(PoisonError::into_inner);
        if decoder.reset_state().is_err()
            && let Ok(fresh) = Decoder::new(self.rate, Channels::Mono)
        {
            *decoder = fresh;
        }
    }

    /// One packet's audio; a packet that does not decode (malformed, or empty) is counted
    /// and concealed as `fallback_ms` of loss.
    pub fn decode(&mut self, packet: &[u8], fallback_ms: u32) -> Decoded<'_> {
        let decoder = self.decoder.get_mut().unwrap_or_else(PoisonError::into_inner);
        let decoded = if packet.is_empty() { None } else { decoder.decode(packet, &mut self.scratch, false).ok() };
        match decoded {
            Some(samples) => {
                self.stats.packets += 1;
                Decoded { pcm: &self.scratch[..samples], concealed: false }
            }
            None => {
                self.stats.malformed += 1;
                let samples = self.conceal_into(self.samples(fallback_ms));
                Decoded { pcm: &self.scratch[..samples], concealed: true }
            }
        }
    }

    /// `samples` of audio lost just before `next` (the packet that follows the loss, when
    /// it is at hand): rebuilt from its in-band FEC where it has some, concealed otherwise.
    /// `samples` is cut to whole 2.5 ms steps and at most 120 ms, as libopus takes them.
    pub fn recover(&mut self, next: Option<&[u8]>, samples: usize) -> Decoded<'_> {
        let samples = self.whole(samples);
        let decoder = self.decoder.get_mut().unwrap_or_else(PoisonError::into_inner);
        let fec = next
            .filter(|p| !p.is_empty() && samples > 0)
            .and_then(|packet| decoder.decode(packet, &mut self.scratch[..samples], true).ok());
        match fec {
            Some(made) => {
                self.stats.fec_samples += made as u64;
                Decoded { pcm: &self.scratch[..made], concealed: false }
            }
            None => {
                let made = self.conceal_into(samples);
                Decoded { pcm: &self.scratch[..made], concealed: true }
            }
        }
    }

    /// `samples` of packet loss concealment (whole 2.5 ms steps, at most 120 ms): after a
    /// DTX packet, comfort noise.
    pub fn conceal(&mut self, samples: usize) -> &[i16] {
        let made = self.conceal_into(self.whole(samples));
        &self.scratch[..made]
    }

    fn whole(&self, samples: usize) -> usize {
        let step = self.rate as usize / 400;
        (samples.min(self.scratch.len()) / step) * step
    }

    fn conceal_into(&mut self, samples: usize) -> usize {
        let samples = samples.min(self.scratch.len());
        let decoder = self.decoder.get_mut().unwrap_or_else(PoisonError::into_inner);
        let made = decoder.decode(&[], &mut self.scratch[..samples], false).unwrap_or_else(|_| {
            self.scratch[..samples].fill(0);
            samples
        });
        self.stats.concealed_samples += made as u64;
        made
    }
}

#[cfg(test)]
mod complexity_tests;
#[cfg(test)]
mod tests;
