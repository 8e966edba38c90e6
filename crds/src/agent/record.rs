//! What the conversation record keeps of an Agent's sessions: the Agent's own redaction
//! rules, beside the gateway's built-in detectors (IBANs, cards, e-mail, phone numbers) and the
//! chart's rules. They apply to everything recorded of the sessions of the Agent's namespace,
//! from their first line (a session may reach any of its Agents).

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
}

impl RecordSettings {
    /// True when nothing is set (left out of serialised specs).
    pub fn is_empty(&self) -> bool {
        self.redact.is_empty()
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
