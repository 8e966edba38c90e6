//! The edge's signalling over real HTTP (hyper's client against a real gateway serving the
//! edge), for what a browser's page and a WHIP client meet before any media flows:
//!
//! - CORS (issue 47): a page of an origin the gateway allows (`--allowed-origin`, the rule of
//!   `/v1/session`) gets its preflights answered on `/v1/webrtc` and on a call's resource,
//!   and every response carries `Access-Control-Allow-Origin` with the headers it reads
//!   exposed; a page of another origin gets no CORS headers and its offer is refused as
//!   before; a gateway without the edge answers the same way (its 404 readable).
//! - Trickle ICE as RFC 8840 and WHIP send it: a fragment with `a=ice-ufrag` and no
//!   `a=ice-pwd` adds candidates (204) to the ICE session it names, and is refused (412)
//!   when that is not the call's.
//! - Too many offers from one credential: a key's `sessions=N` caps its live calls; the
//!   (N+1)th offer is answered 429 with the reason, other keys are not affected, and a call
//!   that ends gives its place back.
//!
//! The offers are a browser's as the SDP fuzz target's seed holds it (Chromium's shape).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, Request, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use switchboard_core::grant::GatewaySigner;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::server::Server;
use switchboard_gateway::{Directory, Gateway, GatewayConfig};
use switchboard_webrtc_edge::{Edge, WebrtcConfig};

/// The origin the gateways allow.
const APP: &str = "https://app.example";
/// An origin they do not.
const ELSEWHERE: &str = "https://elsewhere.example";

fn digest(key: &str) -> String {
    use aws_lc_rs::digest::{SHA256, digest};
    digest(&SHA256, key.as_bytes()).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A gateway with the API keys `keys` (name, key, options) and [`APP`] allowed, serving the
/// edge (`edge`) or its routes without it.
async fn serve(keys: &[(&str, &str, &str)], edge: bool) -> (Arc<Gateway>, Option<Arc<Edge>>, String) {
    let (routes, receiver) = tokio::sync::watch::channel(Directory::empty(None));
    std::mem::forget(routes);
    let file: String = keys.iter().map(|(name, key, options)| format!("{name} {} {options}\n", digest(key))).collect();
    let auth = Auth::new(Some(&file), vec![APP.into()]).expect("keys");
    let signer = GatewaySigner::from_seed(&[9; 32]);
    let gateway =
        Gateway::new(GatewayConfig::default(), receiver, signer, auth, Default::default()).expect("a gateway");
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    let server = Server::bind(local, gateway.clone()).await.expect("binds");
    let (server, edge) = if edge {
        let webrtc = WebrtcConfig { listen: local, ..WebrtcConfig::default() };
        let edge = Edge::bind(&webrtc, gateway.config.max_message_bytes).await.expect("the edge binds");
        (server.with_channel(edge.clone()), Some(edge))
    } else {
        (server.with_routes(switchboard_webrtc_edge::off_routes(gateway.clone())), None)
    };
    let base = format!("http://{}", server.local_addr().expect("addr"));
    tokio::spawn(server.run(std::future::pending()));
    (gateway, edge, base)
}

/// A browser's offer: Opus and a data channel, ICE ufrag `Ab3d`.
fn offer() -> String {
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/webrtc_offer/browser_offer");
    let text = std::fs::read_to_string(seed).expect("the fuzz target's browser offer");
    text.lines().map(|l| format!("{l}\r\n")).collect()
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The JSON refusal's `code`.
    fn code(&self) -> String {
        let body: serde_json::Value = serde_json::from_str(&self.body).unwrap_or_default();
        body["code"].as_str().unwrap_or_default().to_owned()
    }
}

/// One request with hyper's client.
async fn send(method: Method, url: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::from(body.to_owned()))).expect("a request");
    let response = client.request(request).await.expect("answered");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.expect("a body").to_bytes();
    Answer { status, headers, body: String::from_utf8_lossy(&body).into_owned() }
}

/// `POST /v1/webrtc` with the browser's offer, presenting `key`, from `origin` if any.
async fn post_offer(base: &str, key: &str, origin: Option<&str>) -> Answer {
    let bearer = format!("Bearer {key}");
    let mut headers = vec![("content-type", "application/sdp"), ("authorization", bearer.as_str())];
    headers.extend(origin.map(|o| ("origin", o)));
    send(Method::POST, &format!("{base}/v1/webrtc"), &headers, &offer()).await
}

/// A browser's preflight for `method` with `headers` from `origin`.
async fn preflight(url: &str, origin: &str, method: &str, headers: &str) -> Answer {
    let asked =
        [("origin", origin), ("access-control-request-method", method), ("access-control-request-headers", headers)];
    send(Method::OPTIONS, url, &asked, "").await
}

/// The comma-separated list of `name`, lower-cased.
fn list(answer: &Answer, name: &str) -> Vec<String> {
    answer.header(name).unwrap_or_default().split(',').map(|s| s.trim().to_ascii_lowercase()).collect()
}

/// What an allowed origin's preflight must say.
fn allows(answer: &Answer, methods: &[&str]) {
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    assert_eq!(answer.header("access-control-allow-origin"), Some(APP), "the exact origin, never *");
    assert!(list(answer, "vary").contains(&"origin".into()), "{:?}", answer.headers);
    let allowed = list(answer, "access-control-allow-methods");
    for method in methods {
        assert!(allowed.contains(&method.to_ascii_lowercase()), "{method} in {allowed:?}");
    }
    let headers = list(answer, "access-control-allow-headers");
    for header in ["authorization", "content-type", "if-match"] {
        assert!(headers.contains(&header.into()), "{header} in {headers:?}");
    }
    assert_eq!(answer.header("access-control-max-age"), Some("3600"));
    assert_eq!(answer.header("access-control-allow-credentials"), None, "no cookies are asked for");
}

/// What every response to an allowed origin's request carries.
fn readable(answer: &Answer) {
    assert_eq!(answer.header("access-control-allow-origin"), Some(APP), "{:?}", answer.headers);
    let exposed = list(answer, "access-control-expose-headers");
    for header in ["location", "link", "etag", "www-authenticate"] {
        assert!(exposed.contains(&header.into()), "{header} exposed: {exposed:?}");
    }
    assert!(list(answer, "vary").contains(&"origin".into()));
}

/// No CORS header at all: the browser keeps the response from the page.
fn unreadable(answer: &Answer) {
    for name in ["access-control-allow-origin", "access-control-allow-methods", "access-control-expose-headers"] {
        assert_eq!(answer.header(name), None, "{name}: {:?}", answer.headers);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_allowed_origins_get_cors_and_others_none() {
    let (gateway, edge, base) = serve(&[("caller", "the-key", "")], true).await;
    let edge = edge.expect("the edge");
    let offers = format!("{base}/v1/webrtc");

    // The preflight of a POST with the credential and an SDP body.
    allows(&preflight(&offers, APP, "POST", "authorization,content-type").await, &["POST"]);
    let foreign = preflight(&offers, ELSEWHERE, "POST", "authorization,content-type").await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN, "{}", foreign.body);
    assert_eq!(foreign.code(), "origin");
    assert!(foreign.body.contains(ELSEWHERE) && foreign.body.contains("--allowed-origin"), "{}", foreign.body);
    unreadable(&foreign);
    // Not a preflight (no Origin): what the path takes.
    let plain = send(Method::OPTIONS, &offers, &[], "").await;
    assert_eq!((plain.status, plain.header("allow")), (StatusCode::NO_CONTENT, Some("POST, OPTIONS")));
    unreadable(&plain);

    // The offer itself: 201, its Location and Link readable by the page.
    let created = post_offer(&base, "the-key", Some(APP)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    readable(&created);
    let location = created.header("location").expect("a Location").to_owned();
    let resource = format!("{base}{location}");
    // Refusals are readable too: the page can say why.
    let wrong = post_offer(&base, "not-the-key", Some(APP)).await;
    assert_eq!((wrong.status, wrong.code().as_str()), (StatusCode::UNAUTHORIZED, "unknown_key"));
    readable(&wrong);
    assert_eq!(wrong.header("www-authenticate"), Some("Bearer"));
    // Another origin's offer (a request no preflight guarded) is refused as before, unreadable.
    let refused = post_offer(&base, "the-key", Some(ELSEWHERE)).await;
    assert_eq!((refused.status, refused.code().as_str()), (StatusCode::FORBIDDEN, "origin"), "{}", refused.body);
    unreadable(&refused);
    assert_eq!(gateway.metrics.refused.with_label_values(&["origin"]).get(), 1.0);

    // The call's resource: PATCH (trickle, restart) and DELETE.
    allows(&preflight(&resource, APP, "PATCH", "content-type,if-match").await, &["PATCH", "DELETE"]);
    allows(&preflight(&resource, APP, "DELETE", "authorization").await, &["PATCH", "DELETE"]);
    let foreign = preflight(&resource, ELSEWHERE, "DELETE", "authorization").await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    unreadable(&foreign);
    let trickle = [("content-type", "application/trickle-ice-sdpfrag"), ("origin", APP)];
    let patched = send(Method::PATCH, &resource, &trickle, "a=end-of-candidates\r\n").await;
    assert_eq!(patched.status, StatusCode::NO_CONTENT, "{}", patched.body);
    readable(&patched);
    let ended = send(Method::DELETE, &resource, &[("origin", APP)], "").await;
    assert_eq!(ended.status, StatusCode::OK);
    readable(&ended);
    let gone = send(Method::DELETE, &resource, &[("origin", APP)], "").await;
    assert_eq!((gone.status, gone.code().as_str()), (StatusCode::NOT_FOUND, "unknown_call"));
    readable(&gone);
    until("the call ended", || edge.live() == 0).await;

    // A gateway without the edge answers alike: the page reads its 404 and falls back.
    let (_, _, off) = serve(&[("caller", "the-key", "")], false).await;
    allows(&preflight(&format!("{off}/v1/webrtc"), APP, "POST", "authorization,content-type").await, &["POST"]);
    let not_here = post_offer(&off, "the-key", Some(APP)).await;
    assert_eq!((not_here.status, not_here.code().as_str()), (StatusCode::NOT_FOUND, "webrtc_off"));
    readable(&not_here);
    let foreign = preflight(&format!("{off}/v1/webrtc/x"), ELSEWHERE, "DELETE", "").await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    unreadable(&foreign);
}

/// RFC 8840 (and WHIP, RFC 9725 4.3.1): trickled candidates name their ICE session by
/// `a=ice-ufrag` alone. The call's own session's are taken; another's are refused with 412.
/// And WHIP's entity-tags: the `201`'s `ETag` names the ICE session, `If-Match` with it (or
/// `*`) holds, an ICE restart's `200` brings a new one, and the old one is then refused 412.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickle_fragment_names_its_ice_session_by_ufrag_alone() {
    let (_gateway, _edge, base) = serve(&[("caller", "the-key", "")], true).await;
    let created = post_offer(&base, "the-key", None).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let resource = format!("{base}{}", created.header("location").expect("a Location"));
    let trickle = [("content-type", "application/trickle-ice-sdpfrag")];
    let candidate = "a=candidate:2 1 udp 2113937151 192.0.2.11 40001 typ host";
    // The offer's ufrag is Ab3d.
    let ours = format!("a=ice-ufrag:Ab3d\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n{candidate}\r\n");
    let taken = send(Method::PATCH, &resource, &trickle, &ours).await;
    assert_eq!(taken.status, StatusCode::NO_CONTENT, "a ufrag without a password is a trickle: {}", taken.body);
    let end = send(Method::PATCH, &resource, &trickle, "a=ice-ufrag:Ab3d\r\na=end-of-candidates\r\n").await;
    assert_eq!(end.status, StatusCode::NO_CONTENT, "{}", end.body);
    // Another ICE session's candidates.
    let theirs = format!("a=ice-ufrag:Zz9z\r\n{candidate}\r\n");
    let stale = send(Method::PATCH, &resource, &trickle, &theirs).await;
    assert_eq!((stale.status, stale.code().as_str()), (StatusCode::PRECONDITION_FAILED, "other_ice_session"));
    assert!(stale.body.contains("is not this call's ICE session"), "{}", stale.body);
    // A password alone names nothing.
    let half = send(Method::PATCH, &resource, &trickle, "a=ice-pwd:0123456789012345678901\r\n").await;
    assert_eq!((half.status, half.code().as_str()), (StatusCode::BAD_REQUEST, "malformed_sdpfrag"));
    assert!(half.body.contains("a=ice-pwd without a=ice-ufrag"), "{}", half.body);

    // WHIP's entity-tag of the ICE session: the edge's ufrag, quoted.
    let etag = created.header("etag").expect("an ETag").to_owned();
    let edge_ufrag = created.body.lines().find_map(|l| l.strip_prefix("a=ice-ufrag:")).expect("a ufrag").trim();
    assert_eq!(etag, format!("\"{edge_ufrag}\""));
    let end = "a=ice-ufrag:Ab3d\r\na=end-of-candidates\r\n";
    for condition in [etag.as_str(), "*", "\"other\", ETAG"] {
        let condition = condition.replace("ETAG", &etag);
        let held = send(Method::PATCH, &resource, &[trickle[0], ("if-match", &condition)], end).await;
        assert_eq!(held.status, StatusCode::NO_CONTENT, "If-Match {condition}: {}", held.body);
    }
    let weak = format!("W/{etag}");
    for condition in ["\"other\"", weak.as_str()] {
        let failed = send(Method::PATCH, &resource, &[trickle[0], ("if-match", condition)], end).await;
        assert_eq!((failed.status, failed.code().as_str()), (StatusCode::PRECONDITION_FAILED, "other_ice_session"));
        assert!(failed.body.contains("is not this call's ICE session"), "{}", failed.body);
    }
    // An ICE restart (new ufrag and password, If-Match: * as WHIP asks): a new session, a new tag.
    let restart = "a=ice-ufrag:Ef5g\r\na=ice-pwd:abcdefghijklmnopqrstuvwy\r\n";
    let restarted = send(Method::PATCH, &resource, &[trickle[0], ("if-match", "*")], restart).await;
    assert_eq!(restarted.status, StatusCode::OK, "{}", restarted.body);
    assert_eq!(restarted.header("content-type"), Some("application/trickle-ice-sdpfrag"));
    let new_tag = restarted.header("etag").expect("the new session's ETag").to_owned();
    let new_ufrag = restarted.body.lines().find_map(|l| l.strip_prefix("a=ice-ufrag:")).expect("new ufrag").trim();
    assert_eq!(new_tag, format!("\"{new_ufrag}\""));
    assert_ne!(new_tag, etag, "a new ICE session");
    let stale = send(Method::PATCH, &resource, &[trickle[0], ("if-match", &etag)], "a=end-of-candidates\r\n").await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED, "the replaced session's tag: {}", stale.body);
    let late = send(Method::PATCH, &resource, &trickle, end).await;
    assert_eq!(late.status, StatusCode::PRECONDITION_FAILED, "the replaced session's ufrag: {}", late.body);
    let fresh = "a=ice-ufrag:Ef5g\r\na=end-of-candidates\r\n";
    let taken = send(Method::PATCH, &resource, &[trickle[0], ("if-match", &new_tag)], fresh).await;
    assert_eq!(taken.status, StatusCode::NO_CONTENT, "{}", taken.body);

    // The call took all that and is still there.
    let ended = send(Method::DELETE, &resource, &[], "").await;
    assert_eq!(ended.status, StatusCode::OK);
}

/// A key's `sessions=2`: its third live call is refused 429, another key's is not, and a
/// call that ends gives its place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_offers_from_one_credential_are_answered_429() {
    let (gateway, edge, base) =
        serve(&[("caller", "caller-key", "sessions=2"), ("other", "other-key", "")], true).await;
    let edge = edge.expect("the edge");
    let first = post_offer(&base, "caller-key", None).await;
    let second = post_offer(&base, "caller-key", None).await;
    assert_eq!((first.status, second.status), (StatusCode::CREATED, StatusCode::CREATED), "{}", second.body);
    let third = post_offer(&base, "caller-key", None).await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS, "{}", third.body);
    assert_eq!(third.code(), "key_sessions");
    assert!(
        third.body.contains(r#"the API key \"caller\" already has its 2 sessions open; close one first"#),
        "says whose limit and what to do: {}",
        third.body
    );
    assert_eq!(third.header("content-type"), Some("application/json"));
    assert!(!third.body.contains("a=ice-ufrag"), "no answer");
    assert_eq!(gateway.metrics.refused.with_label_values(&["key_sessions"]).get(), 1.0);
    // Another credential is not held back by it.
    let other = post_offer(&base, "other-key", None).await;
    assert_eq!(other.status, StatusCode::CREATED, "{}", other.body);
    assert_eq!(edge.live(), 3);
    // A call that ends gives its place back (the session slot goes with the call's task).
    let location = first.header("location").expect("a Location");
    assert_eq!(send(Method::DELETE, &format!("{base}{location}"), &[], "").await.status, StatusCode::OK);
    until("the call ended", || edge.live() == 2).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        let again = post_offer(&base, "caller-key", None).await;
        if again.status != StatusCode::TOO_MANY_REQUESTS || Instant::now() > deadline {
            break again;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
}

/// Waits (at most 10 s) until `test` holds.
async fn until(what: &str, test: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !test() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
