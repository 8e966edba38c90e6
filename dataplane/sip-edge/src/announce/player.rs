//! Playing a recording, with no I/O: [`Player`] cuts it into 20 ms frames of G.711 in the
//! call's format, once or repeated with a gap of silence; the call's task sends one frame each
//! 20 ms. [`Interjection`] says when an outage announcement may start in a call under way:
//! at a turn boundary, not over the agent's words.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_sip::media::FRAME_SAMPLES;
use switchboard_sip::media::format::Format;

use super::Recording;

/// The silence between two plays of a repeated announcement (the hold announcement).
pub const GAP: Duration = Duration::from_secs(1);

/// A recording being played (see the module docs).
#[derive(Debug)]
pub struct Player {
    recording: Arc<Recording>,
    /// The next sample, within one period (the recording and, repeated, its gap).
    at: usize,
    /// Silence after each play, in samples, when it repeats; `None`: played once.
    gap: Option<usize>,
    /// Whole plays so far.
    plays: u32,
}

impl Player {
    /// Plays `recording` once.
    pub fn once(recording: Arc<Recording>) -> Self {
        Self { recording, at: 0, gap: None, plays: 0 }
    }

    /// Plays `recording` again and again, `gap` of silence between plays.
    pub fn repeating(recording: Arc<Recording>, gap: Duration) -> Self {
        let gap = (gap.as_millis() as usize) * 8;
        Self { recording, at: 0, gap: Some(gap), plays: 0 }
    }

    /// The recording's file name.
    pub fn file(&self) -> &str {
        &self.recording.file
    }

    /// Whether a recording played once is over.
    pub fn is_over(&self) -> bool {
        self.gap.is_none() && self.plays > 0
    }

    /// Whole plays so far.
    pub fn plays(&self) -> u32 {
        self.plays
    }

    /// The next 20 ms in `format` (the last frame of a play padded with silence); `None`
    /// once a recording played once is over.
    pub fn next_frame(&mut self, format: Format) -> Option<Vec<u8>> {
        if self.is_over() {
            return None;
        }
        let samples = self.recording.samples();
        let period = samples.len() + self.gap.unwrap_or(0);
        let frame: Vec<i16> =
            (self.at..self.at + FRAME_SAMPLES).map(|i| samples.get(i).copied().unwrap_or(0)).collect();
        let frame = format.from_8k(&frame);
        self.at += FRAME_SAMPLES;
        let end = if self.gap.is_some() { period } else { samples.len() };
        if self.at >= end {
            self.plays += 1;
            // A repeat starts at the top of its period: the recording's first sample.
            self.at = 0;
        }
        Some(frame)
    }
}

/// How long the agent must have sent no audio, its reply played out, before an outage
/// announcement starts: a pause between turns, not one between words.
pub const QUIET: Duration = Duration::from_millis(600);

/// The longest an outage announcement waits for a turn boundary; then it starts whatever
/// the agent is saying.
pub const MAX_WAIT: Duration = Duration::from_secs(8);

/// When an outage announcement may start in a call under way (see the module docs).
#[derive(Debug)]
pub struct Interjection {
    told: Instant,
    last_agent_audio: Option<Instant>,
}

impl Interjection {
    /// The call was told of the outage at `now`.
    pub fn new(now: Instant) -> Self {
        Self { told: now, last_agent_audio: None }
    }

    /// The agent's audio came at `now`.
    pub fn agent_audio(&mut self, now: Instant) {
        self.last_agent_audio = Some(now);
    }

    /// Whether the announcement may start at `now`, with `queued` bytes of the agent's
    /// reply still to play: the reply played out and [`QUIET`] since the agent's last
    /// audio, or [`MAX_WAIT`] since the call was told.
    pub fn may_start(&self, now: Instant, queued: usize) -> bool {
        let waited = now.saturating_duration_since(self.told) >= MAX_WAIT;
        let quiet = self.last_agent_audio.is_none_or(|at| now.saturating_duration_since(at) >= QUIET);
        waited || (queued == 0 && quiet)
    }
}
