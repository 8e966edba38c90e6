//! SDP offers and answers (`switchboard_sip::sdp`): every INVITE, re-INVITE and UPDATE
//! body, and every answer to the edge's own offers. Properties: no input panics the
//! parser or the negotiation; an answer the edge writes parses, and reading it back
//! settles the same codec and telephone-event payload type.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_sip::sdp::{Codec, Limits, LocalMedia, SessionDescription};

fuzz_target!(|data: &[u8]| {
    let Ok(offer) = SessionDescription::parse(data, &Limits::default()) else { return };
    let local = LocalMedia {
        address: "192.0.2.1".parse().expect("an address"),
        port: 20000,
        session_id: 1,
        version: 1,
        codecs: vec![Codec::Pcmu, Codec::Pcma],
        telephone_event: 101,
        srtp: switchboard_sip::sdp::LocalSrtp::default(),
    };
    match local.answer(&offer) {
        Ok((negotiated, body)) => {
            let answer = SessionDescription::parse(body.as_bytes(), &Limits::default()).expect("our answer parses");
            let back = local.accept_answer(&answer).expect("our answer settles");
            assert_eq!((back.codec, back.telephone_event), (negotiated.codec, negotiated.telephone_event));
        }
        Err(error) => {
            assert!(matches!(error.status(), 400 | 488));
            let _ = error.to_string();
        }
    }
    let _ = local.accept_answer(&offer);
});
