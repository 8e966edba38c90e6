//! Tool progress end to end: an agent whose MCP tool reports progress, run by local mode
//! against the simulator; a real WebSocket client sees `tool_start`, the server's progress
//! lines as `tool_progress`, then `tool_complete` and the model's answer.

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use switchboard_local::{self as local, LocalOptions};
use tokio_tungstenite::tungstenite::Message;

use crate::common::McpServer;

const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

fn agent_folder(mcp_url: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("switchboard-mcp-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let yaml = format!(
        r#"apiVersion: switchboard.dev/v1alpha1
kind: Persona
metadata: {{ name: reporter }}
spec:
  displayName: Rita
  greeting: "Hi, I build reports."
  systemPrompt: "You are {{name}}. You build reports with slow_report. Today is {{date}}."
---
apiVersion: switchboard.dev/v1alpha1
kind: Workflow
metadata: {{ name: reporter }}
spec:
  entry: work
  nodes:
    - id: work
      kind: tool
      tools: [slow_report]
      instruction: Build the report the user asks for.
---
apiVersion: switchboard.dev/v1alpha1
kind: Agent
metadata: {{ name: reporter }}
spec:
  mode: text
  personaRef: {{ name: reporter }}
  workflowRef: {{ name: reporter }}
  tools:
    - name: slow_report
      description: Builds a report in steps.
      inputSchema:
        type: object
        properties: {{ steps: {{ type: integer, minimum: 1 }} }}
        required: [steps]
      mcp: {{ url: "{mcp_url}", timeoutMs: 20000 }}
"#
    );
    std::fs::write(dir.join("reporter.yaml"), yaml).expect("writes the agent");
    let script = r#"
timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }
rules:
  - name: report
    when: { userText: "(?i)report" }
    reply: { text: "Building it.", toolUse: { name: slow_report, input: { steps: 5 } } }
"#;
    std::fs::write(dir.with_extension("script.yaml"), script).expect("writes the script");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_progress_reaches_the_client_between_tool_start_and_tool_complete() {
    let server = McpServer::start().await;
    let dir = agent_folder(&server.url());
    let options = LocalOptions { sim_script: Some(dir.with_extension("script.yaml")), ..LocalOptions::default() };
    let local = local::start(&dir, options).await.expect("local mode starts");
    let url = format!("ws://{}/v1/session?agent=reporter", local.server.local_addr().expect("addr"));
    let running = local.server;
    tokio::spawn(async move { running.run(std::future::pending()).await });

    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.expect("connects");
    let start = ClientMessage::SessionStart(SessionStart::default());
    ws.send(Message::text(serde_json::to_string(&start).expect("json"))).await.expect("sends");
    let input = ClientMessage::BidiTextInput { text: "Please build my report".into(), id: None };
    ws.send(Message::text(serde_json::to_string(&input).expect("json"))).await.expect("sends");

    let mut events = Vec::new();
    loop {
        let frame = tokio::time::timeout(PATIENCE, ws.next()).await.expect("a frame in time");
        let Some(Ok(Message::Text(text))) = frame else { panic!("the session ended early: {frame:?}") };
        let message: ServerMessage = serde_json::from_str(text.as_str()).expect("protocol JSON");
        let done = matches!(
            &message,
            ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, is_final: true, text, .. }
                if text.contains("slow_report returned")
        );
        events.push(message);
        if done {
            break;
        }
    }
    let position = |pred: &dyn Fn(&ServerMessage) -> bool| events.iter().position(pred);
    let started = position(&|m| matches!(m, ServerMessage::ToolStart { name, .. } if name == "slow_report"))
        .unwrap_or_else(|| panic!("no tool_start for slow_report among {events:#?}"));
    let completed = position(&|m| matches!(m, ServerMessage::ToolComplete { name, .. } if name == "slow_report"))
        .unwrap_or_else(|| panic!("no tool_complete for slow_report among {events:#?}"));
    let progress: Vec<(usize, &str)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, m)| match m {
            ServerMessage::ToolProgress { name, message, .. } if name == "slow_report" => Some((i, message.as_str())),
            _ => None,
        })
        .collect();
    let steps: Vec<&str> = progress.iter().map(|(_, m)| *m).filter(|m| m.starts_with("step ")).collect();
    assert_eq!(
        steps,
        ["step 1 of 5 (1/5)", "step 2 of 5 (2/5)", "step 3 of 5 (3/5)", "step 4 of 5 (4/5)", "step 5 of 5 (5/5)"],
        "every progress line, in order: {progress:?}"
    );
    assert!(progress.iter().all(|(i, _)| *i > started && *i < completed), "progress lies between start and complete");
    let _ = std::fs::remove_file(dir.with_extension("script.yaml"));
    let _ = std::fs::remove_dir_all(dir);
}
