//! Unit tests of one call's media.

use super::*;
use crate::media::jitter::JitterConfig;
use crate::media::rtcp::ReportBlock;
use crate::sdp::Codec;

fn phone() -> SocketAddr {
    "198.51.100.20:35012".parse().unwrap()
}

fn negotiated(direction: Direction) -> Negotiated {
    Negotiated {
        remote: phone(),
        codec: Codec::Pcma,
        payload_type: 8,
        telephone_event: Some(101),
        telephone_event_clock: 8000,
        opus: None,
        remote_ptime: Some(20),
        direction,
        rtcp_mux: false,
        srtp: None,
        proto: "RTP/AVP".to_owned(),
    }
}

fn session() -> MediaSession {
    let config = MediaConfig { jitter: JitterConfig { depth: 1, ..JitterConfig::default() }, ..MediaConfig::default() };
    MediaSession::new(config, negotiated(Direction::SendRecv), 0xABCD, 1000, 0)
}

fn packet(pt: u8, seq: u16, ts: u32, payload: &[u8]) -> Vec<u8> {
    RtpSender::new(0x5555, seq, ts).packet(pt, false, ts, payload)
}

#[test]
fn audio_from_the_phone_plays_and_from_anyone_else_is_ignored() {
    let mut s = session();
    let elsewhere: SocketAddr = "203.0.113.66:35012".parse().unwrap();
    assert_eq!(s.receive(Instant::now(), elsewhere, &packet(8, 1, 0, &[1; 160])), Received::Ignored(Ignored::Source));
    let other_port: SocketAddr = "198.51.100.20:35013".parse().unwrap();
    assert_eq!(s.receive(Instant::now(), other_port, &packet(8, 1, 0, &[1; 160])), Received::Ignored(Ignored::Source));
    assert_eq!(
        s.receive(Instant::now(), phone(), &packet(0, 1, 0, &[1; 160])),
        Received::Ignored(Ignored::PayloadType(0))
    );
    assert_eq!(s.receive(Instant::now(), phone(), &[0x80, 201, 0, 1]), Received::Ignored(Ignored::Rtcp));
    assert_eq!(s.receive(Instant::now(), phone(), &[1, 2, 3]), Received::Ignored(Ignored::Malformed));
    assert_eq!(s.receive(Instant::now(), phone(), &packet(8, 2, 160, &[2; 160])), Received::Audio);
    assert_eq!(
        s.receive(Instant::now(), phone(), &packet(8, 2, 160, &[2; 160])),
        Received::Ignored(Ignored::Dropped(Pushed::Duplicate))
    );
    assert_eq!(s.tick().play, Playout::Frame(vec![2; 160]));
}

#[test]
fn telephone_events_are_told_once() {
    let mut s = session();
    let press = telephone::Payload { code: 5, end: false, volume: 10, duration: 0 }.to_bytes();
    let end = telephone::Payload { code: 5, end: true, volume: 10, duration: 800 }.to_bytes();
    assert_eq!(
        s.receive(Instant::now(), phone(), &packet(101, 1, 500, &press)),
        Received::Telephone(vec![Telephone::Pressed(Event::Digit('5'))])
    );
    let released = Telephone::Released { event: Event::Digit('5'), duration_ms: 100 };
    assert_eq!(s.receive(Instant::now(), phone(), &packet(101, 2, 500, &end)), Received::Telephone(vec![released]));
    assert_eq!(s.receive(Instant::now(), phone(), &packet(101, 3, 500, &end)), Received::Telephone(vec![]));
}

#[test]
fn the_agents_audio_is_paced_one_frame_a_tick_then_silence() {
    let mut s = session();
    assert_eq!(s.queue_audio(&[7; 400]), 0);
    let mut sent = Vec::new();
    for _ in 0..4 {
        let (to, bytes) = s.tick().send.expect("a packet every tick");
        assert_eq!(to, phone());
        let p = rtp::parse(&bytes).unwrap();
        sent.push((p.marker, p.sequence, p.timestamp, p.payload[0], p.payload[159], p.payload.len()));
    }
    assert_eq!(
        sent,
        [
            (true, 1000, 0, 7, 7, 160),
            (false, 1001, 160, 7, 7, 160),
            (false, 1002, 320, 7, 0xD5, 160),
            (false, 1003, 480, 0xD5, 0xD5, 160)
        ]
    );
}

#[test]
fn outgoing_audio_is_bounded_and_cleared_on_barge_in() {
    let mut s = MediaSession::new(
        MediaConfig { max_outgoing: 320, ..MediaConfig::default() },
        negotiated(Direction::SendRecv),
        1,
        1,
        1,
    );
    assert_eq!(s.queue_audio(&[1; 500]), 180);
    assert_eq!(s.queued(), 320);
    s.clear_audio();
    assert_eq!(s.queued(), 0);
}

#[test]
fn on_hold_nothing_is_sent_but_the_clock_runs() {
    let mut s = session();
    s.update(negotiated(Direction::RecvOnly));
    assert_eq!(s.tick().send, None);
    assert!(s.digit(Event::Digit('1'), 100).is_none());
    s.update(negotiated(Direction::SendRecv));
    let (_, bytes) = s.tick().send.unwrap();
    let p = rtp::parse(&bytes).unwrap();
    assert_eq!((p.marker, p.timestamp), (true, 160), "a new talk spurt, the clock moved on");
}

#[test]
fn a_digit_goes_out_as_telephone_events_at_the_media_clock() {
    let mut s = session();
    s.tick();
    let packets = s.digit(Event::Digit('#'), 100).unwrap();
    assert_eq!(packets.iter().map(|(at, _)| *at).collect::<Vec<_>>(), [0, 50, 100, 100, 100]);
    let first = rtp::parse(&packets[0].1).unwrap();
    assert_eq!((first.payload_type, first.marker, first.timestamp), (101, true, 160));
    let mut receiver = telephone::Receiver::new();
    let told: Vec<_> = packets
        .iter()
        .flat_map(|(_, b)| {
            let p = rtp::parse(b).unwrap();
            receiver.receive(p.timestamp, p.payload, 8000).unwrap()
        })
        .collect();
    assert_eq!(told.len(), 2);
}

#[test]
fn rtcp_is_read_from_the_phone_and_the_report_goes_back() {
    let t0 = Instant::now();
    let mut s = session();
    for seq in [1u16, 2, 4] {
        s.receive(t0, phone(), &packet(8, seq, u32::from(seq) * 160, &[1; 160]));
    }
    assert_eq!(
        s.receive(t0, phone(), &[0x80, 201, 0, 1, 0, 0, 0x55, 0x55]),
        Received::Ignored(Ignored::Rtcp),
        "no rtcp-mux"
    );
    let their_sr = rtcp::sender_report(
        &SenderInfo { ssrc: 0x5555, wall: Duration::from_secs(1), rtp_timestamp: 0, packets: 3, octets: 480 },
        None,
        "phone",
    );
    let elsewhere: SocketAddr = "203.0.113.66:35013".parse().unwrap();
    assert_eq!(s.receive_rtcp(t0, elsewhere, &their_sr), Received::Ignored(Ignored::Source));
    let rtcp_port: SocketAddr = "198.51.100.20:35013".parse().unwrap();
    assert!(matches!(s.receive_rtcp(t0, rtcp_port, &their_sr), Received::Rtcp(c) if c.sender_report.is_some()));
    s.queue_audio(&[7; 160]);
    s.tick();
    let (to, bytes) = s.report(t0 + Duration::from_secs(5), Duration::from_secs(1_700_000_000), "sb").unwrap();
    assert_eq!(to, rtcp_port, "RTCP on the RTP port + 1 without rtcp-mux");
    let compound = rtcp::parse(&bytes).unwrap();
    assert_eq!(compound.ssrc, 0xABCD);
    let [ReportBlock { ssrc, cumulative_lost, highest_sequence, last_sr, delay_since_last_sr, .. }] =
        compound.reports[..]
    else {
        panic!("{compound:?}")
    };
    assert_eq!((ssrc, cumulative_lost, highest_sequence), (0x5555, 1, 0x1_0004));
    assert_ne!(last_sr, 0);
    assert_eq!(delay_since_last_sr, 5 * 65536);
}

#[test]
fn with_rtcp_mux_rtcp_comes_on_the_rtp_port() {
    let mut media = negotiated(Direction::SendRecv);
    media.rtcp_mux = true;
    let mut s = MediaSession::new(MediaConfig::default(), media, 1, 1, 1);
    let rr = [0x80, 201, 0, 1, 0, 0, 0x55, 0x55];
    assert!(matches!(s.receive(Instant::now(), phone(), &rr), Received::Rtcp(_)));
    let (to, _) = s.report(Instant::now(), Duration::ZERO, "sb").unwrap();
    assert_eq!(to, phone());
}

mod srtp {
    use super::*;
    use crate::media::srtp::{MasterKey, SrtpKeys, SrtpSession, Suite};

    fn keys(local: u8, remote: u8) -> SrtpKeys {
        let key = |n: u8| MasterKey { key: [n; 16], salt: [n; 14] };
        SrtpKeys {
            suite: Suite::AesCm128HmacSha1_80,
            tag: 1,
            remote: key(remote),
            local: key(local),
            lifetime: 1 << 31,
        }
    }

    fn secure() -> MediaSession {
        let config =
            MediaConfig { jitter: JitterConfig { depth: 1, ..JitterConfig::default() }, ..MediaConfig::default() };
        let media =
            Negotiated { srtp: Some(keys(1, 2)), proto: "RTP/SAVP".to_owned(), ..negotiated(Direction::SendRecv) };
        MediaSession::new(config, media, 0xABCD, 1000, 0)
    }

    #[test]
    fn tampered_and_replayed_packets_are_dropped_and_counted_and_genuine_ones_play() {
        let mut s = secure();
        let mut phone_side = SrtpSession::new(keys(2, 1));
        let genuine = phone_side.protect_rtp(&packet(8, 1, 0, &[7; 160])).expect("protects");
        let mut tampered = genuine.clone();
        tampered[40] ^= 0xFF;
        assert_eq!(
            s.receive(Instant::now(), phone(), &tampered),
            Received::Ignored(Ignored::Srtp(SrtpError::AuthFailed))
        );
        let plain = packet(8, 2, 160, &[9; 160]);
        assert_eq!(
            s.receive(Instant::now(), phone(), &plain),
            Received::Ignored(Ignored::Srtp(SrtpError::AuthFailed)),
            "plain RTP on an SRTP call is not played"
        );
        assert_eq!(s.receive(Instant::now(), phone(), &genuine), Received::Audio);
        assert_eq!(s.receive(Instant::now(), phone(), &genuine), Received::Ignored(Ignored::Srtp(SrtpError::Replayed)));
        assert_eq!(s.tick().play, Playout::Frame(vec![7; 160]), "the genuine packet, decrypted");
        let counts = s.take_srtp_counts().expect("SRTP");
        assert_eq!((counts.unprotected, counts.auth_failed, counts.replayed), (1, 2, 1));
    }

    #[test]
    fn what_the_edge_sends_is_protected_and_the_phone_unprotects_it() {
        let mut s = secure();
        s.queue_audio(&[0x42; 160]);
        let (to, sent) = s.tick().send.expect("a packet");
        assert_eq!(to, phone());
        assert_eq!(sent.len(), 12 + 160 + 10);
        assert!(sent[12..172].iter().any(|b| *b != 0x42), "encrypted");
        let mut phone_side = SrtpSession::new(keys(2, 1));
        let plain = phone_side.unprotect_rtp(&sent).expect("authentic");
        assert!(plain[12..].iter().all(|b| *b == 0x42));
        let (_, report) = s.report(Instant::now(), Duration::from_secs(1), "edge").expect("a report");
        let report = phone_side.unprotect_rtcp(&report).expect("SRTCP");
        assert!(crate::media::rtcp::parse(&report).is_ok());
        let digits = s.digit(Event::Digit('5'), 100).expect("telephone events");
        let events = digits.len() as u64;
        for (_, packet) in digits {
            phone_side.unprotect_rtp(&packet).expect("each event packet is protected");
        }
        // The same keys on a re-INVITE keep the contexts; new keys start new ones.
        s.update(Negotiated {
            srtp: Some(keys(1, 2)),
            proto: "RTP/SAVP".to_owned(),
            ..negotiated(Direction::SendRecv)
        });
        assert_eq!(s.take_srtp_counts().expect("SRTP").protected, 2 + events, "kept across the same keys");
        s.update(Negotiated { srtp: None, ..negotiated(Direction::SendRecv) });
        assert!(!s.is_secure(), "plain RTP again");
    }
}

fn g722_session() -> MediaSession {
    let config = MediaConfig { jitter: JitterConfig { depth: 1, ..JitterConfig::default() }, ..MediaConfig::default() };
    let media = Negotiated { codec: Codec::G722, payload_type: 9, ..negotiated(Direction::SendRecv) };
    MediaSession::new(config, media, 0xABCD, 1000, 0)
}

#[test]
fn g722_is_decoded_to_16_khz_pcm_and_encoded_from_it() {
    use crate::media::g722::{Decoder, Encoder};
    let mut s = g722_session();
    assert_eq!(s.format(), Format::Wideband);
    // The phone's 20 ms of a 1 kHz tone, in G.722: 160 bytes, played as 640 bytes of PCM16.
    let tone: Vec<i16> = (0..320)
        .map(|i| (8000.0 * (2.0 * std::f64::consts::PI * 1000.0 * f64::from(i) / 16_000.0).sin()) as i16)
        .collect();
    let mut encoder = Encoder::new();
    let mut played = Vec::new();
    for seq in 1..=5u16 {
        let mut codes = Vec::new();
        encoder.encode(&tone, &mut codes);
        assert_eq!(s.receive(Instant::now(), phone(), &packet(9, seq, u32::from(seq) * 160, &codes)), Received::Audio);
        match s.tick().play {
            Playout::Frame(frame) => played.push(frame),
            other => panic!("{other:?}"),
        }
    }
    assert!(played.iter().all(|f| f.len() == 640), "16 kHz PCM16");
    let last = Format::Wideband.to_16k(&played[4]);
    let peak = last.iter().map(|s| i32::from(*s).abs()).max().unwrap_or(0);
    assert!((6000..10000).contains(&peak), "the tone decoded: peak {peak}");
    // A lost frame: the last one repeated, faded, in PCM16.
    match s.tick().play {
        Playout::Concealed(frame) => assert_eq!(frame, played[4], "the first concealed frame is the last at full gain"),
        other => panic!("{other:?}"),
    }
    // The agent's PCM16 goes out as G.722: 160 bytes a tick, that a decoder hears.
    let agent: Vec<u8> = Format::Wideband.from_16k(&tone.repeat(3));
    s.queue_audio(&agent);
    assert_eq!(s.queued(), 480, "in 8 kHz samples: 60 ms");
    let mut decoder = Decoder::new();
    let mut heard = Vec::new();
    for _ in 0..3 {
        let (_, bytes) = s.tick().send.expect("a packet");
        let p = rtp::parse(&bytes).unwrap();
        assert_eq!((p.payload_type, p.payload.len()), (9, 160));
        decoder.decode(p.payload, &mut heard);
    }
    let peak = heard[640..].iter().map(|s| i32::from(*s).abs()).max().unwrap_or(0);
    assert!((5000..13000).contains(&peak), "the phone hears the agent's tone (adapting from silence): peak {peak}");
    // Then silence, still G.722 (the encoder runs on).
    let (_, bytes) = s.tick().send.expect("silence");
    assert_eq!(rtp::parse(&bytes).unwrap().payload.len(), 160);
}

#[test]
fn a_forwarding_session_hands_the_callers_audio_over_as_it_comes() {
    let window = Duration::from_millis(40);
    let config = MediaConfig { jitter: JitterConfig::forwarding(window), ..MediaConfig::default() };
    let mut s = MediaSession::new(config, negotiated(Direction::SendRecv), 0xABCD, 1000, 0);
    let t0 = Instant::now();
    assert_eq!(s.receive(t0, phone(), &packet(8, 1, 0, &[1; 160])), Received::Audio);
    assert_eq!(s.ready(t0), Playout::Frame(vec![1; 160]));
    assert_eq!(s.ready(t0), Playout::Waiting);
    assert_eq!(s.tick().play, Playout::Waiting, "the tick plays nothing: frames are handed over as they come");
    // A reordered pair is put back in order at once.
    s.receive(t0, phone(), &packet(8, 3, 320, &[3; 160]));
    assert_eq!(s.ready(t0), Playout::Waiting);
    s.receive(t0, phone(), &packet(8, 2, 160, &[2; 160]));
    assert_eq!((s.ready(t0), s.ready(t0)), (Playout::Frame(vec![2; 160]), Playout::Frame(vec![3; 160])));
    // Paced again (a bridge): the tick plays, the depth first.
    s.set_reorder(None);
    assert_eq!(s.ready(t0), Playout::Waiting);
    for seq in 4..=6u16 {
        s.receive(t0, phone(), &packet(8, seq, u32::from(seq) * 160, &[seq as u8; 160]));
    }
    assert_eq!(s.tick().play, Playout::Frame(vec![4; 160]));
    assert_eq!(s.take_dropped(), 0);
}

#[test]
fn the_agents_audio_after_silence_starts_a_talk_spurt() {
    let mut s = session();
    let marker = |sent: Option<(SocketAddr, Vec<u8>)>| rtp::parse(&sent.expect("a packet").1).unwrap().marker;
    assert!(marker(s.send()), "the stream's first packet (silence)");
    assert!(!marker(s.send()), "silence goes on");
    s.queue_audio(&[7; 320]);
    assert!(marker(s.send()), "the reply's first packet after silence: its playout may start anew");
    assert!(!marker(s.send()), "mid-reply");
    assert!(!marker(s.send()), "silence after the reply");
}
