//! Tests of an inbound call's transfer (REFER, RFC 3515): the REFER the edge sends, its
//! answers, the NOTIFYs that report the target's answer, bad NOTIFYs, and the timeout.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::refer::{TransferEnd, TransferProgress};
use super::tests::{answered, drain, in_dialog, phone, statuses};
use super::*;
use crate::sip::{Message, Request, Response};

const TARGET: &str = "sip:advisor@127.0.0.1:5090";

/// The REFER the call sent (the only message of `sent`).
fn refer_of(sent: &[Message]) -> Request {
    match sent {
        [Message::Request(r)] if r.method == crate::sip::Method::Refer => r.clone(),
        other => panic!("one REFER: {other:?}"),
    }
}

/// The answer `status` to `refer`, as the phone sends it.
fn answer(refer: &Request, status: u16, reason: &str) -> Response {
    refer.response(status, Some("8d6f4cba1a3c2e07")).with_reason(reason)
}

fn notify(cseq: u32, state: &str, frag: &str) -> Request {
    in_dialog(
        "NOTIFY",
        cseq,
        &format!("z9hG4bKn{cseq}"),
        &format!("Event: refer\r\nSubscription-State: {state}\r\nContent-Type: message/sipfrag;version=2.0\r\n"),
        frag,
    )
}

fn transfers(events: Vec<CallEvent>) -> Vec<TransferProgress> {
    events.into_iter().filter_map(|e| if let CallEvent::Transfer(p) = e { Some(p) } else { None }).collect()
}

#[test]
fn a_transfer_sends_refer_and_a_200_sipfrag_ends_it_transferred() {
    let t0 = Instant::now();
    let mut call = answered(t0);
    call.transfer(t0, TARGET, Duration::from_secs(30)).expect("starts");
    let (sent, _) = drain(&mut call);
    let refer = refer_of(&sent);
    assert_eq!(refer.uri, "sip:caller-0x55d5e9a0b2f0@127.0.0.1:5080;transport=udp", "to the phone's Contact");
    assert_eq!(refer.headers.get("Refer-To"), Some("<sip:advisor@127.0.0.1:5090>"));
    assert!(refer.headers.get("Referred-By").is_some_and(|r| r.contains("switchboard@")));
    assert_eq!(refer.from().unwrap().tag(), Some("sb7f3a"), "inside the dialogue");
    assert_eq!(call.transfer(t0, TARGET, Duration::from_secs(30)), Err(TransferError::Busy));
    call.handle_response(t0, &answer(&refer, 202, "Accepted"));
    assert_eq!(transfers(drain(&mut call).1), [TransferProgress::Accepted]);
    call.handle_request(t0, phone(), &notify(14880, "active;expires=60", "SIP/2.0 100 Trying\r\n"));
    call.handle_request(t0, phone(), &notify(14881, "active;expires=60", "SIP/2.0 180 Ringing\r\n"));
    let (sent, events) = drain(&mut call);
    assert_eq!(statuses(&sent), [200, 200]);
    assert_eq!(transfers(events), [TransferProgress::Trying(100), TransferProgress::Trying(180)]);
    call.handle_request(t0, phone(), &notify(14882, "terminated;reason=noresource", "SIP/2.0 200 OK\r\n"));
    let (sent, events) = drain(&mut call);
    assert_eq!(statuses(&sent), [200]);
    assert_eq!(transfers(events), [TransferProgress::Ended(TransferEnd::Target { status: 200, reason: "OK".into() })]);
    assert!(!call.transferring());
    assert_eq!(call.state(), State::Confirmed, "the owner hangs up after a transfer");
}

#[test]
fn a_busy_target_and_a_refused_refer_end_the_transfer_with_their_status() {
    let t0 = Instant::now();
    let mut call = answered(t0);
    call.transfer(t0, TARGET, Duration::from_secs(30)).unwrap();
    let refer = refer_of(&drain(&mut call).0);
    // The NOTIFY races ahead of the 202: it answers the REFER too.
    call.handle_request(t0, phone(), &notify(14880, "terminated", "SIP/2.0 486 Busy Here\r\n"));
    call.handle_response(t0, &answer(&refer, 202, "Accepted"));
    let (_, events) = drain(&mut call);
    let end = TransferEnd::Target { status: 486, reason: "Busy Here".into() };
    assert_eq!(transfers(events), [TransferProgress::Accepted, TransferProgress::Ended(end)]);

    call.transfer(t0, TARGET, Duration::from_secs(30)).unwrap();
    let refer = refer_of(&drain(&mut call).0);
    call.handle_response(t0, &answer(&refer, 405, "Method Not Allowed"));
    let end = TransferEnd::Refused { status: 405, reason: "Method Not Allowed".into() };
    assert_eq!(transfers(drain(&mut call).1), [TransferProgress::Ended(end)]);
    call.handle_response(t0, &answer(&refer, 405, "Method Not Allowed"));
    assert!(transfers(drain(&mut call).1).is_empty(), "a retransmitted answer is absorbed");
}

#[test]
fn bad_notifies_get_a_clear_answer_and_leave_the_transfer_waiting() {
    let t0 = Instant::now();
    let mut call = answered(t0);
    call.handle_request(t0, phone(), &notify(14879, "active", "SIP/2.0 200 OK\r\n"));
    assert_eq!(statuses(&drain(&mut call).0), [481], "no transfer: no subscription");
    call.transfer(t0, TARGET, Duration::from_secs(30)).unwrap();
    let refer = refer_of(&drain(&mut call).0);
    call.handle_response(t0, &answer(&refer, 202, "Accepted"));
    drain(&mut call);
    let cases = [
        ("Event: presence\r\nContent-Type: message/sipfrag\r\n", "SIP/2.0 200 OK", 489, "Bad Event"),
        ("Event: refer\r\nContent-Type: text/plain\r\n", "SIP/2.0 200 OK", 415, "message/sipfrag"),
        ("Event: refer\r\nContent-Type: message/sipfrag\r\n", "all good", 400, "not a SIP status line"),
        ("Event: refer\r\nContent-Type: message/sipfrag\r\n", "SIP/2.0 2000 OK", 400, "three digits"),
    ];
    for (i, (headers, body, status, words)) in cases.into_iter().enumerate() {
        let seq = 14890 + u32::try_from(i).unwrap();
        call.handle_request(t0, phone(), &in_dialog("NOTIFY", seq, &format!("z9hG4bKbad{i}"), headers, body));
        let (sent, events) = drain(&mut call);
        assert_eq!(statuses(&sent), [status], "{body}");
        let Message::Response(r) = &sent[0] else { panic!() };
        assert!(r.reason.contains(words), "{status} {}: {words}", r.reason);
        assert!(transfers(events).is_empty());
    }
    assert!(call.transferring(), "a bad NOTIFY does not end the transfer");
    call.handle_request(t0, phone(), &notify(14899, "terminated;reason=timeout", ""));
    let (_, events) = drain(&mut call);
    assert!(matches!(&transfers(events)[..], [TransferProgress::Ended(TransferEnd::Abandoned(_))]));
}

#[test]
fn an_unanswered_transfer_times_out_and_the_refer_is_resent_meanwhile() {
    let t0 = Instant::now();
    let mut call = answered(t0);
    assert_eq!(call.transfer(t0, "tel:+44", Duration::from_secs(30)), Err(TransferError::BadTarget("tel:+44".into())));
    call.transfer(t0, TARGET, Duration::from_secs(10)).unwrap();
    drain(&mut call);
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_millis(500)), "Timer E");
    call.handle_timeout(t0 + Duration::from_millis(500));
    let (sent, _) = drain(&mut call);
    assert_eq!(refer_of(&sent).headers.get("Refer-To"), Some("<sip:advisor@127.0.0.1:5090>"), "resent");
    let refer = refer_of(&sent);
    call.handle_response(t0, &answer(&refer, 202, "Accepted"));
    drain(&mut call);
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(10)));
    call.handle_timeout(t0 + Duration::from_secs(10));
    assert_eq!(transfers(drain(&mut call).1), [TransferProgress::Ended(TransferEnd::TimedOut)]);
    assert_eq!(call.poll_timeout(), None);
}

#[test]
fn only_an_established_call_is_transferred() {
    let t0 = Instant::now();
    let (mut call, _, _) = super::tests::new_call(t0);
    assert_eq!(call.transfer(t0, TARGET, Duration::from_secs(30)), Err(TransferError::NotEstablished));
}

proptest! {
    /// Any sequence of NOTIFYs, answers and timeouts: at most one `Ended`, and after it
    /// the transfer is over.
    #[test]
    fn a_transfer_ends_once(steps in proptest::collection::vec((0u8..6, 100u16..700), 0..12)) {
        let t0 = Instant::now();
        let mut call = answered(t0);
        call.transfer(t0, TARGET, Duration::from_secs(30)).unwrap();
        let refer = refer_of(&drain(&mut call).0);
        let mut ended = 0;
        let mut now = t0;
        for (i, (kind, status)) in steps.into_iter().enumerate() {
            let seq = 15000 + u32::try_from(i).unwrap();
            match kind {
                0 => call.handle_response(now, &answer(&refer, status, "X")),
                1 => call.handle_request(now, phone(), &notify(seq, "active", &format!("SIP/2.0 {status} X\r\n"))),
                2 => call.handle_request(now, phone(), &notify(seq, "terminated", &format!("SIP/2.0 {status} X\r\n"))),
                3 => call.handle_request(now, phone(), &notify(seq, "terminated", "garbage")),
                4 => { now += Duration::from_secs(7); call.handle_timeout(now); }
                _ => call.handle_request(now, phone(), &notify(seq, "terminated", "")),
            }
            let (_, events) = drain(&mut call);
            ended += transfers(events).iter().filter(|p| matches!(p, TransferProgress::Ended(_))).count();
            prop_assert!(ended <= 1);
            if ended == 1 {
                prop_assert!(!call.transferring());
            }
        }
        prop_assert_eq!(call.state(), State::Confirmed);
    }
}
