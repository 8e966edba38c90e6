//! Offer/answer with Opus (RFC 7587): the rtpmap it is taken on, its fmtp read and written,
//! where it stands among the codecs, telephone-event at its clock.

use super::*;

/// baresip 1.0's offer with only its opus module (`opus_stereo no`), as it sends it.
const BARESIP_OPUS: &str = "v=0\r\no=- 562732256 1421633992 IN IP4 192.0.2.2\r\ns=-\r\nc=IN IP4 192.0.2.2\r\nt=0 0\r\n\
a=tool:baresip 1.0.0\r\nm=audio 10748 RTP/AVP 96 101\r\na=rtpmap:96 opus/48000/2\r\na=fmtp:96 stereo=0;sprop-stereo=0\r\n\
a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=sendrecv\r\na=label:1\r\na=rtcp-rsize\r\na=minptime:20\r\na=ptime:20\r\n";

fn edge() -> LocalMedia {
    LocalMedia {
        address: "192.0.2.1".parse().unwrap(),
        port: 20000,
        session_id: 42,
        version: 1,
        codecs: vec![Codec::Opus, Codec::G722, Codec::Pcmu, Codec::Pcma],
        telephone_event: 101,
        srtp: crate::sdp::LocalSrtp::default(),
    }
}

fn parse(text: &str) -> SessionDescription {
    SessionDescription::parse(text.as_bytes(), &Limits::default()).unwrap()
}

#[test]
fn an_opus_only_phone_is_answered_in_opus_on_its_payload_type_with_the_edges_fmtp() {
    let (n, body) = edge().answer(&parse(BARESIP_OPUS)).unwrap();
    assert_eq!(
        (n.codec, n.payload_type, n.telephone_event, n.telephone_event_clock),
        (Codec::Opus, 96, Some(101), 8000)
    );
    assert_eq!(n.opus, Some(OpusParams::default()), "stereo=0 and nothing else it asks for");
    assert_eq!(n.remote, "192.0.2.2:10748".parse().unwrap());
    assert!(body.contains("m=audio 20000 RTP/AVP 96 101\r\na=rtpmap:96 opus/48000/2\r\n"), "{body}");
    assert!(body.contains(&format!("a=fmtp:96 {}\r\n", opus::LOCAL_FMTP)), "{body}");
    assert!(body.contains("a=rtpmap:101 telephone-event/8000\r\n"), "{body}");
    // The answer reads back as Opus (its rtpmap has the channels).
    let answer = parse(&body);
    let map = answer.media[0].rtpmap(96).unwrap();
    assert_eq!((map.encoding.as_str(), map.clock_rate, map.channels), ("opus", 48_000, 2));
    // The phone's fmtp reaches the negotiated stream.
    let asks = BARESIP_OPUS.replace("stereo=0;sprop-stereo=0", "maxplaybackrate=8000;useinbandfec=1;cbr=1");
    let params = edge().answer(&parse(&asks)).unwrap().0.opus.unwrap();
    assert_eq!((params.max_playback_rate, params.use_inband_fec, params.cbr), (Some(8000), true, true));
}

#[test]
fn opus_is_taken_only_as_opus_48000_2_on_a_dynamic_payload_type() {
    for odd in ["opus/48000", "opus/48000/1", "opus/16000/2", "OPUS/8000/2"] {
        let offer = BARESIP_OPUS.replace("opus/48000/2", odd);
        let refused = edge().answer(&parse(&offer)).unwrap_err();
        assert_eq!(refused.status(), 488, "{odd}");
        assert!(refused.to_string().contains("this edge speaks opus/48000/2, G722/8000"), "{refused}");
    }
    // The encoding name is case-insensitive (RFC 4855).
    assert_eq!(edge().answer(&parse(&BARESIP_OPUS.replace("opus/", "OPUS/"))).unwrap().0.codec, Codec::Opus);
    // On a static payload type's number it is not Opus.
    let static_pt = BARESIP_OPUS.replace("RTP/AVP 96 101", "RTP/AVP 3 101").replace(":96 ", ":3 ");
    assert_eq!(edge().answer(&parse(&static_pt)).unwrap_err().status(), 488);
    // A channel count that does not read is a malformed rtpmap: 400.
    let garbled = BARESIP_OPUS.replace("opus/48000/2", "opus/48000/two");
    assert_eq!(SessionDescription::parse(garbled.as_bytes(), &Limits::default()).unwrap_err().status(), 400);
}

#[test]
fn opus_then_g722_then_g711_wherever_they_stand_and_the_edges_own_order_among_wideband() {
    // PCMU first, G.722, then Opus: Opus.
    let offer = BARESIP_OPUS.replace("RTP/AVP 96 101", "RTP/AVP 0 9 96 101");
    assert_eq!(edge().answer(&parse(&offer)).unwrap().0.codec, Codec::Opus);
    // An edge that lists G.722 before Opus takes G.722 from the same offer.
    let g722_first = LocalMedia { codecs: vec![Codec::G722, Codec::Opus, Codec::Pcmu], ..edge() };
    assert_eq!(g722_first.answer(&parse(&offer)).unwrap().0.codec, Codec::G722);
    // Without Opus among the edge's codecs an Opus-only phone is refused; G.711 as before.
    let narrow = LocalMedia { codecs: vec![Codec::Pcmu, Codec::Pcma], ..edge() };
    assert_eq!(narrow.answer(&parse(BARESIP_OPUS)).unwrap_err().status(), 488);
    let g711 = BARESIP_OPUS.replace("RTP/AVP 96 101", "RTP/AVP 8 0 101");
    assert_eq!(edge().answer(&parse(&g711)).unwrap().0.codec, Codec::Pcma);
}

#[test]
fn telephone_events_at_opus_clock_are_preferred_beside_opus() {
    let both = BARESIP_OPUS
        .replace("RTP/AVP 96 101", "RTP/AVP 96 101 102")
        .replace("a=fmtp:101 0-15\r\n", "a=fmtp:101 0-15\r\na=rtpmap:102 telephone-event/48000\r\n");
    let (n, body) = edge().answer(&parse(&both)).unwrap();
    assert_eq!((n.telephone_event, n.telephone_event_clock), (Some(102), 48_000));
    assert!(body.contains("RTP/AVP 96 102\r\n") && body.contains("a=rtpmap:102 telephone-event/48000\r\n"), "{body}");
    // Beside G.711 the 48 kHz events are not taken (their clock is not the audio's).
    let g711 = both.replace("RTP/AVP 96 101 102", "RTP/AVP 0 102");
    assert_eq!(edge().answer(&parse(&g711)).unwrap().0.telephone_event, None);
}

#[test]
fn the_edges_offer_leads_with_opus_and_its_answer_settles_opus_on_both_sides() {
    let offer = edge().offer();
    assert!(
        offer.contains(&format!(
            "RTP/AVP 111 9 0 8 101\r\na=rtpmap:111 opus/48000/2\r\na=fmtp:111 {}\r\na=rtpmap:9 G722/8000\r\n",
            opus::LOCAL_FMTP
        )),
        "{offer}"
    );
    // An Opus-only phone answers it; both sides settle Opus, with each other's fmtp.
    let phone = LocalMedia { address: "198.51.100.7".parse().unwrap(), codecs: vec![Codec::Opus], ..edge() };
    let (theirs, answer) = phone.answer(&parse(&offer)).unwrap();
    let ours = edge().accept_answer(&parse(&answer)).unwrap();
    assert_eq!((ours.codec, ours.payload_type, theirs.codec), (Codec::Opus, 111, Codec::Opus));
    assert_eq!(ours.opus.and_then(|p| p.max_playback_rate), Some(16_000));
    assert!(ours.opus.is_some_and(|p| p.use_inband_fec));
    // Telephone events on 111: Opus moves to 110.
    let clash = LocalMedia { telephone_event: 111, ..edge() }.offer();
    assert!(clash.contains("RTP/AVP 110 9 0 8 111\r\na=rtpmap:110 opus/48000/2\r\n"), "{clash}");
}
