//! Unit tests of the outbound call, against a callee played by the test.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::call::Timers;
use crate::sdp::{Codec, LocalMedia};
use crate::sip::Limits;
use crate::sip::parse::parse_datagram;

fn trunk() -> SocketAddr {
    "198.51.100.10:5060".parse().unwrap()
}

fn media(address: &str, port: u16, codecs: Vec<Codec>) -> LocalMedia {
    LocalMedia {
        address: address.parse().unwrap(),
        port,
        session_id: 9,
        version: 1,
        codecs,
        telephone_event: 101,
        srtp: Default::default(),
    }
}

fn place(t0: Instant, transport: Transport) -> (OutboundCall, Request) {
    place_as(t0, transport, None)
}

fn place_as(t0: Instant, transport: Transport, auth: Option<ClientAuth>) -> (OutboundCall, Request) {
    let config = CallConfig {
        local: "192.0.2.1:5060".parse().unwrap(),
        media: media("192.0.2.1", 20000, vec![Codec::Pcmu, Codec::Pcma]),
        local_tag: "sbout".into(),
        timers: Timers::default(),
    };
    let callee = Callee {
        call_id: "out-1@192.0.2.1".into(),
        uri: "sip:+442079460018@198.51.100.10".into(),
        from: "sip:+4930123456@192.0.2.1".into(),
        peer: trunk(),
        transport,
        ring_timeout: Duration::from_secs(60),
        auth,
    };
    let mut call = OutboundCall::new(t0, config, callee);
    let (sent, _) = drain(&mut call);
    let [Message::Request(invite)] = &sent[..] else { panic!("{sent:?}") };
    (call, invite.clone())
}

fn drain(call: &mut OutboundCall) -> (Vec<Message>, Vec<CallEvent>) {
    let (mut sent, mut events) = (Vec::new(), Vec::new());
    while let Some(effect) = call.poll() {
        match effect {
            Effect::Transmit(t) => sent.push(parse_datagram(&t.bytes, &Limits::default()).unwrap()),
            Effect::Event(e) => events.push(e),
        }
    }
    (sent, events)
}

fn methods(sent: &[Message]) -> Vec<String> {
    sent.iter()
        .map(|m| match m {
            Message::Request(r) => r.method.to_string(),
            Message::Response(r) => r.status.to_string(),
        })
        .collect()
}

/// The callee's 200 OK with its SDP answer and Contact.
fn ok(invite: &Request) -> Response {
    let offer = SessionDescription::parse(&invite.body, &crate::sdp::Limits::default()).unwrap();
    let (_, answer) = media("198.51.100.20", 35012, vec![Codec::Pcma]).answer(&offer).unwrap();
    let mut ok = invite.response(200, Some("callee1")).with_body("application/sdp", answer.into_bytes());
    ok.headers.push("Contact", "<sip:+442079460018@198.51.100.20:5060>");
    ok.headers.push("Record-Route", "<sip:198.51.100.10;lr>");
    ok
}

#[test]
fn the_invite_carries_an_offer_and_is_resent_until_an_answer() {
    let t0 = Instant::now();
    let (mut call, invite) = place(t0, Transport::Udp);
    assert_eq!(invite.uri, "sip:+442079460018@198.51.100.10");
    assert_eq!(invite.from().unwrap().tag(), Some("sbout"));
    assert_eq!(invite.to().unwrap().tag(), None);
    assert!(String::from_utf8_lossy(&invite.body).contains("m=audio 20000 RTP/AVP 0 8 101"));
    call.handle_timeout(t0 + Duration::from_millis(500));
    assert_eq!(methods(&drain(&mut call).0), ["INVITE"]);
    call.handle_response(t0, &invite.response(100, None));
    assert_eq!(call.state(), OutboundState::Proceeding);
    call.handle_timeout(t0 + Duration::from_secs(2));
    assert!(drain(&mut call).0.is_empty(), "no resending once the callee answered");
}

#[test]
fn ringing_then_answered_gets_an_ack_and_the_media() {
    let t0 = Instant::now();
    let (mut call, invite) = place(t0, Transport::Udp);
    call.handle_response(t0, &invite.response(180, Some("callee1")));
    assert_eq!(drain(&mut call).1, [CallEvent::Progress(180)]);
    call.handle_response(t0, &ok(&invite));
    let (sent, events) = drain(&mut call);
    let [Message::Request(ack)] = &sent[..] else { panic!("{sent:?}") };
    assert_eq!(ack.method, Method::Ack);
    assert_eq!(ack.uri, "sip:+442079460018@198.51.100.20:5060", "to the callee's Contact");
    assert_eq!(ack.cseq().unwrap().seq, invite.cseq().unwrap().seq);
    assert_ne!(ack.branch().unwrap(), invite.branch().unwrap(), "the ACK of a 2xx is a new transaction");
    assert_eq!(ack.to().unwrap().tag(), Some("callee1"));
    assert_eq!(ack.headers.get("Route"), Some("<sip:198.51.100.10;lr>"));
    let [CallEvent::Established(media)] = &events[..] else { panic!("{events:?}") };
    assert_eq!((media.codec, media.remote), (Codec::Pcma, "198.51.100.20:35012".parse().unwrap()));
    call.handle_response(t0, &ok(&invite));
    assert_eq!(methods(&drain(&mut call).0), ["ACK"], "a retransmitted 200 gets the ACK again");
    assert_eq!(call.state(), OutboundState::Confirmed);
}

/// A trunk's challenge (401 or 407) to `invite`, as a `Trunks` would send it.
fn challenge(invite: &Request, status: u16) -> Response {
    let header = if status == 401 { "WWW-Authenticate" } else { "Proxy-Authenticate" };
    let mut response = invite.response(status, Some("trunk1"));
    response
        .headers
        .push(header, crate::trunk::digest::challenge("carrier", "n1", crate::trunk::digest::Algorithm::Sha256, false));
    response
        .headers
        .push(header, crate::trunk::digest::challenge("carrier", "n1", crate::trunk::digest::Algorithm::Md5, false));
    response
}

#[test]
fn a_challenged_invite_is_sent_again_once_with_the_credentials() {
    for (status, answer_header) in [(401, "Authorization"), (407, "Proxy-Authorization")] {
        let t0 = Instant::now();
        let auth = ClientAuth { username: "acme".into(), password: "pw".into(), cnonce: "c0ffee".into() };
        let (mut call, invite) = place_as(t0, Transport::Udp, Some(auth));
        call.handle_response(t0, &challenge(&invite, status));
        let (sent, events) = drain(&mut call);
        assert!(events.is_empty(), "a challenge is not the end: {events:?}");
        let [Message::Request(ack), Message::Request(again)] = &sent[..] else { panic!("{sent:?}") };
        assert_eq!((ack.method.clone(), ack.branch().unwrap()), (Method::Ack, invite.branch().unwrap()));
        assert_eq!(again.method, Method::Invite);
        assert_eq!(again.cseq().unwrap().seq, invite.cseq().unwrap().seq + 1, "the next CSeq");
        assert_ne!(again.branch().unwrap(), invite.branch().unwrap(), "a new transaction");
        assert_eq!(again.call_id().unwrap(), invite.call_id().unwrap(), "the same call");
        assert_eq!(again.from().unwrap().tag(), Some("sbout"));
        let answer = crate::trunk::digest::Answer::parse(again.headers.get(answer_header).expect("an answer")).unwrap();
        assert_eq!(answer.algorithm, crate::trunk::digest::Algorithm::Sha256, "the first challenge it can answer");
        assert!(answer.verifies("INVITE", "pw"), "the trunk can verify it");
        assert_eq!(answer.uri, invite.uri);
        assert_eq!(call.state(), OutboundState::Calling);
        // Resent over UDP until answered, like the first INVITE.
        call.handle_timeout(t0 + Duration::from_millis(500));
        assert_eq!(methods(&drain(&mut call).0), ["INVITE"]);
        // Answered: the ACK carries the new CSeq.
        call.handle_response(t0, &ok(again));
        let (sent, events) = drain(&mut call);
        let [Message::Request(ack)] = &sent[..] else { panic!("{sent:?}") };
        assert_eq!(ack.cseq().unwrap().seq, again.cseq().unwrap().seq);
        assert!(matches!(events[..], [CallEvent::Established(_)]), "{events:?}");
    }
}

#[test]
fn a_second_challenge_or_none_to_answer_with_ends_the_call_as_rejected() {
    let t0 = Instant::now();
    let auth = ClientAuth { username: "acme".into(), password: "wrong".into(), cnonce: "c".into() };
    let (mut call, invite) = place_as(t0, Transport::Udp, Some(auth));
    call.handle_response(t0, &challenge(&invite, 407));
    let (sent, _) = drain(&mut call);
    let Some(Message::Request(again)) = sent.last() else { panic!("{sent:?}") };
    call.handle_response(t0, &challenge(again, 407));
    let (sent, events) = drain(&mut call);
    assert_eq!(methods(&sent), ["ACK"], "no third INVITE");
    assert!(matches!(&events[..], [CallEvent::Ended(EndReason::Rejected { status: 407, .. })]), "{events:?}");
    // Without credentials the first challenge ends it.
    let (mut call, invite) = place(t0, Transport::Udp);
    call.handle_response(t0, &challenge(&invite, 401));
    let (_, events) = drain(&mut call);
    assert!(matches!(&events[..], [CallEvent::Ended(EndReason::Rejected { status: 401, .. })]), "{events:?}");
}

#[test]
fn a_refusal_is_acknowledged_in_its_transaction_and_ends_the_call() {
    let t0 = Instant::now();
    let (mut call, invite) = place(t0, Transport::Udp);
    call.handle_response(t0, &invite.response(486, Some("callee1")));
    let (sent, events) = drain(&mut call);
    let [Message::Request(ack)] = &sent[..] else { panic!("{sent:?}") };
    assert_eq!((ack.method.clone(), ack.branch().unwrap()), (Method::Ack, invite.branch().unwrap()));
    assert_eq!(events, [CallEvent::Ended(EndReason::Rejected { status: 486, reason: "Busy Here".into() })]);
    call.handle_timeout(t0 + Duration::from_secs(33));
    assert!(call.is_terminated());
}

#[test]
fn hanging_up_while_it_rings_sends_cancel_and_acks_the_487() {
    let t0 = Instant::now();
    let (mut call, invite) = place(t0, Transport::Udp);
    call.hang_up(t0);
    assert_eq!(drain(&mut call).1, [CallEvent::Ended(EndReason::Cancelled)]);
    assert!(drain(&mut call).0.is_empty(), "no CANCEL before the first answer");
    call.handle_response(t0, &invite.response(180, Some("callee1")));
    let (sent, _) = drain(&mut call);
    let [Message::Request(cancel)] = &sent[..] else { panic!("{sent:?}") };
    assert_eq!((cancel.method.clone(), cancel.branch().unwrap()), (Method::Cancel, invite.branch().unwrap()));
    assert_eq!(cancel.headers.get("CSeq").unwrap(), format!("{} CANCEL", invite.cseq().unwrap().seq));
    call.handle_response(t0, &invite.response(487, Some("callee1")));
    let (sent, events) = drain(&mut call);
    assert_eq!((methods(&sent), events.len()), (vec!["ACK".to_owned()], 0), "ended once");
}

#[test]
fn no_answer_in_the_ring_time_cancels() {
    let t0 = Instant::now();
    let (mut call, invite) = place(t0, Transport::Udp);
    call.handle_response(t0, &invite.response(180, Some("callee1")));
    drain(&mut call);
    call.handle_timeout(t0 + Duration::from_secs(60));
    let (sent, events) = drain(&mut call);
    assert_eq!((methods(&sent), events), (vec!["CANCEL".to_owned()], vec![CallEvent::Ended(EndReason::NoAnswer)]));
    let after = call.poll_timeout().unwrap();
    assert!(after > t0 + Duration::from_secs(60), "no busy loop on a passed deadline");
    call.handle_timeout(t0 + Duration::from_secs(93));
    drain(&mut call);
    assert!(call.is_terminated());
}

#[test]
fn nobody_there_ends_at_timer_b() {
    let t0 = Instant::now();
    let (mut call, _) = place(t0, Transport::Udp);
    let mut resent = 0;
    while let Some(at) = call.poll_timeout() {
        call.handle_timeout(at);
        resent += drain(&mut call).0.len();
    }
    assert!(call.is_terminated());
    assert_eq!(resent, 6, "at 0.5, 1.5, 3.5, 7.5, 15.5 and 31.5 s, then Timer B at 32 s");
}

#[test]
fn either_side_hangs_up_once_answered() {
    let t0 = Instant::now();
    let (mut call, invite) = place(t0, Transport::Tcp);
    call.handle_response(t0, &ok(&invite));
    drain(&mut call);
    call.hang_up(t0);
    let (sent, _) = drain(&mut call);
    let [Message::Request(bye)] = &sent[..] else { panic!("{sent:?}") };
    assert_eq!((bye.from().unwrap().tag(), bye.to().unwrap().tag()), (Some("sbout"), Some("callee1")));
    let mut answer = bye.response(200, None);
    answer.headers.set("To", bye.headers.get("To").unwrap());
    call.handle_response(t0, &answer);
    assert_eq!(drain(&mut call).1, [CallEvent::Ended(EndReason::LocalHangUp)]);
    assert!(call.is_terminated());

    let (mut call, invite) = place(t0, Transport::Tcp);
    call.handle_response(t0, &ok(&invite));
    drain(&mut call);
    let text = "BYE sip:switchboard@192.0.2.1:5060 SIP/2.0\r\nVia: SIP/2.0/TCP 198.51.100.20;branch=z9hG4bKb1\r\n\
        From: <sip:+442079460018@198.51.100.10>;tag=callee1\r\nTo: <sip:+4930123456@192.0.2.1>;tag=sbout\r\n\
        Call-ID: out-1@192.0.2.1\r\nCSeq: 5 BYE\r\nContent-Length: 0\r\n\r\n";
    let Ok(Message::Request(bye)) = parse_datagram(text.as_bytes(), &Limits::default()) else { panic!() };
    call.handle_request(t0, trunk(), &bye);
    let (sent, events) = drain(&mut call);
    assert_eq!((methods(&sent), events), (vec!["200".to_owned()], vec![CallEvent::Ended(EndReason::RemoteHangUp)]));
    assert!(call.is_terminated(), "nothing lingers over TCP");
}

#[test]
fn an_answer_without_usable_media_is_hung_up() {
    let t0 = Instant::now();
    let (mut call, invite) = place(t0, Transport::Udp);
    let bad = invite.response(200, Some("callee1")).with_body("application/sdp", b"v=0\r\n".to_vec());
    call.handle_response(t0, &bad);
    let (sent, events) = drain(&mut call);
    assert_eq!(methods(&sent), ["ACK", "BYE"]);
    assert!(matches!(&events[..], [CallEvent::Ended(EndReason::MediaRefused(_))]));
}

#[derive(Clone, Debug)]
enum Step {
    Respond(u16),
    HangUp,
    RemoteBye,
    Wait(u64),
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        prop::sample::select(vec![100u16, 180, 183, 200, 486, 487, 503]).prop_map(Step::Respond),
        Just(Step::HangUp),
        Just(Step::RemoteBye),
        (0u64..40_000).prop_map(Step::Wait),
    ]
}

proptest::proptest! {
    /// Any order of answers, hang-ups and waits: no panic, the call ends exactly once,
    /// and once the edge hangs up and time passes, it is over.
    #[test]
    fn random_event_sequences_end_once(steps in proptest::collection::vec(step(), 0..20)) {
        let mut now = Instant::now();
        let (mut call, invite) = place(now, Transport::Udp);
        let mut ended = 0;
        let bye = "BYE sip:switchboard@192.0.2.1:5060 SIP/2.0\r\nVia: SIP/2.0/UDP 198.51.100.20;branch=z9hG4bKb1\r\n\
            From: <sip:+442079460018@198.51.100.10>;tag=callee1\r\nTo: <sip:+4930123456@192.0.2.1>;tag=sbout\r\n\
            Call-ID: out-1@192.0.2.1\r\nCSeq: 5 BYE\r\nContent-Length: 0\r\n\r\n";
        let Ok(Message::Request(bye)) = parse_datagram(bye.as_bytes(), &Limits::default()) else { panic!() };
        for s in steps {
            match s {
                Step::Respond(200) => call.handle_response(now, &ok(&invite)),
                Step::Respond(status) => call.handle_response(now, &invite.response(status, Some("callee1"))),
                Step::HangUp => call.hang_up(now),
                Step::RemoteBye => call.handle_request(now, trunk(), &bye),
                Step::Wait(ms) => {
                    now += Duration::from_millis(ms);
                    let mut rounds = 0;
                    while let Some(at) = call.poll_timeout().filter(|at| *at <= now) {
                        call.handle_timeout(at);
                        rounds += 1;
                        proptest::prop_assert!(rounds < 1000, "a timer that never moves on: {:?}", call.state());
                    }
                }
            }
            ended += drain(&mut call).1.iter().filter(|e| matches!(e, CallEvent::Ended(_))).count();
        }
        call.hang_up(now);
        for _ in 0..200 {
            match call.poll_timeout() {
                Some(at) => call.handle_timeout(at),
                None => break,
            }
        }
        ended += drain(&mut call).1.iter().filter(|e| matches!(e, CallEvent::Ended(_))).count();
        proptest::prop_assert_eq!(ended, 1);
        proptest::prop_assert!(call.is_terminated(), "{:?}", call.state());
    }
}
