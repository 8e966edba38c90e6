//! The WebRTC edge's SDP parsers (`switchboard_webrtc`): what `POST /v1/webrtc` takes as an
//! offer and what `PATCH` takes as a trickle-ICE fragment, from any client. Properties: no
//! input panics them; every refusal is a 400 with a stable code; an offer the checks take is
//! one str0m can answer or refuses with an error (never a panic), and its answer parses back
//! as SDP.
#![no_main]

use std::sync::OnceLock;
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use switchboard_webrtc::{Call, CallConfig, CallError, Fragment, Offer, OfferError, OfferRules, generate_dtls_cert};

/// One certificate for every call, as a gateway shares one: a key pair per input would spend
/// the run on key generation.
fn config(rules: OfferRules) -> CallConfig {
    static CONFIG: OnceLock<CallConfig> = OnceLock::new();
    let base = CONFIG.get_or_init(|| CallConfig {
        udp: vec!["192.0.2.1:3478".parse().expect("address")],
        dtls_cert: generate_dtls_cert(),
        ..CallConfig::default()
    });
    CallConfig { rules, ..base.clone() }
}

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(Fragment::parse(data).ok());
    for rules in [OfferRules::default(), OfferRules { require_data_channel: false }] {
        match Offer::parse(data, rules) {
            Ok(offer) => match Call::accept(offer, config(rules), Instant::now()) {
                Ok((_call, answer)) => {
                    str0m::change::SdpAnswer::from_sdp_string(&answer).expect("the answer parses back");
                }
                Err(CallError::Offer(OfferError::Refused(_)) | CallError::NoAudioTrack) => {}
                Err(other) => panic!("a checked offer failed otherwise: {other}"),
            },
            Err(error) => {
                assert_eq!(error.status(), 400);
                assert!(!error.code().is_empty() && !error.to_string().is_empty());
            }
        }
    }
});
