//! Unit tests of RTCP reading, statistics and the edge's report.

use super::*;
use proptest::prelude::*;

fn block() -> ReportBlock {
    ReportBlock {
        ssrc: 0x5555,
        fraction_lost: 25,
        cumulative_lost: -3,
        highest_sequence: 0x1_0005,
        jitter: 40,
        last_sr: 0xABCD_1234,
        delay_since_last_sr: 65536,
    }
}

fn sender() -> SenderInfo {
    SenderInfo {
        ssrc: 0xABCD,
        wall: Duration::new(1_700_000_000, 500_000_000),
        rtp_timestamp: 8000,
        packets: 50,
        octets: 8000,
    }
}

#[test]
fn the_edges_report_reads_back() {
    let bytes = sender_report(&sender(), Some(&block()), "switchboard@edge");
    assert_eq!(bytes.len() % 4, 0);
    let compound = parse(&bytes).unwrap();
    assert_eq!(compound.ssrc, 0xABCD);
    let seconds = (1_700_000_000u64 + NTP_UNIX_OFFSET) as u32;
    assert_eq!(compound.sender_report, Some((seconds << 16) | 0x8000), "the middle 32 bits of the NTP time");
    assert_eq!(compound.reports, [block()]);
    assert!(!compound.bye);
    let without = sender_report(&sender(), None, "");
    assert_eq!(parse(&without).unwrap().reports, []);
}

#[test]
fn a_receiver_report_and_bye_are_read() {
    let mut rr = vec![0x81, 201, 0, 7, 0, 0, 0x12, 0x34];
    let mut b = sender_report(&sender(), Some(&block()), "x");
    rr.extend_from_slice(&b[28..52]);
    rr.extend_from_slice(&[0x81, 203, 0, 1, 0, 0, 0x12, 0x34]);
    let compound = parse(&rr).unwrap();
    assert_eq!((compound.ssrc, compound.sender_report, compound.bye), (0x1234, None, true));
    assert_eq!(compound.reports, [block()]);
    b.truncate(20);
    assert_eq!(parse(&b), Err(RtcpError::Invalid(0)));
}

#[test]
fn bad_compounds_are_refused() {
    assert_eq!(parse(&[0x81, 202, 0, 0]), Err(RtcpError::NotAReport(202)));
    assert_eq!(parse(&[0x41, 201, 0, 1, 0, 0, 0, 0]), Err(RtcpError::Invalid(0)), "version 1");
    assert_eq!(parse(&[0x81, 201, 0, 1, 0, 0, 0, 0]), Err(RtcpError::Invalid(0)), "a block missing");
    assert_eq!(parse(&[0x80; 1501]), Err(RtcpError::TooLarge(1501)));
    assert_eq!(parse(&[0x80, 201, 0, 1, 0, 0, 0, 9, 0x80]), Err(RtcpError::Invalid(8)));
}

#[test]
fn loss_is_counted_over_the_whole_stream_and_the_interval() {
    let t0 = Instant::now();
    let mut stats = ReceiverStats::new(t0, 7, 65530);
    for seq in [65530u16, 65531, 65533, 65534, 0, 1, 2, 4, 5, 6] {
        stats.on_packet(t0, seq, 0, 8000);
    }
    assert_eq!((stats.received(), stats.lost()), (10, 3), "what the owner's metrics read, as the report says");
    let report = stats.report(t0);
    assert_eq!(report.highest_sequence, 0x2_0006, "one wrap of the sequence");
    assert_eq!(report.cumulative_lost, 3, "65532, 65535 and 3");
    assert_eq!(report.fraction_lost, (3 * 256 / 13) as u8);
    stats.on_packet(t0, 7, 0, 8000);
    let next = stats.report(t0);
    assert_eq!((next.fraction_lost, next.cumulative_lost), (0, 3));
}

#[test]
fn jitter_follows_the_variation_of_transit_time() {
    let t0 = Instant::now();
    let mut steady = ReceiverStats::new(t0, 1, 0);
    let mut shaky = ReceiverStats::new(t0, 1, 0);
    for n in 0..100u32 {
        let on_time = t0 + Duration::from_millis(u64::from(n) * 20);
        steady.on_packet(on_time, n as u16, n * 160, 8000);
        let late = on_time + Duration::from_millis(if n % 2 == 0 { 0 } else { 10 });
        shaky.on_packet(late, n as u16, n * 160, 8000);
    }
    assert_eq!(steady.report(t0).jitter, 0);
    let seconds = shaky.jitter_seconds(8000);
    let jitter = shaky.report(t0).jitter;
    assert!((70..=80).contains(&jitter), "about 10 ms (80 units) of jitter: {jitter}");
    assert!((seconds - f64::from(jitter) / 8000.0).abs() < 0.000_2, "the same in seconds: {seconds}");
    assert!(
        steady.jitter_seconds(8000).abs() < 1e-9,
        "no jitter, up to float rounding: {}",
        steady.jitter_seconds(8000)
    );
}

#[test]
fn the_delay_since_the_last_sr_is_reported() {
    let t0 = Instant::now();
    let mut stats = ReceiverStats::new(t0, 1, 0);
    stats.on_sender_report(t0, 0x1234_5678);
    let report = stats.report(t0 + Duration::from_millis(500));
    assert_eq!((report.last_sr, report.delay_since_last_sr), (0x1234_5678, 32768));
}

proptest! {
    #[test]
    fn any_bytes_parse_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(compound) = parse(&bytes) {
            prop_assert!(compound.reports.len() * 24 <= bytes.len());
        }
    }
}
