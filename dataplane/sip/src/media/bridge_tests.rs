//! The bridge's media rules: audio both ways (transcoded between the laws), keys relayed or
//! dropped, latching per leg, the backlog bounded, a silent leg found.

use super::*;
use crate::media::g711::Law;
use crate::media::g722;
use crate::media::rtp::{RtpSender, parse};
use crate::media::session::MediaConfig;
use crate::media::telephone::{Payload, packets};
use crate::sdp::Codec;

const CALLER: &str = "127.0.0.1:4000";
const PERSON: &str = "127.0.0.2:6000";

fn negotiated(remote: &str, codec: Codec, telephone_event: Option<u8>) -> Negotiated {
    Negotiated {
        remote: remote.parse().expect("addr"),
        codec,
        payload_type: codec.payload_type(),
        telephone_event,
        telephone_event_clock: 8000,
        opus: None,
        remote_ptime: None,
        direction: Direction::SendRecv,
        rtcp_mux: false,
        srtp: None,
        proto: "RTP/AVP".to_owned(),
    }
}

fn bridge(caller: Codec, person: Codec, person_events: Option<u8>) -> MediaBridge {
    let now = Instant::now();
    let caller = MediaSession::new(MediaConfig::default(), negotiated(CALLER, caller, Some(101)), 1, 1, 1);
    let person = MediaSession::new(MediaConfig::default(), negotiated(PERSON, person, person_events), 2, 1, 1);
    MediaBridge::new(now, caller, "127.0.0.1".parse().expect("ip"), person, "127.0.0.2".parse().expect("ip"))
}

/// One 20 ms frame of a square-ish wave at `level` in `law`.
fn frame(law: Law, level: i16) -> Vec<u8> {
    (0..FRAME_SAMPLES).map(|i| law.encode(if i % 20 < 10 { level } else { -level })).collect()
}

/// Sends `n` frames from `leg`'s phone and ticks once after each; returns the audio payloads
/// sent to the other leg.
fn talk(bridge: &mut MediaBridge, leg: Leg, phone: &mut RtpSender, pt: u8, audio: &[u8], n: usize) -> Vec<Vec<u8>> {
    let from: SocketAddr = if leg == Leg::Caller { CALLER } else { PERSON }.parse().expect("addr");
    let mut heard = Vec::new();
    for _ in 0..n {
        let packet = phone.media(pt, false, audio, FRAME_SAMPLES as u32);
        assert_eq!(bridge.receive(Instant::now(), leg, from, &packet), Received::Audio);
        for (to, _, sent) in bridge.tick() {
            let rtp = parse(&sent).expect("RTP");
            if to == leg.other() && rtp.payload_type != 101 {
                heard.push(rtp.payload.to_vec());
            }
        }
    }
    heard
}

fn loud(law: Law, payload: &[u8]) -> bool {
    payload.iter().map(|c| i32::from(law.decode(*c)).abs()).max().unwrap_or(0) > 4000
}

#[test]
fn a_g722_caller_and_a_g711_person_hear_each_other() {
    let mut bridge = bridge(Codec::G722, Codec::Pcmu, Some(101));
    // The caller's phone encodes a 16 kHz square-ish wave in G.722, with its own encoder.
    let mut encoder = g722::Encoder::new();
    let wave: Vec<i16> = (0..320).map(|i| if i % 40 < 20 { 8000 } else { -8000 }).collect();
    let mut caller = RtpSender::new(10, 1, 0);
    let from: SocketAddr = CALLER.parse().expect("addr");
    let mut heard = Vec::new();
    for _ in 0..10 {
        let mut codes = Vec::new();
        encoder.encode(&wave, &mut codes);
        assert_eq!(codes.len(), 160, "20 ms of G.722");
        let packet = caller.media(9, false, &codes, FRAME_SAMPLES as u32);
        assert_eq!(bridge.receive(Instant::now(), Leg::Caller, from, &packet), Received::Audio);
        heard.extend(bridge.tick().into_iter().filter(|(to, ..)| *to == Leg::Person).map(|(.., sent)| sent));
    }
    let loud_frames = heard.iter().filter(|p| loud(Law::Ulaw, parse(p).expect("RTP").payload)).count();
    assert!(loud_frames >= 6, "the person hears the caller in μ-law: {loud_frames} loud frames");
    // The person's μ-law reaches the caller as G.722 its phone's decoder hears.
    let mut person = RtpSender::new(20, 1, 0);
    let heard = talk(&mut bridge, Leg::Person, &mut person, 0, &frame(Law::Ulaw, -6000), 10);
    let mut decoder = g722::Decoder::new();
    let mut loudest = 0;
    for payload in &heard {
        assert_eq!(payload.len(), 160, "G.722 to the caller");
        let mut samples = Vec::new();
        decoder.decode(payload, &mut samples);
        loudest = loudest.max(samples.iter().map(|s| i32::from(*s).abs()).max().unwrap_or(0));
    }
    assert!(loudest > 4000, "the caller hears the person: {loudest}");
}

#[test]
fn each_side_hears_the_other_transcoded_between_the_laws() {
    let mut bridge = bridge(Codec::Pcmu, Codec::Pcma, Some(101));
    let mut caller = RtpSender::new(10, 1, 0);
    let heard = talk(&mut bridge, Leg::Caller, &mut caller, 0, &frame(Law::Ulaw, 8000), 10);
    let loud_frames: Vec<&Vec<u8>> = heard.iter().filter(|p| loud(Law::Alaw, p)).collect();
    assert!(loud_frames.len() >= 6, "the person hears the caller, in A-law: {heard:?}");
    let sample = Law::Alaw.decode(loud_frames[0][0]);
    assert!((i32::from(sample).abs() - 8000).abs() < 500, "transcoded, not copied: {sample}");
    let mut person = RtpSender::new(20, 1, 0);
    let heard = talk(&mut bridge, Leg::Person, &mut person, 8, &frame(Law::Alaw, -6000), 10);
    assert!(heard.iter().filter(|p| loud(Law::Ulaw, p)).count() >= 6, "the caller hears the person, in μ-law");
    let (caller, person) = (bridge.counts(Leg::Caller), bridge.counts(Leg::Person));
    assert_eq!((caller.rtp_in, person.rtp_in), (10, 10));
    assert!(caller.relayed >= 6 && person.relayed >= 6, "{caller:?} {person:?}");
}

#[test]
fn one_law_both_sides_is_relayed_byte_for_byte() {
    let mut bridge = bridge(Codec::Pcmu, Codec::Pcmu, None);
    let mut caller = RtpSender::new(10, 1, 0);
    let audio = frame(Law::Ulaw, 9000);
    let heard = talk(&mut bridge, Leg::Caller, &mut caller, 0, &audio, 8);
    assert!(heard.contains(&audio), "unchanged: {heard:?}");
}

#[test]
fn a_key_is_relayed_to_a_leg_that_takes_telephone_events_and_dropped_otherwise() {
    let press = |bridge: &mut MediaBridge| {
        let mut phone = RtpSender::new(10, 1, 0);
        let mut sent = Vec::new();
        for planned in packets(Event::Digit('5'), 100, 8000) {
            let packet = phone.packet(101, planned.marker, 800, &Payload::to_bytes(planned.payload));
            bridge.receive(Instant::now(), Leg::Caller, CALLER.parse().expect("addr"), &packet);
            for _ in 0..3 {
                sent.extend(bridge.tick().into_iter().filter(|(leg, ..)| *leg == Leg::Person));
            }
        }
        for _ in 0..20 {
            sent.extend(bridge.tick().into_iter().filter(|(leg, ..)| *leg == Leg::Person));
        }
        // Everything but the audio stream (PCMU, payload type 0).
        sent.into_iter().filter(|(_, _, p)| parse(p).expect("RTP").payload_type != 0).collect::<Vec<_>>()
    };
    // The person's leg settled telephone events as payload type 96: the press goes out as 96.
    let events: Vec<_> = press(&mut bridge(Codec::Pcmu, Codec::Pcmu, Some(96)));
    assert!(events.len() >= 4, "the press and its end packets reach the person: {}", events.len());
    assert!(events.iter().all(|(_, _, p)| parse(p).expect("RTP").payload_type == 96));
    let first = Payload::parse(parse(&events[0].2).expect("RTP").payload).expect("an event");
    assert_eq!(first.code, Event::code_of('5').expect("a key"));
    let last = Payload::parse(parse(&events[events.len() - 1].2).expect("RTP").payload).expect("an event");
    assert!(last.end, "the press ends");
    assert!(events.iter().all(|(_, to, _)| to == &PERSON.parse::<SocketAddr>().expect("addr")));
    let mut without = bridge(Codec::Pcmu, Codec::Pcmu, None);
    assert!(press(&mut without).is_empty());
    assert_eq!((without.counts(Leg::Caller).keys, without.counts(Leg::Caller).keys_dropped), (0, 1));
}

#[test]
fn each_leg_latches_to_its_own_peer_and_strangers_are_ignored() {
    let mut bridge = bridge(Codec::Pcmu, Codec::Pcmu, None);
    let mut phone = RtpSender::new(30, 1, 0);
    let packet = phone.media(0, false, &frame(Law::Ulaw, 100), FRAME_SAMPLES as u32);
    let stranger: SocketAddr = "192.0.2.9:6000".parse().expect("addr");
    assert!(matches!(bridge.receive(Instant::now(), Leg::Person, stranger, &packet), Received::Ignored(_)));
    // The person's SIP peer on another port (its SDP named another interface): latched.
    let moved: SocketAddr = "127.0.0.2:7000".parse().expect("addr");
    let packet = phone.media(0, false, &frame(Law::Ulaw, 100), FRAME_SAMPLES as u32);
    assert_eq!(bridge.receive(Instant::now(), Leg::Person, moved, &packet), Received::Audio);
    let sent = bridge.tick();
    assert!(sent.iter().any(|(leg, to, _)| *leg == Leg::Person && *to == moved), "sent where it comes from: {sent:?}");
    // The caller's leg is not moved by the person's latching.
    assert!(sent.iter().any(|(leg, to, _)| *leg == Leg::Caller && *to == CALLER.parse::<SocketAddr>().expect("addr")));
    assert_eq!(bridge.counts(Leg::Person).ignored, 1);
}

#[test]
fn the_backlog_for_a_leg_is_dropped_rather_than_grown() {
    let now = Instant::now();
    let session = |remote| MediaSession::new(MediaConfig::default(), negotiated(remote, Codec::Pcmu, None), 1, 1, 1);
    let ip: IpAddr = "127.0.0.1".parse().expect("ip");
    let mut from = Side::new(now, session(CALLER), ip);
    let mut to = Side::new(now, session(PERSON), ip);
    for _ in 0..MAX_QUEUED / FRAME_SAMPLES {
        relay(&mut from, &mut to, Playout::Frame(vec![0x10; FRAME_SAMPLES]));
    }
    assert_eq!(to.session.queued(), MAX_QUEUED);
    relay(&mut from, &mut to, Playout::Concealed(vec![0x20; FRAME_SAMPLES]));
    assert_eq!(to.session.queued(), FRAME_SAMPLES, "the backlog went, the newest frame stays");
    assert_eq!(from.counts.dropped, MAX_QUEUED as u64);
    relay(&mut from, &mut to, Playout::Waiting);
    assert_eq!(from.counts.relayed, 5);
}

#[test]
fn a_leg_that_stops_sending_is_found_silent() {
    let mut bridge = bridge(Codec::Pcmu, Codec::Pcmu, None);
    let later = Instant::now() + Duration::from_secs(40);
    assert_eq!(bridge.silent(Instant::now(), Duration::from_secs(30)), None);
    let mut phone = RtpSender::new(30, 1, 0);
    let packet = phone.media(0, false, &frame(Law::Ulaw, 100), FRAME_SAMPLES as u32);
    bridge.receive(later, Leg::Caller, CALLER.parse().expect("addr"), &packet);
    assert_eq!(bridge.silent(later, Duration::from_secs(30)), Some(Leg::Person));
    // A person's phone on hold (the edge only sends to it) is not expected to send.
    let mut held = negotiated(PERSON, Codec::Pcmu, None);
    held.direction = Direction::SendOnly;
    bridge.update(Leg::Person, held);
    assert_eq!(bridge.silent(later, Duration::from_secs(30)), None);
}
