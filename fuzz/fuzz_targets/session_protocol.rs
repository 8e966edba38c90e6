//! The session protocol (`switchboard_core::protocol`): every text frame a client can send
//! goes through `decode_client`; the chat client and the gateway read `ServerMessage`s.
//! Property: whatever decodes re-encodes to JSON that decodes to an equal message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_core::protocol::{ClientMessage, ServerMessage, decode_client};

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
    if let Ok(message) = serde_json::from_str::<ServerMessage>(text) {
        let json = message.to_json();
        let again: ServerMessage = serde_json::from_str(&json).expect("a re-encoded ServerMessage decodes");
        assert_eq!(again, message, "ServerMessage round trip through {json}");
    }
});
