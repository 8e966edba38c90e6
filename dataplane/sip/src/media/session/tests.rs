//! Unit tests of one call's media.

use super::*;
use crate::media::jitter::JitterConfig;
use crate::media::rtcp::ReportBlock;

fn phone() -> SocketAddr {
    "198.51.100.20:35012".parse().unwrap()
}

fn negotiated(direction: Direction) -> Negotiated {
    Negotiated {
        remote: phone(),
        codec: Codec::Pcma,
        payload_type: 8,
        telephone_event: Some(101),
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
            receiver.receive(p.timestamp, p.payload).unwrap()
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
