//! The runtime's metrics: METRICS.md's table, the GenAI series and the counts taken from
//! messages to the client.

use std::collections::BTreeSet;
use std::path::Path;

use switchboard_crds::Catalog;

use super::*;

/// The rows of METRICS.md's section `heading`: (name, type, labels).
fn documented(heading: &str) -> BTreeSet<(String, String, Vec<String>)> {
    let text = include_str!("../../../../METRICS.md");
    let section = text.split("\n## ").find(|s| s.starts_with(heading)).expect("the section");
    let ticked = |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
    let rows = section.lines().filter(|l| l.starts_with("| `")).map(|line| {
        let cells: Vec<&str> = line.split(" | ").collect();
        (ticked(cells[0])[0].clone(), cells[1].trim().to_owned(), ticked(cells[2]))
    });
    rows.collect()
}

fn spec(agent: &str) -> RuntimeSpec {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/banking");
    let catalog = Catalog::load_paths(&[dir]).expect("the banking example loads");
    let agent = catalog.agents().find(|a| a.metadata.name.as_deref() == Some(agent)).expect("the agent");
    catalog.resolve_agent(agent).expect("it resolves")
}

#[test]
fn metrics_md_lists_every_runtime_series_with_its_type_and_labels() {
    let metrics = Metrics::new().expect("metrics");
    let registered: BTreeSet<(String, String, Vec<String>)> = metrics
        .families()
        .iter()
        .map(|f| (f.name.to_owned(), f.kind.to_owned(), f.labels.iter().map(|l| (*l).to_owned()).collect()))
        .collect();
    assert_eq!(registered, documented("Runtime"));
}

#[test]
fn gen_ai_series_carry_the_conventions_names_labels_and_buckets() {
    let metrics = Metrics::new().expect("metrics");
    let spec = spec("banking");
    let text = ModelLabels::text(&spec);
    metrics.first_token(text, Duration::from_millis(30));
    metrics.model_call_done(text, Duration::from_millis(300), None);
    metrics.model_call_done(text, Duration::from_millis(20), Some("throttled"));
    metrics.token_usage(text, 120, 30);
    metrics.token_usage(ModelLabels::voice(&spec), 0, 7);
    let out = metrics.render();
    let model = &spec.model.text_model_id;
    // The `mode` label is the Agent's mode (banking is hybrid: its text calls are labelled so).
    let mode = spec.mode.as_str();
    let sample = |name: &str, more: &[(&str, &str)], value: &str| {
        let mut labels = vec![
            ("agent", "banking"),
            ("gen_ai_operation_name", "chat"),
            ("gen_ai_request_model", model.as_str()),
            ("gen_ai_system", "aws.bedrock"),
        ];
        labels.extend_from_slice(more);
        labels.sort(); // as the encoder writes them
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        format!("{name}{{{}}} {value}", labels.join(","))
    };
    for line in [
        sample("gen_ai_client_token_usage_bucket", &[("gen_ai_token_type", "input"), ("le", "256")], "1"),
        sample("gen_ai_client_token_usage_sum", &[("gen_ai_token_type", "output")], "30"),
        sample("gen_ai_server_time_to_first_token_seconds_bucket", &[("le", "0.04")], "1"),
        sample("gen_ai_client_operation_duration_seconds_count", &[("error_type", "")], "1"),
        sample("gen_ai_client_operation_duration_seconds_count", &[("error_type", "throttled")], "1"),
        sample("gen_ai_client_operation_duration_seconds_bucket", &[("error_type", ""), ("le", "0.32")], "1"),
        format!(
            "switchboard_time_to_first_token_seconds_count{{agent=\"banking\",mode=\"{mode}\",model=\"{model}\"}} 1"
        ),
        format!(
            "switchboard_model_call_duration_seconds_count{{agent=\"banking\",mode=\"{mode}\",model=\"{model}\"}} 2"
        ),
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
    }
    let voice = format!("gen_ai_request_model=\"{}\",gen_ai_system=\"aws.bedrock\"", spec.model.voice_model_id);
    assert!(out.contains(&format!("{voice},gen_ai_token_type=\"output\"}} 7")), "{out}");
    assert!(!out.contains(&format!("{voice},gen_ai_token_type=\"input\"")), "no empty observation: {out}");
}

#[test]
fn messages_to_the_client_count_tools_consent_and_barge_ins_with_bounded_labels() {
    let metrics = Metrics::new().expect("metrics");
    let spec = spec("banking");
    let error = |name: &str, kind: &str| ServerMessage::ToolError {
        tool_use_id: "t1".into(),
        name: name.into(),
        kind: kind.into(),
        message: "m".into(),
        recoverable: true,
        user_message: "u".into(),
        suggestion: "s".into(),
    };
    let complete = |cached| ServerMessage::ToolComplete {
        tool_use_id: "t2".into(),
        name: "check_balance".into(),
        result: serde_json::json!({}),
        cached,
        duration_ms: 0,
    };
    for message in [
        complete(false),
        complete(true),
        error("check_balance", "timeout"),
        error("made_up_by_the_model_4711", "unknown_tool"),
        error("return_to_triage", "not_allowed"),
        ServerMessage::ConsentRequest {
            tool_use_id: "t3".into(),
            name: "check_balance".into(),
            description: "d".into(),
            input: serde_json::json!({}),
        },
        ServerMessage::BidiInterruption {},
        ServerMessage::BidiInterruption {},
    ] {
        metrics.sent(&spec, &message);
    }
    let out = metrics.render();
    let interruptions =
        format!("switchboard_interruptions_total{{agent=\"banking\",mode=\"{}\"}} 2", spec.mode.as_str());
    for line in [
        "switchboard_tool_calls_total{agent=\"banking\",outcome=\"success\",tool=\"check_balance\"} 1",
        "switchboard_tool_calls_total{agent=\"banking\",outcome=\"cached\",tool=\"check_balance\"} 1",
        "switchboard_tool_calls_total{agent=\"banking\",outcome=\"error\",tool=\"check_balance\"} 1",
        "switchboard_tool_errors_total{agent=\"banking\",kind=\"timeout\",tool=\"check_balance\"} 1",
        "switchboard_tool_errors_total{agent=\"banking\",kind=\"unknown_tool\",tool=\"unknown\"} 1",
        "switchboard_tool_errors_total{agent=\"banking\",kind=\"not_allowed\",tool=\"return_to_caller\"} 1",
        "switchboard_consent_requests_total{agent=\"banking\",tool=\"check_balance\"} 1",
        interruptions.as_str(),
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
    }
    assert!(!out.contains("made_up_by_the_model"), "a tool name the model made up is no label value");
}

#[test]
fn client_tool_calls_are_counted_by_outcome_and_other_tools_are_not() {
    let metrics = Metrics::new().expect("metrics");
    let mut spec = spec("banking");
    let tool = serde_json::json!({ "name": "pick_account", "description": "d", "client": {} });
    spec.tools.push(serde_json::from_value(tool).expect("a client tool"));
    let error = |name: &str, kind: &str| ServerMessage::ToolError {
        tool_use_id: "t1".into(),
        name: name.into(),
        kind: kind.into(),
        message: "m".into(),
        recoverable: true,
        user_message: "u".into(),
        suggestion: "s".into(),
    };
    let complete = |name: &str| ServerMessage::ToolComplete {
        tool_use_id: "t2".into(),
        name: name.into(),
        result: serde_json::json!({}),
        cached: false,
        duration_ms: 3,
    };
    for message in [
        complete("pick_account"),
        complete("check_balance"),
        error("pick_account", "client_timeout"),
        error("pick_account", "client_timeout"),
        error("pick_account", "client_bad_result"),
        error("check_balance", "timeout"),
    ] {
        metrics.sent(&spec, &message);
    }
    let out = metrics.render();
    for line in [
        "switchboard_client_tool_calls_total{agent=\"banking\",outcome=\"success\",tool=\"pick_account\"} 1",
        "switchboard_client_tool_calls_total{agent=\"banking\",outcome=\"client_timeout\",tool=\"pick_account\"} 2",
        "switchboard_client_tool_calls_total{agent=\"banking\",outcome=\"client_bad_result\",tool=\"pick_account\"} 1",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
    }
    assert!(!out.lines().any(|l| l.starts_with("switchboard_client_tool_calls_total") && l.contains("check_balance")));
}

#[test]
fn keypad_entries_are_counted_by_outcome_with_bounded_labels() {
    let metrics = Metrics::new().expect("metrics");
    let spec = spec("banking");
    let line = |event: &str, name: &str, outcome: &str| switchboard_core::TranscriptEntry {
        session_id: "s".into(),
        agent: "banking".into(),
        event: event.into(),
        data: serde_json::json!({ "id": "t1", "name": name, "input": "pin", "outcome": outcome, "keys": 4 }),
    };
    for entry in [
        line("keypad", "check_balance", "waiting"),
        line("keypad", "check_balance", "collected"),
        line("keypad", "check_balance", "timeout"),
        line("keypad", "made_up", "1234"),
        line("tool_call", "check_balance", "collected"),
    ] {
        metrics.transcribed(&spec, &entry);
    }
    let out = metrics.render();
    for line in [
        "switchboard_keypad_inputs_total{agent=\"banking\",outcome=\"collected\",tool=\"check_balance\"} 1",
        "switchboard_keypad_inputs_total{agent=\"banking\",outcome=\"timeout\",tool=\"check_balance\"} 1",
        "switchboard_keypad_inputs_total{agent=\"banking\",outcome=\"other\",tool=\"unknown\"} 1",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
    }
    assert!(!out.contains("1234"), "no label holds what was typed");
    assert!(!out.contains("waiting"), "an entry's start is no outcome");
}
