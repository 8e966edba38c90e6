//! 500 calls at once through one endpoint, each with a second of media both ways: the
//! load the issue sets for one core (500 live calls). It checks that every call is
//! established, carries its audio and ends, and that nothing is left behind; it prints
//! how long the work took (run with `--release` and `--nocapture` to read it).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard_sip::call::{Admission, CallConfig, CallEvent, EndReason, Timers, Transport};
use switchboard_sip::endpoint::{Endpoint, EndpointConfig, Output, Source};
use switchboard_sip::media::jitter::Playout;
use switchboard_sip::media::rtp::RtpSender;
use switchboard_sip::media::session::{MediaConfig, MediaSession, Received};
use switchboard_sip::sdp::{Codec, LocalMedia};
use switchboard_sip::sip::parse::parse_datagram;
use switchboard_sip::sip::{Limits, Message, Request};

const CALLS: usize = 500;
const TICKS: usize = 50;

fn fixture(name: &str) -> Request {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    match parse_datagram(&std::fs::read(path).expect("the fixture"), &Limits::default()) {
        Ok(Message::Request(r)) => r,
        other => panic!("{other:?}"),
    }
}

/// The fixture as call `i` sends it: its own Call-ID, branch, tag, port and RTP port.
fn as_call(mut request: Request, i: usize, tag: Option<&str>) -> Vec<u8> {
    request.headers.set("Call-ID", format!("load-{i}"));
    request
        .headers
        .set("Via", format!("SIP/2.0/UDP 127.0.0.1:{};branch=z9hG4bK{i}{};rport", 10000 + i, request.method));
    request.headers.set("From", format!("<sip:caller{i}@127.0.0.1>;tag=f{i}"));
    if let Some(tag) = tag {
        request.headers.set("To", format!("<sip:+4930123456@127.0.0.1:5070>;tag={tag}"));
    }
    let body = String::from_utf8(request.body.clone()).expect("an SDP body").replace("10814", &(30000 + i).to_string());
    request.body = body.into_bytes();
    Message::Request(request).to_bytes()
}

fn config(i: usize) -> CallConfig {
    CallConfig {
        local: "127.0.0.1:5070".parse().expect("an address"),
        media: LocalMedia {
            address: "127.0.0.1".parse().expect("an address"),
            port: 20000 + i as u16,
            session_id: i as u64,
            version: 1,
            codecs: vec![Codec::Pcmu, Codec::Pcma],
            telephone_event: 101,
            srtp: switchboard_sip::sdp::LocalSrtp::default(),
        },
        local_tag: format!("t{i}"),
        timers: Timers::default(),
    }
}

fn source(i: usize) -> Source {
    Source { address: SocketAddr::from(([127, 0, 0, 1], 10000 + i as u16)), transport: Transport::Udp, trusted: true }
}

#[test]
fn five_hundred_calls_through_one_endpoint() {
    let started = Instant::now();
    let t0 = Instant::now();
    let mut endpoint = Endpoint::new(EndpointConfig { max_calls: CALLS, ..EndpointConfig::default() });
    endpoint.rate_limiter().set_rate("127.0.0.1".parse().unwrap(), 1e6, 1e6);
    let (invite, ack, bye) = (fixture("baresip_invite.sip"), fixture("baresip_ack.sip"), fixture("baresip_bye.sip"));
    for i in 0..CALLS {
        endpoint.handle_datagram(t0, source(i), &as_call(invite.clone(), i, None), || Some(config(i)));
    }
    let mut incoming = 0;
    while let Some(output) = endpoint.poll() {
        if let Output::Event { event: CallEvent::Incoming(_), .. } = output {
            incoming += 1;
        }
    }
    assert_eq!(incoming, CALLS);
    for i in 0..CALLS {
        endpoint.admit(t0, &format!("load-{i}"), Admission::Accept);
        endpoint.handle_datagram(t0, source(i), &as_call(ack.clone(), i, Some(&format!("t{i}"))), || None);
    }
    let mut sessions = Vec::new();
    while let Some(output) = endpoint.poll() {
        if let Output::Event { event: CallEvent::Established(media), .. } = output {
            sessions.push(MediaSession::new(MediaConfig::default(), media, 1, 1, 1));
        }
    }
    assert_eq!(sessions.len(), CALLS);
    let signalling = started.elapsed();

    let media_started = Instant::now();
    let mut phones: Vec<RtpSender> = (0..CALLS).map(|i| RtpSender::new(i as u32, 0, 0)).collect();
    let (mut played, mut sent) = (0, 0);
    for _ in 0..TICKS {
        for (i, session) in sessions.iter_mut().enumerate() {
            let packet = phones[i].media(0, false, &[0x55; 160], 160);
            let from = SocketAddr::from(([127, 0, 0, 1], 30000 + i as u16));
            assert_eq!(session.receive(t0, from, &packet), Received::Audio);
            session.queue_audio(&[0x7E; 160]);
            let tick = session.tick();
            played += usize::from(matches!(tick.play, Playout::Frame(_)));
            sent += usize::from(tick.send.is_some());
        }
    }
    let media = media_started.elapsed();
    assert_eq!(sent, CALLS * TICKS);
    assert_eq!(played, CALLS * (TICKS - 2), "the first two ticks fill the jitter buffer's depth");

    for i in 0..CALLS {
        endpoint.handle_datagram(t0, source(i), &as_call(bye.clone(), i, Some(&format!("t{i}"))), || None);
    }
    let mut ended = 0;
    while let Some(output) = endpoint.poll() {
        if let Output::Event { event: CallEvent::Ended(EndReason::RemoteHangUp), .. } = output {
            ended += 1;
        }
    }
    assert_eq!(ended, CALLS);
    endpoint.handle_timeout(t0 + Duration::from_secs(33));
    assert_eq!(endpoint.calls(), 0, "every call dropped after lingering");
    println!(
        "{CALLS} calls: signalling {signalling:?}; {TICKS} ticks of media both ways {media:?} \
         ({:?} a tick for all calls, against 20 ms of real time)",
        media / TICKS as u32
    );
}
