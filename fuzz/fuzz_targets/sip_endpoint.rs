//! The SIP endpoint and its calls (`switchboard_sip::endpoint`, `switchboard_sip::call`):
//! every datagram to the edge's SIP address, in any order, from a few sources, with the
//! owner's answers, calls it places and hangs up, and time passing between them. The input is a sequence of steps: a
//! control byte (which source, and what the owner does or how much time passes) and,
//! for a datagram, a length byte and the datagram. Properties: nothing panics; no more
//! calls than the limit; everything the edge sends is a SIP message that parses; every
//! timer moves on when it is run.
#![no_main]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use switchboard_sip::call::{Admission, CallConfig, CallEvent, Callee, Timers, Transport};
use switchboard_sip::endpoint::{Endpoint, EndpointConfig, Output, Source};
use switchboard_sip::sdp::{Codec, LocalMedia};
use switchboard_sip::sip::parse::parse_datagram;
use switchboard_sip::sip::Limits;

const MAX_CALLS: usize = 4;

fn config(n: u64) -> CallConfig {
    CallConfig {
        local: SocketAddr::from(([192, 0, 2, 1], 5060)),
        media: LocalMedia {
            address: [192, 0, 2, 1].into(),
            port: 20000,
            session_id: n,
            version: 1,
            codecs: vec![Codec::Pcmu, Codec::Pcma],
            telephone_event: 101,
            srtp: switchboard_sip::sdp::LocalSrtp::default(),
        },
        local_tag: format!("t{n}"),
        timers: Timers::default(),
    }
}

fn drain(endpoint: &mut Endpoint, incoming: &mut Vec<String>) {
    let roomy = Limits { max_message: 1 << 20, max_headers: 1024, max_header_len: 1 << 20, max_body: 1 << 20 };
    while let Some(output) = endpoint.poll() {
        match output {
            Output::Transmit(t) => {
                if let Err(error) = parse_datagram(&t.bytes, &roomy) {
                    panic!("the edge sent what does not parse ({error}): {:?}", String::from_utf8_lossy(&t.bytes));
                }
            }
            Output::Event { call_id, event: CallEvent::Incoming(_) } => incoming.push(call_id),
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut now = Instant::now();
    let mut endpoint = Endpoint::new(EndpointConfig { max_calls: MAX_CALLS, ..EndpointConfig::default() });
    let mut incoming: Vec<String> = Vec::new();
    let mut placed: Vec<String> = Vec::new();
    let mut calls = 0u64;
    let mut rest = data;
    while let Some((&control, tail)) = rest.split_first() {
        rest = tail;
        let source = Source {
            address: SocketAddr::from(([198, 51, 100, control & 3], 5060)),
            transport: if control & 4 == 0 { Transport::Udp } else { Transport::Tcp },
            trusted: control & 8 != 0,
        };
        match control >> 4 {
            0..=9 => {
                let Some((&len, tail)) = rest.split_first() else { break };
                let len = (usize::from(len) * 8).min(tail.len());
                let (datagram, tail) = tail.split_at(len);
                rest = tail;
                endpoint.handle_datagram(now, source, datagram, || {
                    calls += 1;
                    Some(config(calls))
                });
            }
            10 | 11 => {
                if let Some(id) = incoming.pop() {
                    let admission = if control >> 4 == 10 { Admission::Accept } else { Admission::NotFound("no".into()) };
                    endpoint.admit(now, &id, admission);
                }
            }
            12 if control & 1 == 1 => {
                calls += 1;
                let callee = Callee {
                    call_id: format!("out-{calls}"),
                    uri: "sip:+442079460018@198.51.100.10".into(),
                    from: "sip:+4930123456@192.0.2.1".into(),
                    peer: source.address,
                    transport: source.transport,
                    ring_timeout: Duration::from_secs(60),
                    auth: None,
                };
                let _ = endpoint.place(now, config(calls), callee.clone());
                placed.push(callee.call_id);
            }
            12 => {
                if let Some(id) = incoming.first().or(placed.first()).cloned() {
                    endpoint.hang_up(now, &id);
                }
            }
            _ => {
                now += Duration::from_millis(u64::from(control & 0x0f) * 700);
                let mut rounds = 0;
                while let Some(at) = endpoint.poll_timeout().filter(|at| *at <= now) {
                    endpoint.handle_timeout(at);
                    rounds += 1;
                    assert!(rounds < 10_000, "a timer that never moves on");
                }
            }
        }
        drain(&mut endpoint, &mut incoming);
        assert!(endpoint.calls() <= MAX_CALLS);
    }
});
