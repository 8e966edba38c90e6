//! The simulator's Converse/ConverseStream request parser and validator
//! (`switchboard_sim::converse::parse`), which reads whatever body a client posts.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = switchboard_sim::converse::parse("amazon.nova-lite-v1:0", data) {
        std::hint::black_box(format!("{parsed:?}"));
    }
});
