//! Real SIP messages, as baresip and carriers' gateways send them (`tests/fixtures/`,
//! exact bytes with CRLF line ends), read by the parser.

use switchboard_sip::sip::parse::parse_datagram;
use switchboard_sip::sip::{Limits, Message, Method, NameAddr, Request};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn request(name: &str) -> Request {
    match parse_datagram(&fixture(name), &Limits::default()) {
        Ok(Message::Request(r)) => r,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn baresip_invite_with_sdp() {
    let r = request("baresip_invite.sip");
    assert_eq!(r.method, Method::Invite);
    assert_eq!(r.branch().unwrap(), "z9hG4bKab9f0f6c6e1d3c57");
    assert_eq!(r.to().unwrap().user(), Some("+4930123456"));
    assert_eq!(r.from().unwrap().user(), Some("caller"));
    assert_eq!(r.headers.get("Content-Type"), Some("application/sdp"));
    assert!(r.body.starts_with(b"v=0\r\n") && r.body.ends_with(b"\r\n"));
}

#[test]
fn baresip_ack_bye_cancel() {
    let ack = request("baresip_ack.sip");
    assert_eq!((ack.method.clone(), ack.cseq().unwrap().seq), (Method::Ack, 14871));
    assert_eq!(ack.to().unwrap().tag(), Some("sb7f3a"));
    let bye = request("baresip_bye.sip");
    assert_eq!(bye.cseq().unwrap().seq, 14872);
    let cancel = request("baresip_cancel.sip");
    let invite = request("baresip_invite.sip");
    assert_eq!(cancel.branch(), invite.branch(), "a CANCEL names the INVITE's transaction");
}

#[test]
fn an_options_ping_gets_a_200() {
    let r = request("options_keepalive.sip");
    let ok = r.response(200, Some("t"));
    let bytes = Message::Response(ok).to_bytes();
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.starts_with("SIP/2.0 200 OK\r\n"));
    assert!(text.contains("CSeq: 102 OPTIONS\r\n"));
    assert!(text.ends_with("Content-Length: 0\r\n\r\n"));
}

#[test]
fn carrier_invite_with_compact_headers_and_asserted_identity() {
    let r = request("carrier_invite.sip");
    assert_eq!(r.headers.all("Via").count(), 2);
    assert_eq!(r.call_id().unwrap(), "1c2d3e4f5a6b7c8d9e0f@198.51.100.11");
    assert_eq!(r.from().unwrap().display, Some("+44 20 7946 0018"));
    let asserted: Vec<_> = r.headers.all("P-Asserted-Identity").map(|v| NameAddr::parse(v).unwrap().user()).collect();
    assert_eq!(asserted, [Some("+442079460018"), Some("+442079460018")]);
    assert_eq!(r.to().unwrap().user(), Some("+4930123456"));
    let ok = r.response(180, Some("sb"));
    assert_eq!(ok.headers.all("Via").count(), 2);
}

#[test]
fn carrier_200_ok_is_a_response() {
    match parse_datagram(&fixture("carrier_200_ok.sip"), &Limits::default()) {
        Ok(Message::Response(r)) => {
            assert_eq!((r.status, r.reason.as_str()), (200, "OK"));
            assert_eq!(r.to().unwrap().tag(), Some("gw99"));
            assert!(!r.body.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_fixture_round_trips() {
    for name in [
        "baresip_invite.sip",
        "baresip_ack.sip",
        "baresip_bye.sip",
        "baresip_cancel.sip",
        "options_keepalive.sip",
        "carrier_invite.sip",
        "carrier_200_ok.sip",
    ] {
        let message = parse_datagram(&fixture(name), &Limits::default()).unwrap();
        assert_eq!(parse_datagram(&message.to_bytes(), &Limits::default()).unwrap(), message, "{name}");
    }
}
