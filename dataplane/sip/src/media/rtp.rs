//! RTP (RFC 3550) packets: parsed with `rtp-types` (zero-copy, no allocation) into the
//! fields the edge uses, told apart from RTCP on a shared port (RFC 5761 §4), and built
//! by an [`RtpSender`] that owns one stream's SSRC, sequence numbers and timestamps.

use rtp_types::{RtpPacket, RtpPacketBuilder};

/// The largest RTP datagram the edge takes: an Ethernet MTU's worth.
pub const MAX_PACKET: usize = 1500;

/// Why a datagram is not an RTP packet the edge takes.
#[derive(Debug, thiserror::Error)]
pub enum RtpError {
    /// Larger than [`MAX_PACKET`].
    #[error("the RTP packet is {0} bytes, more than {MAX_PACKET}")]
    TooLarge(usize),
    /// An RTCP packet (payload type 64-95 with the marker bit: 192-223) on the RTP port.
    #[error("an RTCP packet, not RTP")]
    Rtcp,
    /// Not RTP version 2, truncated, or with invalid padding.
    #[error("not a valid RTP packet")]
    Invalid(#[from] rtp_types::RtpParseError),
}

/// The fields of an RTP packet the edge reads, and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The payload type.
    pub payload_type: u8,
    /// The marker bit (start of a talk spurt, or of a telephone event).
    pub marker: bool,
    /// The sequence number.
    pub sequence: u16,
    /// The timestamp.
    pub timestamp: u32,
    /// The synchronisation source.
    pub ssrc: u32,
    /// The payload, without header, CSRCs, extension or padding.
    pub payload: &'a [u8],
}

/// Whether a datagram on a muxed port is RTCP (RFC 5761 §4: the second byte is 192-223).
pub fn is_rtcp(datagram: &[u8]) -> bool {
    datagram.len() >= 2 && (192..=223).contains(&datagram[1])
}

/// Reads an RTP packet.
pub fn parse(datagram: &[u8]) -> Result<Packet<'_>, RtpError> {
    if datagram.len() > MAX_PACKET {
        return Err(RtpError::TooLarge(datagram.len()));
    }
    if is_rtcp(datagram) {
        return Err(RtpError::Rtcp);
    }
    let packet = RtpPacket::parse(datagram)?;
    let start = packet.payload_offset();
    let payload = datagram.get(start..start + packet.payload_len()).unwrap_or_default();
    Ok(Packet {
        payload_type: packet.payload_type(),
        marker: packet.marker_bit(),
        sequence: packet.sequence_number(),
        timestamp: packet.timestamp(),
        ssrc: packet.ssrc(),
        payload,
    })
}

/// One outgoing RTP stream: its SSRC, the next sequence number and the timestamp clock.
#[derive(Clone, Debug)]
pub struct RtpSender {
    ssrc: u32,
    sequence: u16,
    timestamp: u32,
    packets: u32,
    octets: u32,
}

impl RtpSender {
    /// A stream with this SSRC, first sequence number and first timestamp (random in
    /// practice, RFC 3550 §5.1: the edge draws them).
    pub fn new(ssrc: u32, sequence: u16, timestamp: u32) -> Self {
        Self { ssrc, sequence, timestamp, packets: 0, octets: 0 }
    }

    /// The stream's SSRC.
    pub fn ssrc(&self) -> u32 {
        self.ssrc
    }

    /// The timestamp the next media frame gets.
    pub fn timestamp(&self) -> u32 {
        self.timestamp
    }

    /// Packets and payload bytes sent (for RTCP sender reports; they wrap).
    pub fn counts(&self) -> (u32, u32) {
        (self.packets, self.octets)
    }

    /// A packet for one media frame of `samples` samples; the clock then moves on by them.
    pub fn media(&mut self, payload_type: u8, marker: bool, payload: &[u8], samples: u32) -> Vec<u8> {
        let packet = self.packet(payload_type, marker, self.timestamp, payload);
        self.timestamp = self.timestamp.wrapping_add(samples);
        packet
    }

    /// A packet with its own timestamp, which does not move the clock (a telephone
    /// event's packets all carry the event's start).
    pub fn packet(&mut self, payload_type: u8, marker: bool, timestamp: u32, payload: &[u8]) -> Vec<u8> {
        let builder = RtpPacketBuilder::<&[u8], &[u8]>::new()
            .payload_type(payload_type & 0x7f)
            .marker_bit(marker)
            .sequence_number(self.sequence)
            .timestamp(timestamp)
            .ssrc(self.ssrc)
            .payload(payload);
        self.sequence = self.sequence.wrapping_add(1);
        self.packets = self.packets.wrapping_add(1);
        self.octets = self.octets.wrapping_add(payload.len() as u32);
        builder.write_vec_unchecked()
    }

    /// Moves the clock on by `samples` without sending (time that passed in silence).
    pub fn skip(&mut self, samples: u32) {
        self.timestamp = self.timestamp.wrapping_add(samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_built_packet_parses_back() {
        let mut sender = RtpSender::new(0x1234_5678, 65535, 4_294_967_200);
        let first = sender.media(0, true, &[0xff; 160], 160);
        let second = sender.media(0, false, &[0x7f; 160], 160);
        let a = parse(&first).unwrap();
        let b = parse(&second).unwrap();
        assert_eq!((a.payload_type, a.marker, a.sequence, a.ssrc), (0, true, 65535, 0x1234_5678));
        assert_eq!((b.sequence, b.timestamp), (0, 4_294_967_200u32.wrapping_add(160)), "both wrap");
        assert_eq!(b.payload, &[0x7f; 160]);
    }

    #[test]
    fn rtcp_truncated_and_oversized_datagrams_are_refused() {
        let receiver_report = [0x80, 201, 0, 1, 0, 0, 0, 1];
        assert!(is_rtcp(&receiver_report));
        assert!(matches!(parse(&receiver_report), Err(RtpError::Rtcp)));
        assert!(matches!(parse(&[0x80, 0, 0]), Err(RtpError::Invalid(_))));
        assert!(matches!(parse(&[0x40; 12]), Err(RtpError::Invalid(_))), "version 1");
        assert!(matches!(parse(&[0x80; 1501]), Err(RtpError::TooLarge(1501))));
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(p) = parse(&bytes) {
                prop_assert!(p.payload.len() <= bytes.len() - 12);
            }
        }

        #[test]
        fn fields_round_trip(pt in 0u8..128, marker: bool, seq: u16, ts: u32, ssrc: u32,
                             payload in proptest::collection::vec(any::<u8>(), 0..320)) {
            let bytes = RtpSender::new(ssrc, seq, ts).packet(pt, marker, ts, &payload);
            if is_rtcp(&bytes) {
                return Ok(());
            }
            let p = parse(&bytes).unwrap();
            prop_assert_eq!((p.payload_type, p.marker, p.sequence, p.timestamp, p.ssrc), (pt, marker, seq, ts, ssrc));
            prop_assert_eq!(p.payload, &payload[..]);
        }
    }
}
