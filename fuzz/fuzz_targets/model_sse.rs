//! Server-sent events from model servers: the shared parser
//! (`switchboard_models::net::SseParser`, also used for MCP streams) and the
//! OpenAI-compatible client's chunk decoder (`switchboard_models::openai::SseDecoder`).
//! The first input byte picks the size of the pieces the rest arrives in; the property
//! is that the parser's events do not depend on how the bytes were split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_models::net::SseParser;
use switchboard_models::openai::SseDecoder;

fuzz_target!(|data: &[u8]| {
    let Some((&piece, body)) = data.split_first() else { return };
    let piece = usize::from(piece).max(1);

    let mut whole = SseParser::new(1024);
    let at_once = whole.feed(body);
    let mut split = SseParser::new(1024);
    let mut in_pieces = Vec::new();
    let mut failed = false;
    for chunk in body.chunks(piece) {
        match split.feed(chunk) {
            Ok(events) => in_pieces.extend(events),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    match at_once {
        Ok(events) => {
            assert!(!failed, "split input failed where the whole one parsed");
            assert_eq!(events, in_pieces, "events depend on how the input was split");
        }
        Err(_) => assert!(failed, "whole input failed where the split one parsed"),
    }

    let mut decoder = SseDecoder::default();
    for chunk in body.chunks(piece) {
        std::hint::black_box(decoder.feed(chunk));
        if decoder.done {
            break;
        }
    }
});
