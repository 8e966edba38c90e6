//! The runtime's metrics as a dashboard sees them, after a real conversation against the
//! simulator (local mode on the Example Bank: triage by Nova Sonic, idv by voice with an
//! identity check, banking by text with a balance tool call):
//!
//! - its `/metrics` has the OpenTelemetry GenAI series (`gen_ai_client_token_usage`,
//!   `gen_ai_client_operation_duration_seconds`, `gen_ai_server_time_to_first_token_seconds`)
//!   with the conventions' labels, agreeing with the `switchboard_*` series, tool calls by
//!   outcome, and no session id; every family it serves is in METRICS.md;
//! - a voice call's Nova Sonic usage reports count under the voice model, and speaking
//!   over the agent counts a barge-in;
//! - a real Prometheus (Debian's, from tests/tools/install.sh) scrapes it during the
//!   conversation, and every query of the chart's Grafana dashboard runs on it; those of
//!   what the conversation did return data.

#[path = "../runtime/common.rs"]
#[allow(dead_code)]
mod common;
#[path = "../support/ports.rs"]
#[allow(dead_code)]
mod ports;
mod prometheus;
#[path = "../voice/common.rs"]
#[allow(dead_code)]
mod voice;

use std::collections::BTreeSet;

use switchboard_core::protocol::ServerMessage;
use switchboard_runtime::ServerConfig;

use common::{Client, metric_sum};

/// The Example Bank conversation: triage -> idv (identity check) -> banking (balance).
async fn converse(running: &common::Running) -> Client {
    let mut client = Client::start(&running.url(""), None).await;
    common::balance_via_idv(&mut client).await;
    client
}

/// The `model` label of `agent`'s `switchboard_tokens_total`.
fn model_of(text: &str, agent: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with("switchboard_tokens_total{") && l.contains(&format!("agent=\"{agent}\"")))
        .unwrap_or_else(|| panic!("{agent}'s tokens in\n{text}"));
    let value = line.split("model=\"").nth(1).and_then(|rest| rest.split('"').next());
    value.expect("a model label").to_owned()
}

/// The families METRICS.md lists.
fn documented() -> BTreeSet<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../METRICS.md");
    let text = std::fs::read_to_string(path).expect("METRICS.md");
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1))
        .filter(|name| name.starts_with("switchboard_") || name.starts_with("gen_ai_"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_shows_in_the_gen_ai_series_and_in_every_dashboard_query_on_a_real_prometheus() {
    let running = common::banking(ServerConfig::default()).await;
    // In local mode the gateway's /metrics serves the runtime's series too: one target.
    let prometheus = prometheus::Prometheus::start(running.addr).await;
    prometheus.wait_for_scrape().await;
    let client = converse(&running).await;
    let session_id = client.seen.iter().find_map(|m| match m {
        ServerMessage::BidiConnectionStart { session_id, .. } => Some(session_id.clone()),
        _ => None,
    });

    let (status, text) = common::get(running.runtime_addr, "/metrics").await;
    assert_eq!(status, 200);
    let text_model = model_of(&text, "banking");
    let banking = [
        ("agent", "banking"),
        ("gen_ai_operation_name", "chat"),
        ("gen_ai_system", "aws.bedrock"),
        ("gen_ai_request_model", text_model.as_str()),
    ];
    let with = |more: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
        banking.iter().copied().chain(more.iter().copied()).collect()
    };
    for (direction, token_type) in [("input", "input"), ("output", "output")] {
        let counted = metric_sum(&text, "switchboard_tokens_total", &[("agent", "banking"), ("direction", direction)]);
        let usage = metric_sum(&text, "gen_ai_client_token_usage_sum", &with(&[("gen_ai_token_type", token_type)]));
        assert!(counted > 0.0, "banking used {direction} tokens:\n{text}");
        assert_eq!(usage, counted, "gen_ai_client_token_usage_sum = switchboard_tokens_total ({direction})");
        let calls = metric_sum(&text, "gen_ai_client_token_usage_count", &with(&[("gen_ai_token_type", token_type)]));
        assert!(calls >= 1.0, "one observation per model call");
    }
    // Typed sessions of the voice and hybrid agents run on the text model too.
    for agent in ["triage", "idv"] {
        let usage = metric_sum(&text, "gen_ai_client_token_usage_sum", &[("agent", agent)]);
        let counted = metric_sum(&text, "switchboard_tokens_total", &[("agent", agent)]);
        assert!(usage > 0.0 && usage == counted, "{agent}: {usage} vs {counted}\n{text}");
    }
    let ttft = metric_sum(&text, "gen_ai_server_time_to_first_token_seconds_count", &banking);
    assert!(ttft >= 1.0, "{text}");
    assert_eq!(ttft, metric_sum(&text, "switchboard_time_to_first_token_seconds_count", &[("agent", "banking")]));
    let ok_calls = metric_sum(&text, "gen_ai_client_operation_duration_seconds_count", &with(&[("error_type", "")]));
    assert_eq!(ok_calls, ttft, "every text model call succeeded and is timed");
    assert!(text.contains("gen_ai_server_time_to_first_token_seconds_bucket{") && text.contains("le=\"0.001\""));
    for (agent, tool) in [("idv", "perform_idv_check"), ("banking", "check_balance")] {
        let labels = [("agent", agent), ("tool", tool), ("outcome", "success")];
        assert_eq!(metric_sum(&text, "switchboard_tool_calls_total", &labels), 1.0, "{text}");
    }
    assert!(!text.contains(&session_id.expect("a session id")), "no session ids in labels");
    let documented = documented();
    for family in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split(' ').next()) {
        assert!(documented.contains(family), "{family} is served but not in METRICS.md");
    }

    // Every dashboard query runs on the real Prometheus; what the conversation did has data.
    prometheus.wait_for_scrape().await;
    prometheus.wait_for_scrape().await;
    let dashboard = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/switchboard/files/dashboards/switchboard.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard).expect("the dashboard")).expect("JSON");
    let mut with_data = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr").replace("$__rate_interval", "1m");
            let expr = expr.replace("$namespace", ".*");
            if !prometheus.query(&expr).await.is_empty() {
                with_data.insert(panel["title"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    for title in [
        "Live sessions (gateway)",
        "Sessions on runtime pods",
        "Sessions started",
        "Turn latency",
        "Time to first token",
        "Model call duration",
        "Tokens by Agent",
        "Tokens by modality",
        "Tool calls",
        "Tool duration",
        "Handoffs",
        "Handoff gap",
        "Gateway memory",
    ] {
        assert!(with_data.contains(title), "the dashboard's {title:?} shows the conversation: {with_data:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_call_counts_its_tokens_under_the_voice_model_and_its_barge_in() {
    let running = voice::banking(&voice::script("", "")).await;
    let mut call = voice::Call::start(&running.url(), "triage", &["audio"], voice::Encoding::Binary).await;
    call.say(voice::STORY, 600);
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    call.say(voice::STOP, 500);
    call.until(|m| matches!(m, ServerMessage::BidiInterruption {})).await;
    call.until(|m| voice::is_final_reply(m, "Sure.")).await;
    call.hang_up().await;
    let text = voice::metrics(running.addr).await;
    let voice_model = model_of(&text, "triage");
    let labels =
        [("agent", "triage"), ("gen_ai_request_model", voice_model.as_str()), ("gen_ai_system", "aws.bedrock")];
    for token_type in ["input", "output"] {
        let mut with = labels.to_vec();
        with.push(("gen_ai_token_type", token_type));
        assert!(metric_sum(&text, "gen_ai_client_token_usage_count", &with) >= 1.0, "{token_type}:\n{text}");
    }
    let usage = metric_sum(&text, "gen_ai_client_token_usage_sum", &labels);
    assert_eq!(usage, metric_sum(&text, "switchboard_tokens_total", &[("agent", "triage")]), "{text}");
    let interruptions = [("agent", "triage"), ("mode", "hybrid")];
    assert_eq!(metric_sum(&text, "switchboard_interruptions_total", &interruptions), 1.0, "{text}");
}
