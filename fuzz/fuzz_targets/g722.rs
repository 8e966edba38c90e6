//! G.722 (`switchboard_sip::media::g722`): a G.722 call's RTP payloads, whatever the phone
//! sends. The input's bytes are decoded, then the decoded samples encoded again. Properties:
//! no input panics the decoder or the encoder (every byte is a code, every sample a sample);
//! the decoder gives two samples a byte, the encoder a byte for two samples.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_sip::media::g722::{Decoder, Encoder};

fuzz_target!(|data: &[u8]| {
    let mut samples = Vec::new();
    Decoder::new().decode(data, &mut samples);
    assert_eq!(samples.len(), data.len() * 2);
    let mut codes = Vec::new();
    Encoder::new().encode(&samples, &mut codes);
    assert_eq!(codes.len(), data.len());
});
