//! Keys the caller pressed, for the agent: each press — an RFC 4733 telephone event
//! (reported once however its packets repeat, by the media session's receiver) or a SIP
//! INFO digit — becomes one `bidi_dtmf` to the gateway as it is pressed. A hook flash is
//! no key and is not forwarded. The keys themselves are never logged (they may be a PIN);
//! only how many were forwarded.

use switchboard_core::protocol::ClientMessage;
use switchboard_sip::media::telephone::Event;
use tokio_tungstenite::tungstenite::Message;

/// The `bidi_dtmf` of one press, or `None` for an event that is no key.
pub(crate) fn message(event: Event) -> Option<Message> {
    let Event::Digit(key) = event else { return None };
    if !switchboard_core::dtmf::is_key(key) {
        return None;
    }
    let text = serde_json::to_string(&ClientMessage::BidiDtmf { digits: key.to_string() }).ok()?;
    Some(Message::text(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_bidi_dtmf_and_a_flash_nothing() {
        let Some(Message::Text(text)) = message(Event::Digit('#')) else { panic!("a text message") };
        assert_eq!(text.as_str(), r##"{"type":"bidi_dtmf","digits":"#"}"##);
        for key in "0123456789*#ABCD".chars() {
            assert!(message(Event::Digit(key)).is_some(), "{key}");
        }
        assert!(message(Event::Flash).is_none());
        assert!(message(Event::Digit('x')).is_none());
    }
}
