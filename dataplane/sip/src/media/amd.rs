//! Answering-machine detection (AMD) for outbound calls, without I/O: the callee's decoded
//! audio (8 kHz, 16-bit) in, frame by frame from the answer on; a verdict out.
//!
//! Two stages. [`Detector`] decides who answered from the first seconds: a short greeting
//! followed by silence is a person ([`Verdict::Human`]: "Hello?" and a pause for the
//! caller), speech that goes on past [`AmdConfig::greeting_max`] with no pause longer
//! than [`AmdConfig::silence_after_greeting`] is a recorded greeting
//! ([`Verdict::Machine`]), and silence from the start for [`AmdConfig::initial_silence`]
//! or no decision within [`AmdConfig::decision_timeout`] is [`Verdict::Unknown`]. Sound
//! shorter than [`AmdConfig::min_word`] (a click, a breath) is not speech.
//!
//! For a machine, [`BeepWaiter`] then says when a message may start, so that the recording
//! holds all of it: when the voicemail beep ends (a steady tone of
//! [`AmdConfig::beep_frequencies`] lasting at least [`AmdConfig::beep_min`]: see [`beep`]),
//! or, for a machine with no beep, after [`AmdConfig::silence_after_message`] of silence
//! that follows its greeting, or at the latest after [`AmdConfig::beep_timeout`].
//!
//! Time is counted in samples, so the same audio always gives the same answer.

pub mod beep;
#[cfg(test)]
mod tests;

use std::ops::RangeInclusive;
use std::time::Duration;

use super::CLOCK_RATE;
use beep::{Tone, ToneRun};

/// The thresholds of detection (the defaults fit a carrier's voicemail and a person who
/// answers with a word or a short sentence).
#[derive(Clone, Debug, PartialEq)]
pub struct AmdConfig {
    /// A frame whose RMS is at least this (0..1 of full scale) is sound; default 0.01
    /// (-40 dBFS: well above a line's noise, below quiet speech).
    pub speech_threshold: f64,
    /// Sound shorter than this in all is not speech (a click, a breath); default 120 ms.
    pub min_word: Duration,
    /// No sound at all this long after the answer: [`Verdict::Unknown`]; default 3.5 s.
    pub initial_silence: Duration,
    /// Speech that goes on this long is a machine's greeting; default 2.5 s.
    pub greeting_max: Duration,
    /// Silence this long after speech ends a person's greeting; default 800 ms. Shorter
    /// pauses are the gaps between words.
    pub silence_after_greeting: Duration,
    /// No verdict this long after the answer: [`Verdict::Unknown`]; default 5 s.
    pub decision_timeout: Duration,
    /// The frequencies a voicemail beep has; default 400-2000 Hz.
    pub beep_frequencies: RangeInclusive<f64>,
    /// A steady tone at least this long is the beep; default 200 ms.
    pub beep_min: Duration,
    /// A machine whose greeting ends in this much silence, with no beep, takes the message
    /// now; default 2.5 s.
    pub silence_after_message: Duration,
    /// The message starts at the latest this long after the machine verdict; default 30 s.
    pub beep_timeout: Duration,
}

impl Default for AmdConfig {
    fn default() -> Self {
        Self {
            speech_threshold: 0.01,
            min_word: Duration::from_millis(120),
            initial_silence: Duration::from_millis(3500),
            greeting_max: Duration::from_millis(2500),
            silence_after_greeting: Duration::from_millis(800),
            decision_timeout: Duration::from_secs(5),
            beep_frequencies: 400.0..=2000.0,
            beep_min: Duration::from_millis(200),
            silence_after_message: Duration::from_millis(2500),
            beep_timeout: Duration::from_secs(30),
        }
    }
}

/// Why an [`AmdConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AmdConfigError {
    /// The speech threshold is not a fraction of full scale.
    #[error("the speech threshold {0} is not between 0 and 1 (exclusive) of full scale")]
    Threshold(f64),
    /// The beep's frequencies are not a range within what 8 kHz audio carries.
    #[error("the beep frequencies {0:?} Hz are not a range within 100-3900 Hz")]
    Frequencies(RangeInclusive<f64>),
    /// A duration is zero, or the greeting's bound is past the decision's.
    #[error("{0}")]
    Durations(&'static str),
}

impl AmdConfig {
    /// Checks the thresholds make sense together.
    pub fn check(&self) -> Result<(), AmdConfigError> {
        if !(self.speech_threshold > 0.0 && self.speech_threshold < 1.0) {
            return Err(AmdConfigError::Threshold(self.speech_threshold));
        }
        let (low, high) = (*self.beep_frequencies.start(), *self.beep_frequencies.end());
        if !(100.0..=3900.0).contains(&low) || !(100.0..=3900.0).contains(&high) || low >= high {
            return Err(AmdConfigError::Frequencies(self.beep_frequencies.clone()));
        }
        let durations = [
            self.min_word,
            self.initial_silence,
            self.greeting_max,
            self.silence_after_greeting,
            self.decision_timeout,
            self.beep_min,
            self.silence_after_message,
            self.beep_timeout,
        ];
        if durations.iter().any(Duration::is_zero) {
            return Err(AmdConfigError::Durations("every AMD duration must be above zero"));
        }
        if self.greeting_max >= self.decision_timeout {
            return Err(AmdConfigError::Durations(
                "the longest greeting must be shorter than the decision timeout (else no call is ever a machine)",
            ));
        }
        Ok(())
    }
}

/// Who answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// A person (a short greeting, then silence).
    Human,
    /// An answering machine or voicemail (a long greeting).
    Machine,
    /// Could not tell in time (silence, or sound that never settled).
    Unknown,
}

impl Verdict {
    /// Its name (`human`, `machine`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::Machine => "machine",
            Self::Unknown => "unknown",
        }
    }
}

/// Samples in `duration` at the G.711 clock.
fn samples(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros() * u128::from(CLOCK_RATE) / 1_000_000).unwrap_or(u64::MAX)
}

/// The duration of `samples` at the G.711 clock.
fn duration(samples: u64) -> Duration {
    Duration::from_micros(samples.saturating_mul(1_000_000) / u64::from(CLOCK_RATE))
}

/// The RMS of a frame, 0..1 of full scale (0 for an empty frame).
pub fn rms(frame: &[i16]) -> f64 {
    if frame.is_empty() {
        return 0.0;
    }
    let energy: f64 = frame.iter().map(|s| f64::from(*s) * f64::from(*s)).sum();
    (energy / frame.len() as f64).sqrt() / 32768.0
}

/// The first stage: who answered (see the module docs).
#[derive(Debug)]
pub struct Detector {
    config: AmdConfig,
    /// Samples heard since the answer.
    at: u64,
    /// When the current stretch of speech began (samples), and how much of it was sound.
    onset: Option<(u64, u64)>,
    /// When sound was last heard (samples).
    last_sound: u64,
    verdict: Option<Verdict>,
}

impl Detector {
    /// A detector at the moment of the answer.
    pub fn new(config: AmdConfig) -> Self {
        Self { config, at: 0, onset: None, last_sound: 0, verdict: None }
    }

    /// How long after the answer the audio so far reaches.
    pub fn elapsed(&self) -> Duration {
        duration(self.at)
    }

    /// The verdict, once there is one.
    pub fn verdict(&self) -> Option<Verdict> {
        self.verdict
    }

    /// Takes the next frame of the callee's audio (any length; 20 ms frames are usual);
    /// returns the verdict once, at the frame that settles it.
    pub fn push(&mut self, frame: &[i16]) -> Option<Verdict> {
        if self.verdict.is_some() || frame.is_empty() {
            return None;
        }
        let length = frame.len() as u64;
        let start = self.at;
        self.at += length;
        let config = &self.config;
        let verdict = if rms(frame) >= config.speech_threshold {
            self.last_sound = self.at;
            let (onset, sound) = self.onset.get_or_insert((start, 0));
            *sound += length;
            (self.at - *onset > samples(config.greeting_max)).then_some(Verdict::Machine)
        } else {
            match self.onset {
                Some((_, sound)) if self.at - self.last_sound >= samples(config.silence_after_greeting) => {
                    if sound >= samples(config.min_word) {
                        Some(Verdict::Human)
                    } else {
                        // Not speech: a click or a breath. Listen on.
                        self.onset = None;
                        None
                    }
                }
                None if self.at >= samples(config.initial_silence) && self.last_sound == 0 => Some(Verdict::Unknown),
                _ => None,
            }
        };
        let verdict = verdict.or_else(|| (self.at >= samples(config.decision_timeout)).then_some(Verdict::Unknown));
        self.verdict = verdict;
        verdict
    }
}

/// When a message to a machine may start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MessageStart {
    /// The beep ended: its frequency (Hz) and length.
    AfterBeep {
        /// The beep's frequency, in Hz.
        frequency: f64,
        /// How long it lasted.
        length: Duration,
    },
    /// The machine's greeting ended in silence and no beep came.
    Silence,
    /// Neither came within the beep timeout.
    Timeout,
}

/// The second stage, for a machine: when the message may start (see the module docs).
#[derive(Debug)]
pub struct BeepWaiter {
    config: AmdConfig,
    /// Samples since the machine verdict.
    at: u64,
    /// When sound was last heard (samples; the greeting was sound up to the verdict).
    last_sound: u64,
    run: ToneRun,
    done: bool,
}

impl BeepWaiter {
    /// Waits from the machine verdict on (the greeting is still playing then).
    pub fn new(config: AmdConfig) -> Self {
        let run = ToneRun::new(config.beep_frequencies.clone(), samples(config.beep_min));
        Self { config, at: 0, last_sound: 0, run, done: false }
    }

    /// How long since the machine verdict the audio so far reaches.
    pub fn elapsed(&self) -> Duration {
        duration(self.at)
    }

    /// Takes the next frame; returns when the message may start, once.
    pub fn push(&mut self, frame: &[i16]) -> Option<MessageStart> {
        if self.done || frame.is_empty() {
            return None;
        }
        self.at += frame.len() as u64;
        let sound = rms(frame) >= self.config.speech_threshold;
        if sound {
            self.last_sound = self.at;
        }
        let tone = if sound { Tone::of(frame) } else { None };
        let start = if let Some(beep) = self.run.push(tone, frame.len() as u64) {
            Some(MessageStart::AfterBeep { frequency: beep.frequency, length: duration(beep.samples) })
        } else if !self.run.is_running() && self.at - self.last_sound >= samples(self.config.silence_after_message) {
            Some(MessageStart::Silence)
        } else if self.at >= samples(self.config.beep_timeout) {
            Some(MessageStart::Timeout)
        } else {
            None
        };
        self.done = start.is_some();
        start
    }
}
