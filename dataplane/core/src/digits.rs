//! Pressing keys on a call (`spec.telephony.sendDigits`): the built-in [`SEND_DIGITS_TOOL`]
//! the model is offered on phone calls, and what a call of it asks of the client. The core
//! cannot press keys itself — the client (the SIP edge) sends them as RFC 4733 telephone
//! events and says how it went with `digits_result` — so a call of this tool is planned here
//! into a [`ServerMessage::DigitsRequest`] and waits, like a running tool, for that answer
//! (or for its deadline: the keys' longest time plus [`REPORT_GRACE`]).
//!
//! Which sessions are phone calls is the gateway's to say ([`is_phone_call`]): only the SIP
//! edge's sessions start with `phoneCall` in their memory (an inbound call, vouched for by
//! the edge's credential) or `outboundCall` (a call the gateway placed); a WebSocket or
//! WebRTC client can set neither, so it is never offered the tool.
//!
//! The keys are no secret (unlike a keypad input the caller types): the call, its input and
//! its result are in the record like any tool call's.

use std::time::Duration;

use switchboard_crds::agent::{SEND_DIGITS_TOOL, Telephony};

use crate::memory::Memory;
use crate::model::ToolDefinition;
use crate::protocol::{DigitsOutcome, ServerMessage};
use crate::tools::{FailureKind, ToolFailure};

/// Most characters (keys and pauses) in one call, as in one `bidi_dtmf`.
pub const MAX_DIGITS: usize = crate::dtmf::MAX_DIGITS;

/// The longest one character takes to send (a `w` pause, half a second; a key is held
/// 120 ms with 100 ms after it), for the deadline.
const LONGEST_PER_CHARACTER: Duration = Duration::from_millis(500);

/// How long past the keys' longest time the core waits for the client's `digits_result`
/// before the call ends as a `timeout`.
pub const REPORT_GRACE: Duration = Duration::from_secs(15);

/// Whether the session with this memory is a phone call: the gateway started it with the
/// call the SIP edge vouched for (`phoneCall`) or with the outbound call it placed
/// (`outboundCall`). No client can set either.
pub fn is_phone_call(memory: &Memory) -> bool {
    [crate::phone::MEMORY_KEY, crate::outbound::MEMORY_KEY]
        .into_iter()
        .any(|key| memory.get(key).is_some_and(|v| !v.is_null()))
}

/// The tool offered to an Agent with `sendDigits`; `None` without.
pub fn tool(telephony: &Telephony) -> Option<ToolDefinition> {
    if !telephony.send_digits {
        return None;
    }
    Some(ToolDefinition {
        name: SEND_DIGITS_TOOL.to_owned(),
        description: "Press keys on the phone call, to choose options in another phone system's menu (\"press 1 \
             for accounts\") or to type a number it asks for. Keys: 0-9, * and #, A-D; w waits half a second \
             between keys. Press only what the menu asked for; you get a result once the keys went, or an error \
             saying why they could not be pressed."
            .to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "digits": {
                    "type": "string",
                    "pattern": "^[0-9*#A-Dw]{1,32}$",
                    "description": "The keys to press, in order, e.g. \"1\" or \"4929#\"; w for a half-second pause."
                }
            },
            "required": ["digits"]
        }),
    })
}

/// A call of the tool, checked: what goes to the client, and how long to wait for its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// The keys, as they go to the client.
    pub digits: String,
    /// What goes to the client.
    pub request: ServerMessage,
    /// How long the core waits for the client's answer.
    pub patience: Duration,
}

/// The keys of a call's `digits`, checked: 1 to [`MAX_DIGITS`] characters, each a keypad
/// key (`0`-`9`, `*`, `#`, `A`-`D`; `a`-`d` are taken as `A`-`D`) or `w` (`W`) for a pause,
/// at least one a key; spaces are dropped. Anything else is refused with what to send.
pub fn check(input: &serde_json::Value) -> Result<String, ToolFailure> {
    let refuse = |message: String| Err(ToolFailure::new(FailureKind::InvalidInput, message));
    let Some(given) = input.get("digits").and_then(serde_json::Value::as_str) else {
        return refuse("give digits: the keys to press, as a string such as \"1\" or \"4929#\"".into());
    };
    let mut digits = String::with_capacity(given.len().min(MAX_DIGITS));
    for c in given.chars().filter(|c| *c != ' ') {
        let key = match c {
            '0'..='9' | '*' | '#' | 'A'..='D' | 'w' => c,
            'a'..='d' => c.to_ascii_uppercase(),
            'W' => 'w',
            other => {
                return refuse(format!(
                    "{other:?} is no key; press only 0-9, *, #, A-D, and w for a half-second pause"
                ));
            }
        };
        if digits.len() == MAX_DIGITS {
            return refuse(format!("more than {MAX_DIGITS} keys and pauses at once; press them in several calls"));
        }
        digits.push(key);
    }
    if !digits.chars().any(|c| c != 'w') {
        return refuse("digits holds no key to press; give at least one of 0-9, *, #, A-D".into());
    }
    Ok(digits)
}

/// Plans call `tool_use_id` of the tool with the model's `input`: the request for the
/// client, or why not (`invalid_input`, saying what to send instead).
pub fn plan(tool_use_id: &str, input: &serde_json::Value) -> Result<Planned, ToolFailure> {
    let digits = check(input)?;
    let patience = LONGEST_PER_CHARACTER * digits.len() as u32 + REPORT_GRACE;
    Ok(Planned {
        request: ServerMessage::DigitsRequest { tool_use_id: tool_use_id.to_owned(), digits: digits.clone() },
        digits,
        patience,
    })
}

/// The failure of keys that did not all go (`outcome` other than `sent`), for the model:
/// which kind, and what to do.
pub fn failure(outcome: DigitsOutcome, sent: u32, keys: usize, said: &str) -> Option<ToolFailure> {
    let said = if said.is_empty() { String::new() } else { format!(" ({said})") };
    let (kind, message) = match outcome {
        DigitsOutcome::Sent => return None,
        DigitsOutcome::Unsupported => (
            FailureKind::DigitsUnsupported,
            format!(
                "no key was pressed: the far end of this call takes no keypad tones (telephone events){said}; \
                 say the choice aloud instead if the menu takes speech"
            ),
        ),
        DigitsOutcome::Interrupted => (
            FailureKind::DigitsInterrupted,
            format!(
                "only {sent} of the {keys} keys were pressed before sending stopped{said}; listen to where the menu \
                 is now before pressing more"
            ),
        ),
        DigitsOutcome::Rejected => (
            FailureKind::DigitsRejected,
            format!("no key was pressed: the call could not send keys just now{said}; try again in a moment"),
        ),
    };
    Some(ToolFailure::new(kind, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_tool_exists_only_where_the_agent_allows_it() {
        assert_eq!(tool(&Telephony::default()), None);
        let allowed = Telephony { send_digits: true, ..Telephony::default() };
        let tool = tool(&allowed).expect("a tool");
        assert_eq!(tool.name, "send_digits");
        assert_eq!(tool.input_schema["required"], json!(["digits"]));
        let pattern = regex::Regex::new(tool.input_schema["properties"]["digits"]["pattern"].as_str().unwrap())
            .expect("the pattern compiles");
        for digits in ["1", "1234#", "*9wA", &"1".repeat(32)] {
            assert!(pattern.is_match(digits) && check(&json!({ "digits": digits })).is_ok(), "{digits}");
        }
        for digits in ["", "1x", &"1".repeat(33)] {
            assert!(!pattern.is_match(digits) && check(&json!({ "digits": digits })).is_err(), "{digits}");
        }
    }

    #[test]
    fn keys_are_checked_and_a_bad_one_is_a_clear_error() {
        assert_eq!(check(&json!({ "digits": "1 2 3 #" })), Ok("123#".into()), "spaces are dropped");
        assert_eq!(check(&json!({ "digits": "a1W#" })), Ok("A1w#".into()), "a-d and W are read as keys");
        let refused = |input: serde_json::Value| check(&input).expect_err("refused");
        let bad = refused(json!({ "digits": "12-34" }));
        assert_eq!(bad.kind, FailureKind::InvalidInput);
        assert!(bad.message.contains("'-'") && bad.message.contains("0-9, *, #, A-D"), "{bad}");
        assert!(refused(json!({ "digits": "E" })).message.contains("'E'"));
        assert!(refused(json!({ "digits": "１" })).message.contains("no key"), "a full-width digit is no key");
        assert!(refused(json!({ "digits": "" })).message.contains("no key to press"));
        assert!(refused(json!({ "digits": "ww" })).message.contains("no key to press"));
        assert!(refused(json!({ "digits": 1234 })).message.contains("give digits"));
        assert!(refused(json!({})).message.contains("give digits"));
        let long = refused(json!({ "digits": "1".repeat(33) }));
        assert!(long.message.contains("more than 32"), "{long}");
        assert_eq!(check(&json!({ "digits": format!("{} ", "1".repeat(32)) })), Ok("1".repeat(32)));
    }

    #[test]
    fn a_plan_asks_the_client_and_waits_for_the_keys_time_and_a_grace() {
        let planned = plan("t1", &json!({ "digits": "12w#" })).expect("planned");
        assert_eq!(planned.request, ServerMessage::DigitsRequest { tool_use_id: "t1".into(), digits: "12w#".into() });
        assert_eq!(planned.patience, Duration::from_secs(2) + REPORT_GRACE);
    }

    #[test]
    fn only_the_gateways_call_keys_make_a_session_a_phone_call() {
        let mut memory = Memory::default();
        assert!(!is_phone_call(&memory));
        memory.set("verifiedUser", json!({ "id": "u1" }));
        assert!(!is_phone_call(&memory));
        memory.set(crate::phone::MEMORY_KEY, json!({}));
        assert!(is_phone_call(&memory), "a call without numbers is a call");
        let mut outbound = Memory::default();
        outbound.set(crate::outbound::MEMORY_KEY, json!({ "id": "call-1" }));
        assert!(is_phone_call(&outbound));
    }

    #[test]
    fn each_outcome_but_sent_is_a_failure_of_its_own_kind() {
        assert_eq!(failure(DigitsOutcome::Sent, 3, 3, ""), None);
        let kinds: Vec<FailureKind> = [DigitsOutcome::Unsupported, DigitsOutcome::Interrupted, DigitsOutcome::Rejected]
            .into_iter()
            .filter_map(|o| failure(o, 1, 3, "on hold").map(|f| f.kind))
            .collect();
        assert_eq!(
            kinds,
            [FailureKind::DigitsUnsupported, FailureKind::DigitsInterrupted, FailureKind::DigitsRejected]
        );
        let partial = failure(DigitsOutcome::Interrupted, 1, 3, "the call was put on hold").expect("a failure");
        assert!(partial.message.contains("only 1 of the 3") && partial.message.contains("put on hold"), "{partial}");
    }
}
