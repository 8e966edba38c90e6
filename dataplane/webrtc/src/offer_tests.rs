//! Each rule of [`super::Offer::parse`] on a browser-like offer and variants of it.

use proptest::prelude::*;

use super::*;

/// A Chrome-like offer: Opus (with RED, G.722, G.711, CN, DTMF) and a data channel, BUNDLEd.
pub(crate) fn browser_offer() -> String {
    let fingerprint = (0..32).map(|i| format!("{:02X}", i * 7 % 256)).collect::<Vec<_>>().join(":");
    let transport = format!(
        "c=IN IP4 0.0.0.0\r\na=ice-ufrag:Ab3d\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=ice-options:trickle\r\n\
         a=fingerprint:sha-256 {fingerprint}\r\na=setup:actpass\r\n"
    );
    format!(
        "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n\
         a=extmap-allow-mixed\r\na=msid-semantic: WMS\r\n\
         m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126\r\n{transport}a=rtcp:9 IN IP4 0.0.0.0\r\na=mid:0\r\n\
         a=sendrecv\r\na=msid:- 7b1c\r\na=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\na=rtcp-fb:111 transport-cc\r\n\
         a=fmtp:111 minptime=10;useinbandfec=1;usedtx=1\r\na=rtpmap:63 red/48000/2\r\na=fmtp:63 111/111\r\n\
         a=rtpmap:9 G722/8000\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:13 CN/8000\r\n\
         a=rtpmap:110 telephone-event/48000\r\na=rtpmap:126 telephone-event/8000\r\na=ssrc:1234 cname:x\r\n\
         m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n{transport}a=mid:1\r\na=sctp-port:5000\r\n\
         a=max-message-size:262144\r\n"
    )
}

/// `offer` without its lines containing any of `needles`.
fn without(offer: &str, needles: &[&str]) -> String {
    offer.lines().filter(|l| !needles.iter().any(|n| l.contains(n))).map(|l| format!("{l}\n")).collect()
}

fn refused(offer: &str) -> OfferError {
    Offer::parse(offer.as_bytes(), OfferRules::default()).expect_err("refused")
}

#[test]
fn a_browser_offer_is_taken() {
    let offer = Offer::parse(browser_offer().as_bytes(), OfferRules::default()).expect("taken");
    assert!(offer.data_channel);
}

#[test]
fn an_offer_without_opus_is_refused_naming_what_it_offers() {
    let offer = browser_offer()
        .replace("UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126", "UDP/TLS/RTP/SAVPF 9 0 8")
        .replace("a=rtpmap:111 opus/48000/2", "")
        .replace("a=rtpmap:63 red/48000/2", "");
    let error = refused(&without(&offer, &["fmtp:111", "fmtp:63", "rtcp-fb:111"]));
    assert_eq!(error.code(), "no_opus");
    assert_eq!(error.status(), 400);
    let message = error.to_string();
    assert!(message.contains("g722") && message.contains("pcmu") && message.contains("opus/48000/2"), "{message}");
}

#[test]
fn an_offer_without_audio_is_refused() {
    // Only the data channel left.
    let audio_start = browser_offer().find("m=audio").expect("audio");
    let app_start = browser_offer().find("m=application").expect("app");
    let mut offer = browser_offer();
    offer.replace_range(audio_start..app_start, "");
    let offer = offer.replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 1");
    assert_eq!(refused(&offer).code(), "no_audio");
    // Audio that is disabled or inactive is no audio either.
    assert_eq!(refused(&browser_offer().replace("m=audio 9", "m=audio 0")).code(), "no_audio");
    assert_eq!(refused(&browser_offer().replace("a=sendrecv", "a=inactive")).code(), "no_audio");
}

#[test]
fn an_offer_without_a_data_channel_is_refused_unless_allowed() {
    let app_start = browser_offer().find("m=application").expect("app");
    let offer = browser_offer()[..app_start].replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 0");
    let error = refused(&offer);
    assert_eq!(error.code(), "no_data_channel");
    assert!(error.to_string().contains("webrtc-datachannel"), "{error}");
    let allowed = Offer::parse(offer.as_bytes(), OfferRules { require_data_channel: false }).expect("allowed");
    assert!(!allowed.data_channel);
}

#[test]
fn ice_credentials_and_a_fingerprint_are_required() {
    assert_eq!(refused(&without(&browser_offer(), &["ice-ufrag", "ice-pwd"])).code(), "no_ice_credentials");
    assert_eq!(refused(&without(&browser_offer(), &["fingerprint"])).code(), "no_fingerprint");
}

#[test]
fn malformed_sdp_names_the_line() {
    let cases = [
        ("hello", "line 1", "v=0"),
        ("v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\nnonsense\r\n", "line 3", "<letter>=<value>"),
        ("v=0\r\nm=audio\r\n", "line 2", "m=<media> <port> <protocol> <formats>"),
        ("v=0\r\nm=audio 99999 UDP/TLS/RTP/SAVPF 111\r\n", "line 2", "port"),
        ("v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 300\r\n", "line 2", "payload type"),
        ("v=0\r\na=rtpmap:111\r\n", "line 2", "<encoding>/<clock rate>"),
        ("v=0\r\na=rtpmap:abc opus/48000\r\n", "line 2", "payload type"),
    ];
    for (offer, line, says) in cases {
        let error = refused(offer);
        let message = error.to_string();
        assert_eq!(error.code(), "malformed_sdp", "{offer:?}: {message}");
        assert!(message.contains(line) && message.contains(says), "{offer:?}: {message}");
    }
    // Lines that pass one by one but not together: str0m's parser says why.
    let error = refused("v=0\r\nx=1\r\n");
    assert!(matches!(error, OfferError::Unparsable(_)), "{error}");
}

#[test]
fn empty_large_and_binary_offers_are_refused() {
    assert!(matches!(refused(""), OfferError::Empty));
    assert!(matches!(refused(" \r\n"), OfferError::Empty));
    let large = format!("{}{}", browser_offer(), "a=x\r\n".repeat(MAX_OFFER_BYTES / 5));
    assert!(matches!(refused(&large), OfferError::TooLarge { .. }));
    let error = Offer::parse(&[b'v', b'=', 0xff], OfferRules::default()).expect_err("binary");
    assert!(matches!(error, OfferError::NotUtf8(_)));
}

#[test]
fn long_outside_text_is_shortened_in_messages() {
    let message = refused(&format!("v=0\r\n{}\r\n", "z".repeat(500))).to_string();
    assert!(message.len() < 200, "{message}");
}

proptest! {
    /// Any text: a verdict, never a panic; what is taken has audio with Opus.
    #[test]
    fn any_text_gets_a_verdict(text in "(v=0\r\n)?([a-z]=[ -~]{0,40}\r\n){0,12}") {
        if let Ok(offer) = Offer::parse(text.as_bytes(), OfferRules::default()) {
            prop_assert!(offer.data_channel);
        }
    }

    /// The browser offer with one line dropped: taken, or refused with a 400.
    #[test]
    fn a_browser_offer_missing_any_line_gets_a_verdict(drop in 0usize..48) {
        let offer: String = browser_offer()
            .lines()
            .enumerate()
            .filter(|(i, _)| *i != drop)
            .map(|(_, l)| format!("{l}\r\n"))
            .collect();
        match Offer::parse(offer.as_bytes(), OfferRules::default()) {
            Ok(_) => {}
            Err(error) => prop_assert_eq!(error.status(), 400),
        }
    }
}
