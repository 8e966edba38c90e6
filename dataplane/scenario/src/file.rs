//! The scenario file: YAML that lives next to the agents (`examples/banking/tests/*.yaml`),
//! one scenario a file — a name, the agent to start with, and the caller's turns, each with
//! what must hold once the agent has answered it.
//!
//! ```yaml
//! name: Balance after identity verification
//! agent: triage                  # optional: the session's first agent (default: the default agent)
//! opening:                       # optional: what the agent says before the first turn
//!   transcript: { contains: Example Bank }
//! steps:
//!   - say: I'd like to check my balance
//!     expect:
//!       agent: idv               # the agent answering when the turn ends
//!       handoffs: [{ to: idv }]  # in this order; [] means none
//!       tools:                   # in this order; [] means none
//!         - name: transfer_to_idv
//!           args: { reason: I'd like to check my balance }   # partial; argsExact: exact
//!       transcript: { contains: verify, matches: "(?i)security team", notContains: sorry }
//!       memory: [{ key: verifiedUser, value: { name: Ada Lovelace } }]   # session memory after the turn; `absent: true`: not set
//!       consent: [{ tool: open_dispute, answer: allow }]                 # requests answered, in order
//!       workflow: verify          # the workflow node after the turn
//!       noError: true             # no bidi_error, no tool_error
//!       latency: { firstTokenMs: 2000, firstTextMs: 3000, turnMs: 5000 }
//! ```
//!
//! Every mapping refuses keys it does not know (`deny_unknown_fields`), so a typo is an
//! error with its line, never an expectation silently skipped. A step may speak instead of
//! typing: `speech:` (text rendered to speech: the simulator's phrase tones, or Amazon Polly)
//! or `audio:` (a WAV file); see [`super::speech`]. A step may press keys: `keys: "1#"` sends
//! them as a phone's keypad does (`bidi_dtmf`, what the SIP edge sends for each RFC 4733
//! telephone event or SIP INFO digit): `0`-`9`, `*`, `#`, `A`-`D`, 1 to 32. Alone, they are
//! the turn's input (the agent is told them as the caller's); with what the caller says,
//! they are pressed when the turn's first tool starts (a tool whose input is typed on the
//! keypad starts, then waits for them; the keys go to it and never to the model).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// A scenario file could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("{path}: cannot read it: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not describe a scenario (syntax, an unknown key, a wrong type).
    #[error("{path}:{line}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line serde_yaml points at (0 when it names none).
        line: usize,
        /// serde_yaml's message: what it found and what it expected.
        #[source]
        source: serde_yaml::Error,
    },
}

/// One scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario shows, as the report names it.
    pub name: String,
    /// A longer description (not used by the runner).
    #[serde(default)]
    pub description: Option<String>,
    /// The agent the session starts with (`session_start.agent`); default: the gateway's
    /// default agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// How long one turn may take before it counts as unanswered (default 30000).
    #[serde(default)]
    pub turn_timeout_ms: Option<u64>,
    /// What must hold before the first turn (the greeting).
    #[serde(default)]
    pub opening: Option<Opening>,
    /// The caller's turns, in order.
    pub steps: Vec<Step>,
}

/// Expectations on the session's opening, before the caller says anything.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Opening {
    /// The agent that opens the session.
    #[serde(default)]
    pub agent: Option<String>,
    /// The greeting's text.
    #[serde(default)]
    pub transcript: Option<TranscriptExpect>,
}

/// One turn of the caller and what must hold after it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    /// What the caller types.
    #[serde(default)]
    pub say: Option<String>,
    /// A WAV file (16 kHz, mono, 16-bit PCM), relative to the scenario file, sent as the
    /// caller's speech (see [`super::speech`]).
    #[serde(default)]
    pub audio: Option<String>,
    /// What the caller says, rendered to speech: the simulator's phrase tones in local mode,
    /// Amazon Polly against real Nova Sonic or a gateway (see [`super::speech`]).
    #[serde(default)]
    pub speech: Option<String>,
    /// Keys the caller presses on a phone's keypad (`0`-`9`, `*`, `#`, `A`-`D`, 1 to
    /// 32), sent as the SIP edge sends them: one `bidi_dtmf` a key, a phone's pace apart
    /// ([`super::run::KEY_GAP`]). Alone: the turn's input. With `say:`, `speech:` or
    /// `audio:`: pressed when the turn's first `tool_start` arrives.
    #[serde(default, deserialize_with = "keys")]
    pub keys: Option<String>,
    /// What must hold once the agent has answered.
    #[serde(default)]
    pub expect: Expect,
}

/// What must hold once a turn ends. Each field left out is not checked.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// The agent serving the session when the turn ends.
    #[serde(default)]
    pub agent: Option<String>,
    /// Tool calls of the turn (`tool_start`), in this order among the others; `[]`: none.
    #[serde(default)]
    pub tools: Option<Vec<ToolExpect>>,
    /// Handoffs of the turn, in this order among the others; `[]`: none.
    #[serde(default)]
    pub handoffs: Option<Vec<HandoffExpect>>,
    /// Session memory after the turn (from `memory_update`, whichever turn set it).
    #[serde(default)]
    pub memory: Vec<MemoryExpect>,
    /// The agent's text in the turn (every final assistant transcript, one a line).
    #[serde(default)]
    pub transcript: Option<TranscriptExpect>,
    /// Consent requests of the turn, in order, and the answer the runner gives each. A
    /// request the step does not list is denied and fails the step.
    #[serde(default)]
    pub consent: Vec<ConsentExpect>,
    /// The workflow node the session is in when the turn ends.
    #[serde(default)]
    pub workflow: Option<String>,
    /// No `bidi_error` and no `tool_error` in the turn.
    #[serde(default)]
    pub no_error: bool,
    /// Latency budgets, from the moment the caller's text is sent.
    #[serde(default)]
    pub latency: Option<Latency>,
    /// A rubric a judge model checks against the conversation so far (see
    /// [`super::judge`]); checked only with a judge model, after the other expectations hold.
    #[serde(default)]
    pub judge: Option<JudgeExpect>,
}

/// A judged expectation.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JudgeExpect {
    /// What must hold of the agent's latest turn, in words, e.g. "The agent asks the caller to
    /// verify their identity before giving any account detail."
    pub rubric: String,
}

/// A tool call.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolExpect {
    /// The tool.
    pub name: String,
    /// Arguments the model gave, partially: every key here with this value (objects
    /// compared the same way, recursively), other keys allowed. Inputs the runtime fills
    /// from session state (`bind`) are not among them.
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    /// Arguments the model gave, exactly.
    #[serde(default)]
    pub args_exact: Option<serde_json::Value>,
    /// How the call ended: `ok` (`tool_complete`) or `error` (`tool_error`).
    #[serde(default)]
    pub outcome: Option<ToolOutcome>,
}

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolOutcome {
    /// `tool_complete`.
    Ok,
    /// `tool_error` (a failure, a refusal, a declined consent).
    Error,
}

/// A handoff.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffExpect {
    /// The agent taking over.
    pub to: String,
    /// The agent handing over.
    #[serde(default)]
    pub from: Option<String>,
    /// `transfer` or `return`.
    #[serde(default)]
    pub kind: Option<HandoffKind>,
}

/// Transfer or return, as `handoff.kind` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HandoffKind {
    /// `transfer_to_<agent>`.
    Transfer,
    /// `return_to_<agent>`.
    Return,
}

/// A memory key that must be set, optionally with a value (partial, as tool `args`).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryExpect {
    /// The key.
    pub key: String,
    /// Its value, partially.
    #[serde(default)]
    pub value: Option<serde_json::Value>,
    /// `true`: the key must not be set (e.g. no verified caller after a failed check).
    #[serde(default)]
    pub absent: bool,
}

/// Text checks; each takes one string or a list.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscriptExpect {
    /// Substrings that must appear (case-sensitive).
    #[serde(default)]
    pub contains: Strings,
    /// Regular expressions (Rust `regex` syntax; `(?i)` for any case) that must match.
    #[serde(default)]
    pub matches: Strings,
    /// Substrings that must not appear.
    #[serde(default)]
    pub not_contains: Strings,
}

/// A consent request and the answer to give it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConsentExpect {
    /// The tool asking.
    pub tool: String,
    /// `allow` or `deny`.
    pub answer: ConsentAnswer,
}

/// The caller's answer to a consent request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsentAnswer {
    /// `tool_consent` with `approved: true`.
    Allow,
    /// `tool_consent` with `approved: false`.
    Deny,
}

/// Latency budgets in milliseconds, from the moment the caller's text is sent.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Latency {
    /// To the agent's first streamed text (or audio).
    #[serde(default)]
    pub first_token_ms: Option<u64>,
    /// To the agent's first complete message (a final transcript).
    #[serde(default)]
    pub first_text_ms: Option<u64>,
    /// To the end of the turn (`bidi_response_complete`, after any handoffs).
    #[serde(default)]
    pub turn_ms: Option<u64>,
}

/// One string or a list of strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Strings(pub Vec<String>);

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OneOrMany;
        impl<'de> Visitor<'de> for OneOrMany {
            type Value = Strings;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Strings, E> {
                Ok(Strings(vec![v.to_owned()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strings, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    out.push(s);
                }
                Ok(Strings(out))
            }
        }
        deserializer.deserialize_any(OneOrMany)
    }
}

/// `keys:` as a string; a number (`keys: 1234`, which YAML reads as an integer and would
/// lose a leading 0) is refused with what to write instead.
fn keys<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    struct Keys;
    impl Visitor<'_> for Keys {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the keys pressed as a string, e.g. keys: \"1234#\"")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Err(E::custom(format!("keys: {v} is a number to YAML: quote the keys pressed, keys: \"{v}\"")))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Err(E::custom(format!("keys: {v} is a number to YAML: quote the keys pressed, keys: \"{v}\"")))
        }
    }
    deserializer.deserialize_any(Keys)
}

/// A parsed scenario file: the scenario, the file and its text (for line numbers).
#[derive(Clone, Debug)]
pub struct ScenarioFile {
    /// The file.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// The scenario.
    pub scenario: Scenario,
}

impl ScenarioFile {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<Self, FileError> {
        let text = std::fs::read_to_string(path).map_err(|source| FileError::Read { path: path.to_owned(), source })?;
        Self::parse(path, text)
    }

    /// Parses `text` as the scenario file `path`.
    pub fn parse(path: &Path, text: String) -> Result<Self, FileError> {
        let scenario = serde_yaml::from_str::<Scenario>(&text).map_err(|source| FileError::Parse {
            path: path.to_owned(),
            line: source.location().map_or(0, |l| l.line()),
            source,
        })?;
        Ok(Self { path: path.to_owned(), text, scenario })
    }

    /// The line of `path` in the file (see [`super::locate`]).
    pub fn line_of(&self, key: &super::locate::KeyPath) -> Option<usize> {
        super::locate::line_of(&self.text, key)
    }
}

/// Session memory as the runner tracks it: key -> value.
pub type Memory = BTreeMap<String, serde_json::Value>;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ScenarioFile, FileError> {
        ScenarioFile::parse(Path::new("t.yaml"), text.to_owned())
    }

    #[test]
    fn a_full_scenario_parses() {
        let file = parse(
            "name: n\nagent: triage\nsteps:\n  - say: hi\n    expect:\n      tools: [{name: t, args: {a: 1}, outcome: ok}]\n      \
             handoffs: []\n      transcript: {contains: x, matches: [a, b]}\n      consent: [{tool: t, answer: deny}]\n      \
             latency: {turnMs: 10}\n      noError: true\n",
        )
        .expect("parses");
        let expect = &file.scenario.steps[0].expect;
        assert_eq!(expect.tools.as_ref().map(Vec::len), Some(1));
        assert_eq!(expect.handoffs.as_ref().map(Vec::len), Some(0));
        let transcript = expect.transcript.as_ref().expect("transcript");
        assert_eq!(transcript.contains, Strings(vec!["x".into()]));
        assert_eq!(transcript.matches.0.len(), 2);
        assert_eq!(expect.consent[0].answer, ConsentAnswer::Deny);
        assert!(expect.no_error);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused_with_their_line() {
        let error = parse("name: n\nsteps:\n  - say: hi\n    expect:\n      tool: [x]\n").expect_err("refused");
        let FileError::Parse { line, .. } = &error else { panic!("{error}") };
        assert_eq!(*line, 5, "{error}");
        assert!(error.to_string().contains("unknown field `tool`"), "{error}");
        assert!(error.to_string().starts_with("t.yaml:5: "), "{error}");
        let error = parse("name: n\nsteps:\n  - say: hi\n    expect:\n      consent: [{tool: t, answer: maybe}]\n")
            .expect_err("refused");
        assert!(error.to_string().contains("unknown variant `maybe`"), "{error}");
        let error = parse("name: n\nsteps: []\nextra: 1\n").expect_err("refused");
        assert!(error.to_string().contains("unknown field `extra`"), "{error}");
        let error = parse("name: n\nsteps:\n  - keys: 12\n").expect_err("refused");
        assert!(error.to_string().starts_with("t.yaml:3: "), "{error}");
        assert!(error.to_string().contains(r#"quote the keys pressed, keys: "12""#), "{error}");
        let file = parse("name: n\nsteps:\n  - keys: \"0042#\"\n").expect("parses");
        assert_eq!(file.scenario.steps[0].keys.as_deref(), Some("0042#"));
        let error = parse("steps: []\n").expect_err("refused");
        assert!(error.to_string().contains("missing field `name`"), "{error}");
    }
}
