//! What the conversation record keeps of an Agent's sessions: the Agent's own redaction
//! rules, beside the gateway's built-in detectors (IBANs, cards, e-mail, phone numbers) and the
//! chart's rules. They apply to everything recorded of the sessions of the Agent's namespace,
//! from their first line (a session may reach any of its Agents). And the analysis of each
//! ended session (`analysis`): fields a model fills from the record.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most redaction rules on one Agent.
pub const MAX_REDACT_RULES: usize = 16;
/// Longest redaction pattern.
pub const MAX_REDACT_PATTERN_LEN: usize = 512;

/// The Agent's part of the conversation record.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordSettings {
    /// Patterns replaced by `[redacted:<name>]` in the record (the live conversation is not
    /// touched), applied after payment cards and before phone numbers and e-mail addresses.
    /// They add to the gateway's own rules (the chart's `gateway.record.redact`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub redact: Vec<RedactRule>,
    /// After each session that started at this Agent ends, a model reads its redacted record
    /// and fills these fields (e.g. `resolved`, `reason`, `sentiment`); the answers are kept
    /// with the session, sent in its end-of-call report and counted in the gateway's
    /// metrics. Off when absent: it costs a model call per session, counted in the session's
    /// tokens and cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisSettings>,
}

impl RecordSettings {
    /// True when nothing is set (left out of serialised specs).
    pub fn is_empty(&self) -> bool {
        self.redact.is_empty() && self.analysis.is_none()
    }
}

/// Most fields one analysis fills.
pub const MAX_ANALYSIS_FIELDS: usize = 16;
/// Most values of one `enum` field.
pub const MAX_ANALYSIS_VALUES: usize = 32;
/// Longest description of a field.
pub const MAX_ANALYSIS_DESCRIPTION_LEN: usize = 500;
/// The field whose `true` counts a session as resolved (a `boolean`, when declared): the
/// resolution rate per Agent and variant is counted from it.
pub const RESOLVED_FIELD: &str = "resolved";

/// What a model fills in after each session.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisSettings {
    /// The text model that analyses (a Bedrock model or inference profile id). Absent: the
    /// gateway's `--record-analysis-model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub model: Option<String>,
    /// The fields, each with a description the model reads. A `boolean` field named
    /// `resolved` counts towards the resolution rate.
    #[schemars(length(min = 1, max = 16))]
    pub fields: Vec<AnalysisField>,
}

/// One field of the analysis.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisField {
    /// The field's name in the record and the report (`snake_case`).
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_]*$"))]
    pub name: String,
    /// What kind of answer.
    #[serde(rename = "type")]
    pub kind: AnalysisFieldType,
    /// What the field means, for the model: "true when the caller's request was done".
    #[schemars(length(min = 1, max = 500))]
    pub description: String,
    /// The answers an `enum` field may take.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 63)))]
    pub values: Vec<String>,
}

/// The kind of an analysis field's answer.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AnalysisFieldType {
    /// `true` or `false`.
    Boolean,
    /// One of `values`.
    Enum,
    /// A number.
    Number,
    /// Free text (at most 500 characters kept).
    String,
}

impl AnalysisFieldType {
    /// As the spec writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Boolean => "boolean",
            Self::Enum => "enum",
            Self::Number => "number",
            Self::String => "string",
        }
    }
}

/// One named pattern.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedactRule {
    /// What the record shows instead: `[redacted:<name>]`.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub name: String,
    /// A regular expression (Rust `regex` syntax: no look-around or backreferences, so
    /// matching time stays linear), e.g. `\b\d{8}\b` for an account number.
    #[schemars(length(min = 1, max = 512))]
    pub pattern: String,
}

impl RedactRule {
    /// The rule as the gateway's `--record-redact` writes it: `name=pattern`.
    pub fn as_flag(&self) -> String {
        format!("{}={}", self.name, self.pattern)
    }
}
