//! Unit tests of parsing, the limits, header reading and responses.

use super::parse::{StreamItem, parse_datagram};
use super::*;
use proptest::prelude::*;

const INVITE: &str = "INVITE sip:+4930123@edge.example.com SIP/2.0\r\n\
Via: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK1;rport\r\n\
Via: SIP/2.0/UDP 10.0.0.2:5060;branch=z9hG4bK2\r\n\
From: \"Alice\" <sip:+4930999@10.0.0.1>;tag=a1\r\n\
To: <sip:+4930123@edge.example.com>\r\n\
Call-ID: c1@10.0.0.1\r\n\
CSeq: 7 INVITE\r\n\
Max-Forwards: 70\r\n\
Content-Type: application/sdp\r\n\
Content-Length: 4\r\n\r\nv=0\n";

fn request(text: &str) -> Request {
    match parse_datagram(text.as_bytes(), &Limits::default()) {
        Ok(Message::Request(r)) => r,
        other => panic!("not a request: {other:?}"),
    }
}

#[test]
fn a_request_reads_with_its_headers_and_body() {
    let r = request(INVITE);
    assert_eq!(r.method, Method::Invite);
    assert_eq!(r.uri, "sip:+4930123@edge.example.com");
    assert_eq!(r.body, b"v=0\n");
    assert_eq!(r.branch().unwrap(), "z9hG4bK1");
    assert_eq!(r.cseq().unwrap(), CSeq { seq: 7, method: Method::Invite });
    assert_eq!(r.from().unwrap().tag(), Some("a1"));
    assert_eq!(r.from().unwrap().display, Some("Alice"));
    assert_eq!(r.from().unwrap().user(), Some("+4930999"));
    assert_eq!(r.to().unwrap().tag(), None);
    assert_eq!(r.headers.get("content-length"), None, "Content-Length is computed, not kept");
}

#[test]
fn a_response_copies_every_via_from_to_call_id_and_cseq_and_tags_to() {
    let r = request(INVITE);
    let ok = r.response(200, Some("sb1"));
    let vias: Vec<_> = ok.headers.all("Via").collect();
    assert_eq!(vias, ["SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK1;rport", "SIP/2.0/UDP 10.0.0.2:5060;branch=z9hG4bK2"]);
    assert_eq!(ok.headers.get("From"), r.headers.get("From"));
    assert_eq!(ok.to().unwrap().tag(), Some("sb1"));
    assert_eq!(ok.headers.get("Call-ID"), Some("c1@10.0.0.1"));
    assert_eq!(ok.headers.get("CSeq"), Some("7 INVITE"));
    assert_eq!(ok.reason, "OK");
    let trying = r.response(100, Some("sb1"));
    assert_eq!(trying.to().unwrap().tag(), None, "100 Trying carries no To-tag");
}

#[test]
fn a_response_that_makes_a_dialogue_keeps_the_proxies_record_route_in_order() {
    let routed = INVITE.replace(
        "Max-Forwards: 70\r\n",
        "Max-Forwards: 70\r\nRecord-Route: <sip:10.0.0.2;lr>\r\nRecord-Route: <sip:10.0.0.1;lr;ftag=a1>, <sip:10.0.0.9;lr>\r\n",
    );
    let r = request(&routed);
    let routes = ["<sip:10.0.0.2;lr>", "<sip:10.0.0.1;lr;ftag=a1>, <sip:10.0.0.9;lr>"];
    for status in [180, 183, 200] {
        assert_eq!(r.response(status, Some("sb1")).headers.all("Record-Route").collect::<Vec<_>>(), routes, "{status}");
    }
    for status in [100, 486, 603] {
        assert_eq!(r.response(status, Some("sb1")).headers.all("Record-Route").count(), 0, "{status}");
    }
    let bye = request(&routed.replace("INVITE sip:", "BYE sip:").replace("7 INVITE", "8 BYE"));
    assert_eq!(bye.response(200, Some("sb1")).headers.all("Record-Route").count(), 0, "only an INVITE's");
}

#[test]
fn a_to_tag_already_there_is_kept() {
    let r = request(&INVITE.replace("To: <sip:+4930123@edge.example.com>", "To: <sip:x@y>;tag=old"));
    assert_eq!(r.response(200, Some("new")).to().unwrap().tag(), Some("old"));
}

#[test]
fn a_serialized_response_parses_back() {
    let ok = request(INVITE).response(488, Some("t")).with_reason("No common codec (offered G729)");
    let bytes = Message::Response(ok.clone()).to_bytes();
    assert_eq!(parse_datagram(&bytes, &Limits::default()).unwrap(), Message::Response(ok));
}

#[test]
fn compact_names_are_expanded() {
    let text = INVITE.replace("Via:", "v:").replace("Call-ID:", "i:").replace("Content-Length:", "l:");
    let r = request(&text);
    assert_eq!(r.call_id().unwrap(), "c1@10.0.0.1");
    assert_eq!(r.headers.all("via").count(), 2);
    assert_eq!(r.body.len(), 4);
}

#[test]
fn folded_lines_are_joined() {
    let r = request(&INVITE.replace("Max-Forwards: 70\r\n", "Subject: one\r\n two\r\nMax-Forwards: 70\r\n"));
    assert_eq!(r.headers.get("Subject"), Some("one two"));
}

#[test]
fn folded_lines_are_checked_like_others() {
    // Found by the sip_message fuzz target: a NUL in a continuation line was taken.
    let nul = INVITE.replace("Max-Forwards: 70\r\n", "Subject: one\r\n \0two\r\nMax-Forwards: 70\r\n");
    assert!(matches!(parse_datagram(nul.as_bytes(), &Limits::default()), Err(ParseError::HeaderLine(_))));
    let blank = INVITE.replace("Max-Forwards: 70\r\n", "Subject:\r\n \r\n two\r\nMax-Forwards: 70\r\n");
    let r = request(&blank);
    assert_eq!(r.headers.get("Subject"), Some("two"));
    let again = parse_datagram(&Message::Request(r.clone()).to_bytes(), &Limits::default()).unwrap();
    assert_eq!(again, Message::Request(r));
}

#[test]
fn bytes_past_content_length_in_a_datagram_are_discarded() {
    assert_eq!(request(&format!("{INVITE}garbage")).body, b"v=0\n");
}

#[test]
fn a_short_body_is_refused_with_400_and_the_head() {
    let err = parse_datagram(INVITE.replace("Content-Length: 4", "Content-Length: 40").as_bytes(), &Limits::default())
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(err.to_string().contains("Content-Length says 40 bytes but the body has 4"), "{err}");
    assert_eq!(err.head().unwrap().call_id().unwrap(), "c1@10.0.0.1");
}

#[test]
fn an_oversized_body_is_413_and_an_oversized_message_513() {
    let limits = Limits { max_body: 2, ..Limits::default() };
    let err = parse_datagram(INVITE.as_bytes(), &limits).unwrap_err();
    assert_eq!(err.status(), 413);
    assert!(err.head().is_some());
    let limits = Limits { max_message: 100, ..Limits::default() };
    assert_eq!(parse_datagram(INVITE.as_bytes(), &limits).unwrap_err().status(), 513);
}

#[test]
fn too_many_or_too_long_headers_are_refused() {
    let limits = Limits { max_headers: 5, ..Limits::default() };
    let err = parse_datagram(INVITE.as_bytes(), &limits).unwrap_err();
    assert_eq!(err, ParseError::TooManyHeaders { limit: 5 });
    let limits = Limits { max_header_len: 40, ..Limits::default() };
    assert!(matches!(parse_datagram(INVITE.as_bytes(), &limits), Err(ParseError::HeaderTooLong { .. })));
}

#[test]
fn missing_or_bad_headers_are_typed_errors() {
    let no_call_id = INVITE.replace("Call-ID: c1@10.0.0.1\r\n", "");
    let err = parse_datagram(no_call_id.as_bytes(), &Limits::default()).unwrap_err();
    assert!(err.to_string().contains("the Call-ID header is missing"), "{err}");
    let wrong = INVITE.replace("CSeq: 7 INVITE", "CSeq: 7 BYE");
    let err = parse_datagram(wrong.as_bytes(), &Limits::default()).unwrap_err();
    assert!(err.to_string().contains("does not match"), "{err}");
    let no_branch = INVITE.replace(";branch=z9hG4bK1", "");
    assert!(parse_datagram(no_branch.as_bytes(), &Limits::default()).is_err());
    let big = INVITE.replace("CSeq: 7", "CSeq: 2147483648");
    assert!(parse_datagram(big.as_bytes(), &Limits::default()).is_err());
}

#[test]
fn start_lines_are_strict() {
    for bad in [
        "INVITE sip:x SIP/3.0",
        "INVITE  SIP/2.0",
        "SIP/2.0 99 Low",
        "SIP/2.0 700 High",
        "HELLO",
        "INV ITE sip:x SIP/2.0",
    ] {
        let text = format!("{bad}\r\nCall-ID: x\r\n\r\n");
        assert!(parse_datagram(text.as_bytes(), &Limits::default()).is_err(), "{bad}");
    }
    let err = parse_datagram(b"OPTIONS sip:x SIP/3.0\r\n\r\n", &Limits::default()).unwrap_err();
    assert_eq!(err.status(), 505);
}

#[test]
fn keep_alives_and_garbage_are_errors_not_panics() {
    assert_eq!(parse_datagram(b"\r\n\r\n", &Limits::default()), Err(ParseError::Empty));
    assert_eq!(parse_datagram(b"INVITE sip:x SIP/2.0\r\n", &Limits::default()), Err(ParseError::Unterminated));
    assert_eq!(parse_datagram(b"\xff\xfe\r\n\r\n", &Limits::default()), Err(ParseError::NotUtf8));
}

#[test]
fn name_addr_forms() {
    let a = NameAddr::parse("sip:bob@example.com;tag=9").unwrap();
    assert_eq!((a.uri, a.tag(), a.user()), ("sip:bob@example.com", Some("9"), Some("bob")));
    let a = NameAddr::parse("<tel:+4930123;phone-context=+49>").unwrap();
    assert_eq!(a.user(), Some("+4930123"));
    assert_eq!(NameAddr::parse("<sip:example.com>").unwrap().user(), None);
    assert!(NameAddr::parse("<sip:x@y").is_err());
    assert!(NameAddr::parse("Bob").is_err());
}

#[test]
fn a_stream_is_cut_by_content_length_and_answers_pings() {
    let mut decoder = StreamDecoder::new(Limits::default());
    let two = format!("\r\n\r\n{INVITE}{INVITE}");
    let (first, second) = two.as_bytes().split_at(30);
    decoder.push(first).unwrap();
    assert_eq!(decoder.next_item(), Some(Ok(StreamItem::Ping)));
    assert_eq!(decoder.next_item(), None);
    decoder.push(second).unwrap();
    assert!(matches!(decoder.next_item(), Some(Ok(StreamItem::Message(_)))));
    assert!(matches!(decoder.next_item(), Some(Ok(StreamItem::Message(_)))));
    assert_eq!(decoder.next_item(), None);
    assert_eq!(decoder.buffered(), 0);
}

#[test]
fn a_stream_needs_content_length_and_is_bounded() {
    let mut decoder = StreamDecoder::new(Limits::default());
    decoder.push(INVITE.replace("Content-Length: 4\r\n", "").as_bytes()).unwrap();
    let err = decoder.next_item().unwrap().unwrap_err();
    assert_eq!(err.to_string(), "INVITE request refused: a message on a stream must carry Content-Length");
    assert_eq!(decoder.next_item(), None, "nothing after an error");
    let mut decoder = StreamDecoder::new(Limits { max_message: 64, ..Limits::default() });
    assert!(decoder.push(&[b'a'; 100]).is_err());
}

fn token() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9.!%*_+`'~-]{0,12}"
}

proptest! {
    #[test]
    fn serialize_then_parse_is_identity(
        method in token(),
        user in "[a-z0-9+]{1,12}",
        extra in proptest::collection::vec((token(), "[ -~]{0,40}"), 0..8),
        body in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut headers = Headers::new();
        headers.push("Via", "SIP/2.0/TCP h:5060;branch=z9hG4bKx");
        headers.push("From", "<sip:a@h>;tag=1");
        headers.push("To", format!("<sip:{user}@h>"));
        headers.push("Call-ID", "id");
        headers.push("CSeq", format!("1 {method}"));
        for (name, value) in extra {
            if canonical_name(&name).eq_ignore_ascii_case("content-length") { continue; }
            headers.push(&name, value.trim());
        }
        let request = Request { method: Method::from_token(&method), uri: format!("sip:{user}@h"), headers, body };
        let bytes = Message::Request(request.clone()).to_bytes();
        prop_assert_eq!(parse_datagram(&bytes, &Limits::default()), Ok(Message::Request(request.clone())));
        let mut decoder = StreamDecoder::new(Limits::default());
        decoder.push(&bytes).unwrap();
        prop_assert_eq!(decoder.next_item(), Some(Ok(StreamItem::Message(Message::Request(request)))));
    }

    #[test]
    fn any_bytes_parse_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_datagram(&bytes, &Limits::default());
    }
}

use super::header::canonical_name;
