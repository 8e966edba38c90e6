//! Outbound calls' status callbacks (`switchboard call --status-callback`, `POST /v1/calls`
//! `statusCallback`): a real HTTP receiver (hyper, on loopback, in this process) gets each
//! step of a real call — placed through the SIP edge to a `baresip` that answers, or is
//! busy, or never answers — as signed JSON, in order, ending with the final event (who hung
//! up, how long). A receiver that answers 500 first gets the event again; one that never
//! answers is given up within the bounds while the call goes on; a bad URL is refused 400.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use crate::outbound::call_with;
use crate::phone::{Callee, free_phone_port};
use crate::stack::{Stack, metrics, sample, stack_custom, wait_for};

/// The key deliveries are signed with (`--calls-webhook-secret-file`).
const SECRET: &str = "a-test-key-of-more-than-16-bytes";

/// One request the receiver got.
#[derive(Clone, Debug)]
pub(crate) struct Delivery {
    path: String,
    delivery: String,
    signature: String,
    body: Bytes,
    json: serde_json::Value,
}

/// An HTTP server on loopback: `/ok` answers 200, `/flaky` 500 the first time it sees a
/// delivery id and 200 after, `/silent` never answers.
pub(crate) struct Receiver {
    base: String,
    got: Arc<Mutex<Vec<Delivery>>>,
    _runtime: tokio::runtime::Runtime,
}

async fn handle(
    got: Arc<Mutex<Vec<Delivery>>>,
    seen: Arc<Mutex<HashSet<String>>>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_owned();
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let (delivery, signature) = (header("x-switchboard-delivery"), header("x-switchboard-signature"));
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let first = seen.lock().expect("lock").insert(delivery.clone());
    got.lock().expect("lock").push(Delivery { path: path.clone(), delivery, signature, body, json });
    let status = match path.as_str() {
        "/silent" => std::future::pending().await,
        "/flaky" if first => 500,
        _ => 200,
    };
    let mut response = hyper::Response::new(Full::new(Bytes::new()));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
    Ok(response)
}

impl Receiver {
    pub(crate) fn start() -> Self {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("the receiver binds");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let got: Arc<Mutex<Vec<Delivery>>> = Arc::default();
        let seen: Arc<Mutex<HashSet<String>>> = Arc::default();
        let shared = got.clone();
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (got, seen) = (shared.clone(), seen.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request| handle(got.clone(), seen.clone(), request));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Self { base, got, _runtime: runtime }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What reached `path`, in the order it came.
    pub(crate) fn got(&self, path: &str) -> Vec<Delivery> {
        self.got.lock().expect("lock").iter().filter(|d| d.path == path).cloned().collect()
    }
}

/// The stack with the outbound `trunks` (`[NAME=]URI`) ringing at most `ring_seconds`, its
/// gateway signing status callbacks with [`SECRET`] (`attempt_seconds` an attempt) and
/// sending them only under `receiver`'s URL.
fn callback_stack(
    name: &str,
    trunks: &[String],
    ring_seconds: &str,
    attempt_seconds: &str,
    receiver: &Receiver,
) -> Stack {
    let secret = std::env::temp_dir().join(format!("switchboard-sip-{name}-secret-{}", std::process::id()));
    std::fs::write(&secret, SECRET).expect("the secret");
    let secret = secret.to_string_lossy().into_owned();
    let mut edge: Vec<&str> = trunks.iter().flat_map(|t| ["--outbound-trunk", t.as_str()]).collect();
    edge.extend(["--caller-id", "+4930123456", "--ring-timeout-seconds", ring_seconds]);
    let allow = receiver.url("/");
    let local = [
        "--calls-webhook-secret-file",
        &secret,
        "--calls-webhook-timeout-seconds",
        attempt_seconds,
        "--calls-webhook-allow",
        &allow,
    ];
    let stack = stack_custom(name, &edge, "", &local);
    stack.taking_outbound_calls()
}

/// The events of `deliveries` once each (a retried one is there twice), checked: each
/// signed as the end-of-call report is, numbered 1, 2, ... in order, all of one call.
fn events(deliveries: &[Delivery]) -> Vec<serde_json::Value> {
    let mut events: Vec<serde_json::Value> = Vec::new();
    for d in deliveries {
        let t: u64 = d
            .signature
            .strip_prefix("t=")
            .and_then(|rest| rest.split(',').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("a signature: {d:?}"));
        let expected = switchboard_gateway::record::webhook::signature(SECRET.as_bytes(), t, &d.body);
        assert_eq!(d.signature, expected, "signed as the end-of-call report is: {d:?}");
        let id = d.json["id"].as_str().expect("the call's id");
        assert_eq!(d.delivery, format!("{id}:{}", d.json["sequence"]), "{d:?}");
        if events.last().is_some_and(|last| last["sequence"] == d.json["sequence"]) {
            continue; // tried again after a 500
        }
        assert_eq!(d.json["sequence"], events.len() + 1, "in order: {deliveries:?}");
        assert!(events.first().is_none_or(|first| first["id"] == d.json["id"]), "one call: {deliveries:?}");
        events.push(d.json.clone());
    }
    events
}

fn names(events: &[serde_json::Value]) -> Vec<&str> {
    events.iter().map(|e| e["event"].as_str().expect("an event")).collect()
}

#[test]
fn an_answered_calls_steps_reach_its_callback_signed_in_order_and_a_silent_one_does_not_hold_the_call() {
    let receiver = Receiver::start();
    // Two phones behind two trunks: one call's receiver answers, the other's never does.
    let (port, silent_port) = (free_phone_port(), free_phone_port());
    let trunks = [format!("ok=sip:127.0.0.1:{port}"), format!("silent=sip:127.0.0.1:{silent_port}")];
    let stack = callback_stack("callback", &trunks, "20", "1", &receiver);
    let callee = Callee::listen(&stack, "callee", "auto", 4, port);
    let other = Callee::listen(&stack, "other", "auto", 4, silent_port);
    let context = || {
        let (edge, one, two) = (stack.edge.log_text(), callee.phone.log(), other.phone.log());
        format!("--- edge ---\n{edge}\n--- callee ---\n{one}\n--- other ---\n{two}")
    };

    // A URL that is not http(s) is refused before anything is dialled.
    let bad = ["--trunk", "ok", "--status-callback", "ftp://127.0.0.1/hook"];
    let (ok, refused) = call_with(&stack, &callee.uri(), &bad).join().expect("switchboard call");
    assert!(!ok && refused.contains("400 invalid_call") && refused.contains("statusCallback"), "{refused}");
    // So is one anywhere but the receiver the gateway was told of (its cloud's metadata here).
    let elsewhere = ["--trunk", "ok", "--status-callback", "http://169.254.169.254/latest/meta-data"];
    let (ok, refused) = call_with(&stack, &callee.uri(), &elsewhere).join().expect("switchboard call");
    assert!(!ok && refused.contains("400 invalid_call") && refused.contains("--calls-webhook-allow"), "{refused}");

    let placed = call_with(&stack, &callee.uri(), &["--trunk", "ok", "--status-callback", &receiver.url("/ok")]);
    let answered = || receiver.got("/ok").iter().any(|d| d.json["event"] == "answered");
    wait_for("the call is answered", Duration::from_secs(40), answered, context);
    std::thread::sleep(Duration::from_secs(4));
    callee.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok && printed.contains("hung up by the callee"), "{printed}\n{}", context());
    let over = |path: &str| receiver.got(path).iter().any(|d| d.json["final"] == true);
    wait_for("the final event", Duration::from_secs(10), || over("/ok"), context);
    let events = events(&receiver.got("/ok"));
    let names = names(&events);
    assert_eq!(names.first(), Some(&"queued"), "{names:?}");
    assert_eq!(names.last(), Some(&"completed"), "{names:?}");
    let order = ["queued", "dialing", "ringing", "answered", "completed"];
    let ranks: Vec<usize> = names.iter().map(|n| order.iter().position(|o| o == n).expect("a known event")).collect();
    assert!(ranks.windows(2).all(|w| w[0] < w[1]), "in the call's order: {names:?}");
    assert!(names.contains(&"dialing") && names.contains(&"answered"), "{names:?}");
    let last = events.last().expect("an event");
    assert_eq!(last["hung_up_by"], "callee", "{last}");
    assert!(last["duration_ms"].as_u64().is_some_and(|ms| ms >= 3000), "{last}");
    assert!(last["session_id"].as_str().is_some_and(|s| s.starts_with("gw-")), "{last}");
    assert!(events.iter().all(|e| e["final"] == (e["event"] == "completed")), "{events:?}");
    let answered = events.iter().find(|e| e["event"] == "answered").expect("answered");
    assert_eq!(answered["sip_status"], 200);

    // A receiver that never answers: each attempt times out (1 s) and is tried 3 times
    // more, then the event is given up; the call is answered and completes meanwhile.
    let silent = ["--trunk", "silent", "--status-callback", &receiver.url("/silent")];
    let placed = call_with(&stack, &other.uri(), &silent);
    let answered = || stack.edge.log_text().matches("outbound call answered").count() == 2;
    wait_for("the second call is answered", Duration::from_secs(40), answered, context);
    std::thread::sleep(Duration::from_secs(2));
    other.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok && printed.contains("completed"), "the call went on: {printed}\n{}", context());
    let series = |outcome: &str| format!("switchboard_gateway_call_webhook_deliveries_total{{outcome=\"{outcome}\"}}");
    let failed = || sample(&metrics(&stack), &series("failed")).is_some_and(|n| n >= 1.0);
    // 4 attempts of 1 s and pauses of 0.5, 1 and 2 s: the first event is given up in 7.5 s.
    wait_for("the first event given up", Duration::from_secs(20), failed, context);
    let got = receiver.got("/silent");
    let first: Vec<&Delivery> = got.iter().filter(|d| d.json["sequence"] == 1).collect();
    // Four attempts (a request still on its way when its attempt timed out may not be here).
    assert!((1..=4).contains(&first.len()), "at most four attempts at the first event: {got:?}");
    let retried = sample(&metrics(&stack), &series("retried")).unwrap_or_default();
    assert!(retried >= 3.0, "three retries of the first event: {retried}");
    assert!(got.iter().all(|d| d.json["sequence"].as_u64() <= Some(2)), "one event at a time, in order: {got:?}");
    assert_eq!(first[0].json["event"], "queued");
}

#[test]
fn busy_and_unanswered_calls_report_their_outcome_and_a_5xx_is_tried_again() {
    let receiver = Receiver::start();
    let port = free_phone_port();
    // 5 s an attempt: a 200 is never taken for a timeout on a busy machine.
    let stack = callback_stack("callback-busy", &[format!("sip:127.0.0.1:{port}")], "8", "5", &receiver);
    // Rings and never answers; one call at a time, so a second call meanwhile is refused 486.
    let callee = Callee::listen(&stack, "callee", "manual", 1, port);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    let uri = callee.uri();
    let ringing = call_with(&stack, &uri, &["--status-callback", &receiver.url("/ok")]);
    wait_for("the callee rings", Duration::from_secs(15), || callee.phone.log().contains("Incoming call"), context);
    let (ok, busy) = call_with(&stack, &uri, &["--status-callback", &receiver.url("/flaky")]).join().expect("busy");
    assert!(!ok && busy.contains("busy (SIP 486)"), "{busy}\n{}", context());
    let (ok, unanswered) = ringing.join().expect("the first call");
    assert!(!ok && unanswered.contains("no_answer"), "{unanswered}\n{}", context());
    let over = |path: &str| receiver.got(path).iter().any(|d| d.json["final"] == true);
    wait_for("both final events", Duration::from_secs(20), || over("/ok") && over("/flaky"), context);

    let unanswered = events(&receiver.got("/ok"));
    assert_eq!(names(&unanswered), ["queued", "dialing", "ringing", "no_answer"], "{unanswered:?}");
    let last = unanswered.last().expect("an event");
    assert_eq!((last["final"].as_bool(), last["state"].as_str()), (Some(true), Some("no_answer")), "{last}");
    assert!(last.get("duration_ms").is_none() && last.get("hung_up_by").is_none(), "never answered: {last}");

    // Every event of the busy call came twice: 500, then 200.
    let flaky = receiver.got("/flaky");
    let busy = events(&flaky);
    assert_eq!(names(&busy).last(), Some(&"busy"), "{busy:?}");
    assert_eq!(busy.last().expect("busy")["sip_status"], 486);
    assert_eq!(flaky.len(), 2 * busy.len(), "each event retried once: {flaky:?}");
    let metrics = metrics(&stack);
    let series = |outcome: &str| {
        sample(&metrics, &format!("switchboard_gateway_call_webhook_deliveries_total{{outcome=\"{outcome}\"}}"))
    };
    assert_eq!(series("retried"), Some(busy.len() as f64), "{metrics}");
    assert_eq!(series("delivered"), Some((busy.len() + unanswered.len()) as f64), "{metrics}");
}
