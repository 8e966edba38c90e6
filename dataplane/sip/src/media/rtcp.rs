//! RTCP (RFC 3550 §6) as the edge needs it: reading the compound packets a phone or
//! media gateway sends (sender and receiver reports, SDES, BYE; others skipped), within
//! bounds; keeping the statistics of one incoming stream (§6.4.1 and appendix A.3/A.8:
//! extended highest sequence, cumulative and interval loss, interarrival jitter); and
//! writing the edge's own report: an SR for the stream it sends, with a report block on
//! the stream it receives, and the SDES CNAME every compound packet carries.

use std::time::{Duration, Instant};

/// The largest RTCP datagram the edge reads.
pub const MAX_PACKET: usize = 1500;

/// Why a datagram is not RTCP the edge reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RtcpError {
    /// Larger than [`MAX_PACKET`].
    #[error("the RTCP datagram is {0} bytes, more than {MAX_PACKET}")]
    TooLarge(usize),
    /// Shorter than its header says, or not version 2.
    #[error("not a valid RTCP compound packet at byte {0}")]
    Invalid(usize),
    /// A compound packet must start with a sender or receiver report (§6.1).
    #[error("an RTCP compound packet must start with SR or RR, not type {0}")]
    NotAReport(u8),
}

/// One report block: what a receiver says about a stream it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportBlock {
    /// The stream reported on.
    pub ssrc: u32,
    /// Packets lost since the last report, out of 256.
    pub fraction_lost: u8,
    /// Packets lost since the start (may be negative with duplicates).
    pub cumulative_lost: i32,
    /// The extended highest sequence number received.
    pub highest_sequence: u32,
    /// Interarrival jitter, in timestamp units.
    pub jitter: u32,
    /// The middle 32 bits of the last SR's NTP time, 0 if none.
    pub last_sr: u32,
    /// The delay since that SR, in 1/65536 s.
    pub delay_since_last_sr: u32,
}

/// What a compound packet told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compound {
    /// The sender's SSRC (of the first SR or RR).
    pub ssrc: u32,
    /// The middle 32 bits of the SR's NTP time, if it was an SR (for the next report's
    /// last_sr).
    pub sender_report: Option<u32>,
    /// The report blocks, on any stream.
    pub reports: Vec<ReportBlock>,
    /// The sender left (BYE).
    pub bye: bool,
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn block(b: &[u8]) -> ReportBlock {
    let lost = i32::from_be_bytes([b[5], b[6], b[7], 0]) >> 8;
    ReportBlock {
        ssrc: u32_at(b, 0),
        fraction_lost: b[4],
        cumulative_lost: lost,
        highest_sequence: u32_at(b, 8),
        jitter: u32_at(b, 12),
        last_sr: u32_at(b, 16),
        delay_since_last_sr: u32_at(b, 20),
    }
}

/// Reads a compound RTCP packet.
pub fn parse(datagram: &[u8]) -> Result<Compound, RtcpError> {
    if datagram.len() > MAX_PACKET {
        return Err(RtcpError::TooLarge(datagram.len()));
    }
    let mut compound = Compound::default();
    let mut at = 0;
    while at < datagram.len() {
        let header = datagram.get(at..at + 4).ok_or(RtcpError::Invalid(at))?;
        let (count, kind) = (usize::from(header[0] & 0x1f), header[1]);
        let length = (usize::from(u16::from_be_bytes([header[2], header[3]])) + 1) * 4;
        if header[0] >> 6 != 2 {
            return Err(RtcpError::Invalid(at));
        }
        let packet = datagram.get(at..at + length).ok_or(RtcpError::Invalid(at))?;
        if at == 0 && kind != 200 && kind != 201 {
            return Err(RtcpError::NotAReport(kind));
        }
        let blocks_at = match kind {
            200 => 28,
            201 => 8,
            _ => 0,
        };
        if blocks_at > 0 {
            if packet.len() < blocks_at + 24 * count {
                return Err(RtcpError::Invalid(at));
            }
            if at == 0 {
                compound.ssrc = u32_at(packet, 4);
                compound.sender_report = (kind == 200).then(|| u32_at(packet, 10));
            }
            compound.reports.extend((0..count).map(|n| block(&packet[blocks_at + 24 * n..])));
        }
        compound.bye |= kind == 203;
        at += length;
    }
    Ok(compound)
}

/// The statistics of one incoming stream (RFC 3550 appendix A.3 and A.8).
#[derive(Clone, Debug)]
pub struct ReceiverStats {
    ssrc: u32,
    base: u64,
    highest: u64,
    received: u64,
    expected_prior: u64,
    received_prior: u64,
    jitter: f64,
    last_transit: Option<f64>,
    start: Instant,
    last_sr: Option<(u32, Instant)>,
    /// The RTP clock of the packets counted (the last [`ReceiverStats::on_packet`]'s).
    clock_rate: u32,
}

impl ReceiverStats {
    /// Statistics starting with a stream's first packet.
    pub fn new(now: Instant, ssrc: u32, sequence: u16) -> Self {
        let base = 0x1_0000 | u64::from(sequence);
        Self {
            ssrc,
            base,
            highest: base,
            received: 0,
            expected_prior: 0,
            received_prior: 0,
            jitter: 0.0,
            last_transit: None,
            start: now,
            last_sr: None,
            clock_rate: super::CLOCK_RATE,
        }
    }

    /// The stream's SSRC.
    pub fn ssrc(&self) -> u32 {
        self.ssrc
    }

    /// Packets received so far (duplicates included, as RFC 3550 counts them).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Packets lost so far: expected (by the highest sequence number) less received; below
    /// zero when duplicates outnumber the losses.
    pub fn lost(&self) -> i64 {
        (self.highest - self.base + 1) as i64 - self.received as i64
    }

    /// The interarrival jitter estimate now (RFC 3550 §6.4.1), in seconds at `clock_rate`.
    pub fn jitter_seconds(&self, clock_rate: u32) -> f64 {
        self.jitter / f64::from(clock_rate.max(1))
    }

    /// The RTP clock rate of the stream's packets (8000; 48000 for Opus).
    pub fn clock_rate(&self) -> u32 {
        self.clock_rate
    }

    /// Counts a packet that arrived at `now` (sequence number and RTP timestamp).
    pub fn on_packet(&mut self, now: Instant, sequence: u16, timestamp: u32, clock_rate: u32) {
        let candidate = (self.highest & !0xFFFF) | u64::from(sequence);
        let extended = if candidate + 0x8000 < self.highest {
            candidate + 0x1_0000
        } else if candidate > self.highest + 0x8000 && candidate >= 0x1_0000 {
            candidate - 0x1_0000
        } else {
            candidate
        };
        self.highest = self.highest.max(extended);
        self.received += 1;
        self.clock_rate = clock_rate;
        let arrival = now.saturating_duration_since(self.start).as_secs_f64() * f64::from(clock_rate);
        let transit = arrival - f64::from(timestamp);
        if let Some(last) = self.last_transit {
            let d = (transit - last).abs();
            // Timestamps from an unrelated clock (a new talk spurt's jump) are bounded
            // by the jitter's own smoothing; a wrap of the RTP clock is one such jump.
            if d < f64::from(clock_rate) * 10.0 {
                self.jitter += (d - self.jitter) / 16.0;
            }
        }
        self.last_transit = Some(transit);
    }

    /// Remembers an SR from this stream's sender, for the next report's LSR/DLSR.
    pub fn on_sender_report(&mut self, now: Instant, ntp_middle: u32) {
        self.last_sr = Some((ntp_middle, now));
    }

    /// The report block for now; starts a new interval for `fraction_lost`.
    pub fn report(&mut self, now: Instant) -> ReportBlock {
        let expected = self.highest - self.base + 1;
        let lost = expected as i64 - self.received as i64;
        let expected_interval = expected - self.expected_prior;
        let received_interval = self.received - self.received_prior;
        self.expected_prior = expected;
        self.received_prior = self.received;
        let lost_interval = expected_interval as i64 - received_interval as i64;
        let fraction_lost = if expected_interval == 0 || lost_interval <= 0 {
            0
        } else {
            ((lost_interval << 8) / expected_interval as i64).min(255) as u8
        };
        let (last_sr, delay) = match self.last_sr {
            Some((ntp, at)) => (ntp, (now.saturating_duration_since(at).as_secs_f64() * 65536.0) as u32),
            None => (0, 0),
        };
        ReportBlock {
            ssrc: self.ssrc,
            fraction_lost,
            cumulative_lost: lost.clamp(-0x80_0000, 0x7F_FFFF) as i32,
            highest_sequence: self.highest as u32,
            jitter: self.jitter as u32,
            last_sr,
            delay_since_last_sr: delay,
        }
    }
}

/// What the edge says about the stream it sends, for its SR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderInfo {
    /// The edge's SSRC.
    pub ssrc: u32,
    /// Wall-clock time since the Unix epoch (the owner reads the clock).
    pub wall: Duration,
    /// The RTP timestamp that corresponds to `wall`.
    pub rtp_timestamp: u32,
    /// Packets sent.
    pub packets: u32,
    /// Payload bytes sent.
    pub octets: u32,
}

/// Seconds from 1900 (NTP's epoch) to 1970 (Unix's).
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// The edge's compound report: an SR with at most one report block, then SDES CNAME.
pub fn sender_report(sender: &SenderInfo, block: Option<&ReportBlock>, cname: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    let blocks = usize::from(block.is_some());
    out.extend_from_slice(&[0x80 | blocks as u8, 200]);
    out.extend_from_slice(&((6 + 6 * blocks) as u16).to_be_bytes());
    out.extend_from_slice(&sender.ssrc.to_be_bytes());
    let seconds = (sender.wall.as_secs() + NTP_UNIX_OFFSET) as u32;
    let fraction = ((u64::from(sender.wall.subsec_nanos()) << 32) / 1_000_000_000) as u32;
    out.extend_from_slice(&seconds.to_be_bytes());
    out.extend_from_slice(&fraction.to_be_bytes());
    for value in [sender.rtp_timestamp, sender.packets, sender.octets] {
        out.extend_from_slice(&value.to_be_bytes());
    }
    if let Some(b) = block {
        out.extend_from_slice(&b.ssrc.to_be_bytes());
        out.push(b.fraction_lost);
        out.extend_from_slice(&b.cumulative_lost.to_be_bytes()[1..]);
        for value in [b.highest_sequence, b.jitter, b.last_sr, b.delay_since_last_sr] {
            out.extend_from_slice(&value.to_be_bytes());
        }
    }
    let cname = &cname.as_bytes()[..cname.len().min(255)];
    // SSRC, CNAME item (type, length, text), the end item, padded to 32 bits.
    let chunk = 4 + 2 + cname.len() + 1;
    let padded = chunk.div_ceil(4) * 4;
    out.extend_from_slice(&[0x81, 202]);
    out.extend_from_slice(&((padded / 4) as u16).to_be_bytes());
    out.extend_from_slice(&sender.ssrc.to_be_bytes());
    out.extend_from_slice(&[1, cname.len() as u8]);
    out.extend_from_slice(cname);
    out.resize(out.len() + padded - chunk + 1, 0);
    out
}

#[cfg(test)]
mod tests;
