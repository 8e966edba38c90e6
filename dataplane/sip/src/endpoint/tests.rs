//! Unit tests of the endpoint: stateless answers, the flood guard, capacity, and a whole
//! call routed by Call-ID.

use std::time::Instant;

use super::*;
use crate::call::{EndReason, Timers};
use crate::sdp::{Codec, LocalMedia};
use crate::sip::Response;

const INVITE: &[u8] = include_bytes!("../../tests/fixtures/baresip_invite.sip");
const ACK: &[u8] = include_bytes!("../../tests/fixtures/baresip_ack.sip");
const BYE: &[u8] = include_bytes!("../../tests/fixtures/baresip_bye.sip");
const OPTIONS: &[u8] = include_bytes!("../../tests/fixtures/options_keepalive.sip");

fn source() -> Source {
    Source { address: "127.0.0.1:5080".parse().unwrap(), transport: Transport::Udp, trusted: false }
}

fn call_config() -> Option<CallConfig> {
    Some(CallConfig {
        local: "127.0.0.1:5070".parse().unwrap(),
        media: LocalMedia {
            address: "127.0.0.1".parse().unwrap(),
            port: 20000,
            session_id: 1,
            version: 1,
            codecs: vec![Codec::Pcmu, Codec::Pcma],
            telephone_event: 101,
            srtp: crate::sdp::LocalSrtp::default(),
        },
        local_tag: "sb7f3a".into(),
        timers: Timers::default(),
    })
}

/// Drains the outputs into the responses sent, the events and the drops.
fn drain(endpoint: &mut Endpoint) -> (Vec<Response>, Vec<CallEvent>, Vec<Dropped>) {
    let (sent, events, dropped, _) = drain_all(endpoint);
    (sent, events, dropped)
}

/// [`drain`], with the INVITEs the endpoint refused itself.
fn drain_all(endpoint: &mut Endpoint) -> (Vec<Response>, Vec<CallEvent>, Vec<Dropped>, Vec<Refusal>) {
    let (mut sent, mut events, mut dropped, mut refused) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    while let Some(output) = endpoint.poll() {
        match output {
            Output::Transmit(t) => match parse_datagram(&t.bytes, &Limits::default()) {
                Ok(Message::Response(r)) => sent.push(r),
                other => panic!("not a response: {other:?}"),
            },
            Output::Event { event, .. } => events.push(event),
            Output::Dropped { reason, .. } => dropped.push(reason),
            Output::Refused { refusal, .. } => refused.push(refusal),
        }
    }
    (sent, events, dropped, refused)
}

fn statuses(sent: &[Response]) -> Vec<u16> {
    sent.iter().map(|r| r.status).collect()
}

#[test]
fn options_outside_a_call_gets_200_with_allow() {
    let mut e = Endpoint::new(EndpointConfig::default());
    e.handle_datagram(Instant::now(), source(), OPTIONS, || None);
    let (sent, _, _) = drain(&mut e);
    assert_eq!(statuses(&sent), [200]);
    assert_eq!(sent[0].headers.get("Allow"), Some(ALLOW));
    assert!(sent[0].to().unwrap().tag().is_some());
}

#[test]
fn a_whole_call_is_routed_by_call_id_and_dropped_when_over() {
    let t0 = Instant::now();
    let mut e = Endpoint::new(EndpointConfig::default());
    e.handle_datagram(t0, source(), INVITE, call_config);
    let (sent, events, _) = drain(&mut e);
    assert_eq!(statuses(&sent), [100]);
    assert!(matches!(events[..], [CallEvent::Incoming(_)]));
    e.admit(t0, "5a6e3f1b0f2c4d1e", Admission::Accept);
    assert_eq!(statuses(&drain(&mut e).0), [200]);
    e.handle_datagram(t0, source(), ACK, || None);
    assert!(matches!(drain(&mut e).1[..], [CallEvent::Established(_)]));
    e.handle_datagram(t0, source(), BYE, || None);
    let (sent, events, _) = drain(&mut e);
    assert_eq!((statuses(&sent), events), (vec![200], vec![CallEvent::Ended(EndReason::RemoteHangUp)]));
    assert_eq!(e.calls(), 1, "lingers to answer a retransmitted BYE");
    e.handle_timeout(e.poll_timeout().unwrap());
    assert_eq!(e.calls(), 0);
}

#[test]
fn a_flood_from_one_address_is_dropped_unanswered() {
    let t0 = Instant::now();
    let rate = RateConfig { per_second: 10.0, burst: 20.0, max_sources: 100 };
    let mut e = Endpoint::new(EndpointConfig { rate, ..EndpointConfig::default() });
    for _ in 0..50 {
        e.handle_datagram(t0, source(), OPTIONS, || None);
    }
    let (sent, _, dropped) = drain(&mut e);
    assert_eq!((sent.len(), dropped.len()), (20, 30));
    assert!(dropped.iter().all(|d| *d == Dropped::RateLimited));
    let other = Source { address: "127.0.0.2:5080".parse().unwrap(), ..source() };
    e.handle_datagram(t0, other, OPTIONS, || None);
    assert_eq!(statuses(&drain(&mut e).0), [200], "another address is not limited");
}

#[test]
fn malformed_messages_get_a_clear_answer_or_none() {
    let t0 = Instant::now();
    let mut e = Endpoint::new(EndpointConfig::default());
    let text = String::from_utf8(INVITE.to_vec()).unwrap().replace("Content-Length: 326", "Content-Length: 999");
    e.handle_datagram(t0, source(), text.as_bytes(), call_config);
    let (sent, events, _) = drain(&mut e);
    assert_eq!(
        (sent[0].status, sent[0].reason.as_str()),
        (400, "INVITE request refused: Content-Length says 999 bytes but the body has 326")
    );
    assert!(events.is_empty());
    let limits = Limits { max_body: 100, ..Limits::default() };
    let mut small = Endpoint::new(EndpointConfig { limits, ..EndpointConfig::default() });
    small.handle_datagram(t0, source(), INVITE, call_config);
    assert_eq!(statuses(&drain(&mut small).0), [413]);
    e.handle_datagram(t0, source(), b"\x16\x03\x01 not SIP\r\n\r\n", || None);
    e.handle_datagram(t0, source(), b"\r\n\r\n", || None);
    let (sent, _, dropped) = drain(&mut e);
    assert!(sent.is_empty());
    assert!(matches!(dropped[..], [Dropped::Unreadable(_), Dropped::KeepAlive]));
    assert_eq!(e.calls(), 0);
}

#[test]
fn past_capacity_an_invite_gets_503() {
    let t0 = Instant::now();
    let mut e = Endpoint::new(EndpointConfig { max_calls: 1, ..EndpointConfig::default() });
    e.handle_datagram(t0, source(), INVITE, call_config);
    drain(&mut e);
    let second = String::from_utf8(INVITE.to_vec()).unwrap().replace("Call-ID: 5a6e3f1b0f2c4d1e", "Call-ID: another");
    e.handle_datagram(t0, source(), second.as_bytes(), call_config);
    let (sent, _, _, refused) = drain_all(&mut e);
    assert_eq!((sent[0].status, sent[0].headers.get("Retry-After")), (503, Some("5")));
    assert_eq!(refused, [Refusal::AtCapacity], "reported for the edge's metrics");
    let mut none_left = Endpoint::new(EndpointConfig::default());
    none_left.handle_datagram(t0, source(), INVITE, || None);
    let (sent, _, _, refused) = drain_all(&mut none_left);
    assert_eq!((statuses(&sent), refused), (vec![503], vec![Refusal::AtCapacity]));
}

#[test]
fn requests_of_no_call_are_answered_by_kind() {
    let t0 = Instant::now();
    let mut e = Endpoint::new(EndpointConfig::default());
    e.handle_datagram(t0, source(), BYE, || None);
    e.handle_datagram(t0, source(), ACK, || None);
    let register = String::from_utf8(OPTIONS.to_vec()).unwrap().replace("OPTIONS", "REGISTER");
    e.handle_datagram(t0, source(), register.as_bytes(), || None);
    let unknown = String::from_utf8(OPTIONS.to_vec()).unwrap().replace("OPTIONS", "FROB");
    e.handle_datagram(t0, source(), unknown.as_bytes(), || None);
    let (sent, _, dropped) = drain(&mut e);
    assert_eq!(statuses(&sent), [481, 405, 501]);
    assert_eq!(dropped, [Dropped::Stray], "an ACK is never answered");
}

#[test]
fn a_stream_message_is_handled_like_a_datagram() {
    let t0 = Instant::now();
    let mut e = Endpoint::new(EndpointConfig::default());
    let tcp = Source { transport: Transport::Tcp, ..source() };
    e.handle_message(t0, tcp, parse_datagram(INVITE, &Limits::default()), call_config);
    let (sent, events, _) = drain(&mut e);
    assert_eq!(statuses(&sent), [100]);
    assert_eq!(events.len(), 1);
    assert_eq!(e.poll_timeout(), None, "nothing to resend over TCP");
}

#[test]
fn a_placed_call_is_routed_like_an_answered_one() {
    let t0 = Instant::now();
    let mut e = Endpoint::new(EndpointConfig { max_calls: 1, ..EndpointConfig::default() });
    let trunk = Source { address: "198.51.100.10:5060".parse().unwrap(), transport: Transport::Udp, trusted: true };
    let callee = crate::call::Callee {
        call_id: "out-1".into(),
        uri: "sip:+442079460018@198.51.100.10".into(),
        from: "sip:+4930123456@127.0.0.1".into(),
        peer: trunk.address,
        transport: Transport::Udp,
        ring_timeout: std::time::Duration::from_secs(60),
        auth: None,
    };
    e.place(t0, call_config().unwrap(), callee.clone()).unwrap();
    assert_eq!(e.place(t0, call_config().unwrap(), callee.clone()), Err(PlaceError::AtCapacity(1)));
    let Some(Output::Transmit(t)) = e.poll() else { panic!("no INVITE") };
    assert_eq!(t.to, trunk.address);
    let Ok(Message::Request(invite)) = parse_datagram(&t.bytes, &Limits::default()) else { panic!() };
    let offer = crate::sdp::SessionDescription::parse(&invite.body, &crate::sdp::Limits::default()).unwrap();
    let mut callee_media = call_config().unwrap().media;
    callee_media.address = "198.51.100.20".parse().unwrap();
    let (_, answer) = callee_media.answer(&offer).unwrap();
    let ok = invite.response(200, Some("gw")).with_body("application/sdp", answer.into_bytes());
    e.handle_datagram(t0, trunk, &Message::Response(ok).to_bytes(), || None);
    let mut acked = false;
    let mut established = false;
    while let Some(output) = e.poll() {
        match output {
            Output::Transmit(t) => acked |= String::from_utf8_lossy(&t.bytes).starts_with("ACK "),
            Output::Event { call_id, event: CallEvent::Established(_) } => established = call_id == "out-1",
            other => panic!("{other:?}"),
        }
    }
    assert!(acked && established);
    assert!(e.call("out-1").and_then(Call::as_outbound).is_some());
    e.hang_up(t0, "out-1");
    let Some(Output::Transmit(t)) = e.poll() else { panic!("no BYE") };
    assert!(String::from_utf8_lossy(&t.bytes).starts_with("BYE "));
}

#[test]
fn with_trunks_a_stranger_gets_403_a_credentialed_trunk_401_and_a_trunk_a_trusted_call() {
    use crate::trunk::{Credentials, Trunk, Trunks};
    let t0 = Instant::now();
    let list = vec![
        Trunk { name: "pbx".into(), sources: vec!["10.0.0.0/8".parse().unwrap()], credentials: None },
        Trunk {
            name: "carrier".into(),
            sources: vec![],
            credentials: Some(Credentials { username: "u".into(), password: "p".into() }),
        },
    ];
    let trunks = |list: Vec<Trunk>| Trunks::new(list, "switchboard", [1; 16]).unwrap();
    // Only the PBX: 127.0.0.1 is a stranger, refused statelessly without a call.
    let mut e = Endpoint::new(EndpointConfig::default()).with_trunks(trunks(list[..1].to_vec()));
    e.handle_datagram(t0, source(), INVITE, || panic!("no call is configured for a stranger"));
    let (sent, events, _, refused) = drain_all(&mut e);
    assert_eq!(statuses(&sent), [403]);
    assert_eq!(refused, [Refusal::Forbidden]);
    assert_eq!(sent[0].reason, "Forbidden: not from a trunk's addresses");
    assert!(events.is_empty() && e.calls() == 0);
    // The carrier may call from anywhere with its credentials: challenged first.
    let mut e = Endpoint::new(EndpointConfig::default()).with_trunks(trunks(list.clone()));
    e.handle_datagram(t0, source(), INVITE, || panic!("no call before the credentials"));
    let (sent, _, _, refused) = drain_all(&mut e);
    assert_eq!(statuses(&sent), [401]);
    assert!(refused.is_empty(), "a challenge is no refusal: the phone answers it");
    let challenges: Vec<&str> = sent[0].headers.all("WWW-Authenticate").collect();
    assert_eq!(challenges.len(), 2, "{challenges:?}");
    assert!(challenges[0].contains("SHA-256") && challenges[1].contains("MD5"), "{challenges:?}");
    // From the PBX's addresses: a call, its caller trusted.
    let mut e = Endpoint::new(EndpointConfig::default()).with_trunks(trunks(list));
    let pbx = Source { address: "10.1.2.3:5060".parse().unwrap(), ..source() };
    e.handle_datagram(t0, pbx, INVITE, call_config);
    let (_, events, _) = drain(&mut e);
    let Some(CallEvent::Incoming(incoming)) = events.first() else { panic!("an incoming call: {events:?}") };
    assert!(incoming.caller_asserted, "a trunk's call is trusted");
}
