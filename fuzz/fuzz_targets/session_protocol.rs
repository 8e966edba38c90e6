//! The session protocol (`switchboard_core::protocol`): every text frame a client can send
//! goes through `decode_client`; the chat client and the gateway read `ServerMessage`s.
//! Property: whatever decodes re-encodes to JSON that decodes to an equal message. The keys
//! of a `digits_request` (the agent's `send_digits`), as the SIP edge reads them: the parser
//! takes at most 32 and the sequence it makes ends, its frames filling its duration and
//! every key pressed; and whatever the core's check of a model's `digits` lets through, the
//! edge's parser takes (the text as the model's `digits`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_core::protocol::{ClientMessage, ServerMessage, decode_client};
use switchboard_sip::media::digits;

/// Runs the keys of a `digits_request` as the edge would.
fn press(text: &str) {
    let Ok(steps) = digits::parse(text) else { return };
    assert!(!steps.is_empty() && steps.len() <= digits::MAX_DIGITS);
    let mut sequence = digits::Sequence::new(steps, 8000);
    let mut frames = 0u32;
    while sequence.next_slot().is_some() {
        frames += 1;
        assert!(frames <= 1000, "a sequence ends");
    }
    assert_eq!(frames * 20, sequence.duration_ms());
    assert_eq!(sequence.pressed(), sequence.keys());
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match decode_client(text) {
        Ok(message) => {
            let json = serde_json::to_string(&message).expect("a decoded ClientMessage serialises");
            let again: ClientMessage = decode_client(&json).expect("a re-encoded ClientMessage decodes");
            assert_eq!(again, message, "ClientMessage round trip through {json}");
        }
        Err(error) => {
            let _ = (error.code(), error.to_string());
        }
    }
    if let Ok(checked) = switchboard_core::digits::check(&serde_json::json!({ "digits": text })) {
        assert!(digits::parse(&checked).is_ok(), "the edge takes what the core sends: {checked:?}");
    }
    if let Ok(message) = serde_json::from_str::<ServerMessage>(text) {
        if let ServerMessage::DigitsRequest { digits, .. } = &message {
            press(digits);
        }
        let json = message.to_json();
        let again: ServerMessage = serde_json::from_str(&json).expect("a re-encoded ServerMessage decodes");
        assert_eq!(again, message, "ServerMessage round trip through {json}");
    }
});
