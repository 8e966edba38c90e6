//! The Nova Sonic part of the simulator's script (the `sonic:` key, optional, so every
//! older script stays valid): turn detection, how utterances are "heard", speech pacing,
//! and stream-level faults.
//!
//! ```yaml
//! sonic:
//!   turnDetection: { energyThreshold: 500, silenceMs: { high: 300, medium: 500, low: 800 } }
//!   phrases: { 1: "What is my balance?", 2: "Thanks, bye" }   # tone 500 Hz = phrase 1, ...
//!   utterances: ["hello", "my name is Ada"]                    # or: the n-th utterance means
//!   speech: { msPerChar: 60, chunkMs: 40, responseDelayMs: 200, pace: 1.0 }
//!   faults:
//!     close: { afterMs: 3000 }                       # end every stream after 3 s
//!     cutReply: { afterMs: 300, atReply: 0 }         # end the stream 300 ms into reply 0
//!     streamError: { kind: modelStreamError, atUtterance: 2, first: 1 }
//!     unsaidLines: ["Calls are recorded"]            # lines asked for with these words are not said
//!   recordFrames: true                               # keep a fingerprint of every audio frame
//!   echoText: true                                   # a USER transcript of text input first
//! ```
//!
//! Replies come from the script's ordinary `rules` (see [`crate::script`]): the heard
//! utterance is the user text, tool results sent back in the stream are tool results, the
//! system prompt and the tools of `promptStart` are the request's. Request-level faults
//! (`faults.error`, counted over all model calls) and `knownModels` apply to the
//! bidirectional operation as well; the pacing here is `sonic.speech`, so the script's
//! and the rules' `timing` and the rules' `faults` apply to Converse only.
//!
//! How an utterance is heard: its phrase id (see [`crate::sonic::audio`]: a tone of
//! `400 + 100 * id` Hz) looked up in `phrases`, then among the texts the simulator's
//! SynthesizeSpeech rendered ([`crate::polly`]); else the `utterances` entry for its index;
//! else `phrase <id>`, or `(inaudible)` when the audio carries no phrase tone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::ScriptError;
use crate::service_error::StreamExceptionKind;

/// Base frequency of phrase tones: phrase `id` is a tone of `PHRASE_BASE_HZ + id * PHRASE_STEP_HZ`.
pub const PHRASE_BASE_HZ: f64 = 400.0;
/// Spacing of phrase tones.
pub const PHRASE_STEP_HZ: f64 = 100.0;
/// Largest `cutReply.afterMs`: an hour.
pub const MAX_CUT_AFTER_MS: u64 = 3_600_000;
/// Largest phrase id (its tone, 3,900 Hz, stays well below the 8 kHz Nyquist limit).
pub const MAX_PHRASE_ID: u32 = 35;

/// The `sonic:` section of a script.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SonicScript {
    /// Energy-based end-of-utterance detection.
    #[serde(default)]
    pub turn_detection: TurnDetection,
    /// What a phrase id (a tone in the audio) means. A heard phrase id without an entry
    /// here falls back to `utterances`, then to the text `phrase <id>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phrases: BTreeMap<u32, String>,
    /// What the n-th utterance (0-based, counted over all streams of this simulator)
    /// means when its audio carries no known phrase id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub utterances: Vec<String>,
    /// How the simulated voice speaks.
    #[serde(default)]
    pub speech: Speech,
    /// Stream-level faults.
    #[serde(default)]
    pub faults: SonicFaults,
    /// Keep a fingerprint ([`crate::sonic::frame_fingerprint`]) of every audio
    /// input frame received, for exactly-once checks. Off by default (memory grows).
    #[serde(default)]
    pub record_frames: bool,
    /// Answer interactive USER text (typed, or asked again) with a USER transcript of it
    /// first, as a service that echoes text input would. Off by default: whether Nova Sonic
    /// echoes it is not documented, and a client must cope either way.
    #[serde(default)]
    pub echo_text: bool,
}

impl SonicScript {
    /// Checks what the types cannot.
    pub fn validate(&self) -> Result<(), ScriptError> {
        if let Some(id) = self.phrases.keys().find(|id| **id > MAX_PHRASE_ID) {
            return Err(ScriptError::Invalid(format!("sonic.phrases: id {id} is above the largest, {MAX_PHRASE_ID}")));
        }
        let speech = &self.speech;
        if speech.chunk_ms == 0 || speech.chunk_ms > 1000 {
            return Err(ScriptError::Invalid("sonic.speech.chunkMs must be between 1 and 1000".into()));
        }
        if !speech.pace.is_finite() || speech.pace < 0.0 {
            return Err(ScriptError::Invalid("sonic.speech.pace must be a number >= 0".into()));
        }
        if self.faults.unsaid_lines.iter().any(|l| l.trim().is_empty()) {
            return Err(ScriptError::Invalid(
                "sonic.faults.unsaidLines: an entry is empty (it would match every line)".into(),
            ));
        }
        if self.faults.close.as_ref().is_some_and(|c| c.after_ms == 0) {
            return Err(ScriptError::Invalid("sonic.faults.close.afterMs must be at least 1".into()));
        }
        if self.faults.cut_reply.as_ref().is_some_and(|c| c.after_ms > MAX_CUT_AFTER_MS) {
            return Err(ScriptError::Invalid(format!(
                "sonic.faults.cutReply.afterMs must be at most {MAX_CUT_AFTER_MS} (a reply is not spoken for longer)"
            )));
        }
        Ok(())
    }
}

/// Turn detection settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnDetection {
    /// RMS amplitude (PCM16 units) at or above which a frame counts as speech. Default 500.
    #[serde(default = "default_threshold")]
    pub energy_threshold: f64,
    /// Voiced audio needed to count as speech (shorter bursts are noise). Default 100 ms.
    #[serde(default = "default_min_speech")]
    pub min_speech_ms: u64,
    /// Silence that ends an utterance, by the session's `endpointingSensitivity`.
    #[serde(default)]
    pub silence_ms: SilenceMs,
}

impl Default for TurnDetection {
    fn default() -> Self {
        Self {
            energy_threshold: default_threshold(),
            min_speech_ms: default_min_speech(),
            silence_ms: SilenceMs::default(),
        }
    }
}

fn default_threshold() -> f64 {
    500.0
}
fn default_min_speech() -> u64 {
    100
}

/// End-of-utterance silence per sensitivity; defaults are the service's documented pauses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SilenceMs {
    /// `HIGH` (fastest). Default 1,500 ms.
    #[serde(default = "default_high")]
    pub high: u64,
    /// `MEDIUM`, also used when the session sets no sensitivity. Default 1,750 ms.
    #[serde(default = "default_medium")]
    pub medium: u64,
    /// `LOW` (most patient). Default 2,000 ms.
    #[serde(default = "default_low")]
    pub low: u64,
}

impl Default for SilenceMs {
    fn default() -> Self {
        Self { high: default_high(), medium: default_medium(), low: default_low() }
    }
}

fn default_high() -> u64 {
    1500
}
fn default_medium() -> u64 {
    1750
}
fn default_low() -> u64 {
    2000
}

/// Speech synthesis and pacing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Speech {
    /// Milliseconds of audio per character of reply text. Default 60.
    #[serde(default = "default_ms_per_char")]
    pub ms_per_char: u64,
    /// Audio per `audioOutput` event. Default 40 ms.
    #[serde(default = "default_chunk_ms")]
    pub chunk_ms: u64,
    /// From the end of the utterance (or the tool result) to the first reply event. Default 200 ms.
    #[serde(default = "default_response_delay")]
    pub response_delay_ms: u64,
    /// Playback speed of the pacing: 1 is real time, 2 twice as fast, 0 no waiting.
    #[serde(default = "default_pace")]
    pub pace: f64,
}

impl Default for Speech {
    fn default() -> Self {
        Self {
            ms_per_char: default_ms_per_char(),
            chunk_ms: default_chunk_ms(),
            response_delay_ms: default_response_delay(),
            pace: default_pace(),
        }
    }
}

fn default_ms_per_char() -> u64 {
    60
}
fn default_chunk_ms() -> u64 {
    40
}
fn default_response_delay() -> u64 {
    200
}
fn default_pace() -> f64 {
    1.0
}

/// Faults of the bidirectional stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SonicFaults {
    /// Close streams after a while, like the service's connection time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close: Option<CloseFault>,
    /// Fail a stream with an in-stream exception when an utterance ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_error: Option<StreamErrorFault>,
    /// End a stream in the middle of a reply it is speaking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_reply: Option<CutReplyFault>,
    /// Lines the model is asked to say at once (a greeting, a filler, a workflow step's
    /// line: `Speak first:` / `Say now, briefly:`) that it does not say: one containing any
    /// of these texts is taken in and not answered at all, as a model that ignores an
    /// instruction would.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsaid_lines: Vec<String>,
}

/// Ends a stream's output `afterMs` into the audio of a reply — as the service's time
/// limit or a failure can, mid-sentence: the reply's rest, its FINAL text and its end never
/// come. Like [`CloseFault`], the input is still read until the client ends it. A reply's
/// audio shorter than `afterMs` is not cut (its stream closes once the time is up, after it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CutReplyFault {
    /// How far into the reply's audio (from its start being sent) the stream ends.
    pub after_ms: u64,
    /// The reply (0-based, counting every reply whose audio started, over all streams of
    /// this simulator) to cut; absent: every reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_reply: Option<u64>,
    /// Only the first N cuts; absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    /// Send this exception before ending the output; absent ends it without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<StreamExceptionKind>,
}

/// Ends a stream's output `afterMs` after it opened. The simulator keeps reading (and
/// counting) the input until the client ends it, so frames in flight are accounted for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloseFault {
    /// Age of the stream at the close.
    pub after_ms: u64,
    /// Send this exception before ending the output; absent ends it without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<StreamExceptionKind>,
    /// Only the first N streams are closed; absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
}

/// An in-stream exception instead of the reply to an utterance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamErrorFault {
    /// The exception.
    #[serde(default)]
    pub kind: StreamExceptionKind,
    /// The utterance (0-based, over all streams) whose end triggers it; absent: every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_utterance: Option<u64>,
    /// Only the first N such errors are injected; absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::super::Script;

    #[test]
    fn a_reply_cut_is_scripted_by_its_reply_and_time_and_bounded() {
        let script = Script::parse("sonic:\n  faults: { cutReply: { afterMs: 300, atReply: 1, first: 1 } }\n")
            .expect("a valid cut");
        let cut = script.sonic.faults.cut_reply.expect("the cut");
        assert_eq!((cut.after_ms, cut.at_reply, cut.first, cut.exception), (300, Some(1), Some(1), None));
        let error = Script::parse("sonic:\n  faults: { cutReply: { afterMs: 3600001 } }\n").expect_err("too long");
        assert!(error.to_string().contains("cutReply.afterMs"), "{error}");
        assert!(Script::parse("sonic:\n  faults: { cutReply: { atReply: 1 } }\n").is_err(), "afterMs is required");
    }

    #[test]
    fn unsaid_lines_are_scripted_and_an_empty_one_is_refused() {
        let script = Script::parse("sonic:\n  faults: { unsaidLines: [\"Calls are recorded\"] }\n").expect("valid");
        assert_eq!(script.sonic.faults.unsaid_lines, ["Calls are recorded"]);
        let error = Script::parse("sonic:\n  faults: { unsaidLines: [\" \"] }\n").expect_err("empty");
        assert!(error.to_string().contains("unsaidLines"), "{error}");
    }
}
