//! Nova Sonic output events as the voice client decodes them
//! (`switchboard_models::sonic::wire::OutputParser`): the input is split at `\n` into
//! successive output chunks fed to one parser, so content ids opened by one event are
//! looked up by later ones. Audio payloads are decoded as the client does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_models::sonic::SonicEvent;
use switchboard_models::sonic::wire::OutputParser;

fuzz_target!(|data: &[u8]| {
    let mut parser = OutputParser::default();
    for chunk in data.split(|&b| b == b'\n') {
        let Ok(events) = parser.parse(chunk) else { continue };
        for event in events {
            if let SonicEvent::Audio { pcm, .. } = &event {
                let _ = pcm.decode();
            }
            std::hint::black_box(format!("{event:?}"));
        }
    }
});
