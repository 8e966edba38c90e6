//! Every call analysed, and variants compared, with real parts: runtime processes for the
//! Example Bank behind the gateway, the triage Agent running two variants and declaring an
//! analysis (`spec.record.analysis`), the record in a real SQLite store, and the analysis
//! model the Bedrock simulator playing the bank's models (its script answers an analysis
//! request from the transcript it reads), reached through the real Bedrock client.
//!
//! The fields land in the record, the end-of-call report and the metrics; what the analysis
//! cost is in the session's tokens and cost; the record's API and `switchboard variants
//! compare` put the variants side by side. A failing analysis — a model error, an answer
//! that is not the declared fields — is kept as the session's analysis error, and the
//! session's record and report are whole.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ServerMessage};
use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::AnalysisSettings;
use switchboard_crds::routing::RouteVariant;
use switchboard_crds::runtime::{NamedPersona, RuntimeVariant};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_models::bedrock::{BedrockConfig, BedrockTextModel};
use switchboard_record::analysis::AnalysisConfig;
use switchboard_record::reporting::{self, Followers};
use switchboard_record::store::SessionRecord;
use switchboard_record::webhook::{Report, WebhookConfig};
use switchboard_record::{RecordConfig, RecordMetrics, Recorder, Redactor, Store};
use switchboard_sim::{Script, SimConfig, SimHandle, Simulator, banking_script};
use tokio_util::sync::CancellationToken;

use crate::client::{Client, get_with, replies};
use crate::fleet::Fleet;
use crate::record::{Posts, keys, receiver_failing, session_id};

/// The analysis model (the simulator answers it; the price table knows it).
const ANALYST: &str = "amazon.nova-lite-v1:0";

/// The fields the docs' example declares.
fn analysis() -> AnalysisSettings {
    serde_json::from_value(serde_json::json!({ "fields": [
        { "name": "resolved", "type": "boolean", "description": "The caller got what they called for." },
        { "name": "reason", "type": "enum", "values": ["balance", "dispute", "other"], "description": "Why they called." },
        { "name": "sentiment", "type": "enum", "values": ["positive", "neutral", "negative"], "description": "How the caller felt at the end." },
        { "name": "follow_up", "type": "boolean", "description": "Someone must act after the call." },
    ]}))
    .expect("analysis settings")
}

/// The triage Agent analysed, with a `zoe` variant (another Persona and greeting).
fn analysed_with_zoe(spec: &mut RuntimeSpec) {
    if spec.agent.name != "triage" {
        return;
    }
    spec.record.analysis = Some(analysis());
    let mut persona = spec.persona.spec.clone();
    persona.display_name = "Zoe".into();
    persona.greeting = Some("Hello, you're through to Example Bank. I'm Zoe. How can I help?".into());
    let variant = |name: &str, persona: Option<NamedPersona>| RuntimeVariant {
        name: name.into(),
        persona,
        workflow: None,
        text_model_id: None,
        system_prompt: None,
    };
    spec.variants =
        vec![variant("control", None), variant("zoe", Some(NamedPersona { name: "triage-zoe".into(), spec: persona }))];
}

fn weigh(fleet: &mut Fleet, control: u32, zoe: u32) {
    let mut table = fleet.directory.borrow().table().clone();
    let weights = [("control", control), ("zoe", zoe)];
    table.variants.insert(
        "bank/triage".into(),
        weights.iter().map(|(name, weight)| RouteVariant { name: (*name).into(), weight: *weight }).collect(),
    );
    fleet.publish(table);
}

/// A Bedrock client of `sim`, the analysis model.
async fn analyst(script: Script) -> (SimHandle, Arc<dyn switchboard_models::TextModel>) {
    let sim = Simulator::start(SimConfig::new(script)).await.expect("simulator");
    let bedrock = BedrockConfig::simulator(sim.endpoint_url(), sim.ca_cert_path());
    let model = BedrockTextModel::connect(&bedrock).await.expect("a Bedrock client");
    (sim, Arc::new(model))
}

/// A recorder analysing with `model`, reporting to `hook`.
fn recorder(
    store: Store,
    model: Arc<dyn switchboard_models::TextModel>,
    hook: &str,
) -> (Arc<Recorder>, CancellationToken) {
    let config = RecordConfig { flush_interval: Duration::from_millis(50), ..RecordConfig::default() };
    let metrics = RecordMetrics::new().expect("metrics");
    let (recorder, mut writer) = Recorder::new(store.clone(), config, Redactor::default(), Default::default(), metrics);
    let webhook = WebhookConfig {
        url: hook.parse().expect("url"),
        secret: b"sixteen or more bytes".to_vec(),
        retry: Default::default(),
    };
    let client = switchboard_models::net::client::Trust::system().client().expect("client");
    let analysis = AnalysisConfig { default_model: Some(ANALYST.into()), ..AnalysisConfig::default() };
    let followers =
        Followers { webhook: Some((webhook, client)), summary: None, analysis: Some((Some(model), analysis)) };
    if let Some(ended) = reporting::start(&recorder, &store, followers) {
        writer = writer.reporting_to(ended);
    }
    let stop = CancellationToken::new();
    tokio::spawn(writer.run(stop.clone()));
    (recorder, stop)
}

/// What a session's caller does after the greeting.
#[derive(Clone, Copy)]
enum Call {
    /// Asks for the balance, through idv and banking: resolved.
    Balance,
    /// Says one line and goes.
    Says(&'static str),
}

/// A session opened with the `web` key: greeted (by which variant), the `call` made, closed.
async fn session(url: &str, call: Call) -> (String, &'static str) {
    let mut client = Client::connect_with(url, &[("authorization", "Bearer web-key")]).await;
    client.send(&ClientMessage::SessionStart(Default::default())).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let greeting = replies(&hello).into_iter().next().unwrap_or_default();
    let variant = if greeting.contains("I'm Zoe") { "zoe" } else { "control" };
    let id = session_id(&hello);
    match call {
        Call::Balance => {
            client.say("I'd like to check my balance").await;
            client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
            client.turn().await;
            client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
            client.turn().await;
            client.say("My balance please").await;
            client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
            let balance = client.turn().await;
            assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "{balance:?}");
        }
        Call::Says(line) => {
            client.say(line).await;
            client.turn().await;
        }
    }
    client.send(&ClientMessage::Close {}).await;
    assert_eq!(client.closed().await.0, 1000);
    (id, variant)
}

/// The record of `id` once its analysis is kept.
async fn analysed(store: &Store, id: &str) -> SessionRecord {
    for _ in 0..300 {
        if let Ok(Some(record)) = store.show(id).await
            && record.summary.analysis.is_some()
        {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("session {id} was not analysed within 30 s: {:?}", store.show(id).await);
}

/// Every report until one per session in `ids` came, by session.
async fn reports(posts: &mut Posts, ids: &[&str]) -> std::collections::HashMap<String, Report> {
    let mut reports = std::collections::HashMap::new();
    while !ids.iter().all(|id| reports.contains_key(*id)) {
        let (_, body) = tokio::time::timeout(Duration::from_secs(30), posts.recv())
            .await
            .expect("reports in time")
            .expect("a report");
        let report: Report = serde_json::from_str(&body).expect("a report");
        reports.insert(report.session_id.clone(), report);
    }
    reports
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_is_analysed_into_the_record_report_and_metrics_and_variants_are_compared() {
    let dir = std::env::temp_dir().join(format!("switchboard-analysis-{}", uuid::Uuid::new_v4()));
    let file = dir.join("record.db");
    let store = Store::file(&file).expect("store");
    let (hook, mut posts) = receiver_failing(0).await;
    let (_analyst, model) = analyst(banking_script().expect("script")).await;
    let (recorder, stop) = recorder(store.clone(), model, &hook);
    let script = banking_script().expect("script");
    let mut fleet = Fleet::edited(
        &[],
        keys(),
        GatewayConfig::default(),
        ResumeStore::default(),
        script,
        Some(recorder.clone()),
        analysed_with_zoe,
    )
    .await;
    let url = fleet.url.clone();

    // control: one balance (resolved), one hello (not); zoe: two balances, one hello.
    weigh(&mut fleet, 100, 0);
    let mut sessions = vec![session(&url, Call::Balance).await, session(&url, Call::Says("Hello there")).await];
    weigh(&mut fleet, 0, 100);
    sessions.push(session(&url, Call::Balance).await);
    sessions.push(session(&url, Call::Says("Hello there")).await);
    sessions.push(session(&url, Call::Balance).await);
    let expected_variants = ["control", "control", "zoe", "zoe", "zoe"];
    assert_eq!(sessions.iter().map(|s| s.1).collect::<Vec<_>>(), expected_variants, "the weights chose");

    for (n, (id, variant)) in sessions.iter().enumerate() {
        let record = analysed(&store, id).await;
        let s = &record.summary;
        assert_eq!(s.variant.as_deref(), Some(*variant), "the row names its variant: {s:?}");
        let analysis = s.analysis.as_ref().expect("analysed");
        let balance = n % 2 == 0 || n == 4;
        let fields = if balance {
            serde_json::json!({"resolved": true, "reason": "balance", "sentiment": "positive", "follow_up": false})
        } else {
            serde_json::json!({"resolved": false, "reason": "other", "sentiment": "neutral", "follow_up": true})
        };
        assert_eq!(analysis["fields"], fields, "{analysis}");
        assert_eq!(analysis["model"], ANALYST);
        // Its cost is the session's: tokens of every model call, the analysis's among them.
        let (input, output) =
            (analysis["input_tokens"].as_i64().expect("n"), analysis["output_tokens"].as_i64().expect("n"));
        assert!(input > 0 && output > 0 && analysis["cost_usd"].as_f64().expect("usd") > 0.0, "{analysis}");
        let used = |key: &str| -> i64 {
            record.events.iter().filter(|e| e.kind == "usage").map(|e| e.data[key].as_i64().unwrap_or(0)).sum()
        };
        assert_eq!(s.input_tokens, used("input_tokens") + input, "{s:?}");
        assert_eq!(s.output_tokens, used("output_tokens") + output, "{s:?}");
        let priced: f64 = record
            .events
            .iter()
            .filter(|e| e.kind == "usage")
            .map(|e| e.data["cost_usd"].as_f64().unwrap_or(0.0))
            .sum();
        assert!((s.cost_usd - priced - analysis["cost_usd"].as_f64().expect("usd")).abs() < 1e-9, "{s:?}");
        // The record keeps it as the last event, after the session's end.
        let last = record.events.last().expect("events");
        assert_eq!((last.kind.as_str(), last.agent.as_str()), ("analysis", "bank/triage"));
        assert!(record.events.iter().any(|e| e.kind == "session_end"));
    }

    // The end-of-call reports carry the analysis and the variant.
    let ids: Vec<&str> = sessions.iter().map(|s| s.0.as_str()).collect();
    let reports = reports(&mut posts, &ids).await;
    for (id, variant) in &sessions {
        let report = &reports[id];
        assert_eq!(report.variant.as_deref(), Some(*variant));
        let stored = store.show(id).await.expect("reads").expect("recorded");
        assert_eq!(report.analysis, stored.summary.analysis, "the report waits for the analysis");
        assert_eq!(report.input_tokens, stored.summary.input_tokens, "and counts its tokens");
    }

    // The metrics: the resolution rate per Agent and variant, analyses, their tokens.
    let metrics = recorder.metrics.render();
    for line in [
        r#"switchboard_gateway_analysis_resolved_total{agent="bank/triage",resolved="true",variant="control"} 1"#,
        r#"switchboard_gateway_analysis_resolved_total{agent="bank/triage",resolved="false",variant="control"} 1"#,
        r#"switchboard_gateway_analysis_resolved_total{agent="bank/triage",resolved="true",variant="zoe"} 2"#,
        r#"switchboard_gateway_analysis_resolved_total{agent="bank/triage",resolved="false",variant="zoe"} 1"#,
        r#"switchboard_gateway_record_analyses_total{outcome="written"} 5"#,
        r#"switchboard_gateway_tokens_total{agent="bank/triage",direction="output",model="amazon.nova-lite-v1:0"}"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }

    // The record's API compares the variants, for a reader of the bank's record only.
    let addr: std::net::SocketAddr =
        fleet.url.trim_start_matches("ws://").split('/').next().and_then(|a| a.parse().ok()).expect("addr");
    let (status, body) = get_with(addr, "/v1/variants?agent=bank/triage", &[("authorization", "Bearer ops-key")]).await;
    assert_eq!(status, 200, "{body}");
    let compared: switchboard_record::compare::Comparison = serde_json::from_str(&body).expect("a comparison");
    assert_eq!(compared.sessions, 5);
    let by =
        |name: &str| compared.variants.iter().find(|v| v.variant.as_deref() == Some(name)).expect("a variant").clone();
    let (control, zoe) = (by("control"), by("zoe"));
    assert_eq!((control.sessions, control.finished, control.analysed, control.resolved), (2, 2, 2, 1));
    assert_eq!((zoe.sessions, zoe.finished, zoe.analysed, zoe.resolved), (3, 3, 3, 2));
    assert_eq!(control.resolution_rate, Some(0.5));
    assert_eq!(zoe.resolution_rate, Some(2.0 / 3.0));
    assert_eq!((control.transferred, zoe.transfer_rate), (0, Some(0.0)));
    assert_eq!(zoe.fields["reason"].counts, [("balance".to_owned(), 2), ("other".to_owned(), 1)].into());
    assert_eq!(zoe.fields["sentiment"].counts, [("neutral".to_owned(), 1), ("positive".to_owned(), 2)].into());
    assert!(zoe.duration_ms.is_some_and(|d| d.p90 >= d.p50 && d.mean > 0.0), "{zoe:?}");
    let rows = store.list(&Default::default()).await.expect("lists");
    let zoe_cost: f64 = rows.iter().filter(|r| r.variant.as_deref() == Some("zoe")).map(|r| r.cost_usd).sum();
    assert!((zoe.cost_usd - zoe_cost).abs() < 1e-9 && zoe.mean_cost_usd.is_some_and(|c| c > 0.0), "{zoe:?}");
    let (status, body) =
        get_with(addr, "/v1/variants?agent=bank/triage", &[("authorization", "Bearer shop-key")]).await;
    assert_eq!((status, body.contains("unknown_agent")), (404, true), "another tenant's reader: {body}");
    let (status, body) = get_with(addr, "/v1/variants?agent=triage", &[("authorization", "Bearer ops-key")]).await;
    assert_eq!((status, body.contains("invalid_agent")), (400, true), "{body}");
    let (status, _) = get_with(addr, "/v1/variants?agent=bank/triage", &[("authorization", "Bearer web-key")]).await;
    assert_eq!(status, 403, "a key that may not read the record");

    // `switchboard variants compare` reads the same from the store.
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["variants", "compare", "--agent", "bank/triage", "--record-database-url"])
        .arg(format!("sqlite:{}", file.display()))
        .output()
        .expect("switchboard runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let row = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_owned();
    assert!(row("control ").split_whitespace().take(4).eq(["control", "2", "2", "50.0%"]), "{text}");
    assert!(row("zoe ").split_whitespace().take(4).eq(["zoe", "3", "3", "66.7%"]), "{text}");
    assert!(text.contains("zoe: 3 analysed, 0 failed"), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("reason") && l.ends_with("balance 2, other 1")), "{text}");
    let shown = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["sessions", "show", &sessions[0].0, "--record-database-url"])
        .arg(format!("sqlite:{}", file.display()))
        .output()
        .expect("switchboard runs");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("variant   control"), "{shown}");
    let line = shown.lines().find(|l| l.starts_with("analysis  ")).unwrap_or_default();
    for part in
        ["follow_up=false", "reason=balance", "resolved=true", "sentiment=positive", "(by amazon.nova-lite-v1:0; "]
    {
        assert!(line.contains(part), "{part} in {shown}");
    }
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

/// The analysis model, scripted to fail: a model error for a session whose caller said
/// "broken", prose instead of the fields for one that said "ramble", and fields of the
/// wrong kind for one that said "wrong".
const FAILING: &str = r#"
timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }
rules:
  - name: broken
    when: { system: strict analyst, userText: '(?s)Caller: [^\n]*broken' }
    reply: { text: 'never sent' }
    faults: { error: { kind: accessDenied, message: 'not allowed to invoke the model' } }
  - name: ramble
    when: { system: strict analyst, userText: '(?s)Caller: [^\n]*ramble' }
    reply: { text: 'The caller seemed happy enough, I would say.' }
  - name: wrong
    when: { system: strict analyst, userText: '(?s)Caller: [^\n]*wrong' }
    reply: { text: '{{"resolved": "maybe", "reason": "weather", "sentiment": "neutral", "follow_up": true}}' }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_analysis_is_kept_as_an_error_and_the_session_record_is_whole() {
    let dir = std::env::temp_dir().join(format!("switchboard-analysis-fail-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (hook, mut posts) = receiver_failing(0).await;
    let (_analyst, model) = analyst(Script::parse(FAILING).expect("script")).await;
    let (recorder, stop) = recorder(store.clone(), model, &hook);
    let script = banking_script().expect("script");
    let edit = |spec: &mut RuntimeSpec| {
        if spec.agent.name == "triage" {
            spec.record.analysis = Some(analysis());
        }
    };
    let fleet = Fleet::edited(
        &[],
        keys(),
        GatewayConfig::default(),
        ResumeStore::default(),
        script,
        Some(recorder.clone()),
        edit,
    )
    .await;
    let url = fleet.url.clone();

    let (broken, _) = session(&url, Call::Says("It's broken again")).await;
    let (ramble, _) = session(&url, Call::Says("Let me ramble a bit")).await;
    let (wrong, _) = session(&url, Call::Says("Something is wrong")).await;
    let errors = [
        (&broken, "the judge model amazon.nova-lite-v1:0 failed"),
        (
            &ramble,
            "the analysis model amazon.nova-lite-v1:0 did not answer a JSON object; it answered \"The caller seemed happy enough",
        ),
        (
            &wrong,
            "did not fill the declared fields: resolved is \"maybe\", not a boolean; reason is \"weather\", not one of [balance, dispute, other]",
        ),
    ];
    for (id, error) in errors {
        let record = analysed(&store, id).await;
        let analysis = record.summary.analysis.as_ref().expect("kept");
        let kept = analysis["error"].as_str().unwrap_or_default();
        assert!(kept.contains(error), "{error:?} in {analysis}");
        assert!(analysis.get("fields").is_none(), "{analysis}");
        // The session's own record is whole.
        assert_eq!(record.summary.outcome, "ended");
        assert!(record.summary.turns >= 1, "{:?}", record.summary);
        let kinds: Vec<&str> = record.events.iter().map(|e| e.kind.as_str()).collect();
        for kind in ["session_start", "user", "assistant", "session_end", "analysis"] {
            assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
        }
    }
    assert!(kept_error(&store, &broken).await.contains("not allowed to invoke the model"));
    let reports = reports(&mut posts, &[&broken, &ramble, &wrong]).await;
    assert!(reports[&ramble].analysis.as_ref().is_some_and(|a| a["error"].is_string()), "the report says it failed");
    let metrics = recorder.metrics.render();
    for line in [
        r#"switchboard_gateway_record_analyses_total{outcome="model_error"} 1"#,
        r#"switchboard_gateway_record_analyses_total{outcome="malformed"} 2"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(!metrics.contains("switchboard_gateway_analysis_resolved_total{"), "no answer, no resolution: {metrics}");
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

async fn kept_error(store: &Store, id: &str) -> String {
    let record = store.show(id).await.expect("reads").expect("recorded");
    record.summary.analysis.map(|a| a["error"].as_str().unwrap_or_default().to_owned()).unwrap_or_default()
}
