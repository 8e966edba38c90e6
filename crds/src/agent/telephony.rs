//! `spec.telephony`: the phone numbers an Agent answers. A call the SIP edge takes for a
//! number reaches the Agent that claims it; a number is one Agent's only, cluster-wide
//! (the operator refuses the later claim, see `switchboard_operator`'s number check).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most numbers one Agent claims.
pub const MAX_NUMBERS: usize = 64;

/// An E.164 number: `+`, a country code that does not start with 0, at most 15 digits in
/// all (ITU-T E.164 §6), nothing else (no spaces, dashes or extensions).
pub const E164_PATTERN: &str = r"^\+[1-9][0-9]{1,14}$";

/// How an Agent takes phone calls.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Telephony {
    /// The phone numbers this Agent answers, in E.164 (`+442079460000`). A call to one of
    /// them through the SIP edge reaches this Agent (as `sip:<agent>@edge` does for an
    /// exposed Agent). A number belongs to one Agent in the whole cluster: an Agent that
    /// claims a number another Agent claimed first is not accepted (`NumberTaken`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 3, max = 16), regex(pattern = r"^\+[1-9][0-9]{1,14}$")))]
    pub numbers: Vec<String>,
}

impl Telephony {
    /// True when nothing is set (the field is left out of the spec).
    pub fn is_empty(&self) -> bool {
        self.numbers.is_empty()
    }
}

/// Whether `number` is E.164 as [`E164_PATTERN`] says.
pub fn is_e164(number: &str) -> bool {
    let Some(digits) = number.strip_prefix('+') else { return false };
    (2..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e164_is_a_plus_a_country_code_and_at_most_fifteen_digits() {
        for good in ["+442079460000", "+15551234567", "+12", "+123456789012345"] {
            assert!(is_e164(good), "{good}");
        }
        for bad in
            ["442079460000", "+", "+1", "+0442079460000", "+1234567890123456", "+44 20 7946", "+44-20", "tel:+44", ""]
        {
            assert!(!is_e164(bad), "{bad}");
        }
    }
}
