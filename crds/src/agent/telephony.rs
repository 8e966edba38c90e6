//! `spec.telephony`: the phone numbers an Agent answers. A call the SIP edge takes for a
//! number reaches the Agent that claims it; a number is one Agent's only among the Agents
//! one operator watches — the routing table its gateway and SIP edge serve: the whole
//! cluster for a cluster-wide operator, its namespace for a namespaced one (the operator
//! refuses the later claim, see `switchboard_operator`'s number check).
//! And the people a caller may be put through to: an Agent that lists `people` gets the
//! built-in [`TRANSFER_TO_PERSON_TOOL`]. An Agent with `sendDigits` gets the built-in
//! [`SEND_DIGITS_TOOL`] on its phone calls: it presses keys to navigate another IVR.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most numbers one Agent claims.
pub const MAX_NUMBERS: usize = 64;

/// An E.164 number: `+`, a country code that does not start with 0, at most 15 digits in
/// all (ITU-T E.164 §6), nothing else (no spaces, dashes or extensions).
pub const E164_PATTERN: &str = r"^\+[1-9][0-9]{1,14}$";

/// The most people one Agent lists.
pub const MAX_PEOPLE: usize = 32;

/// The built-in tool an Agent with `spec.telephony.people` gets: it puts the caller
/// through to one of them (the client performs it: a SIP edge transfers the call).
pub const TRANSFER_TO_PERSON_TOOL: &str = "transfer_to_person";

/// The built-in tool an Agent with `spec.telephony.sendDigits` gets on phone calls: it
/// presses keys on the call (the client performs it: a SIP edge sends RFC 4733 telephone
/// events), to navigate another phone system's menu.
pub const SEND_DIGITS_TOOL: &str = "send_digits";

/// How long a transfer may ring before it counts as unanswered, by default (seconds).
pub const DEFAULT_TRANSFER_TIMEOUT_SECONDS: u32 = 30;

/// Where a person is reached: an E.164 number or a `sip:`/`sips:` URI with a user part.
pub const PERSON_ADDRESS_PATTERN: &str = r#"^(\+[1-9][0-9]{1,14}|sips?:[^\s<>"@]+@[^\s<>"@;]+(;[^\s<>"]*)?)$"#;

/// A person (or a team's line) the caller can be put through to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    /// The name the model asks for (`advisor`, `fraud-team`): lowercase letters, digits,
    /// `-` and `_`, unique in the Agent.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9][a-z0-9_-]*$"))]
    pub name: String,
    /// Where the person is: an E.164 number (`+442079460001`, dialled through the trunk
    /// the call came from) or a SIP URI (`sip:advisor@pbx.example.com`).
    #[schemars(
        length(min = 3, max = 256),
        regex(pattern = r#"^(\+[1-9][0-9]{1,14}|sips?:[^\s<>"@]+@[^\s<>"@;]+(;[^\s<>"]*)?)$"#)
    )]
    pub address: String,
    /// When to put a caller through to this person, for the model (`Card disputes the
    /// agent cannot settle`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 500))]
    pub description: String,
    /// How the caller is put through: `cold` (the default: the caller goes straight to the
    /// person) or `warm` (the caller hears hold audio while the person's phone rings; when
    /// the person answers the agent tells them who is calling and why, then the caller is
    /// put through and the agent leaves the call).
    #[serde(default, skip_serializing_if = "TransferMode::is_cold")]
    pub transfer: TransferMode,
}

/// How a caller is put through to a person.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TransferMode {
    /// The caller goes straight to the person; the agent leaves when the person answers.
    #[default]
    Cold,
    /// The caller is on hold while the agent briefs the person, then put through.
    Warm,
}

impl TransferMode {
    /// Whether this is the default, a cold transfer.
    pub fn is_cold(&self) -> bool {
        *self == Self::Cold
    }

    /// `cold` or `warm`, as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cold => "cold",
            Self::Warm => "warm",
        }
    }
}

/// How an Agent takes phone calls.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Telephony {
    /// The phone numbers this Agent answers, in E.164 (`+442079460000`). A call to one of
    /// them through the SIP edge reaches this Agent (as `sip:<agent>@edge` does for an
    /// exposed Agent). A number belongs to one Agent among those one operator watches (the
    /// routing table its gateway and SIP edge serve: every namespace for a cluster-wide
    /// operator, one for a namespaced one): an Agent that claims a number another Agent
    /// there claimed first is not accepted (`NumberTaken`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 3, max = 16), regex(pattern = r"^\+[1-9][0-9]{1,14}$")))]
    pub numbers: Vec<String>,
    /// The people a caller may be put through to (by default a cold transfer: the caller
    /// leaves the agent; `transfer: warm`, the agent briefs the person first). With any listed, the Agent gets the built-in `transfer_to_person` tool,
    /// which names them; a transfer that fails (busy, no answer, declined, unreachable)
    /// comes back to the model as a tool error of that kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub people: Vec<Person>,
    /// How long a transfer may ring before it counts as unanswered (5-300 s; default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 300))]
    pub transfer_timeout_seconds: Option<u32>,
    /// Answering-machine detection on the Agent's outbound calls (`POST /v1/calls`) and
    /// what a call does when a machine answers: leave the agent's message after the beep,
    /// or hang up. Absent: no detection, the agent talks as soon as the call is answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answering_machine: Option<super::AnsweringMachine>,
    /// The agent may press keys on its phone calls, to navigate another phone system's
    /// menu (an IVR: "press 1 for accounts"), typically on an outbound call. With it, the
    /// Agent gets the built-in `send_digits` tool on phone calls only (never on a WebSocket
    /// or WebRTC session, where there is no keypad to press): its `digits` (`0`-`9`, `*`,
    /// `#`, `A`-`D`, `w` for a half-second pause; at most 32) go to the far end as RFC 4733
    /// telephone events, and the model hears when they went, or why they could not (the
    /// far end takes no telephone events, the call is on hold).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub send_digits: bool,
}

impl Telephony {
    /// True when nothing is set (the field is left out of the spec).
    pub fn is_empty(&self) -> bool {
        self.numbers.is_empty()
            && self.people.is_empty()
            && self.transfer_timeout_seconds.is_none()
            && self.answering_machine.is_none()
            && !self.send_digits
    }

    /// The person named `name`.
    pub fn person(&self, name: &str) -> Option<&Person> {
        self.people.iter().find(|p| p.name == name)
    }

    /// How long a transfer may ring (seconds).
    pub fn transfer_timeout(&self) -> u32 {
        self.transfer_timeout_seconds.unwrap_or(DEFAULT_TRANSFER_TIMEOUT_SECONDS)
    }
}

/// Whether `address` is where a person can be reached, as [`PERSON_ADDRESS_PATTERN`]
/// says: an E.164 number, or `sip:`/`sips:`, a user, `@`, a host and optional parameters,
/// with no spaces, angle brackets or quotes.
pub fn is_person_address(address: &str) -> bool {
    if address.len() > 256 || address.chars().any(|c| c.is_whitespace() || c.is_control() || "<>\"".contains(c)) {
        return false;
    }
    if address.starts_with('+') {
        return is_e164(address);
    }
    let Some(rest) = address.strip_prefix("sip:").or_else(|| address.strip_prefix("sips:")) else { return false };
    let Some((user, host)) = rest.split_once('@') else { return false };
    let host = host.split(';').next().unwrap_or_default();
    !user.is_empty() && !host.is_empty() && !host.contains('@') && !user.contains('@')
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
    fn a_person_is_a_number_or_a_sip_uri_with_a_user() {
        for good in
            ["+442079460001", "sip:advisor@pbx.example.com", "sips:a.b@10.0.0.1:5061", "sip:7001@pbx;transport=tcp"]
        {
            assert!(is_person_address(good), "{good}");
        }
        for bad in [
            "",
            "advisor",
            "sip:pbx.example.com",
            "sip:@pbx",
            "sip:a@",
            "tel:+44",
            "sip:a b@pbx",
            "sip:a@b@c",
            "+0123",
            "sip:<a>@pbx",
            "http://x@y",
        ] {
            assert!(!is_person_address(bad), "{bad}");
        }
        let regex = regex::Regex::new(PERSON_ADDRESS_PATTERN).expect("the pattern compiles");
        for address in
            ["+442079460001", "sip:advisor@pbx.example.com", "sip:7001@pbx;transport=tcp", "sip:pbx", "x", "sip:a b@c"]
        {
            assert_eq!(regex.is_match(address), is_person_address(address), "{address}");
        }
    }

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
