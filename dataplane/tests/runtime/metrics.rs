//! Metrics scraped after a conversation show the tokens and turns that happened.

use switchboard_core::protocol::ServerMessage;
use switchboard_runtime::ServerConfig;

use crate::common::{self, Client, metric_sum};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_match_the_conversation() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = Client::start(&running.url(""), None).await;
    common::balance_via_idv(&mut client).await;

    let (input, output) = client.seen.iter().fold((0u64, 0u64), |(i, o), m| match m {
        ServerMessage::BidiUsage { input_tokens, output_tokens, .. } => (i + input_tokens, o + output_tokens),
        _ => (i, o),
    });
    let turns = client.seen.iter().filter(|m| matches!(m, ServerMessage::BidiResponseStart { .. })).count();
    let session_id = client.seen.iter().find_map(|m| match m {
        ServerMessage::BidiConnectionStart { session_id, .. } => Some(session_id.clone()),
        _ => None,
    });
    assert!(input > 0 && output > 0);

    let (status, text) = common::get(running.addr, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(metric_sum(&text, "switchboard_tokens_total", &[("direction", "input")]), input as f64, "{text}");
    assert_eq!(metric_sum(&text, "switchboard_tokens_total", &[("direction", "output")]), output as f64);
    assert_eq!(metric_sum(&text, "switchboard_turn_latency_seconds_count", &[]), turns as f64, "one latency per turn");
    let calls = client.seen.iter().filter(|m| matches!(m, ServerMessage::BidiUsage { .. })).count();
    assert_eq!(
        metric_sum(&text, "switchboard_time_to_first_token_seconds_count", &[]),
        calls as f64,
        "one TTFT per model call"
    );
    assert!(metric_sum(&text, "switchboard_turn_latency_seconds_sum", &[]) > 0.0);
    assert_eq!(metric_sum(&text, "switchboard_sessions_total", &[("agent", "triage")]), 1.0);
    assert_eq!(metric_sum(&text, "switchboard_sessions_total", &[("agent", "banking")]), 1.0);
    assert_eq!(metric_sum(&text, "switchboard_sessions_active", &[("agent", "banking")]), 1.0);
    assert_eq!(metric_sum(&text, "switchboard_sessions_active", &[("agent", "triage")]), 0.0);
    assert_eq!(metric_sum(&text, "switchboard_handoffs_total", &[]), 2.0);
    assert_eq!(
        metric_sum(
            &text,
            "switchboard_tool_duration_seconds_count",
            &[("tool", "perform_idv_check"), ("outcome", "success")]
        ),
        1.0
    );
    assert_eq!(
        metric_sum(
            &text,
            "switchboard_tool_duration_seconds_count",
            &[("tool", "check_balance"), ("outcome", "success")]
        ),
        1.0
    );
    assert!(text.contains("le=\"0.001\""), "OpenTelemetry GenAI TTFT buckets");
    assert!(!text.contains(&session_id.expect("session id")), "no session ids in labels");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcripts_are_written_as_jsonl() {
    let dir = std::env::temp_dir().join(format!("switchboard-transcripts-{}", uuid::Uuid::new_v4()));
    let running = common::banking_with_transcripts(ServerConfig::default(), Some(dir.clone())).await;
    // triage hands the session to idv, which verifies the caller: one gateway session.
    let mut client = Client::start(&running.url(""), None).await;
    client.verify_at_idv().await;
    client.send(&switchboard_core::protocol::ClientMessage::Close {}).await;
    client.closed().await;
    let starts: Vec<(String, String)> = client
        .seen
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiConnectionStart { session_id, agent, .. } => Some((session_id.clone(), agent.clone())),
            _ => None,
        })
        .collect();
    let agents: Vec<&str> = starts.iter().map(|(_, agent)| agent.as_str()).collect();
    assert_eq!(agents, ["triage", "idv"], "{starts:?}");
    let session_id = starts[0].0.clone();
    assert!(starts.iter().all(|(id, _)| *id == session_id), "the handoff keeps the gateway's session id: {starts:?}");
    let path = dir.join(format!("{session_id}.jsonl"));
    // The writer is asynchronous: wait (bounded) for the session's last line.
    let mut lines: Vec<serde_json::Value> = Vec::new();
    let event = |line: &serde_json::Value| line["event"].as_str().unwrap_or_default().to_owned();
    for _ in 0..200 {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        lines = text.lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
        if lines.last().map(event).as_deref() == Some("end") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let events: Vec<String> = lines.iter().map(event).collect();
    for expected in ["user", "assistant", "tool_call", "tool_result", "memory", "transition", "handoff", "end"] {
        assert!(events.iter().any(|e| e == expected), "{expected} in {events:?}");
    }
    // One file for the whole session, across the handoff: triage's lines, then idv's.
    assert!(lines.iter().all(|l| l["session_id"] == session_id.as_str()), "{lines:#?}");
    let by: Vec<&str> = lines.iter().map(|l| l["agent"].as_str().unwrap_or_default()).collect();
    let first_idv = by.iter().position(|a| *a == "idv").expect("idv's lines are in the session's file");
    assert!(first_idv > 0 && by[..first_idv].iter().all(|a| *a == "triage"), "{by:?}");
    assert!(by[first_idv..].iter().all(|a| *a == "idv"), "{by:?}");
    let files = std::fs::read_dir(&dir).expect("the transcript folder").count();
    assert_eq!(files, 1, "one transcript file per gateway session");
    let _ = std::fs::remove_dir_all(dir);
}
