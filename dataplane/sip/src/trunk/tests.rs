use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::digest::{Algorithm, Answer};
use super::*;
use crate::sip::parse::parse_datagram;
use crate::sip::{Limits, Message};

fn invite(authorization: Option<&str>) -> Request {
    let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    let text = format!(
        "INVITE sip:+442079460000@edge SIP/2.0\r\nVia: SIP/2.0/UDP 198.51.100.7:5060;branch=z9hG4bK1\r\n\
         From: <sip:+15551234567@carrier>;tag=a\r\nTo: <sip:+442079460000@edge>\r\nCall-ID: c1\r\nCSeq: 2 INVITE\r\n\
         Max-Forwards: 70\r\n{auth}Content-Length: 0\r\n\r\n"
    );
    match parse_datagram(text.as_bytes(), &Limits::default()) {
        Ok(Message::Request(request)) => request,
        other => panic!("{other:?}"),
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

fn trunks() -> Trunks {
    let list = vec![
        Trunk { name: "pbx".into(), sources: vec!["10.1.0.0/16".parse().expect("cidr")], credentials: None },
        Trunk {
            name: "carrier".into(),
            sources: vec!["198.51.100.0/24".parse().expect("cidr")],
            credentials: Some(Credentials { username: "bank".into(), password: "s3cret".into() }),
        },
    ];
    Trunks::new(list, "switchboard", [7; 16]).expect("trunks")
}

/// The answer a UA computes to `challenge` (one `WWW-Authenticate` value).
fn answer(challenge: &str, algorithm: Algorithm, password: &str, nc: u32) -> String {
    let nonce = challenge.split("nonce=\"").nth(1).and_then(|r| r.split('"').next()).expect("a nonce");
    let h = |s: &str| algorithm.hex(s);
    let uri = "sip:+442079460000@edge";
    let ha1 = h(&format!("bank:switchboard:{password}"));
    let ha2 = h(&format!("INVITE:{uri}"));
    let response = h(&format!("{ha1}:{nonce}:{nc:08x}:cn:auth:{ha2}"));
    format!(
        "Digest username=\"bank\", realm=\"switchboard\", nonce=\"{nonce}\", uri=\"{uri}\", response=\"{response}\", \
         algorithm={}, qop=auth, nc={nc:08x}, cnonce=\"cn\"",
        algorithm.name()
    )
}

#[test]
fn cidrs_hold_their_addresses_only() {
    let block: Cidr = "192.0.2.0/24".parse().expect("cidr");
    assert!(block.contains(ip("192.0.2.200")) && !block.contains(ip("192.0.3.1")));
    assert!(block.contains(ip("::ffff:192.0.2.9")), "an IPv4-mapped address is its IPv4 address");
    let host: Cidr = "2001:db8::1".parse().expect("one host");
    assert!(host.contains(ip("2001:db8::1")) && !host.contains(ip("2001:db8::2")));
    assert!("0.0.0.0/0".parse::<Cidr>().expect("all").contains(ip("203.0.113.1")));
    for bad in ["192.0.2.0/33", "nope/8", "10.0.0.0/x", ""] {
        assert!(bad.parse::<Cidr>().is_err(), "{bad}");
    }
}

#[test]
fn a_trunks_addresses_let_it_in_and_anything_else_is_refused() {
    let mut t = trunks();
    let now = Instant::now();
    assert_eq!(t.admit(now, ip("10.1.2.3"), &invite(None)), Verdict::Trunk("pbx".into()));
    assert_eq!(t.admit(now, ip("203.0.113.9"), &invite(None)), Verdict::Forbidden("not from a trunk's addresses"));
    let mut open = Trunks::new(vec![], "switchboard", [0; 16]).expect("none");
    assert_eq!(open.admit(now, ip("203.0.113.9"), &invite(None)), Verdict::Open);
}

#[test]
fn digest_is_challenged_sha256_first_and_md5_and_sha256_answers_are_taken_once() {
    let mut t = trunks();
    let now = Instant::now();
    let source = ip("198.51.100.7");
    let Verdict::Challenge(challenges) = t.admit(now, source, &invite(None)) else { panic!("a challenge") };
    assert_eq!(challenges.len(), 2);
    assert!(challenges[0].contains("algorithm=SHA-256") && challenges[1].contains("algorithm=MD5"), "{challenges:?}");
    for algorithm in [Algorithm::Sha256, Algorithm::Md5] {
        let Verdict::Challenge(c) = t.admit(now, source, &invite(None)) else { panic!("a challenge") };
        let good = answer(&c[0], algorithm, "s3cret", 1);
        assert_eq!(t.admit(now, source, &invite(Some(&good))), Verdict::Trunk("carrier".into()), "{algorithm:?}");
        // The same answer again (a replay): challenged, not let in.
        assert!(matches!(t.admit(now, source, &invite(Some(&good))), Verdict::Challenge(_)));
        // The next count of the same nonce is fine.
        let next = answer(&c[0], algorithm, "s3cret", 2);
        assert_eq!(t.admit(now, source, &invite(Some(&next))), Verdict::Trunk("carrier".into()));
    }
    let Verdict::Challenge(c) = t.admit(now, source, &invite(None)) else { panic!("a challenge") };
    let wrong = answer(&c[0], Algorithm::Md5, "guess", 1);
    assert_eq!(t.admit(now, source, &invite(Some(&wrong))), Verdict::Forbidden("wrong trunk credentials"));
    // Credentials do not open the trunk from elsewhere.
    let good = answer(&c[0], Algorithm::Md5, "s3cret", 1);
    assert_eq!(
        t.admit(now, ip("203.0.113.9"), &invite(Some(&good))),
        Verdict::Forbidden("not from a trunk's addresses")
    );
    assert_eq!(t.admit(now, source, &invite(Some("Digest garbage"))), Verdict::Forbidden("a malformed Authorization"));
}

#[test]
fn nonces_expire_and_their_table_is_bounded() {
    let mut t = trunks();
    let start = Instant::now();
    let source = ip("198.51.100.7");
    let Verdict::Challenge(c) = t.admit(start, source, &invite(None)) else { panic!("a challenge") };
    let late = start + NONCE_LIFETIME + Duration::from_secs(1);
    let Verdict::Challenge(again) = t.admit(late, source, &invite(Some(&answer(&c[0], Algorithm::Md5, "s3cret", 1))))
    else {
        panic!("an expired nonce is challenged again")
    };
    assert!(again[0].ends_with("stale=true"), "{again:?}");
    for _ in 0..MAX_NONCES + 100 {
        t.admit(late, source, &invite(None));
    }
    assert_eq!(t.nonces(), MAX_NONCES);
    // An unknown nonce (forgotten, or never issued) is challenged.
    let forged = answer("nonce=\"feedfacefeedfacefeedfacefeedface\"", Algorithm::Md5, "s3cret", 1);
    assert!(matches!(t.admit(late, source, &invite(Some(&forged))), Verdict::Challenge(_)));
    assert!(Answer::parse(&forged).is_ok());
}

#[test]
fn a_trunk_is_addresses_or_credentials_never_neither() {
    let open = Trunk { name: "x".into(), sources: vec![], credentials: None };
    assert_eq!(Trunks::new(vec![open.clone()], "r", [0; 16]).err(), Some(TrunkError::Open("x".into())));
    let twice = vec![open.clone(), open];
    assert!(Trunks::new(twice, "r", [0; 16]).is_err());
}
