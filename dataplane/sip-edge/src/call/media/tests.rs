//! Unit tests of a call's media apart from its sockets.

use std::time::Duration;

use switchboard_sip::sdp::Codec;

use super::*;
use std::time::Instant;

const ULAW: Format = Format::G711(Law::Ulaw);

#[test]
fn laws_convert_only_when_they_differ() {
    let ulaw = [0xFF, 0x80, 0x00, 0x7F];
    assert_eq!(convert(ULAW, ULAW, &ulaw), ulaw);
    let alaw = convert(ULAW, Format::G711(Law::Alaw), &ulaw);
    let back = convert(Format::G711(Law::Alaw), ULAW, &alaw);
    for (a, b) in ulaw.iter().zip(&back) {
        let (a, b) = (i32::from(Law::Ulaw.decode(*a)), i32::from(Law::Ulaw.decode(*b)));
        assert!((a - b).abs() <= a.abs() / 8 + 16, "{a} vs {b}");
    }
}

fn negotiated(direction: Direction) -> Negotiated {
    Negotiated {
        remote: "127.0.0.1:4000".parse().expect("addr"),
        codec: Codec::Pcmu,
        payload_type: 0,
        telephone_event: None,
        telephone_event_clock: 8000,
        opus: None,
        remote_ptime: None,
        direction,
        rtcp_mux: false,
        srtp: None,
        proto: "RTP/AVP".to_owned(),
    }
}

#[test]
fn a_g722_phone_speaks_16_khz_pcm_with_the_session_both_ways() {
    use switchboard_sip::media::g722::{Decoder, Encoder};
    let mut relay = Relay::new(Arc::new(MediaSettings::default()), Format::Wideband, "127.0.0.1".parse().expect("ip"));
    // The agent's greeting (16 kHz PCM16) comes before the media is settled.
    let tone: Vec<i16> = (0..320).map(|i| if i % 32 < 16 { 6000 } else { -6000 }).collect();
    relay.agent_audio(&Format::Wideband.from_16k(&tone.repeat(5)));
    assert_eq!(relay.queued(), 800, "100 ms, in 8 kHz samples");
    relay.media(Negotiated { codec: Codec::G722, payload_type: 9, ..negotiated(Direction::SendRecv) });
    let mut decoder = Decoder::new();
    let mut heard = Vec::new();
    for _ in 0..5 {
        let (_, send) = relay.tick();
        let (_, packet) = send.expect("a packet");
        let rtp = switchboard_sip::media::rtp::parse(&packet).expect("RTP");
        assert_eq!((rtp.payload_type, rtp.payload.len()), (9, 160), "G.722 to the phone");
        decoder.decode(rtp.payload, &mut heard);
    }
    assert!(heard[320..].iter().any(|s| s.abs() > 3000), "the phone hears the greeting");
    // The phone's G.722 reaches the session as 640 bytes of PCM16 a frame.
    let mut encoder = Encoder::new();
    let mut phone = switchboard_sip::media::rtp::RtpSender::new(7, 1, 1);
    let mut frames = Vec::new();
    for _ in 0..6 {
        let mut codes = Vec::new();
        encoder.encode(&tone, &mut codes);
        // Each packet's frame goes on as it comes (the jitter buffer forwards).
        frames.extend(relay.rtp("127.0.0.1:4000".parse().expect("addr"), &phone.media(9, false, &codes, 160), false));
        frames.extend(relay.tick().0);
    }
    assert!(
        frames.len() == 6 && frames.iter().all(|f| f.len() == 640),
        "{:?}",
        frames.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let last = Format::Wideband.to_16k(frames.last().expect("a frame"));
    assert!(last.iter().any(|s| s.abs() > 3000), "the agent hears the caller, wideband");
}

#[test]
fn silent_rtp_times_the_call_out_unless_the_phone_is_not_sending() {
    let settings = MediaSettings { timeout: Duration::from_millis(50), ..MediaSettings::default() };
    let mut relay = Relay::new(Arc::new(settings), ULAW, "127.0.0.1".parse().expect("ip"));
    assert!(!relay.timed_out(), "no media yet");
    relay.media(negotiated(Direction::SendRecv));
    assert!(!relay.timed_out());
    std::thread::sleep(Duration::from_millis(80));
    assert!(relay.timed_out(), "nothing from the phone for longer than the timeout");
    let mut phone = switchboard_sip::media::rtp::RtpSender::new(7, 1, 1);
    relay.rtp("127.0.0.1:4000".parse().expect("addr"), &phone.media(0, false, &[0xFF; 160], 160), false);
    assert!(!relay.timed_out(), "a packet from the phone resets it");
    relay.media(negotiated(Direction::SendOnly));
    std::thread::sleep(Duration::from_millis(80));
    assert!(!relay.timed_out(), "a phone on hold (the edge only sends) is not expected to send");
}

#[test]
fn rtp_from_a_stranger_is_ignored_and_never_latched() {
    let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "10.0.0.1".parse().expect("ip"));
    relay.media(negotiated(Direction::SendRecv));
    let mut stranger = switchboard_sip::media::rtp::RtpSender::new(9, 1, 1);
    relay.rtp("192.0.2.77:4000".parse().expect("addr"), &stranger.media(0, false, &[0x00; 160], 160), false);
    assert_eq!((relay.counts.rtp_in, relay.counts.ignored, relay.latched), (0, 1, false));
    // The phone's SIP address on another port: latched once.
    relay.rtp("10.0.0.1:5000".parse().expect("addr"), &stranger.media(0, false, &[0xFF; 160], 160), false);
    assert_eq!((relay.counts.rtp_in, relay.latched), (1, true));
}

#[test]
fn a_key_press_is_forwarded_once_however_its_packets_repeat() {
    use switchboard_sip::media::telephone::{Payload, packets};
    let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
    let mut media = negotiated(Direction::SendRecv);
    media.telephone_event = Some(101);
    relay.media(media);
    let (to_gateway, mut sent) = mpsc::channel(16);
    let mut phone = switchboard_sip::media::rtp::RtpSender::new(7, 1, 1);
    for (key, start) in [('4', 8000u32), ('#', 16000)] {
        for planned in packets(switchboard_sip::media::telephone::Event::Digit(key), 120, 8000) {
            let payload = Payload::to_bytes(planned.payload);
            let packet = phone.packet(101, planned.marker, start, &payload);
            relay.rtp("127.0.0.1:4000".parse().expect("addr"), &packet, false);
            relay.forward_keys(&to_gateway);
        }
    }
    let mut keys = Vec::new();
    while let Ok(Message::Text(text)) = sent.try_recv() {
        keys.push(text.to_string());
    }
    assert_eq!(keys, [r#"{"type":"bidi_dtmf","digits":"4"}"#, r##"{"type":"bidi_dtmf","digits":"#"}"##]);
    assert_eq!(relay.counts.keys, 2);
}

#[test]
fn on_hold_the_chime_fills_what_the_agent_leaves_silent() {
    let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
    relay.media(negotiated(Direction::SendRecv));
    relay.hold(true);
    let mut chime = HoldTone::new(Law::Ulaw);
    let (_, send) = relay.tick();
    assert_eq!(send.expect("a packet").1[12..], chime.frame()[..], "the chime's first frame");
    relay.agent_audio(&[0x10; 160]);
    let (_, send) = relay.tick();
    let (_, packet) = send.expect("a packet");
    assert!(packet[12..].iter().all(|b| *b == 0x10), "the agent's audio first, the chime after");
    relay.hold(false);
    let (_, send) = relay.tick();
    assert!(send.expect("silence").1[12..].iter().all(|b| *b == 0xFF), "off hold: silence again");
    assert_eq!(relay.queued(), 0);
}

#[test]
fn an_interruption_drops_the_queued_reply_at_once() {
    let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
    relay.agent_audio(&[0x10; 1600]);
    assert_eq!(relay.pending.len(), 1600, "held until the media is settled");
    relay.interrupted();
    assert!(relay.pending.is_empty());
    let media = negotiated(Direction::SendRecv);
    relay.agent_audio(&[0x10; 800]);
    relay.media(media);
    let (_, send) = relay.tick();
    let (to, packet) = send.expect("a packet");
    assert_eq!((to.port(), packet[12..].iter().all(|b| *b == 0x10)), (4000, true), "the greeting is played first");
    relay.agent_audio(&[0x20; 1600]);
    relay.interrupted();
    let (_, send) = relay.tick();
    assert!(send.expect("silence").1[12..].iter().all(|b| *b == 0xFF), "silence after the interruption");
}

#[test]
fn the_callers_audio_goes_to_the_agent_as_it_comes_and_paced_while_detection_listens() {
    let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
    relay.media(negotiated(Direction::SendRecv));
    let from: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
    let mut phone = switchboard_sip::media::rtp::RtpSender::new(7, 1, 1);
    let first = relay.rtp(from, &phone.media(0, false, &[0x11; 160], 160), false);
    assert_eq!(first, [vec![0x11; 160]], "the first packet at once, no playout delay");
    assert!(relay.tick().0.is_empty(), "nothing more on the tick");
    // A packet lost: the next waits the reorder window, then the loss is concealed.
    let _ = phone.media(0, false, &[0x22; 160], 160);
    assert!(relay.rtp(from, &phone.media(0, false, &[0x33; 160], 160), false).is_empty());
    std::thread::sleep(crate::call::REORDER_WINDOW + Duration::from_millis(5));
    let (frames, _) = relay.tick();
    assert_eq!(
        frames,
        [vec![0x11; 160], vec![0x33; 160]],
        "the lost frame concealed (the last repeated), then the next"
    );
    // Answering-machine detection paces: one frame a tick, after the jitter buffer's depth.
    relay.pace(true);
    let mut heard = Vec::new();
    for n in 0..6u8 {
        assert!(relay.rtp(from, &phone.media(0, false, &[n; 160], 160), false).is_empty());
        heard.extend(relay.tick().0);
    }
    assert_eq!(heard.iter().map(|f| f[0]).collect::<Vec<_>>(), [0, 1, 2, 3], "three held, then one a tick");
}

#[test]
fn the_agents_audio_goes_to_the_phone_as_it_comes_never_ahead_of_real_time() {
    let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
    assert!(relay.next_send().is_none(), "no media yet");
    relay.media(negotiated(Direction::SendRecv));
    let t0 = Instant::now();
    let first = |packets: Vec<Packet>| {
        assert_eq!(packets.len(), 1, "one packet");
        let p = switchboard_sip::media::rtp::parse(&packets[0].1).expect("RTP");
        (p.marker, p.payload[0])
    };
    assert_eq!(first(relay.send_due(t0)), (true, 0xFF), "silence starts the stream at once");
    assert!(relay.send_due(t0).is_empty(), "the next is 20 ms on");
    // A reply's first frame 12 ms after the silence: it goes at once.
    relay.agent_audio(&[0x10; 80]);
    assert!(relay.send_due(t0 + Duration::from_millis(12)).is_empty(), "less than a frame waits");
    relay.agent_audio(&[0x10; 350]);
    assert!(relay.next_send() <= Some(Instant::now()), "at once");
    assert_eq!(first(relay.send_due(t0 + Duration::from_millis(12))), (true, 0x10), "a new talk spurt");
    // The rest came in one burst: one frame every 20 ms (at most the lead early).
    assert!(relay.send_due(t0 + Duration::from_millis(13)).is_empty());
    assert_eq!(first(relay.send_due(t0 + Duration::from_millis(30))), (false, 0x10));
    // The last part (less than a frame) waits the grace for more, then goes padded.
    assert!(relay.send_due(t0 + Duration::from_millis(55)).is_empty());
    assert_eq!(first(relay.send_due(t0 + Duration::from_millis(70))), (false, 0x10));
    assert_eq!(relay.queued(), 0);
    // Busy for 40 ms with nothing to say: one packet of silence, the clock starts again.
    assert_eq!(relay.send_due(t0 + Duration::from_millis(130)).len(), 1);
    // The reply goes on late (its clock did not wait for the silence): its frames are owed
    // and go at once.
    relay.agent_audio(&[0x30; 480]);
    assert_eq!(relay.send_due(t0 + Duration::from_millis(200)).len(), 3);
    assert_eq!(relay.queued(), 0);
}

#[test]
fn keys_the_agent_presses_go_on_the_media_clock_and_their_result_follows_once() {
    use switchboard_core::protocol::DigitsOutcome;
    let mut relay = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
    let refused = relay.press("t0", "1").expect_err("no media yet");
    assert!(refused.to_text().expect("text").contains(r#""outcome":"rejected""#), "{refused:?}");
    relay.media(Negotiated { telephone_event: Some(101), ..negotiated(Direction::SendRecv) });
    let bad = relay.press("t0", "1x").expect_err("not a key");
    assert!(bad.to_text().expect("text").contains("do not read"), "{bad:?}");
    // The agent's reply waits behind the keys.
    relay.agent_audio(&[0x22; 480]);
    let ms = relay.press("t1", "1#").expect("pressing");
    assert_eq!(ms, 440);
    assert!(relay.press("t2", "2").is_err(), "one sequence at a time");
    let start = Instant::now();
    let (mut events, mut audio, mut result) = (Vec::new(), 0, None);
    for frame in 0..40u32 {
        let now = start + Duration::from_millis(u64::from(frame * 20));
        for (_, packet) in relay.send_due(now) {
            let rtp = switchboard_sip::media::rtp::parse(&packet).expect("RTP");
            match rtp.payload_type {
                101 => events.push(frame),
                _ if rtp.payload.contains(&0x22) => audio += 1,
                _ => {}
            }
            if rtp.payload.contains(&0x22) {
                assert!(events.len() == 16, "the agent's audio only after every key: {events:?}");
            }
        }
        if let Some(done) = relay.keys_done() {
            assert!(result.is_none(), "told once");
            result = Some((frame, done));
        }
    }
    assert_eq!(events.len(), 16, "8 packets a key: {events:?}");
    assert!(events.windows(2).all(|w| w[1] > w[0]), "one a frame, on the stream's clock: {events:?}");
    let (frame, (message, outcome)) = result.expect("the result");
    assert_eq!(outcome, DigitsOutcome::Sent);
    assert!((21..=24).contains(&frame), "after the last key's gap: frame {frame}");
    assert_eq!(
        message.to_text().expect("text"),
        r#"{"type":"digits_result","tool_use_id":"t1","outcome":"sent","sent":2}"#
    );
    assert_eq!(audio, 3, "then the reply");
    assert_eq!(relay.counts.keys_pressed, 2);
    // A phone that settled no telephone events: unsupported, at once.
    let mut plain = Relay::new(Arc::new(MediaSettings::default()), ULAW, "127.0.0.1".parse().expect("ip"));
    plain.media(negotiated(Direction::SendRecv));
    let unsupported = plain.press("t3", "1").expect_err("no telephone events");
    let text = unsupported.to_text().expect("text").to_owned();
    assert!(text.contains(r#""outcome":"unsupported""#) && text.contains("RFC 4733"), "{text}");
}
