//! The simulator's Nova Sonic input side (`switchboard_sim::sonic`): event-stream frames
//! in signed envelopes (`envelope::EnvelopeDecoder`) and the input-event validator
//! (`protocol::Protocol::accept`). First byte even: the rest is a request body, fed in
//! pieces, its events validated in order. First byte odd: the rest is `\n`-separated JSON
//! events given straight to the validator (so the fuzzer reaches the validator's depth
//! without having to forge frame checksums).
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_sim::sonic::envelope::{Envelope, EnvelopeDecoder};
use switchboard_sim::sonic::protocol::Protocol;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    let mut protocol = Protocol::default();
    if mode & 1 == 1 {
        for line in body.split(|&b| b == b'\n') {
            let Ok(event) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
            if let Ok(Some(_)) = protocol.accept(&event) {
                protocol.expect_tool_result("t1");
            }
        }
        let _ = protocol.prompt_name();
        return;
    }
    let piece = usize::from(mode >> 1).max(1);
    let mut decoder = EnvelopeDecoder::default();
    'body: for chunk in body.chunks(piece) {
        decoder.extend(chunk);
        loop {
            match decoder.next_envelope() {
                Ok(Some(Envelope::Event(event))) => {
                    let _ = protocol.accept(&event);
                }
                Ok(Some(Envelope::End)) | Err(_) => break 'body,
                Ok(None) => break,
            }
        }
    }
});
