use switchboard_core::protocol::ServerMessage;

use super::*;
use crate::{Prices, RecordConfig, RecordMetrics, Store};

#[tokio::test]
async fn a_fallbacks_tokens_are_counted_and_priced_as_the_model_that_answered() {
    let dir = std::env::temp_dir().join(format!("switchboard-log-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let metrics = RecordMetrics::new().expect("metrics");
    let (recorder, _writer) =
        Recorder::new(store, RecordConfig::default(), Redactor::default(), Prices::default(), metrics);
    let mut log = SessionLog::new(recorder.clone(), "gw-1");
    // The session's model, as its bidi_connection_start named it.
    log.model = "amazon.nova-lite-v1:0".into();
    let usage = |model: Option<&str>| ServerMessage::BidiUsage {
        input_tokens: 1_000_000,
        output_tokens: 0,
        total_tokens: 1_000_000,
        modality: None,
        model: model.map(str::to_owned),
    };
    log.message("bank/banking", usage(Some("amazon.nova-pro-v1:0@us-west-2")));
    log.message("bank/banking", usage(None));
    let prices = &recorder.prices;
    let pro = prices.cost("amazon.nova-pro-v1:0", 1_000_000, 0, None).expect("Nova Pro is priced");
    let lite = prices.cost("amazon.nova-lite-v1:0", 1_000_000, 0, None).expect("Nova Lite is priced");
    assert_ne!(pro, lite);
    let text = recorder.metrics.render();
    let line = |name: &str, model: &str| {
        let prefix = format!("{name}{{agent=\"bank/banking\",");
        let found = text.lines().find(|l| l.starts_with(&prefix) && l.contains(&format!("model=\"{model}\"")));
        found.and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse::<f64>().ok())
    };
    let micro = |usd: f64| (usd * 1e6).round();
    assert_eq!(
        line("switchboard_gateway_cost_microdollars_total", "amazon.nova-pro-v1:0@us-west-2"),
        Some(micro(pro)),
        "{text}"
    );
    assert_eq!(
        line("switchboard_gateway_cost_microdollars_total", "amazon.nova-lite-v1:0"),
        Some(micro(lite)),
        "{text}"
    );
    assert_eq!(line("switchboard_gateway_tokens_total", "amazon.nova-pro-v1:0@us-west-2"), Some(1_000_000.0), "{text}");
    assert!(!text.contains("switchboard_gateway_unpriced_usage_total{"), "both are priced: {text}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A client's `tool_consent` is recorded only as the answer to a consent request the
/// runtime made, once: any other id (a flood of 64 KB ids, say) writes nothing.
#[tokio::test]
async fn only_the_answer_to_a_consent_request_is_recorded_once() {
    let dir = std::env::temp_dir().join(format!("switchboard-log-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let metrics = RecordMetrics::new().expect("metrics");
    let config = RecordConfig { flush_interval: std::time::Duration::from_millis(10), ..RecordConfig::default() };
    let (recorder, writer) = Recorder::new(store.clone(), config, Redactor::default(), Prices::default(), metrics);
    let stop = tokio_util::sync::CancellationToken::new();
    let writing = tokio::spawn(writer.run(stop.clone()));
    let mut log = SessionLog::new(recorder.clone(), "gw-consent");
    log.started("bank/banking", "web", false, None, &[]);
    let answer = |id: &str, approved: bool| {
        serde_json::json!({"type": "tool_consent", "tool_use_id": id, "approved": approved}).to_string()
    };
    log.client("bank/banking", &answer(&"x".repeat(64 * 1024), true));
    log.message(
        "bank/banking",
        ServerMessage::ConsentRequest {
            tool_use_id: "t-1".into(),
            name: "open_dispute".into(),
            description: "Open a dispute".into(),
            input: serde_json::json!({}),
        },
    );
    log.client("bank/banking", &answer("t-2", true));
    log.client("bank/banking", &answer("t-1", false));
    log.client("bank/banking", &answer("t-1", true));
    log.ended("bank/banking", "ended", None);
    drop(log);
    drop(recorder);
    writing.await.expect("the writer ends with its last recorder");
    let record = store.show("gw-consent").await.expect("store").expect("recorded");
    let answers: Vec<&serde_json::Value> =
        record.events.iter().filter(|e| e.kind == "consent_answer").map(|e| &e.data).collect();
    assert_eq!(answers, [&serde_json::json!({"tool_use_id": "t-1", "approved": false})], "{:?}", record.events);
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

/// A session's record keeps what was said and done up to its bound: past it, one
/// `record_truncated` event, then events without their data; the session's row (turns, end)
/// is still written. And what waits for the store is bounded in bytes: past
/// `pending_bytes`, entries are dropped and counted, and what is written gives the bytes back.
#[tokio::test]
async fn a_sessions_record_and_what_waits_for_the_store_are_bounded_in_bytes() {
    let dir = std::env::temp_dir().join(format!("switchboard-log-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let metrics = RecordMetrics::new().expect("metrics");
    let config = RecordConfig {
        flush_interval: std::time::Duration::from_millis(10),
        session_bytes: 10_000,
        pending_bytes: 200_000,
        ..RecordConfig::default()
    };
    let (recorder, writer) = Recorder::new(store.clone(), config, Redactor::default(), Prices::default(), metrics);
    let mut log = SessionLog::new(recorder.clone(), "gw-big");
    log.started("bank/banking", "web", false, None, &[]);
    let said = |n: usize, bytes: usize| ServerMessage::BidiTranscriptStream {
        role: switchboard_core::protocol::TranscriptRole::User,
        text: format!("{n} {}", "x".repeat(bytes)),
        delta: false,
        is_final: true,
        input_id: None,
    };
    let line = |n: usize| said(n, 1_000);
    // Nothing is written yet (the writer does not run): the queue holds them all, in bytes.
    for n in 0..100 {
        log.message("bank/banking", line(n));
    }
    let held = recorder.pending().load(std::sync::atomic::Ordering::Relaxed);
    assert!((9_000..60_000).contains(&held), "about 10 kB of lines and 90 small events: {held}");
    // Forty other sessions say 9 kB each: past 200 kB waiting, entries are dropped.
    let big = |n: usize| said(n, 9_000);
    for n in 0..40 {
        SessionLog::new(recorder.clone(), &format!("gw-flood-{n}")).message("bank/banking", big(n));
    }
    let held = recorder.pending().load(std::sync::atomic::Ordering::Relaxed);
    assert!((150_000..=200_000).contains(&held), "{held}");
    let metrics = recorder.metrics.render();
    assert!(metrics.contains(r#"switchboard_gateway_record_entries_dropped_total{reason="bytes_full"}"#), "{metrics}");
    log.ended("bank/banking", "ended", None);
    drop(log);
    let pending = recorder.pending();
    drop(recorder);
    // The writer writes everything queued, and ends with its last recorder.
    writer.run(tokio_util::sync::CancellationToken::new()).await;
    assert_eq!(pending.load(std::sync::atomic::Ordering::Relaxed), 0, "written entries give their bytes back");
    let record = store.show("gw-big").await.expect("store").expect("recorded");
    let users = record.events.iter().filter(|e| e.kind == "user" && e.data.get("text").is_some()).count();
    assert!((8..=10).contains(&users), "about 10 kB of 1 kB lines kept: {users}");
    let truncated: Vec<_> = record.events.iter().filter(|e| e.kind == "record_truncated").collect();
    assert_eq!(truncated.len(), 1, "{:?}", record.events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>());
    assert_eq!(record.events.last().map(|e| e.kind.as_str()), Some("session_end"));
    assert_eq!(record.summary.outcome, "ended");
    let _ = std::fs::remove_dir_all(dir);
}

/// A transfer to a person is recorded when the client answers one the runtime asked for; a
/// `transferred` answer marks the session's row (variants are compared on it), other outcomes
/// and answers to transfers never asked for do not. The variant of the Agent the session
/// started at is kept on its row; a later Agent's is only its event.
#[tokio::test]
async fn a_transfer_to_a_person_and_the_first_agents_variant_mark_the_sessions_row() {
    let dir = std::env::temp_dir().join(format!("switchboard-log-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let metrics = RecordMetrics::new().expect("metrics");
    let config = RecordConfig { flush_interval: std::time::Duration::from_millis(10), ..RecordConfig::default() };
    let (recorder, writer) = Recorder::new(store.clone(), config, Redactor::default(), Prices::default(), metrics);
    let stop = tokio_util::sync::CancellationToken::new();
    let writing = tokio::spawn(writer.run(stop.clone()));
    let result = |id: &str, outcome: &str| {
        serde_json::json!({"type": "transfer_result", "tool_use_id": id, "outcome": outcome, "message": "486 Busy Here"})
            .to_string()
    };
    let request = |id: &str| ServerMessage::TransferRequest {
        tool_use_id: id.into(),
        person: "fraud team".into(),
        address: "+44 20 7946 0000".into(),
        reason: "a card was stolen".into(),
        timeout_seconds: 30,
        warm: false,
    };
    for (session, outcomes) in [("gw-busy", ["busy", "busy"]), ("gw-put-through", ["busy", "transferred"])] {
        let mut log = SessionLog::new(recorder.clone(), session);
        log.started("bank/triage", "web", false, None, &[]);
        log.variant("bank/triage", "zoe");
        log.handed_off("bank/triage", "bank/banking");
        log.variant("bank/banking", "brief");
        // An answer to a transfer never asked for is not the record's.
        log.client("bank/banking", &result("t-0", "transferred"));
        log.message("bank/banking", request("t-1"));
        log.client("bank/banking", &result("t-1", outcomes[0]));
        log.message("bank/banking", request("t-2"));
        log.client("bank/banking", &result("t-2", outcomes[1]));
        // The agent's side ended the call: after the caller was put through, the transfer.
        log.ended_by("bank/banking", "ended", Some((1000, "")), Some(switchboard_core::outbound::HungUpBy::Agent));
    }
    drop(recorder);
    writing.await.expect("the writer ends with its last recorder");
    let busy = store.show("gw-busy").await.expect("store").expect("recorded");
    let through = store.show("gw-put-through").await.expect("store").expect("recorded");
    assert!(!busy.summary.transferred && through.summary.transferred, "{:?} {:?}", busy.summary, through.summary);
    assert_eq!(busy.summary.variant.as_deref(), Some("zoe"), "the first Agent's variant");
    let hung_up = (busy.summary.hung_up_by.as_deref(), through.summary.hung_up_by.as_deref());
    assert_eq!(hung_up, (Some("agent"), Some("transfer")), "who hung up: the agent, or the transfer");
    let results: Vec<&serde_json::Value> =
        through.events.iter().filter(|e| e.kind == "transfer_result").map(|e| &e.data["outcome"]).collect();
    assert_eq!(results, ["busy", "transferred"], "{:?}", through.events);
    let requested = through.events.iter().find(|e| e.kind == "transfer_request").expect("the request");
    assert_eq!(requested.data["address"], "[redacted:phone]", "the person's number is redacted");
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}
