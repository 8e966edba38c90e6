//! Unit and property tests of the inbound call: each rule of RFC 3261 the machine keeps,
//! driven with real messages (the fixtures baresip and a carrier send).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::sdp::{Codec, Direction};
use crate::sip::parse::parse_datagram;
use crate::sip::{Limits, Message, Request, Response};

const BARESIP_INVITE: &[u8] = include_bytes!("../../tests/fixtures/baresip_invite.sip");
const CANCEL: &[u8] = include_bytes!("../../tests/fixtures/baresip_cancel.sip");
const CARRIER_INVITE: &[u8] = include_bytes!("../../tests/fixtures/carrier_invite.sip");

pub(super) fn phone() -> SocketAddr {
    "127.0.0.1:5080".parse().unwrap()
}

pub(super) fn config() -> CallConfig {
    CallConfig {
        local: "192.0.2.1:5070".parse().unwrap(),
        media: LocalMedia {
            address: "192.0.2.1".parse().unwrap(),
            port: 20000,
            session_id: 7,
            version: 1,
            codecs: vec![crate::sdp::Codec::Pcmu, crate::sdp::Codec::Pcma],
            telephone_event: 101,
            srtp: crate::sdp::LocalSrtp::default(),
        },
        local_tag: "sb7f3a".into(),
        timers: Timers::default(),
    }
}

pub(super) fn request(bytes: &[u8]) -> Request {
    match parse_datagram(bytes, &Limits::default()) {
        Ok(Message::Request(r)) => r,
        other => panic!("{other:?}"),
    }
}

pub(super) fn invite() -> Request {
    request(BARESIP_INVITE)
}

/// A request inside the call's dialogue, as baresip writes it.
pub(super) fn in_dialog(method: &str, cseq: u32, branch: &str, extra: &str, body: &str) -> Request {
    let text = format!(
        "{method} sip:switchboard@192.0.2.1:5070 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5080;branch={branch};rport\r\n\
         To: <sip:+4930123456@127.0.0.1:5070>;tag=sb7f3a\r\nFrom: <sip:caller@127.0.0.1:5080>;tag=8d6f4cba1a3c2e07\r\n\
         Call-ID: 5a6e3f1b0f2c4d1e\r\nCSeq: {cseq} {method}\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    request(text.as_bytes())
}

pub(super) fn ack() -> Request {
    in_dialog("ACK", 14871, "z9hG4bKack1", "", "")
}

/// Drains the effects: the responses sent (status, reason) and the events.
pub(super) fn drain(call: &mut InboundCall) -> (Vec<Message>, Vec<CallEvent>) {
    let (mut sent, mut events) = (Vec::new(), Vec::new());
    while let Some(effect) = call.poll() {
        match effect {
            Effect::Transmit(t) => sent.push(parse_datagram(&t.bytes, &Limits::default()).unwrap()),
            Effect::Event(e) => events.push(e),
        }
    }
    (sent, events)
}

pub(super) fn statuses(sent: &[Message]) -> Vec<u16> {
    sent.iter().filter_map(|m| if let Message::Response(r) = m { Some(r.status) } else { None }).collect()
}

pub(super) fn response(message: &Message) -> &Response {
    match message {
        Message::Response(r) => r,
        Message::Request(r) => panic!("a request: {r:?}"),
    }
}

pub(super) fn new_call(t0: Instant) -> (InboundCall, Vec<Message>, Vec<CallEvent>) {
    let mut call = InboundCall::new(t0, config(), &invite(), phone(), Transport::Udp, false).unwrap();
    let (sent, events) = drain(&mut call);
    (call, sent, events)
}

pub(super) fn answered(t0: Instant) -> InboundCall {
    let (mut call, _, _) = new_call(t0);
    call.admit(t0, Admission::Accept);
    call.handle_request(t0, phone(), &ack());
    drain(&mut call);
    assert_eq!(call.state(), State::Confirmed);
    call
}

#[test]
fn an_invite_gets_100_trying_and_asks_the_owner() {
    let (call, sent, events) = new_call(Instant::now());
    assert_eq!(statuses(&sent), [100]);
    assert_eq!(response(&sent[0]).to().unwrap().tag(), None);
    let [CallEvent::Incoming(incoming)] = &events[..] else { panic!("{events:?}") };
    assert_eq!(incoming.dialled.as_deref(), Some("+4930123456"));
    assert_eq!((incoming.caller.as_deref(), incoming.caller_asserted), (Some("caller"), false));
    let media = incoming.media.as_ref().unwrap();
    assert_eq!((media.codec, media.remote), (Codec::Pcmu, "127.0.0.1:10814".parse().unwrap()));
    assert_eq!(call.state(), State::Proceeding);
    assert_eq!(call.poll_timeout(), None);
}

#[test]
fn the_asserted_identity_is_believed_only_from_a_trusted_trunk() {
    let text = String::from_utf8(CARRIER_INVITE.to_vec()).unwrap().replace("<tel:+442079460018>", "<tel:+15550001>");
    let text = text.replacen(
        "P-Asserted-Identity: \"+44 20 7946 0018\" <sip:+442079460018@198.51.100.11;user=phone>\r\n",
        "",
        1,
    );
    let carrier = request(text.as_bytes());
    let source: SocketAddr = "198.51.100.10:5060".parse().unwrap();
    for (trusted, caller) in [(true, "+15550001"), (false, "+442079460018")] {
        let mut call = InboundCall::new(Instant::now(), config(), &carrier, source, Transport::Udp, trusted).unwrap();
        let (_, events) = drain(&mut call);
        let [CallEvent::Incoming(incoming)] = &events[..] else { panic!("{events:?}") };
        assert_eq!((incoming.caller.as_deref(), incoming.caller_asserted), (Some(caller), trusted));
        assert_eq!(incoming.media.as_ref().unwrap().codec, Codec::Pcma, "the carrier prefers PCMA");
        assert_eq!(incoming.display_name.as_deref(), Some("+44 20 7946 0018"));
        assert!(!incoming.caller_private, "Privacy: none");
    }
    let mut private = carrier.clone();
    private.headers.set("Privacy", "id;critical");
    let mut call = InboundCall::new(Instant::now(), config(), &private, source, Transport::Udp, true).unwrap();
    let (_, events) = drain(&mut call);
    assert!(matches!(&events[..], [CallEvent::Incoming(i)] if i.caller_private && i.caller.is_some()));
}

#[test]
fn accepted_the_200_is_resent_until_the_ack() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    call.admit(t0, Admission::Accept);
    let (sent, _) = drain(&mut call);
    let ok = response(&sent[0]);
    assert_eq!((ok.status, ok.to().unwrap().tag()), (200, Some("sb7f3a")));
    assert!(ok.headers.get("Contact").unwrap().contains("192.0.2.1:5070"));
    assert!(String::from_utf8_lossy(&ok.body).contains("m=audio 20000 RTP/AVP 0 101"));
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_millis(500)));
    call.handle_timeout(t0 + Duration::from_millis(500));
    assert_eq!(statuses(&drain(&mut call).0), [200]);
    assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_millis(1500)));
    call.handle_request(t0 + Duration::from_millis(600), phone(), &ack());
    let (sent, events) = drain(&mut call);
    assert!(sent.is_empty());
    assert!(matches!(events[..], [CallEvent::Established(_)]));
    assert_eq!((call.state(), call.poll_timeout()), (State::Confirmed, None));
}

#[test]
fn no_ack_in_64_t1_ends_the_call_with_a_bye() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    call.admit(t0, Admission::Accept);
    drain(&mut call);
    while let Some(at) = call.poll_timeout().filter(|_| call.state() == State::Answered) {
        call.handle_timeout(at);
    }
    let (sent, events) = drain(&mut call);
    assert_eq!(events, [CallEvent::Ended(EndReason::NoAck)]);
    let Some(Message::Request(bye)) = sent.last() else { panic!("{sent:?}") };
    assert_eq!(bye.method, crate::sip::Method::Bye);
    assert_eq!(call.state(), State::Ending);
}

#[test]
fn a_refusal_carries_its_reason_and_waits_for_the_ack() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    call.admit(t0, Admission::NotFound("No agent answers +4930123456".into()));
    let (sent, events) = drain(&mut call);
    let refused = response(&sent[0]);
    assert_eq!((refused.status, refused.reason.as_str()), (404, "No agent answers +4930123456"));
    assert_eq!(refused.to().unwrap().tag(), Some("sb7f3a"));
    assert_eq!(events, [CallEvent::Ended(EndReason::Refused(404))]);
    call.handle_timeout(t0 + Duration::from_millis(500));
    assert_eq!(statuses(&drain(&mut call).0), [404], "resent until the ACK");
    // The ACK of a non-2xx answer is in the INVITE's transaction (its branch).
    let ack = in_dialog("ACK", 14871, "z9hG4bKab9f0f6c6e1d3c57", "", "");
    call.handle_request(t0 + Duration::from_secs(1), phone(), &ack);
    assert_eq!(call.state(), State::Lingering);
    call.handle_timeout(t0 + Duration::from_secs(6));
    assert!(call.is_terminated());
}

#[test]
fn admissions_map_to_their_statuses() {
    for (admission, status) in [
        (Admission::Forbidden("not a trunk".into()), 403),
        (Admission::NotAcceptable("the agent is text-only".into()), 488),
        (Admission::Busy("no capacity".into()), 486),
        (Admission::Refuse(999, "x".into()), 699),
    ] {
        let t0 = Instant::now();
        let (mut call, _, _) = new_call(t0);
        call.admit(t0, admission);
        assert_eq!(statuses(&drain(&mut call).0), [status]);
    }
}

#[test]
fn an_offer_without_a_common_codec_is_488_before_asking() {
    let mut call_invite = invite();
    let body = String::from_utf8(call_invite.body.clone()).unwrap().replace("RTP/AVP 0 8 101", "RTP/AVP 18 101");
    call_invite.body = body.into_bytes();
    let mut call = InboundCall::new(Instant::now(), config(), &call_invite, phone(), Transport::Udp, false).unwrap();
    let (sent, events) = drain(&mut call);
    assert_eq!(statuses(&sent), [100, 488]);
    assert!(
        response(&sent[1]).reason.starts_with("no common codec: offered payload type 18, telephone-event/8000"),
        "{:?}",
        sent[1]
    );
    assert_eq!(events, [CallEvent::Ended(EndReason::Refused(488))]);
}

#[test]
fn a_delayed_offer_is_answered_with_an_offer_and_settled_by_the_ack() {
    let t0 = Instant::now();
    let mut no_offer = invite();
    no_offer.body.clear();
    no_offer.headers.remove("Content-Type");
    let mut call = InboundCall::new(t0, config(), &no_offer, phone(), Transport::Udp, false).unwrap();
    let (_, events) = drain(&mut call);
    assert!(matches!(&events[..], [CallEvent::Incoming(i)] if i.media.is_none()));
    call.admit(t0, Admission::Accept);
    let (sent, _) = drain(&mut call);
    let offer = String::from_utf8(response(&sent[0]).body.clone()).unwrap();
    assert!(offer.contains("m=audio 20000 RTP/AVP 0 8 101"), "{offer}");
    let sdp = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 10900 RTP/AVP 8 101\r\n\
               a=rtpmap:101 telephone-event/8000\r\n";
    call.handle_request(t0, phone(), &in_dialog("ACK", 14871, "z9hG4bKack1", "Content-Type: application/sdp\r\n", sdp));
    let (_, events) = drain(&mut call);
    let [CallEvent::Established(media)] = &events[..] else { panic!("{events:?}") };
    assert_eq!((media.codec, media.remote.port(), media.telephone_event), (Codec::Pcma, 10900, Some(101)));

    let mut call = InboundCall::new(t0, config(), &no_offer, phone(), Transport::Udp, false).unwrap();
    call.admit(t0, Admission::Accept);
    drain(&mut call);
    call.handle_request(t0, phone(), &ack());
    let (sent, events) = drain(&mut call);
    assert!(matches!(&events[..], [CallEvent::Ended(EndReason::MediaRefused(_))]), "{events:?}");
    assert!(matches!(&sent[..], [Message::Request(r)] if r.method == crate::sip::Method::Bye));
}

#[test]
fn a_required_extension_gets_420_and_no_hops_left_483() {
    let mut with_100rel = invite();
    with_100rel.headers.push("Require", "100rel, timer");
    let mut call = InboundCall::new(Instant::now(), config(), &with_100rel, phone(), Transport::Udp, false).unwrap();
    let (sent, events) = drain(&mut call);
    assert_eq!(statuses(&sent), [100, 420]);
    assert_eq!(response(&sent[1]).headers.get("Unsupported"), Some("100rel, timer"));
    assert_eq!(events, [CallEvent::Ended(EndReason::Refused(420))]);
    let mut looping = invite();
    looping.headers.set("Max-Forwards", "0");
    let mut call = InboundCall::new(Instant::now(), config(), &looping, phone(), Transport::Udp, false).unwrap();
    assert_eq!(statuses(&drain(&mut call).0), [100, 483]);
}

#[test]
fn cancel_gets_200_and_the_invite_487() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    let cancel = request(include_bytes!("../../tests/fixtures/baresip_cancel.sip"));
    call.handle_request(t0, phone(), &cancel);
    let (sent, events) = drain(&mut call);
    assert_eq!(statuses(&sent), [200, 487]);
    assert_eq!(response(&sent[0]).cseq().unwrap().method, crate::sip::Method::Cancel);
    assert_eq!(response(&sent[1]).cseq().unwrap().method, crate::sip::Method::Invite);
    assert_eq!(events, [CallEvent::Ended(EndReason::Cancelled)]);
    call.handle_request(t0, phone(), &cancel);
    assert_eq!(statuses(&drain(&mut call).0), [200], "a retransmitted CANCEL gets its 200 again");
}

#[test]
fn the_callers_bye_gets_200_even_when_retransmitted() {
    let t0 = Instant::now();
    let mut call = answered(t0);
    let bye = request(include_bytes!("../../tests/fixtures/baresip_bye.sip"));
    call.handle_request(t0, phone(), &bye);
    let (sent, events) = drain(&mut call);
    assert_eq!((statuses(&sent), events), (vec![200], vec![CallEvent::Ended(EndReason::RemoteHangUp)]));
    call.handle_request(t0 + Duration::from_secs(1), phone(), &bye);
    let (sent, events) = drain(&mut call);
    assert_eq!((statuses(&sent), events.len()), (vec![200], 0));
    call.handle_timeout(t0 + Duration::from_secs(33));
    assert!(call.is_terminated());
}

#[test]
fn the_edge_hangs_up_with_a_bye_that_swaps_from_and_to() {
    let t0 = Instant::now();
    let mut call = answered(t0);
    call.hang_up(t0);
    let (sent, _) = drain(&mut call);
    let Message::Request(bye) = &sent[0] else { panic!() };
    assert_eq!(bye.uri, "sip:caller-0x55d5e9a0b2f0@127.0.0.1:5080;transport=udp", "to the caller's Contact");
    assert_eq!(bye.from().unwrap().tag(), Some("sb7f3a"));
    assert_eq!(bye.to().unwrap().tag(), Some("8d6f4cba1a3c2e07"));
    call.handle_timeout(t0 + Duration::from_millis(500));
    assert_eq!(drain(&mut call).0.len(), 1, "resent");
    let mut ok = bye.response(200, None);
    ok.headers.set("To", bye.headers.get("To").unwrap());
    call.handle_response(t0, &ok);
    assert_eq!(drain(&mut call).1, [CallEvent::Ended(EndReason::LocalHangUp)]);
    assert!(call.is_terminated());
}

#[test]
fn hanging_up_before_the_ack_waits_for_it() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    call.admit(t0, Admission::Accept);
    call.hang_up(t0);
    drain(&mut call);
    call.handle_request(t0, phone(), &ack());
    let (sent, _) = drain(&mut call);
    assert!(matches!(&sent[..], [Message::Request(r)] if r.method == crate::sip::Method::Bye));
    assert_eq!(call.state(), State::Ending);
}

#[test]
fn a_hold_re_invite_is_answered_and_moves_the_media() {
    let t0 = Instant::now();
    let mut call = answered(t0);
    let sdp = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
               m=audio 10900 RTP/AVP 8\r\na=sendonly\r\n";
    let reinvite = in_dialog("INVITE", 14873, "z9hG4bKre1", "Content-Type: application/sdp\r\n", sdp);
    call.handle_request(t0, phone(), &reinvite);
    let (sent, events) = drain(&mut call);
    assert_eq!(statuses(&sent), [200]);
    assert!(String::from_utf8_lossy(&response(&sent[0]).body).contains("a=recvonly"));
    let [CallEvent::MediaChanged(media)] = &events[..] else { panic!("{events:?}") };
    assert_eq!((media.codec, media.remote.port(), media.direction), (Codec::Pcma, 10900, Direction::RecvOnly));
    assert!(call.poll_timeout().is_some(), "its 200 is resent until its ACK");
    call.handle_request(t0, phone(), &reinvite);
    let (sent, events) = drain(&mut call);
    assert_eq!((statuses(&sent), events.len()), (vec![200], 0), "a retransmitted re-INVITE gets its 200 again");
    call.handle_request(t0, phone(), &in_dialog("ACK", 14873, "z9hG4bKack2", "", ""));
    assert_eq!(call.poll_timeout(), None);
}

#[test]
fn other_requests_in_the_dialogue_get_sensible_answers() {
    let t0 = Instant::now();
    let mut call = answered(t0);
    let info = in_dialog(
        "INFO",
        14880,
        "z9hG4bKi1",
        "Content-Type: application/dtmf-relay\r\n",
        "Signal=#\r\nDuration=160\r\n",
    );
    call.handle_request(t0, phone(), &info);
    let (sent, events) = drain(&mut call);
    assert_eq!(
        (statuses(&sent), events),
        (vec![200], vec![CallEvent::Digit(crate::media::telephone::Event::Digit('#'))])
    );
    for (method, cseq, status) in
        [("OPTIONS", 14881, 200), ("REFER", 14882, 405), ("FOO", 14883, 501), ("UPDATE", 14884, 200)]
    {
        call.handle_request(t0, phone(), &in_dialog(method, cseq, &format!("z9hG4bK{method}"), "", ""));
        let (sent, _) = drain(&mut call);
        assert_eq!(statuses(&sent), [status], "{method}");
        if status >= 405 {
            assert_eq!(response(&sent[0]).headers.get("Allow"), Some(ALLOW));
        }
    }
    call.handle_request(t0, phone(), &in_dialog("INFO", 14800, "z9hG4bKold", "", ""));
    assert_eq!(statuses(&drain(&mut call).0), [500], "a CSeq out of order");
    let mut stranger = in_dialog("BYE", 14890, "z9hG4bKs", "", "");
    stranger.headers.set("To", "<sip:+4930123456@127.0.0.1:5070>;tag=other");
    call.handle_request(t0, phone(), &stranger);
    assert_eq!(statuses(&drain(&mut call).0), [481]);
    assert_eq!(call.state(), State::Confirmed);
}

#[test]
fn a_retransmitted_invite_gets_the_last_answer_again() {
    let t0 = Instant::now();
    let (mut call, _, _) = new_call(t0);
    call.handle_request(t0, phone(), &invite());
    assert_eq!(statuses(&drain(&mut call).0), [100]);
    call.admit(t0, Admission::Accept);
    drain(&mut call);
    call.handle_request(t0, phone(), &invite());
    assert_eq!(statuses(&drain(&mut call).0), [200]);
}

#[test]
fn nothing_is_resent_over_tcp() {
    let t0 = Instant::now();
    let mut call = InboundCall::new(t0, config(), &invite(), phone(), Transport::Tcp, false).unwrap();
    call.admit(t0, Admission::Forbidden("no".into()));
    drain(&mut call);
    call.handle_timeout(t0 + Duration::from_secs(1));
    assert!(drain(&mut call).0.is_empty());
    call.handle_request(t0, phone(), &in_dialog("ACK", 14871, "z9hG4bKab9f0f6c6e1d3c57", "", ""));
    assert!(call.is_terminated(), "no lingering on a reliable transport");
}

#[test]
fn only_an_invite_starts_a_call() {
    let bye = request(include_bytes!("../../tests/fixtures/baresip_bye.sip"));
    let err = InboundCall::new(Instant::now(), config(), &bye, phone(), Transport::Udp, false).unwrap_err();
    assert_eq!(err.to_string(), "a call starts with an INVITE, not BYE");
}

#[derive(Clone, Debug)]
enum Step {
    Admit(bool),
    HangUp,
    Ack,
    Bye,
    Cancel,
    Reinvite,
    InviteAgain,
    Wait(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<bool>().prop_map(Step::Admit),
        Just(Step::HangUp),
        Just(Step::Ack),
        Just(Step::Bye),
        Just(Step::Cancel),
        Just(Step::Reinvite),
        Just(Step::InviteAgain),
        (0u64..40_000).prop_map(Step::Wait),
    ]
}

proptest! {
    /// Any order of events: no panic, the call ends exactly once, and once the edge hangs
    /// up and time passes, it is over.
    #[test]
    fn random_event_sequences_end_once(steps in proptest::collection::vec(step(), 0..25)) {
        let mut now = Instant::now();
        let (mut call, _, _) = new_call(now);
        let mut ended = 0;
        let mut cseq = 14871;
        for s in steps {
            match s {
                Step::Admit(true) => call.admit(now, Admission::Accept),
                Step::Admit(false) => call.admit(now, Admission::Busy("busy".into())),
                Step::HangUp => call.hang_up(now),
                Step::Ack => call.handle_request(now, phone(), &ack()),
                Step::Bye | Step::Reinvite => {
                    cseq += 1;
                    let method = if matches!(s, Step::Bye) { "BYE" } else { "INVITE" };
                    let request = in_dialog(method, cseq, &format!("z9hG4bK{cseq}"), "", "");
                    call.handle_request(now, phone(), &request);
                }
                Step::Cancel => call.handle_request(now, phone(), &request(CANCEL)),
                Step::InviteAgain => call.handle_request(now, phone(), &invite()),
                Step::Wait(ms) => {
                    now += Duration::from_millis(ms);
                    let mut rounds = 0;
                    while let Some(at) = call.poll_timeout().filter(|at| *at <= now) {
                        call.handle_timeout(at);
                        rounds += 1;
                        prop_assert!(rounds < 1000, "a timer that never moves on: {:?}", call.state());
                    }
                }
            }
            ended += drain(&mut call).1.iter().filter(|e| matches!(e, CallEvent::Ended(_))).count();
        }
        call.hang_up(now);
        call.handle_request(now, phone(), &ack());
        for _ in 0..200 {
            match call.poll_timeout() {
                Some(at) => call.handle_timeout(at),
                None => break,
            }
        }
        ended += drain(&mut call).1.iter().filter(|e| matches!(e, CallEvent::Ended(_))).count();
        prop_assert_eq!(ended, 1);
        prop_assert!(call.is_terminated(), "{:?}", call.state());
    }
}
