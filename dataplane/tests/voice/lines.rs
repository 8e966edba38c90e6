//! A workflow node's `say` line (issue 42: "lines marked uninterruptible, a disclosure, are
//! played whole"), through local mode with a real-time microphone and the simulator — which,
//! as Nova Sonic does, stops its reply as soon as it hears speech. Triage's `route` step
//! opens with a disclosure marked `uninterruptible`: the model moves there
//! (`workflow_goto`), answers, then says the disclosure; the caller talking over it does not
//! cut it, and the transcript says it was played whole. A reply after it is interrupted as
//! before. The step taken is told to the live stream and counted
//! (`switchboard_voice_state_notices_total`).

use std::time::Duration;

use switchboard_core::protocol::{ServerMessage, TranscriptRole};

use crate::common::{self, Call, Encoding, audio_bytes, finals, is_final_reply, metric_sum, summary};

/// The disclosure: about three seconds of speech at 30 ms a character.
const DISCLOSURE: &str =
    "This call is recorded for quality and training purposes, and the advice given is general information only.";

/// The script: the caller asking the opening hours makes the model move to `route`, whose
/// tool result it answers briefly; speech at about a person's pace.
fn script() -> String {
    let rules = r#"
  - name: line-moved
    when: { toolResult: { name: workflow_goto } }
    reply: { text: "Noted." }
  - name: line-move
    when: { userText: "(?i)opening hours", tools: [workflow_goto] }
    reply:
      toolUse: { name: workflow_goto, input: { step: route } }
  - name: voice-story
"#;
    common::script("", "").replacen("\n  - name: voice-story\n", rules, 1).replace("msPerChar: 4,", "msPerChar: 30,")
}

/// Triage's `route` step says the disclosure, played whole.
fn with_disclosure(copy: &std::path::Path) {
    let triage = copy.join("triage.yaml");
    let text = std::fs::read_to_string(&triage).expect("reads triage.yaml");
    let route = "    - id: route\n      kind: decision\n";
    assert!(text.contains(route), "triage's workflow has a route step");
    let said = format!("{route}      say: {{ text: \"{DISCLOSURE}\", uninterruptible: true }}\n");
    std::fs::write(&triage, text.replacen(route, &said, 1)).expect("writes triage.yaml");
}

fn interrupted(messages: &[ServerMessage]) -> bool {
    messages.iter().any(|m| matches!(m, ServerMessage::BidiInterruption {}))
}

/// The transcript entries of the one session written into `dir`.
fn transcript(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let files: Vec<_> = std::fs::read_dir(dir).expect("the transcripts").map(|e| e.expect("an entry").path()).collect();
    assert_eq!(files.len(), 1, "one session: {files:?}");
    let text = std::fs::read_to_string(&files[0]).expect("reads the transcript");
    text.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disclosure_on_entering_a_step_is_played_whole_and_a_later_reply_can_be_interrupted() {
    let dir = std::env::temp_dir().join(format!("switchboard-lines-{}", uuid::Uuid::new_v4()));
    let running = common::banking_edited_transcribed(&script(), with_disclosure, dir.clone()).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;

    call.say(common::HOURS, 700);
    let moved = call.until(|m| is_final_reply(m, "Noted.")).await;
    assert!(
        moved.iter().any(|m| matches!(m, ServerMessage::WorkflowTransition { to, .. } if to == "route")),
        "{:#?}",
        summary(&moved)
    );
    // The disclosure follows; the caller talks over it for a second and a half.
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    call.say(common::STOP, 1500);
    let disclosed = call.until(|m| is_final_reply(m, "quality and training")).await;
    assert!(!interrupted(&disclosed), "the disclosure was cut: {:#?}", summary(&disclosed));
    assert_eq!(finals(&disclosed, TranscriptRole::Assistant), [DISCLOSURE], "played whole");
    assert!(audio_bytes(&disclosed) > 24_000 * 2 * 2, "seconds of it were spoken");
    assert!(finals(&disclosed, TranscriptRole::User).is_empty(), "the model did not hear the speech over it");

    // After it, "stop" for a second cuts a story as before.
    call.say(common::STORY, 700);
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    call.say(common::STOP, 1000);
    let stopped = call.until(|m| is_final_reply(m, "Sure.")).await;
    let cut = stopped.iter().position(|m| matches!(m, ServerMessage::BidiInterruption {}));
    let answer = stopped.iter().position(|m| is_final_reply(m, "Sure."));
    assert!(cut.is_some() && cut < answer, "interrupted, then answered: {:#?}", summary(&stopped));
    call.hang_up().await;

    // The move to `route` was told to the live stream, and counted as the stream took it.
    let told = running.sim.sonic_stats().notices.len();
    let counted = metric_sum(
        &common::metrics(running.addr).await,
        "switchboard_voice_state_notices_total",
        &[("agent", "triage")],
    );
    assert!(told >= 1, "the step taken was told to the live stream");
    assert_eq!(counted, told as f64, "every notice the stream took is counted");

    // The transcript says the line was played whole (the writer is a background task).
    let mut lines = Vec::new();
    for _ in 0..50 {
        lines = transcript(&dir).into_iter().filter(|e| e["event"] == "workflow_line").collect();
        if !lines.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(lines.len(), 1, "{lines:?}");
    let data = &lines[0]["data"];
    assert_eq!(
        (data["node"].as_str(), data["played"].as_str(), data["uninterruptible"].as_bool()),
        (Some("route"), Some("whole"), Some(true)),
        "{data}"
    );
    assert_eq!(data["text"], DISCLOSURE);
    let _ = std::fs::remove_dir_all(&dir);
}
