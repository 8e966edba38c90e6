//! Which agent a call is for and what the edge vouches for about it: the Request-URI's user
//! part names the agent (or the number it claims), and the caller's number enters the
//! session's context only from an authenticated trunk.

use switchboard_core::phone::PhoneCall;
use switchboard_sip::call::Incoming;

/// The longest agent name taken from a Request-URI (a Kubernetes name is at most 253).
const MAX_AGENT: usize = 253;

/// The agent a call is for: the Request-URI's user part, a Kubernetes name (lowercase
/// letters, digits, `-` and `.`) or an E.164 number (the gateway routes it to the Agent
/// that claims it), or why no agent can answer it.
pub(crate) fn agent_of(incoming: &Incoming) -> Result<String, String> {
    let Some(user) = incoming.dialled.as_deref().filter(|u| !u.is_empty()) else {
        return Err("the Request-URI names no agent (call sip:<agent>@host)".to_owned());
    };
    if let Some(digits) = user.strip_prefix('+') {
        // A number: the gateway finds the Agent that claims it (spec.telephony.numbers).
        let e164 =
            (2..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0');
        if !e164 {
            return Err(
                "no agent answers this number (a dialled number is E.164: '+' and at most 15 digits)".to_owned()
            );
        }
        return Ok(user.to_owned());
    }
    let valid = user.len() <= MAX_AGENT
        && user.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !valid {
        return Err("no agent has that name (agent names are lowercase letters, digits, '-' and '.')".to_owned());
    }
    Ok(user.to_owned())
}

/// What the edge vouches for to the gateway about a call: the caller's number only when
/// the call came through an authenticated trunk, and the number dialled.
pub(crate) fn phone_call(incoming: &Incoming) -> PhoneCall {
    PhoneCall::of(
        incoming.caller.as_deref(),
        incoming.caller_asserted,
        incoming.dialled.as_deref(),
        incoming.caller_private,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incoming(dialled: Option<&str>) -> Incoming {
        Incoming {
            call_id: "c".into(),
            dialled: dialled.map(str::to_owned),
            caller: None,
            caller_asserted: false,
            caller_private: false,
            display_name: None,
            source: "127.0.0.1:5080".parse().expect("addr"),
            media: None,
        }
    }

    #[test]
    fn the_request_uri_user_names_the_agent() {
        assert_eq!(agent_of(&incoming(Some("triage"))), Ok("triage".to_owned()));
        assert_eq!(agent_of(&incoming(Some("bank.triage-2"))), Ok("bank.triage-2".to_owned()));
        assert_eq!(agent_of(&incoming(Some("+4930123456"))), Ok("+4930123456".to_owned()), "a number: the gateway's");
        let bad_numbers = [Some("+"), Some("+0301234"), Some("+1234567890123456"), Some("+44 20"), Some("+44x")];
        for bad in bad_numbers.into_iter().chain([None, Some(""), Some("Triage"), Some("a b"), Some("x/../y")]) {
            assert!(agent_of(&incoming(bad)).is_err(), "{bad:?}");
        }
        assert!(agent_of(&incoming(Some(&"a".repeat(254)))).is_err());
    }

    #[test]
    fn the_callers_number_is_vouched_for_only_from_a_trunk() {
        let mut call = Incoming {
            caller: Some("+442079460018".into()),
            caller_asserted: true,
            caller_private: true,
            ..incoming(Some("+442079460000"))
        };
        let header = phone_call(&call).to_header();
        assert_eq!(header, r#"{"caller":"+442079460018","dialled":"+442079460000","withheld":true}"#);
        call.caller_asserted = false;
        assert_eq!(phone_call(&call), PhoneCall { dialled: Some("+442079460000".into()), ..PhoneCall::default() });
        assert!(phone_call(&incoming(Some("triage"))).is_empty(), "a call by the agent's name dialled no number");
    }
}
