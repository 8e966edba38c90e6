//! An Opus call's media (`switchboard_sip::media::session` over `switchboard_opus`): what a
//! phone on an Opus call (RFC 7587) sends to the call's RTP port. The input is a sequence of
//! datagrams, each prefixed by a control byte (bit 0: a tick after it; bit 1: the datagram's
//! bytes are queued as the agent's 16 kHz PCM instead of received) and a length byte.
//! libopus is fuzzed on its own (OSS-Fuzz's decoder targets); this target is for what the
//! edge puts around it: the jitter buffer's order, the FEC look-ahead into whatever packet
//! the buffer holds next, decoding into a fixed scratch (packets of any length up to 120 ms),
//! concealment of what does not decode, the 16 kHz PCM conversion and the 48 kHz RTP clock.
//! Properties: no input panics; every frame played is whole 16 kHz PCM16 samples, at most
//! 120 ms; every packet sent parses as RTP on Opus's payload type, 960 ticks of the clock
//! after the one before.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_sip::media::jitter::{JitterConfig, Playout};
use switchboard_sip::media::rtp;
use switchboard_sip::media::session::{MediaConfig, MediaSession};
use switchboard_sip::sdp::{Codec, Direction, Negotiated, OpusParams};

fuzz_target!(|data: &[u8]| {
    let phone = "192.0.2.1:4000".parse().expect("an address");
    let media = Negotiated {
        remote: phone,
        codec: Codec::Opus,
        payload_type: 96,
        telephone_event: Some(101),
        telephone_event_clock: 48_000,
        opus: Some(OpusParams { use_inband_fec: true, ..OpusParams::default() }),
        remote_ptime: Some(20),
        direction: Direction::SendRecv,
        rtcp_mux: true,
        srtp: None,
        proto: "RTP/AVP".to_owned(),
    };
    let config = MediaConfig {
        jitter: JitterConfig { depth: 2, capacity: 16, max_payload: 1500, max_concealed: 4, backlog: 3, reorder: None },
        ..MediaConfig::default()
    };
    let mut session = MediaSession::new(config, media, 1, 1, 0);
    let now = std::time::Instant::now();
    let mut last_sent: Option<u32> = None;
    let mut tick = |session: &mut MediaSession| {
        let tick = session.tick();
        if let Playout::Frame(frame) | Playout::Concealed(frame) = &tick.play {
            assert!(frame.len() % 2 == 0 && frame.len() <= 2 * 1920, "{} bytes", frame.len());
        }
        if let Some((_, bytes)) = tick.send {
            let packet = rtp::parse(&bytes).expect("what the edge sends parses");
            assert_eq!(packet.payload_type, 96);
            if let Some(last) = last_sent {
                assert_eq!(packet.timestamp.wrapping_sub(last), 960);
            }
            last_sent = Some(packet.timestamp);
        }
    };
    let mut rest = data;
    while let [control, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (datagram, tail) = tail.split_at(len);
        rest = tail;
        if control & 2 != 0 {
            session.queue_audio(&datagram[..datagram.len() / 2 * 2]);
        } else {
            let _ = session.receive(now, phone, datagram);
        }
        if control & 1 != 0 {
            tick(&mut session);
        }
    }
    for _ in 0..config.jitter.capacity + config.jitter.max_concealed + 2 {
        tick(&mut session);
    }
});
