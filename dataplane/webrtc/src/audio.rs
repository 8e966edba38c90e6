//! The call's audio: Opus (a 48 kHz RTP clock) on the wire, PCM16 mono at the runtime's rates
//! on the session's side, transcoded once each way (libopus through [`switchboard_opus`], the
//! wrapper the SIP edge shares: its decoder's FEC and concealment, its voice encoder):
//! libopus decodes to and encodes from the runtime's rate itself, with no resampling by the
//! edge. [`Inbound`] decodes the caller's packets (in order, as str0m's reorder buffer
//! releases them), conceals what was lost — in-band FEC from the next packet for the frame
//! just before it, packet loss concealment for the rest — and fills DTX pauses, at the
//! runtime's input rate. [`Outbound`] cuts the agent's reply into 20 ms frames and encodes
//! each when its time comes (real-time pacing), and drops everything queued at once on a
//! flush (barge-in).

mod inbound;
mod outbound;

pub use inbound::{Inbound, InboundStats, MAX_LATENESS};
pub use outbound::{DEFAULT_COMPLEXITY, Frame, Outbound};

/// Opus's RTP clock.
pub const OPUS_RATE: u32 = switchboard_opus::RTP_CLOCK;
/// RTP time of one 20 ms frame (samples at 48 kHz).
pub const FRAME_SAMPLES: usize = 960;
/// One frame's duration.
pub const FRAME: std::time::Duration = std::time::Duration::from_millis(20);

/// The runtime's PCM rates a call converts to and from (those of the session protocol).
pub const RUNTIME_RATES: [u32; 3] = [8_000, 16_000, 24_000];

/// A codec failure.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// libopus refused to make an encoder or decoder, to set one up, or to encode
    /// ([`switchboard_opus`], the Opus wrapper the SIP edge shares).
    #[error(transparent)]
    Opus(#[from] switchboard_opus::OpusError),
    /// A rate the session protocol does not speak.
    #[error("{rate} Hz is not a rate of the session protocol (8000, 16000 or 24000)")]
    Rate {
        /// The rate asked for.
        rate: u32,
    },
}

/// The core's resampler between 48 kHz and a runtime rate. Calls used it before libopus
/// converted for them; its frequency response at these rates is still tested here.
#[cfg(test)]
fn resampler(from: u32, to: u32) -> Result<switchboard_core::audio::resample::Resampler, AudioError> {
    let rate = if from == OPUS_RATE { to } else { from };
    if !RUNTIME_RATES.contains(&rate) {
        return Err(AudioError::Rate { rate });
    }
    switchboard_core::audio::resample::Resampler::new(from, to).ok_or(AudioError::Rate { rate })
}

#[cfg(test)]
mod lateness_tests;
#[cfg(test)]
mod tests;
