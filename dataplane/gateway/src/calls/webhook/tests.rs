//! The status callbacks against a real HTTP receiver on loopback (axum): the events of a
//! call in order and signed, a 5xx tried again, a 4xx not, a receiver that never answers
//! given up within the bounds; and the URL's checks.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::{HeaderMap, StatusCode};
use switchboard_core::outbound::{AnsweredBy, CallState, FromEdge, HungUpBy, ToEdge};

use super::*;
use crate::calls::{Calls, CallsConfig, PlaceRequest};

const SECRET: &[u8] = b"0123456789abcdef-call-webhooks";

/// What the receiver got: each request's headers, body as JSON, and body as sent.
type Got = Arc<Mutex<Vec<(HeaderMap, serde_json::Value, axum::body::Bytes)>>>;

/// A receiver answering the `n`th request (from 0) with `answer(n)`; `None`: never answers.
async fn receiver(answer: fn(usize) -> Option<u16>) -> (String, Got) {
    let got: Got = Arc::default();
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                let n = {
                    let mut seen = seen.lock().expect("lock");
                    seen.push((headers, serde_json::from_slice(&body).expect("JSON"), body));
                    seen.len() - 1
                };
                match answer(n) {
                    Some(code) => StatusCode::from_u16(code).expect("a status"),
                    None => std::future::pending().await,
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), got)
}

/// Callbacks signed with [`SECRET`], allowed to `receivers` (URL prefixes).
fn config(timeout: Duration, receivers: &[&str]) -> CallWebhookConfig {
    let client = switchboard_models::net::client::Trust::system().client().expect("a client");
    let receivers = Receivers::parse(receivers).expect("receivers");
    CallWebhookConfig {
        attempt_timeout: timeout,
        first_pause: Duration::from_millis(50),
        ..CallWebhookConfig::new(SECRET.to_vec(), client, receivers)
    }
}

fn counter() -> prometheus::CounterVec {
    prometheus::CounterVec::new(prometheus::Opts::new("d", "d"), &["outcome"]).expect("metric")
}

/// A gateway's calls with callbacks, an edge attached, and a call placed to `to` with the
/// callback `url`: the calls, the edge's id, the call's id, the deliveries' counter.
fn placed(url: &str, timeout: Duration) -> (Calls, u64, String, prometheus::CounterVec) {
    let deliveries = counter();
    let calls = Calls::new(CallsConfig::default(), counter(), counter())
        .with_webhooks(Some(config(timeout, &[url])), deliveries.clone());
    let (edge, mut to_edge) = calls.attach();
    let request = PlaceRequest {
        to: "+442079460018".into(),
        agent: "triage".into(),
        status_callback: Some(url.to_owned()),
        ..PlaceRequest::default()
    };
    let status = calls.place("k", ("bank", "triage"), request, Instant::now()).expect("placed");
    let Ok(ToEdge::Place { id, .. }) = to_edge.try_recv() else { panic!("nothing sent to the edge") };
    assert_eq!(id, status.id);
    (calls, edge, id, deliveries)
}

fn progress(id: &str, state: CallState, status: Option<u16>, hung_up_by: Option<HungUpBy>) -> FromEdge {
    FromEdge::Progress { id: id.into(), state, status, reason: None, session_id: None, hung_up_by }
}

async fn until(what: &str, limit: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_calls_events_reach_the_receiver_in_order_signed_with_the_end_of_call_reports_signature() {
    let (url, got) = receiver(|_| Some(204)).await;
    let (calls, edge, id, deliveries) = placed(&url, Duration::from_secs(5));
    let now = Instant::now();
    calls.report(edge, progress(&id, CallState::Dialing, None, None), now);
    calls.report(edge, progress(&id, CallState::Ringing, Some(180), None), now);
    calls.report(edge, progress(&id, CallState::Answered, Some(200), None), now);
    let detected = FromEdge::Detected { id: id.clone(), answered_by: AnsweredBy::Human, after_ms: 2800 };
    calls.report(edge, detected, now);
    calls.report(edge, progress(&id, CallState::Completed, None, Some(HungUpBy::Callee)), now);
    until("six events", Duration::from_secs(10), || got.lock().expect("lock").len() == 6).await;
    let got = got.lock().expect("lock").clone();
    let events: Vec<&str> = got.iter().map(|(_, body, _)| body["event"].as_str().expect("an event")).collect();
    assert_eq!(events, ["queued", "dialing", "ringing", "answered", "answered_by", "completed"]);
    for (n, (headers, body, sent)) in got.iter().enumerate() {
        assert_eq!(body["sequence"], n + 1);
        assert_eq!(body["id"], id.as_str());
        assert_eq!(body["final"], n == 5);
        let delivery = headers["x-switchboard-delivery"].to_str().expect("text");
        assert_eq!(delivery, format!("{id}:{}", n + 1));
        // The signature is the end-of-call report's: HMAC-SHA256 of "<t>.<body>".
        let signature = headers["x-switchboard-signature"].to_str().expect("text");
        let t: u64 = signature["t=".len()..signature.find(',').expect("t,v1")].parse().expect("a time");
        assert_eq!(signature, switchboard_record::webhook::signature(SECRET, t, sent));
    }
    let last = &got[5].1;
    assert_eq!((last["state"].as_str(), last["hung_up_by"].as_str()), (Some("completed"), Some("callee")));
    assert_eq!(last["answered_by"], "human");
    assert_eq!(got[2].1["sip_status"], 180);
    assert!(last["duration_ms"].as_u64().is_some(), "{last}");
    assert_eq!(deliveries.with_label_values(&["delivered"]).get(), 6.0);
}

#[tokio::test]
async fn a_5xx_is_tried_again_a_4xx_is_not_and_a_silent_receiver_is_given_up_within_the_bounds() {
    // 500, then 200: the event arrives twice (the same delivery id), then the next once.
    let (url, got) = receiver(|n| Some(if n == 0 { 500 } else { 200 })).await;
    let (calls, edge, id, deliveries) = placed(&url, Duration::from_secs(5));
    calls.report(edge, progress(&id, CallState::Busy, Some(486), None), Instant::now());
    until("three requests", Duration::from_secs(10), || got.lock().expect("lock").len() == 3).await;
    let delivered: Vec<String> = got
        .lock()
        .expect("lock")
        .iter()
        .map(|(h, _, _)| h["x-switchboard-delivery"].to_str().expect("text").to_owned())
        .collect();
    assert_eq!(delivered, [format!("{id}:1"), format!("{id}:1"), format!("{id}:2")]);
    assert_eq!(deliveries.with_label_values(&["retried"]).get(), 1.0);
    assert_eq!(deliveries.with_label_values(&["delivered"]).get(), 2.0);

    // 400: refused, not tried again; the next event is still sent.
    let (url, got) = receiver(|_| Some(400)).await;
    let (calls, edge, id, deliveries) = placed(&url, Duration::from_secs(5));
    calls.report(edge, progress(&id, CallState::NoAnswer, None, None), Instant::now());
    until("two requests", Duration::from_secs(10), || got.lock().expect("lock").len() == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(got.lock().expect("lock").len(), 2, "a 4xx is final");
    assert_eq!(deliveries.with_label_values(&["refused"]).get(), 2.0);

    // Never answers: each attempt times out, 3 retries, then the event is given up; the
    // call moves on meanwhile.
    let (url, got) = receiver(|_| None).await;
    let started = Instant::now();
    let (calls, edge, id, deliveries) = placed(&url, Duration::from_millis(500));
    calls.report(edge, progress(&id, CallState::Failed, Some(503), None), Instant::now());
    assert_eq!(calls.status("k", &id).expect("status").state, CallState::Failed, "the call is not held");
    until("both events given up", Duration::from_secs(10), || deliveries.with_label_values(&["failed"]).get() == 2.0)
        .await;
    assert!(got.lock().expect("lock").len() <= 8, "at most four attempts at each of two events");
    assert_eq!(deliveries.with_label_values(&["retried"]).get(), 6.0, "three retries of each");
    // 8 attempts of 500 ms and pauses of 50, 100, 200 ms twice: 4.7 s.
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn a_status_callback_is_an_http_url_under_a_named_receiver_and_needs_a_key_to_sign_it() {
    let hooks = config(Duration::from_secs(5), &["https://hooks.example.com/calls", "http://10.0.0.5:8080"]);
    assert!(check_url("https://hooks.example.com/calls?x=1", Some(&hooks)).is_ok());
    assert!(check_url("http://10.0.0.5:8080/hook", Some(&hooks)).is_ok());
    let refused = |url: &str, config: Option<&CallWebhookConfig>| match check_url(url, config) {
        Err(CallError::Invalid(why)) => why,
        other => panic!("{url:?}: {other:?}"),
    };
    for bad in ["ftp://example.com/x", "example.com/hook", "http:///nohost", "not a url"] {
        let why = refused(bad, Some(&hooks));
        assert!(why.starts_with("statusCallback: "), "{why}");
    }
    assert!(refused("ftp://example.com/x", Some(&hooks)).contains("http:// or https://"));
    let long = format!("https://example.com/{}", "a".repeat(MAX_URL_BYTES));
    assert!(refused(&long, Some(&hooks)).contains("at most 2048"));
    assert!(refused("https://example.com/hook", None).contains("--calls-webhook-secret-file"));
    // Anywhere else the gateway reaches is refused: its cloud's metadata, the API server,
    // another port of the same host, a path beside the named one.
    for elsewhere in [
        "http://169.254.169.254/latest/meta-data",
        "https://kubernetes.default.svc/api",
        "http://10.0.0.5:8081/hook",
        "https://hooks.example.com/callsign",
    ] {
        assert!(refused(elsewhere, Some(&hooks)).contains("--calls-webhook-allow"), "{elsewhere}");
    }
    assert!(refused("https://me@hooks.example.com/calls", Some(&hooks)).contains("user info"));

    // Placing a call: refused before anything is dialled; without a key, refused too.
    let calls = Calls::new(CallsConfig::default(), counter(), counter());
    let (_edge, mut to_edge) = calls.attach();
    let request = |url: &str| PlaceRequest {
        to: "+442079460018".into(),
        agent: "triage".into(),
        status_callback: Some(url.into()),
        ..PlaceRequest::default()
    };
    let refused = calls.place("k", ("bank", "triage"), request("https://example.com/hook"), Instant::now());
    assert!(matches!(&refused, Err(CallError::Invalid(why)) if why.contains("no key")), "{refused:?}");
    assert_eq!(refused.expect_err("refused").status(), 400);
    assert!(to_edge.try_recv().is_err(), "nothing dialled");

    // With a key: a callback outside the receivers is refused the same way.
    let calls = Calls::new(CallsConfig::default(), counter(), counter()).with_webhooks(Some(hooks), counter());
    let (_edge, mut to_edge) = calls.attach();
    let refused = calls.place("k", ("bank", "triage"), request("http://169.254.169.254/hook"), Instant::now());
    assert!(matches!(&refused, Err(CallError::Invalid(why)) if why.contains("--calls-webhook-allow")), "{refused:?}");
    assert!(to_edge.try_recv().is_err(), "nothing dialled");
}
