//! Offer/answer with SDES keys: what each policy takes and refuses, and why.

use super::crypto::Crypto;
use super::*;
use crate::media::srtp::{MasterKey, Suite};

/// The phone's key (what baresip would draw).
fn phone_key() -> MasterKey {
    MasterKey { key: [0x11; 16], salt: [0x22; 14] }
}

fn edge_key() -> MasterKey {
    MasterKey { key: [0x33; 16], salt: [0x44; 14] }
}

fn offer(proto: &str, crypto: &[String]) -> SessionDescription {
    let mut text = format!(
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
         m=audio 10814 {proto} 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
    );
    for line in crypto {
        text.push_str(&format!("a=crypto:{line}\r\n"));
    }
    SessionDescription::parse(text.as_bytes(), &Limits::default()).expect("parses")
}

/// baresip's `srtp-mand` offer: both suites, the 32-bit tag first.
fn baresip_lines() -> Vec<String> {
    vec![
        Crypto::value(1, Suite::AesCm128HmacSha1_32, &phone_key()),
        Crypto::value(2, Suite::AesCm128HmacSha1_80, &phone_key()),
    ]
}

fn local(srtp: LocalSrtp) -> LocalMedia {
    LocalMedia {
        address: "192.0.2.1".parse().expect("ip"),
        port: 20000,
        session_id: 42,
        version: 1,
        codecs: vec![Codec::Pcmu, Codec::Pcma],
        telephone_event: 101,
        srtp,
    }
}

#[test]
fn an_savp_offer_gets_srtp_with_the_offers_first_line_and_the_edges_own_key() {
    let (n, body) = local(LocalSrtp::Optional(edge_key())).answer(&offer("RTP/SAVP", &baresip_lines())).expect("takes");
    let keys = n.srtp.expect("SRTP settled");
    assert_eq!((keys.tag, keys.suite), (1, Suite::AesCm128HmacSha1_32));
    assert_eq!((keys.remote, keys.local.clone()), (phone_key(), edge_key()));
    assert!(body.contains("m=audio 20000 RTP/SAVP 0 101\r\n"), "{body}");
    let answer = SessionDescription::parse(body.as_bytes(), &Limits::default()).expect("parses");
    assert_eq!(answer.media[0].crypto.len(), 1, "one line: the one taken");
    let line = Crypto::parse(&answer.media[0].crypto[0]).expect("reads");
    assert_eq!((line.tag, line.suite, line.key), (1, Suite::AesCm128HmacSha1_32, edge_key()));
}

#[test]
fn best_effort_crypto_on_rtp_avp_gets_srtp_when_the_edge_takes_it_and_plain_rtp_when_not() {
    let best_effort = offer("RTP/AVP", &baresip_lines());
    let (n, body) = local(LocalSrtp::Optional(edge_key())).answer(&best_effort).expect("takes");
    assert!(n.srtp.is_some());
    assert!(body.contains("m=audio 20000 RTP/AVP 0 101\r\n") && body.contains("a=crypto:1 "), "{body}");
    let (n, body) = local(LocalSrtp::default()).answer(&best_effort).expect("takes");
    assert!(n.srtp.is_none() && !body.contains("a=crypto"), "SRTP off: plain RTP, no key: {body}");
    let (n, _) = local(LocalSrtp::Optional(edge_key())).answer(&offer("RTP/AVP", &[])).expect("takes");
    assert!(n.srtp.is_none(), "no crypto offered: plain RTP");
}

#[test]
fn each_refusal_is_488_and_names_why() {
    let cases = [
        (LocalSrtp::default(), offer("RTP/SAVP", &baresip_lines()), "RTP/SAVP is offered: SRTP is off on this edge"),
        (
            LocalSrtp::Refused("SRTP is required and keys travel only over TLS; this call came over UDP".into()),
            offer("RTP/AVP", &[]),
            "this call came over UDP",
        ),
        (LocalSrtp::Required(edge_key()), offer("RTP/AVP", &[]), "SRTP is required: the offer has no a=crypto line"),
        (
            LocalSrtp::Required(edge_key()),
            offer("RTP/SAVP", &["1 AES_256_CM_HMAC_SHA1_80 inline:AAAA".to_owned()]),
            "suite AES_256_CM_HMAC_SHA1_80 is not supported",
        ),
        (
            LocalSrtp::Optional(edge_key()),
            offer("RTP/SAVP", &["1 AES_CM_128_HMAC_SHA1_80 inline:AAAA".to_owned()]),
            "the inline key and salt are 3 bytes",
        ),
    ];
    for (srtp, offer, reason) in cases {
        let error = local(srtp).answer(&offer).expect_err("refused");
        assert_eq!(error.status(), 488);
        assert!(error.to_string().contains(reason), "{error} / {reason}");
    }
}

#[test]
fn the_edges_own_offer_and_the_answer_to_it() {
    for (srtp, proto) in [(LocalSrtp::Required(edge_key()), "RTP/SAVP"), (LocalSrtp::Optional(edge_key()), "RTP/AVP")] {
        let ours = local(srtp.clone());
        let body = ours.offer();
        assert!(body.contains(&format!("m=audio 20000 {proto} 0 8 101\r\n")), "{body}");
        let sent = SessionDescription::parse(body.as_bytes(), &Limits::default()).expect("parses");
        assert_eq!(sent.media[0].crypto.len(), 2, "both suites");
        // The phone answers with its own key on the line it took.
        let phone = local(LocalSrtp::Optional(phone_key()));
        let (_, answer) = phone.answer(&sent).expect("the phone takes it");
        let answer = SessionDescription::parse(answer.as_bytes(), &Limits::default()).expect("parses");
        let keys = ours.accept_answer(&answer).expect("settles").srtp.expect("SRTP");
        assert_eq!(
            (keys.tag, keys.suite, keys.remote, keys.local),
            (1, Suite::AesCm128HmacSha1_80, phone_key(), edge_key())
        );
    }
    let required = local(LocalSrtp::Required(edge_key()));
    let plain =
        SessionDescription::parse(local(LocalSrtp::default()).offer().as_bytes(), &Limits::default()).expect("parses");
    let error = required.accept_answer(&plain).expect_err("no key in the answer");
    assert!(error.to_string().contains("SRTP is required"), "{error}");
}
