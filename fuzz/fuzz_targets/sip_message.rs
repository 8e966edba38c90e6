//! SIP messages (`switchboard_sip::sip`): every datagram and every byte of a SIP stream the
//! edge receives goes through `parse_datagram` or `StreamDecoder`. Properties: no input
//! panics them; a message that parses serialises to bytes that parse to an equal message
//! (with room for what serialising adds: long header names, Content-Length); what a
//! stream yields stays within its limits, however the bytes are split; the header
//! readers and response building never panic on what parsed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_sip::sip::parse::{StreamItem, parse_datagram};
use switchboard_sip::sip::{Limits, Message, NameAddr, StreamDecoder};

const LIMITS: Limits = Limits { max_message: 4096, max_headers: 32, max_header_len: 512, max_body: 1024 };
/// Serialising may write long header names for compact ones and add Content-Length.
const ROOMY: Limits = Limits { max_message: 4096 * 3, max_headers: 33, max_header_len: 1024, max_body: 1024 };

fn read_everything(message: &Message) {
    let headers = message.headers();
    for name in ["From", "To", "Contact", "P-Asserted-Identity"] {
        for value in headers.all(name) {
            if let Ok(address) = NameAddr::parse(value) {
                let _ = (address.tag(), address.user());
            }
        }
    }
    if let Message::Request(request) = message {
        let _ = (request.branch(), request.cseq(), request.call_id(), request.check());
        let response = request.response(200, Some("fuzz"));
        let bytes = Message::Response(response).to_bytes();
        parse_datagram(&bytes, &ROOMY).expect("a response built from a request parses");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else { return };
    match parse_datagram(bytes, &LIMITS) {
        Ok(message) => {
            read_everything(&message);
            let again = parse_datagram(&message.to_bytes(), &ROOMY).expect("a serialised message parses");
            assert_eq!(again, message, "round trip");
        }
        Err(error) => {
            let _ = (error.status(), error.to_string());
            if let Some(head) = error.head() {
                let _ = head.response(error.status(), Some("fuzz"));
            }
        }
    }
    let mut decoder = StreamDecoder::new(LIMITS);
    let at = usize::from(split) % (bytes.len() + 1);
    for chunk in [&bytes[..at], &bytes[at..]] {
        if decoder.push(chunk).is_err() {
            break;
        }
        assert!(decoder.buffered() <= LIMITS.max_message + 4);
        while let Some(item) = decoder.next_item() {
            match item {
                Ok(StreamItem::Message(message)) => {
                    let body = match &message {
                        Message::Request(r) => r.body.len(),
                        Message::Response(r) => r.body.len(),
                    };
                    assert!(body <= LIMITS.max_body);
                    read_everything(&message);
                }
                Ok(StreamItem::Ping) => {}
                Err(error) => {
                    let _ = error.to_string();
                }
            }
        }
    }
});
