//! Continuing an ended session brings back a summary of it as well as its memory and last
//! turns: once a model (the real Bedrock client against the simulator's echo) has
//! summarised the session's redacted record, the continued session's agent has that
//! summary in its system prompt.

use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::record::{RecordConfig, Store};
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_sim::banking_script;
use switchboard_sim::script::Rule;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::record::{conversation, ended, keys, recorder_with};
use crate::record_access::echo_summariser;

/// A rule for the agents' model: asked what was said before, it answers with the start of
/// the summary in its system prompt (the core's "Summary of the earlier conversation").
const RECALL: &str = r#"
name: recall
when:
  userText: "(?i)what did we talk about"
  system: "Summary of the earlier conversation:\n(?P<earlier>[^\n]{0,60})"
reply:
  text: "Earlier: {earlier}"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_session_brings_back_the_records_summary_of_it() {
    let dir = std::env::temp_dir().join(format!("switchboard-record-continue-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (_summary_sim, summary) = echo_summariser().await;
    let (recorder, stop) = recorder_with(store.clone(), None, RecordConfig::default(), Some(summary));
    let mut script = banking_script().expect("script");
    script.rules.insert(0, serde_yaml::from_str::<Rule>(RECALL).expect("rule"));
    let fleet =
        Fleet::recording(&[], keys(), GatewayConfig::default(), ResumeStore::default(), script, Some(recorder)).await;
    let id = conversation(&fleet.url, &[("x-api-key", "web-key")], || async {}).await;
    ended(&store, &id).await;
    let mut written = None;
    for _ in 0..300 {
        written = store.show(&id).await.expect("store").and_then(|r| r.summary.summary);
        if written.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written = written.expect("the model summarised the session within 30 s");
    assert!(written.starts_with("You said: Agent bank/triage: "), "{written}");

    let mut client = Client::connect_with(&fleet.url, &[("x-api-key", "web-key")]).await;
    let start = SessionStart { continue_from: Some(id.clone()), ..Default::default() };
    client.send(&ClientMessage::SessionStart(start)).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    client.say("What did we talk about before?").await;
    let recalled = client.turn().await;
    let expected = format!("Earlier: {}", &written[..60]);
    assert!(replies(&recalled).iter().any(|r| r.contains(&expected)), "{expected:?} in {recalled:?}");
    // Its memory came back too: the caller is still verified.
    client.say("What is my balance now?").await;
    let balance = client.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56")), "the verified caller came back: {balance:?}");
    client.send(&ClientMessage::Close {}).await;
    client.closed().await;
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}
