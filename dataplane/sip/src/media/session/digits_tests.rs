//! Keys the agent presses on a call ([`MediaSession::press`]): each key's telephone events
//! on the media clock (the key's start as every packet's timestamp, the marker on its
//! first, the end three times), silence between keys, the agent's audio held until the
//! keys are over, and refusals and interruptions for the owner to report.

use super::*;
use crate::media::digits::{self, KEY_MS, PressRefused, Pressed};
use crate::sdp::Codec;

fn phone() -> SocketAddr {
    "198.51.100.20:35012".parse().unwrap()
}

fn negotiated(codec: Codec, telephone_event: Option<u8>, clock: u32) -> Negotiated {
    let payload_type = match codec {
        Codec::Opus => 96,
        Codec::Pcma => 8,
        _ => 0,
    };
    Negotiated {
        remote: phone(),
        codec,
        payload_type,
        telephone_event,
        telephone_event_clock: clock,
        opus: (codec == Codec::Opus).then(crate::sdp::OpusParams::default),
        remote_ptime: Some(20),
        direction: Direction::SendRecv,
        rtcp_mux: false,
        srtp: None,
        proto: "RTP/AVP".to_owned(),
    }
}

fn session(media: Negotiated) -> MediaSession {
    MediaSession::new(MediaConfig::default(), media, 0xABCD, 1000, 5000)
}

/// The packets the session sends for `frames` frames.
fn sent(s: &mut MediaSession, frames: usize) -> Vec<(bool, u8, u16, u32, Vec<u8>)> {
    (0..frames)
        .filter_map(|_| s.send())
        .map(|(to, bytes)| {
            assert_eq!(to, phone());
            let p = rtp::parse(&bytes).expect("RTP");
            (p.marker, p.payload_type, p.sequence, p.timestamp, p.payload.to_vec())
        })
        .collect()
}

#[test]
fn keys_go_as_telephone_events_on_the_media_clock_with_silence_between_them() {
    let mut s = session(negotiated(Codec::Pcmu, Some(101), 8000));
    sent(&mut s, 2);
    // The agent's reply, queued before the keys: it waits until they are over.
    s.queue_audio(&[0x11; 320]);
    let ms = s.press(digits::parse("1#").expect("keys")).expect("pressed");
    assert_eq!(ms, 2 * (KEY_MS + digits::GAP_MS));
    assert!(s.is_pressing());
    let packets = sent(&mut s, (ms / FRAME_MS) as usize);
    assert_eq!(packets.len(), 22, "a packet every frame: events, then silence");
    // Sequence numbers run on without a gap; timestamps: the clock was at 2 frames.
    assert!(packets.windows(2).all(|w| w[1].2 == w[0].2.wrapping_add(1)));
    let mut receiver = telephone::Receiver::new();
    let mut told = Vec::new();
    for (i, (marker, pt, _, ts, payload)) in packets.iter().enumerate() {
        let key = i / 11;
        let frame = i % 11;
        if frame < 8 {
            assert_eq!(*pt, 101, "frame {i}: a telephone event");
            assert_eq!(*marker, frame == 0, "frame {i}: the marker on a key's first packet only");
            assert_eq!(*ts, 5000 + 2 * 160 + key as u32 * 11 * 160, "frame {i}: the key's start");
            let event = telephone::Payload::parse(payload).expect("an event");
            assert_eq!(event.end, frame >= 5, "frame {i}: the end bit on the last three");
            assert_eq!(u32::from(event.duration), (frame as u32 + 1).min(6) * 160, "frame {i}");
            told.extend(receiver.receive(*ts, payload, 8000).expect("reads"));
        } else {
            assert_eq!((*pt, *marker), (0, false), "frame {i}: silence between keys");
            assert_eq!(*ts, 5000 + (2 + i as u32) * 160, "frame {i}: the media clock ran on");
            assert!(payload.iter().all(|b| *b == 0xFF), "frame {i}: μ-law silence, not the agent's audio");
        }
    }
    let keys: Vec<char> = told
        .iter()
        .filter_map(|t| match t {
            telephone::Telephone::Pressed(Event::Digit(k)) => Some(*k),
            _ => None,
        })
        .collect();
    assert_eq!(keys, ['1', '#']);
    // Over: the owner is told once, and the agent's audio goes on as a new talk spurt.
    let after = sent(&mut s, 1);
    assert_eq!(s.take_pressed(), Some(Pressed { keys: 2, pressed: 2, interrupted: None }));
    assert_eq!(s.take_pressed(), None);
    assert!(!s.is_pressing());
    let (marker, pt, _, ts, payload) = &after[0];
    assert_eq!((*marker, *pt, *ts), (true, 0, 5000 + 24 * 160));
    assert_eq!(payload, &vec![0x11; 160], "the reply that waited");
}

#[test]
fn beside_opus_events_count_48_khz_and_the_clock_moves_a_frame_a_packet() {
    let mut s = session(negotiated(Codec::Opus, Some(101), 48_000));
    s.press(digits::parse("9").expect("keys")).expect("pressed");
    let packets = sent(&mut s, 11);
    let end = telephone::Payload::parse(&packets[5].4).expect("an event");
    assert!(end.end && end.duration == 5760, "120 ms at 48 kHz: {}", end.duration);
    assert!(packets[..8].iter().all(|p| p.1 == 101 && p.3 == 5000), "every event at the key's start");
    assert_eq!((packets[8].1, packets[8].3), (96, 5000 + 8 * 960), "Opus silence on the 48 kHz clock");
}

#[test]
fn a_call_without_telephone_events_or_on_hold_refuses_keys_and_one_sequence_runs_at_a_time() {
    let mut none = session(negotiated(Codec::Pcmu, None, 8000));
    assert_eq!(none.press(digits::parse("1").unwrap()), Err(PressRefused::NoTelephoneEvents));
    let mut held = session(Negotiated { direction: Direction::RecvOnly, ..negotiated(Codec::Pcmu, Some(101), 8000) });
    assert_eq!(held.press(digits::parse("1").unwrap()), Err(PressRefused::NotSending));
    let mut busy = session(negotiated(Codec::Pcmu, Some(101), 8000));
    busy.press(digits::parse("1").unwrap()).expect("pressed");
    assert_eq!(busy.press(digits::parse("2").unwrap()), Err(PressRefused::Busy));
}

#[test]
fn hold_or_new_telephone_events_mid_sequence_interrupt_it_with_the_keys_pressed_so_far() {
    let mut s = session(negotiated(Codec::Pcmu, Some(101), 8000));
    s.press(digits::parse("123").unwrap()).expect("pressed");
    sent(&mut s, 11 + 6);
    s.update(Negotiated { direction: Direction::RecvOnly, ..negotiated(Codec::Pcmu, Some(101), 8000) });
    assert_eq!(sent(&mut s, 1), []);
    assert_eq!(s.take_pressed(), Some(Pressed { keys: 3, pressed: 2, interrupted: Some("the call was put on hold") }));
    let mut moved = session(negotiated(Codec::Pcmu, Some(101), 8000));
    moved.press(digits::parse("1").unwrap()).expect("pressed");
    moved.update(negotiated(Codec::Pcmu, None, 8000));
    assert_eq!(moved.take_pressed().map(|p| p.interrupted), Some(Some("the call's media changed")));
    // A new address for the same events (latching) does not stop them.
    let mut latched = session(negotiated(Codec::Pcmu, Some(101), 8000));
    latched.press(digits::parse("1").unwrap()).expect("pressed");
    latched.update(Negotiated {
        remote: "198.51.100.20:40000".parse().unwrap(),
        ..negotiated(Codec::Pcmu, Some(101), 8000)
    });
    assert!(latched.is_pressing() && latched.take_pressed().is_none());
}
