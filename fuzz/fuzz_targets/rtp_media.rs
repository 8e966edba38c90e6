//! RTP media (`switchboard_sip::media`): every datagram on a call's RTP port. The input
//! is a sequence of packets, each prefixed by its length byte. Properties: no packet
//! panics the RTP or RTCP parser, the telephone-event receiver or the jitter buffer (paced,
//! and forwarding on a clock read from the packets' timestamps); the paced buffer never holds
//! more than its capacity, the forwarding one never more than its backlog once drained; it
//! tells at most one press and one release per packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_sip::media::g711::Law;
use std::time::{Duration, Instant};

use switchboard_sip::media::jitter::{JitterBuffer, JitterConfig, Playout};
use switchboard_sip::media::{rtcp, rtp, telephone};

fuzz_target!(|data: &[u8]| {
    let config =
        JitterConfig { depth: 2, capacity: 16, max_payload: 320, max_concealed: 4, backlog: 3, reorder: None };
    let mut buffer = JitterBuffer::new(Some(Law::Ulaw), config);
    let forwarding = JitterConfig { reorder: Some(Duration::from_millis(40)), ..config };
    let mut forward = JitterBuffer::new(Some(Law::Ulaw), forwarding);
    let t0 = Instant::now();
    let mut receiver = telephone::Receiver::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        let (datagram, tail) = tail.split_at(len);
        rest = tail;
        let packet = match rtp::parse(datagram) {
            Ok(packet) => packet,
            Err(rtp::RtpError::Rtcp) => {
                if let Ok(compound) = rtcp::parse(datagram) {
                    assert!(compound.reports.len() * 24 <= datagram.len());
                }
                continue;
            }
            Err(_) => continue,
        };
        if packet.payload_type == 101 {
            if let Ok(told) = receiver.receive(packet.timestamp, packet.payload, 8000) {
                assert!(told.len() <= 2);
            }
        } else {
            buffer.push(packet.sequence, packet.payload);
            assert!(buffer.len() <= config.capacity);
            forward.push(packet.sequence, packet.payload);
            let now = t0 + Duration::from_micros(u64::from(packet.timestamp) * 125);
            while forward.pop_ready(now) != Playout::Waiting {}
            assert!(forward.len() <= forwarding.backlog);
            if packet.marker {
                let _ = buffer.pop();
            }
        }
    }
    for _ in 0..config.capacity + config.max_concealed + 2 {
        let _ = buffer.pop();
    }
});
