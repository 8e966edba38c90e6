//! Unit tests of the edge's metrics: every label comes from a fixed set and says what
//! happened; a call under way is counted until it ends, whichever way; RTP readings add only
//! what is new.

use std::time::{Duration, Instant};

use super::*;
use crate::gateway::Fallback;

fn metrics() -> Metrics {
    Metrics::new().expect("the registry")
}

#[test]
fn every_gateway_refusal_has_its_reason_and_every_reason_its_status() {
    let fallback = |person| Fallback {
        agent: "bank/triage".into(),
        cause: "switch".into(),
        message: "We are closed".into(),
        person,
        retry_after_seconds: None,
    };
    let cases = [
        (Refused::UnknownAgent { agent: "x".into(), message: "m".into() }, "not_found"),
        (Refused::NotExposed { agent: "x".into(), message: "m".into() }, "not_exposed"),
        (Refused::TextOnly { agent: "x".into() }, "not_acceptable"),
        (Refused::Unauthorized("m".into()), "edge_unauthorized"),
        (Refused::Busy("m".into()), "busy"),
        (Refused::CapacityFull { message: "m".into(), retry_after_seconds: Some(30) }, "capacity_full"),
        (Refused::Unreachable { url: "ws://g".into(), reason: "m".into() }, "gateway_unreachable"),
        (Refused::Outage(Box::new(fallback(None))), "outage"),
        (Refused::Other { code: 4000, message: "m".into() }, "other"),
    ];
    let statuses: std::collections::HashMap<&str, u16> = REFUSALS.into_iter().collect();
    for (refused, reason) in cases {
        assert_eq!(gateway_reason(&refused), reason, "{refused:?}");
        // The reason's documented status is the one the phone is answered with.
        let admission = refused.admission();
        let answered = admission.refusal().map(|(status, _)| status);
        assert_eq!(statuses.get(reason).copied(), answered, "{reason}");
    }
    assert_eq!(
        [Refusal::Forbidden, Refusal::AtCapacity, Refusal::Malformed].map(endpoint_reason),
        ["forbidden", "at_capacity", "bad_request"]
    );
    assert_eq!(
        [488, 400, 420, 483, 500].map(status_reason),
        ["not_acceptable", "bad_request", "bad_request", "bad_request", "other"]
    );
    let named: Vec<&str> = REFUSALS.iter().map(|(reason, _)| *reason).collect();
    for reason in ["not_found", "shutdown", "forbidden", "at_capacity", "bad_request"] {
        assert!(named.contains(&reason), "{reason} is listed");
    }
}

#[test]
fn a_refusal_counts_the_call_and_its_reason_and_an_outage_message_is_a_fallback() {
    let m = metrics();
    m.refused_by_gateway(&Refused::UnknownAgent { agent: "nobody".into(), message: "m".into() });
    m.refused_by_endpoint(Refusal::Forbidden);
    m.refused_with_status(488);
    let outage = Fallback {
        agent: "bank/triage".into(),
        cause: "breaker".into(),
        message: "Call back later".into(),
        person: None,
        retry_after_seconds: Some(60),
    };
    m.refused_by_gateway(&Refused::Outage(Box::new(outage)));
    assert_eq!(m.calls.with_label_values(&["inbound", "refused"]).get(), 4);
    for reason in ["not_found", "forbidden", "not_acceptable", "outage"] {
        assert_eq!(m.refused.with_label_values(&[reason]).get(), 1, "{reason}");
    }
    assert_eq!(m.fallbacks.with_label_values(&["message"]).get(), 1);
    let text = m.render();
    assert!(text.contains(r#"switchboard_sip_calls_refused_total{reason="not_found"} 1"#), "{text}");
    assert!(text.contains(r#"switchboard_sip_calls_total{direction="inbound",outcome="refused"} 4"#), "{text}");
}

#[test]
fn an_answered_call_is_active_until_it_ends_and_ends_once() {
    let m = metrics();
    let active = || m.active.with_label_values(&["inbound"]).get();
    let live = m.answered(Direction::Inbound);
    let second = m.answered(Direction::Inbound);
    assert_eq!((active(), m.calls.with_label_values(&["inbound", "answered"]).get()), (2, 2));
    live.ended(&End::Caller(EndReason::RemoteHangUp));
    assert_eq!(active(), 1);
    // A task that ends without saying how (a panic, an early return) leaves no call active.
    drop(second);
    assert_eq!(active(), 0);
    let ended = |outcome| m.ended.with_label_values(&["inbound", outcome]).get();
    assert_eq!((ended("phone_hung_up"), ended("failed")), (1, 1));
    let outbound = m.answered(Direction::Outbound);
    outbound.ended(&End::MediaTimeout);
    assert_eq!(m.ended.with_label_values(&["outbound", "rtp_timeout"]).get(), 1);
    assert_eq!(m.active.with_label_values(&["outbound"]).get(), 0);
}

#[test]
fn each_end_has_its_outcome() {
    let cases = [
        (End::Caller(EndReason::RemoteHangUp), "phone_hung_up"),
        (End::Caller(EndReason::NoAck), "no_ack"),
        (End::Caller(EndReason::LocalHangUp), "failed"),
        (End::Session("1000 ".into()), "agent_hung_up"),
        (End::MediaTimeout, "rtp_timeout"),
        (End::Shutdown, "shutdown"),
    ];
    for (end, outcome) in cases {
        assert_eq!(end_outcome(&end), outcome, "{end:?}");
    }
}

#[test]
fn outbound_outcomes_transfers_and_drops_have_fixed_labels() {
    let m = metrics();
    m.outbound(CallState::Busy);
    m.outbound(CallState::NoAnswer);
    m.outbound(CallState::Failed);
    m.outbound(CallState::Completed);
    let outbound = |outcome| m.calls.with_label_values(&["outbound", outcome]).get();
    assert_eq!((outbound("busy"), outbound("no_answer"), outbound("failed")), (1, 1, 2));
    // Answered, but over before a session opened: never counted `answered` (no session).
    m.over_in_detection(OverInDetection::MachineHungUp);
    m.over_in_detection(OverInDetection::CalleeLeft);
    m.over_in_detection(OverInDetection::CalleeLeft);
    assert_eq!((outbound("machine_hung_up"), outbound("left_in_detection"), outbound("answered")), (1, 2, 0));
    assert_eq!(m.active.with_label_values(&["outbound"]).get(), 0, "no call under way");
    for outcome in TransferOutcome::ALL {
        m.transfer(outcome);
    }
    assert_eq!(m.transfers.with_label_values(&["no_answer"]).get(), 1);
    m.dropped(&Dropped::RateLimited);
    m.dropped(&Dropped::RateLimited);
    m.dropped(&Dropped::Stray);
    m.dropped(&Dropped::KeepAlive);
    assert_eq!(m.dropped.with_label_values(&["rate_limited"]).get(), 2);
    assert!(!m.render().contains("keep"), "keep-alives are not counted");
}

#[test]
fn rtp_readings_add_only_what_is_new_and_a_new_stream_starts_again() {
    let m = metrics();
    let t0 = Instant::now();
    let mut stats = ReceiverStats::new(t0, 7, 100);
    let mut readings = RtpReadings::default();
    readings.read(&m, None);
    assert_eq!(m.jitter.get_sample_count(), 0, "nothing to read before the first packet");
    // 100..=109 with 103 and 104 missing: 8 received, 2 lost.
    for (n, seq) in [100u16, 101, 102, 105, 106, 107, 108, 109].into_iter().enumerate() {
        stats.on_packet(t0 + Duration::from_millis(20 * n as u64), seq, u32::from(seq) * 160, 8000);
    }
    readings.read(&m, Some(&stats));
    assert_eq!((m.rtp_received.get(), m.rtp_lost.get()), (8, 2));
    // The late 103 lowers the stream's loss; the counter keeps what it counted.
    stats.on_packet(t0 + Duration::from_millis(200), 103, 103 * 160, 8000);
    stats.on_packet(t0 + Duration::from_millis(220), 110, 110 * 160, 8000);
    readings.read(&m, Some(&stats));
    assert_eq!((m.rtp_received.get(), m.rtp_lost.get()), (10, 2));
    readings.read(&m, Some(&stats));
    assert_eq!((m.rtp_received.get(), m.rtp_lost.get()), (10, 2), "a second reading adds nothing");
    // The phone restarts its stream: a new SSRC's statistics count from zero.
    let mut restarted = ReceiverStats::new(t0, 8, 5000);
    for seq in [5000u16, 5002] {
        restarted.on_packet(t0, seq, 0, 8000);
    }
    readings.read(&m, Some(&restarted));
    assert_eq!((m.rtp_received.get(), m.rtp_lost.get()), (12, 3));
    assert_eq!(m.jitter.get_sample_count(), 4, "one jitter observation a reading");
}

#[test]
fn announcements_are_counted_by_purpose_and_an_outage_end_by_its_outcome() {
    let m = metrics();
    m.announcement(crate::announce::Purpose::Hold);
    m.announcement(crate::announce::Purpose::Outage);
    m.announced_outage();
    m.answered(Direction::Inbound).ended(&End::Outage(None));
    let text = m.render();
    for series in [
        r#"switchboard_sip_announcements_total{purpose="hold"} 1"#,
        r#"switchboard_sip_announcements_total{purpose="outage"} 1"#,
        r#"switchboard_sip_calls_total{direction="inbound",outcome="announced"} 1"#,
        r#"switchboard_sip_calls_ended_total{direction="inbound",outcome="outage"} 1"#,
    ] {
        assert!(text.contains(series), "{series}: {text}");
    }
}
