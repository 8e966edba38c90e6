//! How an Agent's sessions take a share of the model provider's quota: the account its
//! model streams count against (beside the model's region, `spec.model.region`), its
//! priority among sessions waiting for a slot, and what a new session meets when the quota
//! is full — a place in the queue, or a refusal with a retry hint. The gateway enforces
//! it (`switchboard_capacity`); the quota and each namespace's guaranteed share
//! are the gateway's settings (one platform decision, not each Agent's).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The account a quota is counted against when an Agent names none.
pub const DEFAULT_ACCOUNT: &str = "default";
/// The lowest and highest priority an Agent may have.
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i32> = -100..=100;
/// The longest hold message, in bytes.
pub const MAX_HOLD_MESSAGE: usize = 500;

/// An Agent's place in the shared model quota (`spec.capacity`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacitySettings {
    /// The provider account the Agent's model streams count against, a name the platform
    /// team gives it (the gateway's `--capacity-quota <account>/<region>=<streams>` sets its
    /// quota in a region). Default `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"))]
    pub account: Option<String>,
    /// Among sessions waiting for a slot in the same tenant class (within or over its
    /// namespace's guaranteed share), higher goes first; -100 to 100, default 0. A
    /// session is never cut to make room.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = -100, max = 100))]
    pub priority: i32,
    /// What a new session meets when the quota is full: `queue` (the default: it waits,
    /// told its position and an estimate) or `refuse` (closed at once with
    /// `capacity_full` and a retry hint).
    #[serde(default, skip_serializing_if = "WhenFull::is_default")]
    pub when_full: WhenFull,
    /// What a person waiting in the queue is told (`All our advisers are busy; please stay
    /// on the line.`), up to 500 bytes: `bidi_session_queued.message`, which a client shows
    /// and a phone edge may speak. Default: a sentence with the caller's place and the
    /// estimated wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 500))]
    pub hold_message: Option<String>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl CapacitySettings {
    /// True when nothing is set (left out of serialised specs).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The account, defaulted.
    pub fn account(&self) -> &str {
        self.account.as_deref().unwrap_or(DEFAULT_ACCOUNT)
    }

    /// What is wrong with these settings, for a person to fix (the schema says the same
    /// for the API server; this is for specs that do not pass through it: local mode, the
    /// operator's own check).
    pub fn check(&self) -> Result<(), String> {
        if !PRIORITY_RANGE.contains(&self.priority) {
            return Err(format!("spec.capacity.priority is {}; it must be from -100 to 100", self.priority));
        }
        if let Some(account) = &self.account {
            let ok = !account.is_empty()
                && account.len() <= 63
                && account.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !account.starts_with('-')
                && !account.ends_with('-');
            if !ok {
                return Err(format!(
                    "spec.capacity.account {account:?} must be 1 to 63 lowercase letters, digits and '-', \
                     starting and ending with a letter or digit"
                ));
            }
        }
        if let Some(message) = &self.hold_message
            && (message.trim().is_empty() || message.len() > MAX_HOLD_MESSAGE)
        {
            return Err(format!(
                "spec.capacity.holdMessage must be 1 to {MAX_HOLD_MESSAGE} bytes of text, not blank ({} now)",
                message.len()
            ));
        }
        Ok(())
    }
}

/// What a new session meets when the quota is full.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WhenFull {
    /// It waits in the gateway's bounded queue, told its position and an estimate.
    #[default]
    Queue,
    /// It is refused at once (`capacity_full`, close 1013) with a retry hint.
    Refuse,
}

impl WhenFull {
    fn is_default(&self) -> bool {
        *self == Self::Queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_with_reasons() {
        assert!(CapacitySettings::default().check().is_ok());
        assert_eq!(CapacitySettings::default().account(), "default");
        let high = CapacitySettings { priority: 101, ..Default::default() };
        assert!(high.check().unwrap_err().contains("-100 to 100"));
        for bad in ["", "Prod", "-a", "a-", "a_b", &"a".repeat(64)] {
            let s = CapacitySettings { account: Some(bad.into()), ..Default::default() };
            assert!(s.check().is_err(), "{bad:?}");
        }
        for bad in [" ", &"a".repeat(MAX_HOLD_MESSAGE + 1)] {
            let s = CapacitySettings { hold_message: Some(bad.into()), ..Default::default() };
            assert!(s.check().unwrap_err().contains("holdMessage"), "{bad:?}");
        }
        let ok = CapacitySettings {
            account: Some("bank-prod".into()),
            priority: -100,
            when_full: WhenFull::Refuse,
            hold_message: Some("Please hold.".into()),
        };
        assert!(ok.check().is_ok());
        let yaml = "account: bank-prod\npriority: 5\nwhenFull: refuse\nholdMessage: Please hold.\n";
        let read: CapacitySettings = serde_yaml::from_str(yaml).expect("reads");
        assert_eq!(read.when_full, WhenFull::Refuse);
        assert_eq!(read.priority, 5);
        assert_eq!(read.hold_message.as_deref(), Some("Please hold."));
    }
}
