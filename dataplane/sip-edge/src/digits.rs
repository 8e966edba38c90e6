//! Keys the agent presses on the call (`send_digits`): the gateway's `digits_request`,
//! read again here (it comes from outside the process: [`switchboard_sip::media::digits::parse`]
//! bounds and checks it), pressed by the call's media session as RFC 4733 telephone
//! events, and answered with one `digits_result` — at once when the keys cannot be pressed
//! (no telephone events settled with the phone: `unsupported`; on hold, media not settled,
//! other keys under way, keys that do not read: `rejected`), or when the last key's gap is
//! over (`sent`), or when the call went on hold or changed its media part-way
//! (`interrupted`, with how many went). The keys are no secret, but like the caller's
//! they are not logged: only how many, and how it went.

use switchboard_core::protocol::{ClientMessage, DigitsOutcome};
use switchboard_sip::media::digits::{PressRefused, Pressed};
use tokio_tungstenite::tungstenite::Message;

/// The `digits_result` for call `tool_use_id`.
pub(crate) fn result(tool_use_id: &str, outcome: DigitsOutcome, sent: u32, message: &str) -> Message {
    let result =
        ClientMessage::DigitsResult { tool_use_id: tool_use_id.to_owned(), outcome, sent, message: message.to_owned() };
    Message::text(serde_json::to_string(&result).unwrap_or_default())
}

/// The outcome of keys the media session refused to press.
pub(crate) fn refused(why: PressRefused) -> DigitsOutcome {
    match why {
        PressRefused::NoTelephoneEvents => DigitsOutcome::Unsupported,
        PressRefused::NotSending | PressRefused::Busy => DigitsOutcome::Rejected,
    }
}

/// The outcome of a sequence that ended, with how many keys went and why it stopped.
pub(crate) fn ended(pressed: &Pressed) -> (DigitsOutcome, u32, &'static str) {
    match pressed.interrupted {
        None => (DigitsOutcome::Sent, pressed.pressed, ""),
        Some(why) => (DigitsOutcome::Interrupted, pressed.pressed, why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_name_the_call_and_how_it_went() {
        let Message::Text(text) = result("t1", DigitsOutcome::Sent, 3, "") else { panic!("a text message") };
        assert_eq!(text.as_str(), r#"{"type":"digits_result","tool_use_id":"t1","outcome":"sent","sent":3}"#);
        assert_eq!(refused(PressRefused::NoTelephoneEvents), DigitsOutcome::Unsupported);
        assert_eq!(refused(PressRefused::NotSending), DigitsOutcome::Rejected);
        assert_eq!(refused(PressRefused::Busy), DigitsOutcome::Rejected);
        let cut = Pressed { keys: 4, pressed: 1, interrupted: Some("the call was put on hold") };
        assert_eq!(ended(&cut), (DigitsOutcome::Interrupted, 1, "the call was put on hold"));
        assert_eq!(ended(&Pressed { keys: 4, pressed: 4, interrupted: None }), (DigitsOutcome::Sent, 4, ""));
    }
}
