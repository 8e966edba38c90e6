//! RTP media (`switchboard_sip::media`): every datagram on a call's RTP port. The input
//! is a sequence of packets, each prefixed by its length byte. Properties: no packet
//! panics the RTP or RTCP parser, the telephone-event receiver or the jitter buffer; the buffer
//! never holds more than its capacity; it tells at most one press and one release per
//! packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_sip::media::g711::Law;
use switchboard_sip::media::jitter::{JitterBuffer, JitterConfig};
use switchboard_sip::media::{rtcp, rtp, telephone};

fuzz_target!(|data: &[u8]| {
    let config = JitterConfig { depth: 2, capacity: 16, max_payload: 320, max_concealed: 4 };
    let mut buffer = JitterBuffer::new(Some(Law::Ulaw), config);
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
            if packet.marker {
                let _ = buffer.pop();
            }
        }
    }
    for _ in 0..config.capacity + config.max_concealed + 2 {
        let _ = buffer.pop();
    }
});
