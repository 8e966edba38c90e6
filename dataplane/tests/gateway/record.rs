//! The conversation record through the gateway, with the real stores: a conversation from
//! triage to idv to banking leaves one record — every event in order, with times, the
//! Agent that spoke, tool calls with durations, tokens and cost — with card, e-mail, phone,
//! account and sort-code numbers redacted; `switchboard sessions show` prints it, the API
//! serves it to a reader allowed to see it, and a real HTTP receiver gets the end-of-call
//! report, signed, after one refused delivery. Against a
//! real PostgreSQL, a server restarted mid-conversation loses no record.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use sha2::Digest as _;
use switchboard_core::protocol::{ClientMessage, ServerMessage};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_record::reporting;
use switchboard_record::store::SessionRecord;
use switchboard_record::summary::SummaryConfig;
use switchboard_record::webhook::{Report, WebhookConfig};
use switchboard_record::{RecordConfig, RecordMetrics, Recorder, Redactor, Store};
use switchboard_sim::banking_script;
use tokio_util::sync::CancellationToken;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::postgres::Postgres;

/// What the caller says first: an e-mail address, a phone number and a card number, which
/// the simulator's default reply repeats.
pub(crate) const FIRST: &str =
    "Hello, I'm ada@example.com, call me on +44 20 7946 0958, my number is 4111 1111 1111 1111";
pub(crate) const SECRETS: [&str; 6] = ["ada@example.com", "7946 0958", "4111 1111", "12345678", "12-34-56", "87654321"];

pub(crate) fn recorder(store: Store, webhook: Option<WebhookConfig>) -> (Arc<Recorder>, CancellationToken) {
    recorder_with(store, webhook, RecordConfig::default(), None)
}

/// A recorder of `config` (flushing every 50 ms) with its writer running, summarising with
/// `summary` and reporting to `webhook` when given.
pub(crate) fn recorder_with(
    store: Store,
    webhook: Option<WebhookConfig>,
    config: RecordConfig,
    summary: Option<(Arc<dyn switchboard_models::TextModel>, SummaryConfig)>,
) -> (Arc<Recorder>, CancellationToken) {
    let config = RecordConfig { flush_interval: Duration::from_millis(50), ..config };
    // Only the built-in rules here: account numbers and sort codes are the idv Agent's own
    // rules (examples/banking/idv.yaml, `spec.record.redact`), which the routes carry.
    let redactor = Redactor::default();
    let metrics = RecordMetrics::new().expect("metrics");
    let (recorder, mut writer) = Recorder::new(store.clone(), config, redactor, Default::default(), metrics);
    let client = || switchboard_models::net::client::Trust::system().client().expect("client");
    let webhook = webhook.map(|webhook| (webhook, client()));
    let followers = reporting::Followers { webhook, summary, analysis: None };
    if let Some(ended) = reporting::start(&recorder, &store, followers) {
        writer = writer.reporting_to(ended);
    }
    let stop = CancellationToken::new();
    tokio::spawn(writer.run(stop.clone()));
    (recorder, stop)
}

/// Webhook POSTs as a receiver gets them: headers and body.
pub(crate) type Posts = tokio::sync::mpsc::UnboundedReceiver<(axum::http::HeaderMap, String)>;

/// A real HTTP receiver of end-of-call reports: it answers the first POST 503 (the
/// gateway must retry) and the next ones 200; each POST's headers and body come out.
pub(crate) async fn receiver() -> (String, Posts) {
    receiver_failing(1).await
}

/// [`receiver`], answering its first `failures` POSTs 503.
pub(crate) async fn receiver_failing(failures: usize) -> (String, Posts) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let posts = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let (tx, posts) = (tx.clone(), posts.clone());
            async move {
                let _ = tx.send((headers, body));
                if posts.fetch_add(1, Ordering::SeqCst) < failures {
                    axum::http::StatusCode::SERVICE_UNAVAILABLE
                } else {
                    axum::http::StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

pub(crate) async fn fleet(recorder: Arc<Recorder>, auth: Auth) -> Fleet {
    let script = banking_script().expect("script");
    Fleet::recording(&[], auth, GatewayConfig::default(), ResumeStore::default(), script, Some(recorder)).await
}

/// Keys: `web` opens sessions, `ops` reads the bank's record, `shop` reads only its own.
pub(crate) fn keys() -> Auth {
    let line = |name: &str, key: &str, options: &str| {
        let digest: String = sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        format!("{name} {digest} {options}\n")
    };
    let file = [
        line("web", "web-key", ""),
        line("web2", "web2-key", ""),
        line("ops", "ops-key", "records=read agents=bank/*"),
        line("shop", "shop-key", "records=read agents=shop/*"),
    ]
    .concat();
    Auth::new(Some(&file), Vec::new()).expect("keys")
}

/// The session's id, from its first `bidi_connection_start`.
pub(crate) fn session_id(messages: &[ServerMessage]) -> String {
    messages
        .iter()
        .find_map(|m| match m {
            ServerMessage::BidiConnectionStart { session_id, .. } => Some(session_id.clone()),
            _ => None,
        })
        .expect("a bidi_connection_start")
}

/// The newest resume token among `messages` (what continuing the session needs).
pub(crate) fn newest_token(messages: &[ServerMessage]) -> String {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ServerMessage::BidiConnectionStart { resume_token: Some(token), .. } => Some(token.clone()),
            _ => None,
        })
        .expect("a bidi_connection_start with a resume token")
}

/// An ended conversation: its session id and the newest resume token its client got.
pub(crate) struct Ended {
    pub id: String,
    pub token: String,
}

/// Triage (the caller's details, echoed), idv (verified), banking (a balance); returns
/// the session id and its newest resume token. `between` runs before the banking turn.
pub(crate) async fn conversation<F: std::future::Future<Output = ()>>(
    url: &str,
    headers: &[(&'static str, &str)],
    between: impl FnOnce() -> F,
) -> Ended {
    let mut client = Client::connect_with(url, headers).await;
    client.send(&ClientMessage::SessionStart(Default::default())).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let id = session_id(&hello);
    client.say(FIRST).await;
    let echo = client.turn().await;
    assert!(
        replies(&echo).iter().any(|r| r.contains("4111 1111 1111 1111")),
        "the live reply is not redacted: {echo:?}"
    );
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    between().await;
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = client.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "{balance:?}");
    client.send(&ClientMessage::Close {}).await;
    let (code, _) = client.closed().await;
    assert_eq!(code, 1000);
    Ended { id, token: newest_token(&client.seen) }
}

/// The recorder's metrics once they show `line`, or after 10 s (a sender counts a delivery
/// once it has read the receiver's answer, after the receiver handed the report on).
pub(crate) async fn metrics_showing(recorder: &Recorder, line: &str) -> String {
    for _ in 0..100 {
        let metrics = recorder.metrics.render();
        if metrics.contains(line) {
            return metrics;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    recorder.metrics.render()
}

/// The record of `id` once its end is written (the writer batches).
pub(crate) async fn ended(store: &Store, id: &str) -> SessionRecord {
    for _ in 0..200 {
        if let Ok(Some(record)) = store.show(id).await
            && record.summary.ended_at.is_some()
        {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("session {id} was not recorded as ended within 20 s: {:?}", store.show(id).await);
}

pub(crate) fn kinds(record: &SessionRecord) -> Vec<&str> {
    record.events.iter().map(|e| e.kind.as_str()).collect()
}

/// Everything the record must hold of that conversation.
fn check(record: &SessionRecord) {
    let s = &record.summary;
    assert_eq!(s.agents, ["bank/triage", "bank/idv", "bank/banking"], "{s:?}");
    assert_eq!(
        (s.first_agent.as_str(), s.last_agent.as_str(), s.outcome.as_str()),
        ("bank/triage", "bank/banking", "ended")
    );
    assert!(s.turns >= 4 && s.input_tokens > 0 && s.output_tokens > 0 && s.cost_usd > 0.0, "{s:?}");
    let json = serde_json::to_string(record).expect("json");
    for secret in SECRETS {
        assert!(!json.contains(secret), "{secret} is in the record: {json}");
    }
    for label in
        ["[redacted:email]", "[redacted:phone]", "[redacted:card]", "[redacted:account]", "[redacted:sort-code]"]
    {
        assert!(json.contains(label), "{label} in {json}");
    }
    assert!(record.events.windows(2).all(|w| w[0].at_us <= w[1].at_us), "events in time order");
    let kinds = kinds(record);
    assert_eq!(kinds.first(), Some(&"session_start"));
    assert_eq!(kinds.last(), Some(&"session_end"));
    let at = |kind: &str, pred: &dyn Fn(&serde_json::Value) -> bool| {
        record
            .events
            .iter()
            .position(|e| e.kind == kind && pred(&e.data))
            .unwrap_or_else(|| panic!("no {kind} in {kinds:?}"))
    };
    let first_user = at("user", &|d| d["text"].as_str().is_some_and(|t| t.contains("[redacted:card]")));
    let echo = at("assistant", &|d| d["text"].as_str().is_some_and(|t| t.contains("[redacted:email]")));
    let to_idv = at("handoff", &|d| d["to"] == "idv");
    let verify = at("tool_start", &|d| d["name"] == "perform_idv_check");
    let verified = at("tool_complete", &|d| d["name"] == "perform_idv_check" && d["duration_ms"].is_u64());
    let caller = at("memory", &|d| d["key"] == "verifiedUser");
    let to_banking = at("handoff", &|d| d["to"] == "banking");
    let balance = at("tool_complete", &|d| d["name"] == "check_balance");
    assert!(
        first_user < echo
            && echo < to_idv
            && to_idv < verify
            && verify < verified
            && verified < to_banking
            && to_banking < balance,
        "in order: {kinds:?}"
    );
    assert!(caller > verify, "{kinds:?}");
    assert_eq!(record.events[verify].agent, "bank/idv");
    assert_eq!(record.events[balance].agent, "bank/banking");
    let turn = record.events.iter().find(|e| e.kind == "turn").expect("a turn");
    assert!(turn.data["turn_ms"].is_u64() && turn.data["first_reply_ms"].is_u64(), "{turn:?}");
    let usage = record.events.iter().find(|e| e.kind == "usage").expect("usage");
    assert!(usage.data["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{usage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_across_three_agents_leaves_one_redacted_record_in_sqlite() {
    let dir = std::env::temp_dir().join(format!("switchboard-record-{}", uuid::Uuid::new_v4()));
    let file = dir.join("record.db");
    let store = Store::file(&file).expect("store");
    let (hook, mut posts) = receiver().await;
    let secret = b"a shared secret of the bank's".to_vec();
    let webhook = WebhookConfig { url: hook.parse().expect("url"), secret: secret.clone(), retry: Default::default() };
    let (recorder, stop) = recorder(store.clone(), Some(webhook));
    let fleet = fleet(recorder.clone(), keys()).await;
    let id = conversation(&fleet.url, &[("x-api-key", "web-key")], || async {}).await.id;
    let record = ended(&store, &id).await;
    check(&record);
    assert_eq!(record.summary.close_code, Some(1000));
    assert_eq!(record.summary.credential, "web");

    // The gateway's API: only a key allowed to read the record, about its namespaces.
    let addr: std::net::SocketAddr =
        fleet.url.trim_start_matches("ws://").split('/').next().and_then(|a| a.parse().ok()).expect("addr");
    let one = format!("/v1/sessions/{id}");
    assert_eq!(get(addr, "/v1/sessions", None).await.0, 401);
    let (status, body) = get(addr, "/v1/sessions", Some("web-key")).await;
    assert_eq!((status, body.contains("records_not_allowed")), (403, true), "{body}");
    let (status, body) = get(addr, "/v1/sessions", Some("shop-key")).await;
    assert_eq!((status, body.contains(&id)), (200, false), "another namespace's reader: {body}");
    assert_eq!(get(addr, &one, Some("shop-key")).await.0, 404);
    let (status, body) = get(addr, "/v1/sessions?agent=bank/banking&limit=5", Some("ops-key")).await;
    assert_eq!((status, body.contains(&id)), (200, true), "{body}");
    let (status, body) = get(addr, &one, Some("ops-key")).await;
    assert_eq!(status, 200, "{body}");
    let read: SessionRecord = serde_json::from_str(&body).expect("a session record");
    assert_eq!(read, record);

    // The end-of-call report: refused once (503), delivered on the retry, signed.
    let mut deliveries = Vec::new();
    for _ in 0..2 {
        let post = tokio::time::timeout(Duration::from_secs(20), posts.recv()).await.expect("a report in time");
        deliveries.push(post.expect("a report"));
    }
    assert_eq!(deliveries[0].1, deliveries[1].1, "the retry carries the same report");
    let (headers, body) = &deliveries[1];
    assert_eq!(headers["x-switchboard-delivery"], id.as_str());
    let signature = headers["x-switchboard-signature"].to_str().expect("text");
    let (t, mac) = signature.strip_prefix("t=").and_then(|s| s.split_once(",v1=")).expect("t=…,v1=…");
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &secret);
    let signed = format!("{t}.{body}");
    aws_lc_rs::hmac::verify(&key, signed.as_bytes(), &hex(mac)).expect("the signature verifies with the shared secret");
    let report: Report = serde_json::from_str(body).expect("a report");
    assert_eq!(report.agents, ["bank/triage", "bank/idv", "bank/banking"]);
    assert_eq!((report.outcome.as_str(), report.close_code, report.turns), ("ended", Some(1000), record.summary.turns));
    assert_eq!((report.cost_usd, report.input_tokens), (record.summary.cost_usd, record.summary.input_tokens));
    assert!(report.tool_calls >= 3 && report.duration_ms.is_some_and(|d| d > 0), "{report:?}");
    assert_eq!(report.record, one);
    // Counted once the sender has read the receiver's 200, which comes after the receiver
    // handed the report to this test.
    let delivered = r#"switchboard_gateway_webhook_deliveries_total{outcome="delivered"} 1"#;
    let metrics = metrics_showing(&recorder, delivered).await;
    assert!(metrics.contains(delivered), "{metrics}");

    // The command line reads the same file.
    let url = format!("sqlite:{}", file.display());
    let show = sessions(&["--record-database-url", &url, "show", &id]);
    for needle in
        ["bank/triage -> bank/idv -> bank/banking", "[redacted:account]", "perform_idv_check", "check_balance"]
    {
        assert!(show.contains(needle), "{needle} in\n{show}");
    }
    assert!(!show.contains("12345678"), "{show}");
    let list = sessions(&["--record-database-url", &url, "list", "--agent", "bank/banking", "--since", "1h"]);
    assert!(list.contains(&id), "{list}");
    let none = sessions(&["--record-database-url", &url, "list", "--agent", "bank/disputes"]);
    assert!(none.contains("no recorded sessions match"), "{none}");
    let metrics = recorder.metrics.render();
    assert!(
        metrics
            .contains(r#"switchboard_gateway_cost_microdollars_total{agent="bank/idv",model="amazon.nova-lite-v1:0"}"#),
        "{metrics}"
    );
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

/// Account numbers and sort codes are the idv Agent's rules (`spec.record.redact`), but a
/// caller who says them at triage, before any session reached idv, finds them redacted in
/// the record too: a session is recorded under every rule of its namespace from its first
/// line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_caller_says_before_reaching_the_agent_with_the_rule_is_redacted_too() {
    let dir = std::env::temp_dir().join(format!("switchboard-record-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (recorder, stop) = recorder(store.clone(), None);
    let fleet = fleet(recorder, keys()).await;
    let mut client = Client::connect_with(&fleet.url, &[("x-api-key", "web-key")]).await;
    client.send(&ClientMessage::SessionStart(Default::default())).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let id = session_id(&hello);
    // Triage takes it as the reason to transfer to idv: the user's line, the transfer
    // tool's input and the handoff's reason all carry it, before idv is reached.
    client.say("Hi, my account is 12345678 and my sort code is 12-34-56").await;
    let turn = client.turn().await;
    assert!(
        turn.iter().any(|m| matches!(m, ServerMessage::ToolStart { name, input, .. }
            if name == "transfer_to_idv" && input.to_string().contains("12345678"))),
        "what is live is not redacted: {turn:?}"
    );
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    client.send(&ClientMessage::Close {}).await;
    client.closed().await;
    let record = ended(&store, &id).await;
    assert_eq!(record.summary.first_agent, "bank/triage");
    let kept = serde_json::to_string(&record).expect("json");
    for secret in ["12345678", "12-34-56"] {
        assert!(!kept.contains(secret), "{secret} in the record: {kept}");
    }
    assert!(kept.contains("[redacted:account]") && kept.contains("[redacted:sort-code]"), "{kept}");
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

/// GETs `path` with an API key, over a real connection: (status, body).
pub(crate) async fn get(addr: std::net::SocketAddr, path: &str, key: Option<&str>) -> (u16, String) {
    let headers: Vec<(&str, &str)> = key.map(|key| ("x-api-key", key)).into_iter().collect();
    crate::client::get_with(addr, path, &headers).await
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).filter_map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// Runs `switchboard sessions …`; its stdout.
fn sessions(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard")).arg("sessions").args(args).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "sessions {args:?} failed: {}{stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_restarted_mid_conversation_loses_no_record() {
    let pg = Postgres::start();
    let store = Store::open(&pg.url).expect("store");
    let (recorder, stop) = recorder(store.clone(), None);
    let fleet = fleet(recorder.clone(), Auth::default()).await;
    let id = conversation(&fleet.url, &[], || async {
        // The verification is written; the database goes down for the banking turn.
        pg.stop();
    })
    .await
    .id;
    // Nothing can be written while it is down: the entries wait.
    let metrics = || recorder.metrics.render();
    for _ in 0..100 {
        if !metrics().contains("switchboard_gateway_record_write_errors_total 0") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!metrics().contains("switchboard_gateway_record_write_errors_total 0"), "a write failed: {}", metrics());
    pg.start_again();
    let record = ended(&store, &id).await;
    check(&record);
    assert!(!metrics().contains("switchboard_gateway_record_entries_dropped_total"), "nothing dropped: {}", metrics());
    stop.cancel();
}
