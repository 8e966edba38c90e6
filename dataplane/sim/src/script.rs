//! The simulator's script: how fast it answers, which faults it injects, and the rules
//! that turn a conversation's latest turn into a reply. Loaded from YAML or JSON, or built
//! in Rust (every type here is public and has a `Default` where one makes sense).
//!
//! ```yaml
//! timing: { timeToFirstTokenMs: 300, tokensPerSecond: 40 }
//! faults: { error: { kind: throttling, first: 2 } }   # the first 2 requests are throttled
//! rules:
//!   - name: balance
//!     when: { userText: "(?i)\\bbalance\\b" }
//!     reply: { toolUse: { name: check_balance, input: {} } }
//!   - name: balance-result
//!     when: { toolResult: { name: check_balance } }
//!     reply: { text: "Your balance is {balance} {currency}." }
//! default: { text: "You said: {text}" }
//! ```
//!
//! Rules are tried in order; the first whose conditions all hold answers. A rule that
//! calls a tool the request does not offer answers with its `fallbackText` instead, or,
//! without one, is skipped (a real model cannot call a tool it was not given).

pub mod error;
pub mod sonic;

use std::collections::BTreeMap;
use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Serialize};

pub use error::ScriptError;

use super::service_error::{ErrorKind, StreamExceptionKind};

/// A whole script. `Script::default()` is [`Script::echo`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Script {
    /// Pacing of every reply (a rule may override it).
    #[serde(default)]
    pub timing: Timing,
    /// Faults applied to every request, counted over all requests.
    #[serde(default)]
    pub faults: Faults,
    /// Rules, tried in order.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The reply when no rule matches a user message. Default: `You said: {text}`.
    #[serde(default = "default_reply")]
    pub default: ReplySpec,
    /// The reply when no rule matches a tool result. Default: `{tool} returned: {result}`.
    #[serde(default = "default_tool_result_reply")]
    pub default_tool_result: ReplySpec,
    /// Faults of named models (and regions): a request for such a model is refused with
    /// the fault's service error before any other fault or rule applies, on Converse,
    /// ConverseStream and the bidirectional stream alike. For fallback tests: the primary
    /// model is throttled or unavailable, the next one answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_faults: Vec<ModelFault>,
    /// Model ids the simulator knows; others get `ResourceNotFoundException`. Empty (the
    /// default) accepts every model id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_models: Vec<String>,
    /// The bidirectional (Nova Sonic) operation's behaviour; see [`sonic`].
    #[serde(default)]
    pub sonic: sonic::SonicScript,
    /// The most input tokens (system prompt, messages and tools, as the simulator counts
    /// them) a Converse or ConverseStream request may carry: a longer one is refused as
    /// Bedrock refuses a request beyond the model's context window — HTTP 400
    /// `ValidationException` "Input is too long for requested model." Unset (the default)
    /// takes any length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

fn default_reply() -> ReplySpec {
    ReplySpec { text: Some("You said: {text}".into()), ..ReplySpec::default() }
}

fn default_tool_result_reply() -> ReplySpec {
    ReplySpec { text: Some("{tool} returned: {result}".into()), ..ReplySpec::default() }
}

impl Script {
    /// An empty script: default timing, no faults, no rules, the echoing default reply.
    pub fn echo() -> Self {
        Self {
            timing: Timing::default(),
            faults: Faults::default(),
            rules: Vec::new(),
            model_faults: Vec::new(),
            default: default_reply(),
            default_tool_result: default_tool_result_reply(),
            known_models: Vec::new(),
            sonic: sonic::SonicScript::default(),
            context_window: None,
        }
    }

    /// Reads a script from YAML (or JSON) text.
    pub fn parse(text: &str) -> Result<Self, ScriptError> {
        let script: Script = serde_yaml::from_str(text).map_err(|e| ScriptError::Parse(e.to_string()))?;
        script.validate()?;
        Ok(script)
    }

    /// Reads a script file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScriptError::Read { path: path.display().to_string(), message: e.to_string() })?;
        Self::parse(&text).map_err(|e| match e {
            ScriptError::Parse(message) => ScriptError::Parse(format!("{}: {message}", path.display())),
            other => other,
        })
    }

    /// Checks what the types cannot: rule names unique, every rule can reply.
    pub fn validate(&self) -> Result<(), ScriptError> {
        let mut names = std::collections::BTreeSet::new();
        for rule in &self.rules {
            if !names.insert(rule.name.as_str()) {
                return Err(ScriptError::Invalid(format!(
                    "rule name {:?} is used twice; names must be unique",
                    rule.name
                )));
            }
            if rule.reply.text.is_none() && rule.reply.tool_use.is_none() {
                return Err(ScriptError::Invalid(format!(
                    "rule {:?} has a reply with neither text nor toolUse",
                    rule.name
                )));
            }
            rule.timing.as_ref().map_or(Ok(()), Timing::validate)?;
        }
        for (field, reply) in [("default", &self.default), ("defaultToolResult", &self.default_tool_result)] {
            if reply.tool_use.is_some() || reply.text.is_none() {
                return Err(ScriptError::Invalid(format!("the {field} reply must be text only")));
            }
        }
        for fault in &self.model_faults {
            fault.validate()?;
        }
        self.sonic.validate()?;
        self.timing.validate()
    }
}

impl Default for Script {
    fn default() -> Self {
        Self::echo()
    }
}

/// Reply pacing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timing {
    /// Milliseconds from the response headers to the first token. Default 200.
    #[serde(default = "default_ttft")]
    pub time_to_first_token_ms: u64,
    /// Tokens generated per second after the first; 0 sends everything at once.
    /// Default 50.
    #[serde(default = "default_tps")]
    pub tokens_per_second: f64,
    /// Tokens per streamed delta. Default 1.
    #[serde(default = "default_tokens_per_delta")]
    pub tokens_per_delta: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            time_to_first_token_ms: default_ttft(),
            tokens_per_second: default_tps(),
            tokens_per_delta: default_tokens_per_delta(),
        }
    }
}

impl Timing {
    /// No waiting at all: for tests that do not care about pacing.
    pub fn instant() -> Self {
        Self { time_to_first_token_ms: 0, tokens_per_second: 0.0, tokens_per_delta: 1 }
    }

    fn validate(&self) -> Result<(), ScriptError> {
        if !self.tokens_per_second.is_finite() || self.tokens_per_second < 0.0 {
            return Err(ScriptError::Invalid(format!(
                "tokensPerSecond must be a number >= 0, not {}",
                self.tokens_per_second
            )));
        }
        if self.tokens_per_delta == 0 {
            return Err(ScriptError::Invalid("tokensPerDelta must be at least 1".into()));
        }
        Ok(())
    }
}

fn default_ttft() -> u64 {
    200
}
fn default_tps() -> f64 {
    50.0
}
fn default_tokens_per_delta() -> u32 {
    1
}

/// Injected faults. On the script they count every request; on a rule, the rule's matches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Faults {
    /// Milliseconds added before the response headers.
    #[serde(default)]
    pub extra_latency_ms: u64,
    /// Answer with a request-level error instead of a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorFault>,
    /// Cut the reply stream after some tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<CutFault>,
}

/// A request-level error (HTTP status, `x-amzn-errortype`, JSON message).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorFault {
    /// Which error.
    pub kind: ErrorKind,
    /// Only the first N requests (or matches) fail; absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    /// The error message; a typical one for the kind when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A named model that fails: `model` (exactly as in the request path), optionally only in
/// `region` (the region of the request's SigV4 credential scope, so one simulator can play
/// several regions), answers `error`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelFault {
    /// The model id.
    pub model: String,
    /// Only requests signed for this region fail; absent means every region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The error, counted over this fault's matching requests (`first`).
    pub error: ErrorFault,
}

impl ModelFault {
    fn validate(&self) -> Result<(), ScriptError> {
        if self.model.is_empty() {
            return Err(ScriptError::Invalid("a modelFaults entry needs a model id".into()));
        }
        if self.region.as_deref().is_some_and(str::is_empty) {
            return Err(ScriptError::Invalid(format!("the modelFaults entry of {:?} has an empty region", self.model)));
        }
        Ok(())
    }

    /// Whether a request for `model` signed for `region` meets this fault.
    pub fn matches(&self, model: &str, region: Option<&str>) -> bool {
        self.model == model && self.region.as_deref().is_none_or(|r| Some(r) == region)
    }
}

/// A reply stream that breaks mid-answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CutFault {
    /// Output tokens sent before the cut.
    pub after_tokens: u32,
    /// How the stream breaks.
    #[serde(default)]
    pub mode: CutMode,
    /// The exception sent when `mode` is `exception`. Default `modelStreamError`.
    #[serde(default)]
    pub exception: StreamExceptionKind,
    /// Only the first N requests (or matches) are cut; absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
}

/// How a cut stream breaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CutMode {
    /// An in-stream exception frame (`:message-type: exception`), then the end of the body.
    #[default]
    Exception,
    /// The TCP connection is closed abruptly (every stream on it breaks).
    Drop,
}

/// A rule: conditions and the reply they produce.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// A unique name, for logs and per-rule fault counting.
    pub name: String,
    /// When the rule applies; no conditions means always.
    #[serde(default)]
    pub when: Condition,
    /// What it answers.
    pub reply: ReplySpec,
    /// Faults when this rule answers, counted over its matches.
    #[serde(default)]
    pub faults: Faults,
    /// Pacing of this rule's replies, instead of the script's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
}

/// Conditions of a rule; all that are given must hold.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// The latest user message is text matching this regex (its capture groups become
    /// placeholders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_text: Option<Pattern>,
    /// The latest user message carries a tool result matching this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResultCondition>,
    /// The system prompt matches this regex (tells agents apart; its capture groups
    /// become placeholders too, e.g. an account number from the session memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Pattern>,
    /// Tools that must all be offered in the request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The model id matches this regex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Pattern>,
}

/// Conditions on a tool result.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultCondition {
    /// The tool's name (the name of the tool call the result answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `success` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResultStatus>,
    /// Fields of the result that must equal these values; keys are top-level field names
    /// or JSON Pointers (`/account/verified`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, serde_json::Value>,
    /// A regex the result's compact JSON must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Pattern>,
}

/// A tool result's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    /// The tool succeeded.
    Success,
    /// The tool failed.
    Error,
}

/// What a rule answers. Text and a tool call may both be given: the text comes first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplySpec {
    /// Reply text, with placeholders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use: Option<ToolUseSpec>,
    /// The text answered when the tool is not offered in the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_text: Option<String>,
}

/// A scripted tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolUseSpec {
    /// The tool's name, with placeholders (e.g. `transfer_to_{agent}`).
    pub name: String,
    /// The input: a JSON template whose strings may hold placeholders.
    #[serde(default = "empty_object")]
    pub input: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

/// A compiled regex that (de)serialises as its source text.
#[derive(Clone, Debug)]
pub struct Pattern(pub Regex);

impl Pattern {
    /// Compiles `source`.
    pub fn new(source: &str) -> Result<Self, ScriptError> {
        Regex::new(source).map(Self).map_err(|e| ScriptError::Invalid(format!("bad regex {source:?}: {e}")))
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.as_str())
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = String::deserialize(deserializer)?;
        Regex::new(&source).map(Self).map_err(serde::de::Error::custom)
    }
}

/// The bundled Example Bank script (`dataplane/sim/banking.yaml`), the local mode's default.
pub const BANKING_SCRIPT_YAML: &str = include_str!("../banking.yaml");

/// The bundled Example Bank script, parsed.
pub fn banking_script() -> Result<Script, ScriptError> {
    Script::parse(BANKING_SCRIPT_YAML)
}
