//! How an AgentTest's Job reports back: `switchboard test --summary-file
//! /dev/termination-log` writes one JSON object, and the kubelet keeps it as the container's
//! termination message, where the operator reads it into the AgentTest's status. The
//! message comes from outside the operator's process: [`TestSummary::parse`] refuses
//! anything oversized, malformed, or whose counts do not add up.

use serde::{Deserialize, Serialize};

/// The kubelet keeps at most this many bytes of a termination message.
pub const SUMMARY_MAX_BYTES: usize = 4096;
/// The longest message (a divergence or an error) a summary carries, in bytes.
pub const MESSAGE_MAX_BYTES: usize = 1024;

/// The outcome of one run of scenarios.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestSummary {
    /// Scenarios that passed.
    pub passed: u32,
    /// Scenarios that failed or could not run.
    pub failed: u32,
    /// Scenarios planned.
    pub total: u32,
    /// The first failing scenario's name and first divergence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<String>,
    /// Why nothing was judged (scenario files refused, the target out of reach).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A termination message that is not a summary.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    /// Longer than a kubelet keeps, or a message longer than a summary carries.
    #[error("the summary is {0} bytes; a summary has at most {SUMMARY_MAX_BYTES} and messages of {MESSAGE_MAX_BYTES}")]
    TooLong(usize),
    /// Not the JSON of a summary.
    #[error("not a test summary: {0}")]
    Malformed(#[source] serde_json::Error),
    /// Counts that do not add up.
    #[error("the summary's counts do not add up: {passed} passed + {failed} failed > {total} planned")]
    Counts {
        /// Passed.
        passed: u32,
        /// Failed.
        failed: u32,
        /// Planned.
        total: u32,
    },
}

impl TestSummary {
    /// Whether the run judged every scenario and all passed.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.failed == 0 && self.passed == self.total
    }

    /// The summary as one JSON line, its messages cut (at a character boundary, marked with
    /// `…`) so the whole fits [`SUMMARY_MAX_BYTES`].
    pub fn encode(&self) -> String {
        let cut = Self {
            first_divergence: self.first_divergence.as_deref().map(shorten),
            error: self.error.as_deref().map(shorten),
            ..self.clone()
        };
        // Two messages of at most 1024 bytes, each escaped to at most 6 bytes a byte in
        // JSON, could still pass 4096: shorten further until it fits.
        let mut text = serde_json::to_string(&cut).unwrap_or_default();
        let mut limit = MESSAGE_MAX_BYTES;
        while text.len() > SUMMARY_MAX_BYTES && limit > 16 {
            limit /= 2;
            let shorter = Self {
                first_divergence: cut.first_divergence.as_deref().map(|m| cut_to(m, limit)),
                error: cut.error.as_deref().map(|m| cut_to(m, limit)),
                ..cut.clone()
            };
            text = serde_json::to_string(&shorter).unwrap_or_default();
        }
        text
    }

    /// Reads a termination message; refuses what is not a summary.
    pub fn parse(text: &str) -> Result<Self, SummaryError> {
        if text.len() > SUMMARY_MAX_BYTES {
            return Err(SummaryError::TooLong(text.len()));
        }
        let summary: Self = serde_json::from_str(text.trim()).map_err(SummaryError::Malformed)?;
        let longest = summary.first_divergence.iter().chain(&summary.error).map(String::len).max().unwrap_or(0);
        if longest > MESSAGE_MAX_BYTES {
            return Err(SummaryError::TooLong(longest));
        }
        let (passed, failed, total) = (summary.passed, summary.failed, summary.total);
        if u64::from(passed) + u64::from(failed) > u64::from(total) {
            return Err(SummaryError::Counts { passed, failed, total });
        }
        Ok(summary)
    }
}

fn shorten(message: &str) -> String {
    cut_to(message, MESSAGE_MAX_BYTES)
}

/// `message` in at most `max` bytes, ending in `…` when cut.
fn cut_to(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_round_trips() {
        let s = TestSummary {
            passed: 6,
            failed: 1,
            total: 7,
            first_divergence: Some("Balance, step 2: expected tool check_balance".into()),
            error: None,
        };
        assert_eq!(TestSummary::parse(&s.encode()).expect("parses"), s);
        assert!(!s.ok());
        assert!(TestSummary { passed: 2, total: 2, ..Default::default() }.ok());
        assert!(!TestSummary { passed: 1, total: 2, ..Default::default() }.ok(), "a scenario not judged");
    }

    #[test]
    fn long_messages_are_cut_to_fit_a_termination_message() {
        let s = TestSummary {
            passed: 0,
            failed: 1,
            total: 1,
            first_divergence: Some("é\"".repeat(3000)),
            error: Some("\u{1}".repeat(5000)),
        };
        let text = s.encode();
        assert!(text.len() <= SUMMARY_MAX_BYTES, "{}", text.len());
        let back = TestSummary::parse(&text).expect("parses");
        assert!(back.first_divergence.is_some_and(|m| m.ends_with('…') && m.len() <= MESSAGE_MAX_BYTES));
    }

    #[test]
    fn what_is_not_a_summary_is_refused() {
        for (text, expected) in [
            ("Error: exec format error", "not a test summary"),
            (r#"{"passed":1,"failed":0,"total":1,"extra":1}"#, "unknown field"),
            (r#"{"passed":3,"failed":1,"total":2}"#, "do not add up"),
            (&format!(r#"{{"passed":0,"failed":0,"total":0,"error":"{}"}}"#, "x".repeat(2000)), "2000 bytes"),
            (&"x".repeat(5000), "5000 bytes"),
        ] {
            let err = TestSummary::parse(text).expect_err(text).to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
