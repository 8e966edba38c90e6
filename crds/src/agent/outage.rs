//! `spec.outage`: what an Agent's new sessions meet when its model service fails, or when a
//! person turns outage mode on. The gateway enforces it (`switchboard_gateway::outage`):
//!
//! - **The switch** (`active: true`): every new session of the Agent goes to its fallback
//!   at once, until the switch is turned off. The operator records each flip as an Event
//!   on the Agent.
//! - **The breaker** (`breaker`, on unless `enabled: false`): the gateway watches the
//!   Agent's turns — a model error, or a reply whose first audio (first text, typed) came
//!   later than `firstAudioSeconds`, is a failed turn — and once at least `minTurns` turns
//!   in the last `windowSeconds` have failed at `errorPercent` or more, it trips: new
//!   sessions go to the fallback for `openSeconds`, then traffic ramps back through
//!   `rampPercent` (that share of new sessions is served, the rest still fall back); each
//!   step needs `probeTurns` good turns in a row, and any failed turn trips it again.
//! - **The fallback**: a person to put the caller through to (one of
//!   `spec.telephony.people`; a SIP edge transfers the call, another client is told the
//!   address) and/or a message for the caller; and, for a voice or hybrid Agent, `text`:
//!   a new session whose client reads text is served in text through the Agent's text
//!   model instead (a phone call still gets the person or the message).
//!
//! None of it reaches the runtime pods: flipping the switch or tuning the breaker rolls
//! nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Mode;

/// The longest fallback message, in bytes.
pub const MAX_FALLBACK_MESSAGE: usize = 500;
/// The most ramp steps.
pub const MAX_RAMP_STEPS: usize = 8;

/// What an Agent's new sessions meet in an outage (`spec.outage`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutageSettings {
    /// The switch: `true` sends every new session to the fallback now, whatever the model
    /// service's health; `false` (the default) leaves it to the breaker. Sessions under way
    /// go on.
    #[serde(default, skip_serializing_if = "is_false")]
    pub active: bool,
    /// What a new session gets instead of the agent.
    pub fallback: Fallback,
    /// When the gateway turns outage mode on by itself, and how it ramps back.
    #[serde(default)]
    pub breaker: Breaker,
}

/// What a new session gets instead of the agent: a person, a message, or both (the
/// message first). At least one; with `text`, a client that reads text is served in text
/// instead.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fallback {
    /// The person (a `name` of `spec.telephony.people`) the caller is put through to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9][a-z0-9_-]*$"))]
    pub person: Option<String>,
    /// What the caller is told (`Our assistant is unavailable; please call back later.`),
    /// up to 500 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 500))]
    pub message: Option<String>,
    /// A text-only reply: a new session whose client reads text (`text` among its
    /// `session_start.modalities`, or no `audio`) is served in text through the Agent's text model
    /// (`model.textModelId`) rather than sent away, and is told so
    /// (`bidi_session_outage`, `text_only: true`). Clients that only speak — a phone call —
    /// still get the person or the message. Voice and hybrid Agents only. Default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub text: bool,
}

/// The circuit breaker over the Agent's model turns.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Breaker {
    /// Whether the gateway trips outage mode by itself. Default true.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The percent of failed turns (model errors and slow first audio) that trips it,
    /// 1-100. Default 50.
    #[serde(default = "default_error_percent")]
    #[schemars(range(min = 1, max = 100))]
    pub error_percent: u32,
    /// The fewest turns in the window before it may trip, 1-1000. Default 10.
    #[serde(default = "default_min_turns")]
    #[schemars(range(min = 1, max = 1000))]
    pub min_turns: u32,
    /// The window the turns are counted over, in seconds, 5-3600. Default 60.
    #[serde(default = "default_window")]
    #[schemars(range(min = 5, max = 3600))]
    pub window_seconds: u32,
    /// A reply whose first audio (first text, typed) comes later than this after the
    /// caller's turn ended counts as failed, 1-120 seconds. Default 10.
    #[serde(default = "default_first_audio")]
    #[schemars(range(min = 1, max = 120))]
    pub first_audio_seconds: u32,
    /// How long all new sessions go to the fallback after a trip, in seconds, 1-3600.
    /// Default 30.
    #[serde(default = "default_open")]
    #[schemars(range(min = 1, max = 3600))]
    pub open_seconds: u32,
    /// The percent of new sessions served at each step of the way back, rising, each
    /// 1-99 (after the last, all are). Default [10, 50].
    #[serde(default = "default_ramp")]
    #[schemars(length(min = 1, max = 8), inner(range(min = 1, max = 99)))]
    pub ramp_percent: Vec<u32>,
    /// Good turns in a row each ramp step needs before the next, 1-1000. Default 3.
    #[serde(default = "default_probe_turns")]
    #[schemars(range(min = 1, max = 1000))]
    pub probe_turns: u32,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            enabled: true,
            error_percent: default_error_percent(),
            min_turns: default_min_turns(),
            window_seconds: default_window(),
            first_audio_seconds: default_first_audio(),
            open_seconds: default_open(),
            ramp_percent: default_ramp(),
            probe_turns: default_probe_turns(),
        }
    }
}

impl OutageSettings {
    /// Every problem with these settings, as `(field, message)`, for a person to fix, for
    /// an Agent of `mode`; the people are the Agent's `spec.telephony.people` names. (The
    /// schema says the ranges for the API server; this is for every spec, local mode's
    /// too, and the cross-field rules.)
    pub fn problems<'a>(&self, mode: Mode, people: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut problem = |field: &str, message: String| problems.push((format!("spec.outage.{field}"), message));
        let fallback = &self.fallback;
        if fallback.person.is_none() && fallback.message.is_none() {
            let also =
                if fallback.text { " (callers who cannot read text, such as phone calls, get those)" } else { "" };
            problem(
                "fallback",
                format!(
                    "name a person (one of spec.telephony.people), a message, or both: what a new session gets in an \
                     outage{also}"
                ),
            );
        }
        if fallback.text && !mode.has_audio() {
            problem(
                "fallback.text",
                format!(
                    "a {mode} Agent's sessions already run on its text model, the one an outage takes away: \
                     text: true serves a voice or hybrid Agent's sessions in text while its voice model is out; \
                     remove text: true (a text Agent falls back to its person or message)"
                ),
            );
        }
        if let Some(person) = &fallback.person {
            let people: Vec<&str> = people.into_iter().collect();
            if !people.contains(&person.as_str()) {
                let known = if people.is_empty() { "it lists none".to_owned() } else { people.join(", ") };
                problem(
                    "fallback.person",
                    format!(
                        "{person:?} is not a person of spec.telephony.people ({known}); add them there or name one of them"
                    ),
                );
            }
        }
        if let Some(message) = &fallback.message
            && (message.trim().is_empty() || message.len() > MAX_FALLBACK_MESSAGE)
        {
            problem(
                "fallback.message",
                format!(
                    "the message must be 1 to {MAX_FALLBACK_MESSAGE} bytes of text, not blank ({} now)",
                    message.len()
                ),
            );
        }
        let b = &self.breaker;
        let mut range = |field: &str, value: u32, low: u32, high: u32| {
            if !(low..=high).contains(&value) {
                problem(&format!("breaker.{field}"), format!("{value} is out of range: use {low} to {high}"));
            }
        };
        range("errorPercent", b.error_percent, 1, 100);
        range("minTurns", b.min_turns, 1, 1000);
        range("windowSeconds", b.window_seconds, 5, 3600);
        range("firstAudioSeconds", b.first_audio_seconds, 1, 120);
        range("openSeconds", b.open_seconds, 1, 3600);
        range("probeTurns", b.probe_turns, 1, 1000);
        let ramp = &b.ramp_percent;
        let rising = ramp.windows(2).all(|w| w[0] < w[1]);
        if ramp.is_empty() || ramp.len() > MAX_RAMP_STEPS || !rising || ramp.iter().any(|p| !(1..=99).contains(p)) {
            problem(
                "breaker.rampPercent",
                format!(
                    "{ramp:?} must be 1 to {MAX_RAMP_STEPS} rising percents, each 1 to 99 (after the last step every \
                     session is served), e.g. [10, 50]"
                ),
            );
        }
        problems
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}
fn yes() -> bool {
    true
}
fn default_error_percent() -> u32 {
    50
}
fn default_min_turns() -> u32 {
    10
}
fn default_window() -> u32 {
    60
}
fn default_first_audio() -> u32 {
    10
}
fn default_open() -> u32 {
    30
}
fn default_ramp() -> Vec<u32> {
    vec![10, 50]
}
fn default_probe_turns() -> u32 {
    3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(yaml: &str) -> OutageSettings {
        serde_yaml::from_str(yaml).expect("reads")
    }

    #[test]
    fn defaults_fill_the_breaker_and_a_fallback_is_required() {
        let read = settings("fallback: { message: Sorry }\n");
        assert_eq!(read.breaker, Breaker::default());
        assert!(!read.active);
        assert!(read.problems(Mode::Voice, []).is_empty(), "{:?}", read.problems(Mode::Voice, []));
        let none = settings("fallback: {}\n");
        let problems = none.problems(Mode::Voice, []);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, "spec.outage.fallback");
    }

    #[test]
    fn the_person_must_be_one_of_the_agents_people() {
        let read = settings("active: true\nfallback: { person: advisor }\n");
        assert!(read.problems(Mode::Voice, ["advisor", "fraud"]).is_empty());
        let problems = read.problems(Mode::Voice, ["fraud"]);
        assert_eq!(problems[0].0, "spec.outage.fallback.person");
        assert!(problems[0].1.contains("fraud"), "{problems:?}");
        assert!(read.problems(Mode::Voice, [])[0].1.contains("lists none"));
    }

    #[test]
    fn breaker_ranges_and_the_ramp_are_checked_with_reasons() {
        let read = settings(
            "fallback: { message: ' ' }\nbreaker: { errorPercent: 0, windowSeconds: 1, rampPercent: [50, 10] }\n",
        );
        let fields: Vec<String> = read.problems(Mode::Voice, []).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "spec.outage.fallback.message",
                "spec.outage.breaker.errorPercent",
                "spec.outage.breaker.windowSeconds",
                "spec.outage.breaker.rampPercent"
            ]
        );
        for bad in ["[]", "[100]", "[0, 10]", "[10, 10]", "[1,2,3,4,5,6,7,8,9]"] {
            let read = settings(&format!("fallback: {{ message: m }}\nbreaker: {{ rampPercent: {bad} }}\n"));
            assert_eq!(read.problems(Mode::Voice, []).len(), 1, "{bad}");
        }
        let long = settings(&format!("fallback: {{ message: {} }}\n", "a".repeat(501)));
        assert_eq!(long.problems(Mode::Voice, []).len(), 1);
    }

    #[test]
    fn a_text_reply_is_for_voice_and_hybrid_agents_and_needs_a_person_or_message_too() {
        let read = settings("fallback: { message: Sorry, text: true }\n");
        assert!(read.fallback.text);
        assert!(read.problems(Mode::Voice, []).is_empty());
        assert!(read.problems(Mode::Hybrid, []).is_empty());
        let problems = read.problems(Mode::Text, []);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "spec.outage.fallback.text");
        assert!(problems[0].1.contains("voice or hybrid"), "{problems:?}");
        let alone = settings("fallback: { text: true }\n");
        let problems = alone.problems(Mode::Voice, []);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "spec.outage.fallback");
        assert!(problems[0].1.contains("phone calls"), "{problems:?}");
        // Off unless asked for, and not written when off.
        let plain = settings("fallback: { message: Sorry }\n");
        assert!(!plain.fallback.text);
        assert!(!serde_json::to_string(&plain).expect("json").contains("text"));
    }
}
