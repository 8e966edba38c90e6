//! Tests of an inbound call held unanswered while its session waits for room (`182
//! Queued`, kept alive every `Timers::provisional`) and of refusals with `Retry-After`.

use std::time::{Duration, Instant};

use super::tests::{ack, drain, invite, new_call, phone, request, response, statuses};
use super::*;

const HOLD: &str = "All our lines are busy at the moment. You are number 2 in line; the wait is about 40 seconds.";

#[test]
fn a_queued_call_gets_182_with_the_hold_message_again_every_half_minute_until_answered() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    assert_eq!(call.poll_timeout(), None, "nothing to resend before it is queued");
    call.queued(t0, HOLD);
    let (sent, events) = drain(&mut call);
    assert!(events.is_empty(), "{events:?}");
    let queued = response(&sent[0]);
    assert_eq!((queued.status, queued.reason.as_str()), (182, HOLD));
    assert_eq!(queued.to().unwrap().tag(), Some("sb7f3a"), "the dialogue's tag, as the final answer will have");
    assert!(queued.headers.get("Contact").is_some_and(|c| c.contains("192.0.2.1:5070")));
    assert_eq!(call.state(), State::Proceeding);
    let refresh = t0 + Timers::default().provisional;
    assert_eq!(call.poll_timeout(), Some(refresh));
    call.handle_timeout(refresh - Duration::from_millis(1));
    assert!(drain(&mut call).0.is_empty(), "not yet");
    call.handle_timeout(refresh);
    assert_eq!(statuses(&drain(&mut call).0), [182], "again, so no proxy or NAT gives the call up");
    assert_eq!(call.poll_timeout(), Some(refresh + Timers::default().provisional));
    // A retransmitted INVITE gets the latest provisional answer; a new place a new phrase.
    call.handle_request(refresh, phone(), &invite());
    assert_eq!(statuses(&drain(&mut call).0), [182]);
    call.queued(refresh, "You are next.");
    let (sent, _) = drain(&mut call);
    assert_eq!(response(&sent[0]).reason, "You are next.");
    // Admitted: 200, and no more 182.
    call.admit(refresh, Admission::Accept);
    assert_eq!(statuses(&drain(&mut call).0), [200]);
    call.handle_request(refresh, phone(), &ack());
    drain(&mut call);
    assert_eq!(call.state(), State::Confirmed);
    assert_eq!(call.poll_timeout(), None, "a confirmed call resends nothing");
    call.queued(refresh, HOLD);
    assert!(drain(&mut call).0.is_empty(), "an answered call is not queued");
}

#[test]
fn a_hold_message_becomes_a_safe_reason_phrase() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    call.queued(t0, "line one\r\nInjected: header");
    let (sent, _) = drain(&mut call);
    assert_eq!(response(&sent[0]).reason, "line one  Injected: header");
    call.queued(t0, "  ");
    assert_eq!(response(&drain(&mut call).0[0]).reason, "Queued", "an empty message: the usual phrase");
}

#[test]
fn a_caller_who_cancels_in_the_queue_gets_487_and_no_more_182() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    call.queued(t0, HOLD);
    drain(&mut call);
    call.handle_request(t0, phone(), &request(include_bytes!("../../tests/fixtures/baresip_cancel.sip")));
    let (sent, events) = drain(&mut call);
    assert_eq!(statuses(&sent), [200, 487]);
    assert_eq!(events, [CallEvent::Ended(EndReason::Cancelled)]);
    let later = t0 + Timers::default().provisional;
    call.handle_timeout(later);
    let resent = statuses(&drain(&mut call).0);
    assert!(!resent.contains(&182), "the 487 is resent until its ACK, never a 182: {resent:?}");
}

#[test]
fn an_unavailable_refusal_is_503_with_retry_after_when_there_is_a_hint() {
    for (retry_after, header) in [(Some(40), Some("40")), (None, None)] {
        let t0 = Instant::now();
        let (mut call, _, _) = new_call(t0);
        call.queued(t0, HOLD);
        drain(&mut call);
        call.admit(t0, Admission::Unavailable { reason: "The model quota is full".into(), retry_after });
        let (sent, events) = drain(&mut call);
        let refused = response(&sent[0]);
        assert_eq!((refused.status, refused.reason.as_str()), (503, "The model quota is full"));
        assert_eq!(refused.headers.get("Retry-After"), header);
        assert_eq!(events, [CallEvent::Ended(EndReason::Refused(503))]);
    }
    assert_eq!(Admission::Busy("x".into()).retry_after(), None);
}

#[test]
fn early_media_is_183_with_the_sdp_answer_the_200_repeats() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    assert!(call.early_media(t0, HOLD), "the INVITE had an offer: early media");
    let (sent, events) = drain(&mut call);
    assert!(events.is_empty(), "{events:?}");
    let progress = response(&sent[0]);
    assert_eq!((progress.status, progress.reason.as_str()), (183, HOLD));
    assert_eq!(progress.headers.get("Content-Type"), Some("application/sdp"));
    let early_sdp = progress.body.clone();
    assert!(String::from_utf8_lossy(&early_sdp).contains("m=audio 20000 RTP/AVP"), "the answer's port");
    let refresh = t0 + Timers::default().provisional;
    call.handle_timeout(refresh);
    assert_eq!(statuses(&drain(&mut call).0), [183], "kept alive as a 182 is");
    call.admit(refresh, Admission::Accept);
    let (sent, _) = drain(&mut call);
    let ok = response(&sent[0]);
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body, early_sdp, "the 200 carries the answer the early media used");
}

#[test]
fn a_call_without_an_offer_gets_182_instead_of_early_media() {
    let t0 = Instant::now();
    let mut no_offer = invite();
    no_offer.body.clear();
    no_offer.headers.remove("Content-Type");
    let mut call = InboundCall::new(t0, super::tests::config(), &no_offer, phone(), Transport::Udp, false).unwrap();
    drain(&mut call);
    assert!(!call.early_media(t0, HOLD), "no offer: no early media");
    let (sent, _) = drain(&mut call);
    let queued = response(&sent[0]);
    assert_eq!((queued.status, queued.body.is_empty()), (182, true));
}
