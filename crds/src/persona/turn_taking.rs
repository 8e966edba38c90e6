//! A Persona's turn-taking on a call (`spec.turnTaking`): what counts as the caller
//! interrupting, what the agent does when the line goes quiet, and how long a call may last.
//!
//! The defaults suit a phone line: speech shorter than 400 ms while the agent speaks (an
//! "mm-hm", a "yeah", a cough) does not cut the reply; after 10 s of quiet the agent asks
//! whether the caller is still there, twice, then says goodbye and ends the call; a call
//! ends after an hour, with a spoken warning a minute before; the caller's audio is not
//! cleaned of noise unless `noiseSuppression` asks for it. Every part applies to sessions
//! with audio (voice, or hybrid with `audio`); a text session ignores them.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Largest `minInterruptionMs`: five seconds (longer would make a caller unable to stop
/// the agent at all).
pub const MAX_MIN_INTERRUPTION_MS: u32 = 5_000;
/// Largest quiet period before a re-prompt: ten minutes.
pub const MAX_SILENCE_SECONDS: u32 = 600;
/// Most re-prompts before a call is ended for silence.
pub const MAX_PROMPTS: u32 = 10;
/// Shortest and longest `maxCall.seconds` (when not 0): ten seconds and twelve hours.
pub const MIN_CALL_SECONDS: u32 = 10;
/// See [`MIN_CALL_SECONDS`].
pub const MAX_CALL_SECONDS: u32 = 43_200;
/// Longest line the agent is asked to say (a re-prompt, a warning, a goodbye).
pub const MAX_LINE_CHARS: u32 = 512;

/// How an agent takes turns on a call.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnTaking {
    /// How long the caller must speak over the agent before the agent stops (barge-in), in
    /// milliseconds of speech. Shorter speech — a backchannel such as "mm-hm", "yeah" or
    /// "okay", a cough — does not cut the reply and does not reach the model. Once the
    /// caller has spoken this long, the interruption is taken as before: the reply stops and
    /// the model hears the caller's words from their start. `0` lets any speech interrupt.
    #[serde(default = "default_min_interruption_ms")]
    #[schemars(range(min = 0, max = 5000))]
    pub min_interruption_ms: u32,

    /// Whether the spoken greeting (`speakFirst`) is played whole: while it is spoken the
    /// caller's audio does not reach the model, so talking over it does not cut it; the
    /// model hears what they said over it once it is over. The agent's re-prompts, time
    /// warnings and goodbyes are always played whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uninterruptible_greeting: bool,

    /// What the agent does when nobody speaks.
    #[serde(default)]
    pub silence: Silence,

    /// The longest a call may last.
    #[serde(default)]
    pub max_call: MaxCall,

    /// Noise suppression of the caller's audio before the barge-in gate and the voice model
    /// hear it: `off` (the default) or `rnnoise` (RNNoise, a recurrent network that removes
    /// steady and babble-like background noise — a street, a room full of talk, a fan —
    /// from each 10 ms of audio). With it, background noise is far less often taken for
    /// the caller interrupting. It costs CPU on every frame of a call (BENCHMARKS.md,
    /// `noise_suppression`) and delays the caller's audio by about 13 ms.
    #[serde(default, skip_serializing_if = "NoiseSuppression::is_off")]
    pub noise_suppression: NoiseSuppression,
}

/// How the caller's audio is cleaned of background noise.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NoiseSuppression {
    /// The caller's audio is heard as it arrives.
    #[default]
    Off,
    /// RNNoise (its pure-Rust port, nnnoiseless) on every frame of the caller's audio.
    Rnnoise,
}

impl NoiseSuppression {
    /// Whether suppression is off (the field is left out of a Persona written back).
    pub fn is_off(&self) -> bool {
        *self == Self::Off
    }
}

impl Default for TurnTaking {
    fn default() -> Self {
        Self {
            min_interruption_ms: default_min_interruption_ms(),
            uninterruptible_greeting: false,
            silence: Silence::default(),
            max_call: MaxCall::default(),
            noise_suppression: NoiseSuppression::Off,
        }
    }
}

impl TurnTaking {
    /// Whether these are the defaults (the field is left out of a Persona written back).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// After a quiet period the agent asks, in its own voice, whether the caller is still there;
/// after `maxPrompts` unanswered prompts it says `goodbye` and ends the call (the reason is
/// in the conversation record).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("self.afterSeconds == 0 || size(self.prompt.trim()) > 0").message("silence.prompt must say something when silence.afterSeconds is set; write the line or set afterSeconds to 0"))]
#[serde(rename_all = "camelCase")]
pub struct Silence {
    /// Seconds of quiet — the caller silent, the agent neither speaking nor working on a
    /// reply — before the agent re-prompts. `0` turns silence handling off.
    #[serde(default = "default_silence_seconds")]
    #[schemars(range(min = 0, max = 600))]
    pub after_seconds: u32,

    /// What the agent says after a quiet period.
    #[serde(default = "default_prompt")]
    #[schemars(length(max = 512))]
    pub prompt: String,

    /// How many times the agent re-prompts before it ends the call; speech from the caller
    /// starts the count again. `0` ends the call after the first quiet period.
    #[serde(default = "default_max_prompts")]
    #[schemars(range(min = 0, max = 10))]
    pub max_prompts: u32,

    /// What the agent says before it ends a silent call.
    #[serde(default = "default_silence_goodbye")]
    #[schemars(length(min = 1, max = 512))]
    pub goodbye: String,
}

impl Default for Silence {
    fn default() -> Self {
        Self {
            after_seconds: default_silence_seconds(),
            prompt: default_prompt(),
            max_prompts: default_max_prompts(),
            goodbye: default_silence_goodbye(),
        }
    }
}

/// A call lasts at most `seconds`: `warningSeconds` before the end the agent says
/// `warning`, and at the end it says `goodbye` and ends the call (the reason is in the
/// conversation record).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new("self.seconds == 0 || self.warningSeconds < self.seconds").message("maxCall.warningSeconds must be less than maxCall.seconds, or the warning would come before the call starts"))]
#[x_kube(validation = Rule::new("self.seconds == 0 || self.seconds >= 10").message("maxCall.seconds must be at least 10 (or 0 for no limit)"))]
#[serde(rename_all = "camelCase")]
pub struct MaxCall {
    /// The longest a call may last, in seconds from its start. `0`: no limit.
    #[serde(default = "default_call_seconds")]
    #[schemars(range(min = 0, max = 43200))]
    pub seconds: u32,

    /// How many seconds before the end the agent warns the caller; `0`: no warning.
    #[serde(default = "default_warning_seconds")]
    #[schemars(range(min = 0, max = 43200))]
    pub warning_seconds: u32,

    /// What the agent says as the warning.
    #[serde(default = "default_warning")]
    #[schemars(length(min = 1, max = 512))]
    pub warning: String,

    /// What the agent says as it ends the call.
    #[serde(default = "default_call_goodbye")]
    #[schemars(length(min = 1, max = 512))]
    pub goodbye: String,
}

impl Default for MaxCall {
    fn default() -> Self {
        Self {
            seconds: default_call_seconds(),
            warning_seconds: default_warning_seconds(),
            warning: default_warning(),
            goodbye: default_call_goodbye(),
        }
    }
}

fn default_min_interruption_ms() -> u32 {
    400
}
fn default_silence_seconds() -> u32 {
    10
}
fn default_prompt() -> String {
    "Are you still there?".to_owned()
}
fn default_max_prompts() -> u32 {
    2
}
fn default_silence_goodbye() -> String {
    "I haven't heard from you, so I'll end the call now. Goodbye.".to_owned()
}
fn default_call_seconds() -> u32 {
    3600
}
fn default_warning_seconds() -> u32 {
    60
}
fn default_warning() -> String {
    "We're almost out of time on this call.".to_owned()
}
fn default_call_goodbye() -> String {
    "We've reached the time limit for this call. Thank you for calling, goodbye.".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_suppression_is_off_unless_asked_for_and_only_known_kinds_are_taken() {
        let parse = |json: &str| serde_json::from_str::<TurnTaking>(json);
        assert_eq!(parse("{}").expect("defaults").noise_suppression, NoiseSuppression::Off);
        let on = parse(r#"{"noiseSuppression": "rnnoise"}"#).expect("rnnoise");
        assert_eq!(on.noise_suppression, NoiseSuppression::Rnnoise);
        assert!(!on.is_default(), "written back");
        assert_eq!(serde_json::to_value(&on).expect("json")["noiseSuppression"], "rnnoise");
        assert!(serde_json::to_value(TurnTaking::default()).expect("json").get("noiseSuppression").is_none());
        let error = parse(r#"{"noiseSuppression": "loud"}"#).expect_err("not a kind");
        assert!(error.to_string().contains("unknown variant `loud`, expected `off` or `rnnoise`"), "{error}");
        let schema = serde_json::to_value(schemars::schema_for!(TurnTaking)).expect("schema");
        assert!(
            schema.to_string().contains(r#"["off","rnnoise"]"#) || schema.to_string().contains("rnnoise"),
            "{schema}"
        );
    }
}
