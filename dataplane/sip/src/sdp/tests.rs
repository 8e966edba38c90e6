//! Unit tests of SDP parsing and offer/answer.

use super::*;
use proptest::prelude::*;

const BARESIP: &str = "v=0\r\no=- 1470390394 1470390394 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
m=audio 10814 RTP/AVP 0 8 101\r\nb=AS:64\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n\
a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=ptime:20\r\na=sendrecv\r\na=rtcp-mux\r\n";

const CARRIER: &str = "v=0\no=root 1 1 IN IP4 198.51.100.20\ns=GW\nt=0 0\nm=audio 35012 RTP/AVP 18 8 0 101\n\
c=IN IP4 198.51.100.21\na=rtpmap:18 G729/8000\na=rtpmap:101 telephone-event/8000\na=sendonly\n\
m=video 35014 RTP/AVP 96\na=rtpmap:96 H264/90000\n";

fn local() -> LocalMedia {
    LocalMedia {
        address: "192.0.2.1".parse().unwrap(),
        port: 20000,
        session_id: 42,
        version: 1,
        codecs: vec![Codec::Pcmu, Codec::Pcma],
        telephone_event: 101,
        srtp: crate::sdp::LocalSrtp::default(),
    }
}

fn parse(text: &str) -> SessionDescription {
    SessionDescription::parse(text.as_bytes(), &Limits::default()).unwrap()
}

#[test]
fn baresip_offer_reads() {
    let sdp = parse(BARESIP);
    assert_eq!(sdp.connection, Some("127.0.0.1".parse().unwrap()));
    let audio = &sdp.media[0];
    assert_eq!((audio.port, audio.proto.as_str(), audio.formats.len()), (10814, "RTP/AVP", 3));
    assert_eq!(audio.ptime, Some(20));
    assert!(audio.rtcp_mux);
    assert_eq!(audio.direction, Some(Direction::SendRecv));
    assert_eq!(audio.fmtps, [(101, "0-15".to_owned())]);
}

#[test]
fn the_answer_takes_the_offerers_first_common_codec_and_telephone_events() {
    let (n, body) = local().answer(&parse(BARESIP)).unwrap();
    assert_eq!((n.codec, n.payload_type, n.telephone_event), (Codec::Pcmu, 0, Some(101)));
    assert_eq!(n.remote, "127.0.0.1:10814".parse().unwrap());
    assert!(body.contains("m=audio 20000 RTP/AVP 0 101\r\n"), "{body}");
    assert!(body.contains("c=IN IP4 192.0.2.1\r\n"));
    assert!(body.contains("a=rtcp-mux\r\n"));
    let answer = parse(&body);
    assert_eq!(answer.media[0].rtpmap(0).unwrap().encoding, "PCMU");
}

#[test]
fn g722_wins_wherever_it_stands_in_the_offer_and_g711_keeps_the_offerers_order() {
    let edge = LocalMedia { codecs: vec![Codec::G722, Codec::Pcmu, Codec::Pcma], ..local() };
    // baresip with g711 and g722 loaded offers PCMU first, G722 after, without an rtpmap
    // for the static type 9.
    let offer = BARESIP.replace("RTP/AVP 0 8 101", "RTP/AVP 0 8 9 101");
    let (n, body) = edge.answer(&parse(&offer)).unwrap();
    assert_eq!((n.codec, n.payload_type, n.telephone_event), (Codec::G722, 9, Some(101)));
    assert!(body.contains("m=audio 20000 RTP/AVP 9 101\r\na=rtpmap:9 G722/8000\r\n"), "{body}");
    // A G.722-only phone gets G.722; one without it keeps G.711 in its own order.
    let only = BARESIP.replace("RTP/AVP 0 8 101", "RTP/AVP 9 101").replace("a=rtpmap:0 PCMU/8000\r\n", "");
    assert_eq!(edge.answer(&parse(&only)).unwrap().0.codec, Codec::G722);
    assert_eq!(edge.answer(&parse(BARESIP)).unwrap().0.codec, Codec::Pcmu);
    assert_eq!(edge.answer(&parse(CARRIER)).unwrap().0.codec, Codec::Pcma);
    // G.722 at another clock is not G.722 (RFC 3551's clock is 8000 whatever it samples).
    let odd =
        BARESIP.replace("RTP/AVP 0 8 101", "RTP/AVP 96 101").replace("a=rtpmap:0 PCMU/8000", "a=rtpmap:96 G722/16000");
    assert!(edge.answer(&parse(&odd)).is_err());
    // An edge without G.722 answers the same offer in G.711, and refuses G.722 alone.
    assert_eq!(local().answer(&parse(&offer)).unwrap().0.codec, Codec::Pcmu);
    let refused = local().answer(&parse(&only)).unwrap_err();
    assert_eq!(refused.status(), 488);
    assert!(refused.to_string().contains("G722/8000"), "{refused}");
    // The edge's offer lists G.722 first, with its rtpmap.
    let offered = edge.offer();
    assert!(offered.contains("RTP/AVP 9 0 8 101\r\na=rtpmap:9 G722/8000\r\n"), "{offered}");
}

#[test]
fn a_carrier_offer_gets_pcma_the_media_level_address_and_a_refused_video_line() {
    let (n, body) = local().answer(&parse(CARRIER)).unwrap();
    assert_eq!((n.codec, n.payload_type), (Codec::Pcma, 8), "PCMA comes before PCMU in this offer");
    assert_eq!(n.remote, "198.51.100.21:35012".parse().unwrap());
    assert_eq!(n.direction, Direction::RecvOnly, "a sendonly offer gets recvonly");
    assert!(body.contains("m=video 0 RTP/AVP 96\r\n"), "{body}");
    assert_eq!(parse(&body).media.len(), 2, "as many m= lines as the offer");
}

#[test]
fn no_common_codec_is_488_and_says_what_was_offered() {
    let offer = parse(&CARRIER.replace("RTP/AVP 18 8 0 101", "RTP/AVP 18 101"));
    let err = local().answer(&offer).unwrap_err();
    assert_eq!(err.status(), 488);
    assert_eq!(
        err.to_string(),
        "no common codec: offered G729/8000, telephone-event/8000, this edge speaks PCMU/8000, PCMA/8000"
    );
}

#[test]
fn secure_rtp_with_srtp_off_or_no_audio_is_488() {
    let err = local().answer(&parse(&BARESIP.replace("RTP/AVP", "RTP/SAVP"))).unwrap_err();
    assert_eq!(err.status(), 488);
    assert_eq!(err.to_string(), "RTP/SAVP is offered: SRTP is off on this edge");
    let err = local().answer(&parse(&BARESIP.replace("RTP/AVP", "UDP/TLS/RTP/SAVP"))).unwrap_err();
    assert_eq!(err.status(), 488);
    assert!(err.to_string().contains("audio UDP/TLS/RTP/SAVP"), "{err}");
}

#[test]
fn a_stream_without_an_address_is_refused() {
    let err = local().answer(&parse(&BARESIP.replace("c=IN IP4 127.0.0.1\r\n", ""))).unwrap_err();
    assert_eq!(err, SdpError::NoConnection);
}

#[test]
fn malformed_bodies_are_typed_errors_with_400() {
    let cases: [(&str, SdpError); 5] = [
        ("v=1\r\n", SdpError::Version),
        ("v=0\r\nbad line\r\n", SdpError::Line { line: 2, text: "bad line".into() }),
        ("v=0\r\ns=-\r\nt=0 0\r\n", SdpError::Missing('o')),
        ("v=0\r\nc=IN IP4 999.1.1.1\r\n", SdpError::Invalid { kind: 'c', text: "IN IP4 999.1.1.1".into() }),
        ("v=0\r\nm=audio x RTP/AVP 0\r\n", SdpError::Invalid { kind: 'm', text: "audio x RTP/AVP 0".into() }),
    ];
    for (text, want) in cases {
        let err = SessionDescription::parse(text.as_bytes(), &Limits::default()).unwrap_err();
        assert_eq!(err, want, "{text:?}");
        assert_eq!(err.status(), 400);
    }
    assert_eq!(SessionDescription::parse(b"\xff", &Limits::default()), Err(SdpError::NotUtf8));
}

#[test]
fn limits_hold() {
    let limits = Limits { max_formats: 2, ..Limits::default() };
    let err = SessionDescription::parse(BARESIP.as_bytes(), &limits).unwrap_err();
    assert!(matches!(err, SdpError::TooMany { what: "formats on an m= line", .. }));
    let limits = Limits { max_lines: 4, ..Limits::default() };
    assert!(matches!(SessionDescription::parse(BARESIP.as_bytes(), &limits), Err(SdpError::TooMany { .. })));
    let many = format!("{BARESIP}{}", "m=audio 1 RTP/AVP 0\r\n".repeat(8));
    assert!(matches!(SessionDescription::parse(many.as_bytes(), &Limits::default()), Err(SdpError::TooMany { .. })));
}

#[test]
fn an_offer_and_its_answer_settle_the_same_stream_on_both_sides() {
    let edge = local();
    let offer = parse(&edge.offer());
    let phone =
        LocalMedia { address: "198.51.100.7".parse().unwrap(), port: 4000, codecs: vec![Codec::Pcma], ..local() };
    let (theirs, answer) = phone.answer(&offer).unwrap();
    let ours = edge.accept_answer(&parse(&answer)).unwrap();
    assert_eq!((ours.codec, theirs.codec), (Codec::Pcma, Codec::Pcma));
    assert_eq!(ours.remote, "198.51.100.7:4000".parse().unwrap());
    assert_eq!(theirs.remote, "192.0.2.1:20000".parse().unwrap());
    assert_eq!(ours.telephone_event, Some(101));
}

proptest! {
    #[test]
    fn any_bytes_parse_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = SessionDescription::parse(&bytes, &Limits::default());
    }

    #[test]
    fn every_answer_parses_and_names_one_of_the_offered_codecs(
        formats in proptest::collection::vec(prop_oneof![Just(0u8), Just(8), Just(9), Just(18), 96u8..128], 1..8),
        port in 1u16..,
    ) {
        let list: Vec<String> = formats.iter().map(u8::to_string).collect();
        let offer = format!("v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\nm=audio {port} RTP/AVP {}\r\n", list.join(" "));
        match local().answer(&parse(&offer)) {
            Ok((n, body)) => {
                prop_assert!(formats.contains(&n.payload_type));
                prop_assert_eq!(local().accept_answer(&parse(&body)).map(|a| a.codec), Ok(n.codec));
            }
            Err(err) => {
                prop_assert_eq!(err.status(), 488);
                prop_assert!(!formats.contains(&0) && !formats.contains(&8));
            }
        }
    }
}
