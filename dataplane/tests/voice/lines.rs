//! A workflow node's `say` line (issue 42: "lines marked uninterruptible, a disclosure, are
//! played whole"), through local mode with a real-time microphone and the simulator — which,
//! as Nova Sonic does, stops its reply as soon as it hears speech. Triage's `route` step
//! opens with a disclosure marked `uninterruptible`: the model moves there
//! (`workflow_goto`), answers, then says the disclosure; the caller talking over it does not
//! cut it, the model hears what they said once it is over and answers it (counted in
//! `switchboard_voice_withheld_speech_total`), and the gateway's
//! record (its API) and the transcript say it was played whole. A reply after it is
//! interrupted as before. The step taken is told to the live stream and counted
//! (`switchboard_voice_state_notices_total`). A line the model never says is abandoned
//! after its time limit, with its reason in the record, and the next step's line is said.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_core::protocol::{LinePlayed, ServerMessage, TranscriptRole};
use switchboard_record::{RecordConfig, RecordMetrics, Recorder, Redactor, Store};

use crate::common::{self, Call, Encoding, audio_bytes, finals, is_final_reply, metric_sum, summary};

/// The disclosure: about three seconds of speech at 30 ms a character.
const DISCLOSURE: &str =
    "This call is recorded for quality and training purposes, and the advice given is general information only.";
/// A line the simulated model is told not to say (`sonic.faults.unsaidLines`).
const UNSAID: &str = "Calls on this line are recorded.";
/// The line of the step after it.
const NEXT_LINE: &str = "Our branches open at nine.";

/// The script: the caller asking the opening hours makes the model move to `route`, asking
/// to check their balance then moves it to `answer`; each move's tool result is answered briefly;
/// speech at about a person's pace; `sonic` more of the `sonic:` section.
fn script(sonic: &str) -> String {
    let rules = r#"
  - name: line-moved
    when: { toolResult: { name: workflow_goto } }
    reply: { text: "Noted." }
  - name: line-move
    when: { userText: "(?i)opening hours", tools: [workflow_goto] }
    reply:
      toolUse: { name: workflow_goto, input: { step: route } }
  - name: line-move-on
    when: { userText: "(?i)check my balance", tools: [workflow_goto] }
    reply:
      toolUse: { name: workflow_goto, input: { step: answer } }
  - name: voice-story
"#;
    common::script(sonic, "").replacen("\n  - name: voice-story\n", rules, 1).replace("msPerChar: 4,", "msPerChar: 30,")
}

/// Triage's `route` step says `line` (`uninterruptible` or not) and, when `next` is given,
/// its `answer` step says that.
fn with_lines(line: &'static str, uninterruptible: bool, next: Option<&'static str>) -> impl FnOnce(&std::path::Path) {
    move |copy| {
        let triage = copy.join("triage.yaml");
        let mut text = std::fs::read_to_string(&triage).expect("reads triage.yaml");
        for (id, kind, said, whole) in
            [("route", "decision", Some(line), uninterruptible), ("answer", "message", next, false)]
        {
            let Some(said) = said else { continue };
            let step = format!("    - id: {id}\n      kind: {kind}\n");
            assert!(text.contains(&step), "triage's workflow has a {id} step");
            let with = format!("{step}      say: {{ text: \"{said}\", uninterruptible: {whole} }}\n");
            text = text.replacen(&step, &with, 1);
        }
        std::fs::write(&triage, text).expect("writes triage.yaml");
    }
}

fn interrupted(messages: &[ServerMessage]) -> bool {
    messages.iter().any(|m| matches!(m, ServerMessage::BidiInterruption {}))
}

fn session_id(messages: &[ServerMessage]) -> String {
    messages
        .iter()
        .find_map(|m| match m {
            ServerMessage::BidiConnectionStart { session_id, .. } => Some(session_id.clone()),
            _ => None,
        })
        .expect("a bidi_connection_start")
}

/// A recorder keeping the record in a fresh SQLite file in `dir`.
fn recorder(dir: &std::path::Path) -> Arc<Recorder> {
    std::fs::create_dir_all(dir).expect("the record's folder");
    let store = Store::file(&dir.join("record.db")).expect("the record's SQLite file");
    let config = RecordConfig { flush_interval: Duration::from_millis(50), ..RecordConfig::default() };
    let metrics = RecordMetrics::new().expect("metrics");
    let (recorder, writer) = Recorder::new(store, config, Redactor::default(), Default::default(), metrics);
    tokio::spawn(writer.run(tokio_util::sync::CancellationToken::new()));
    recorder
}

/// The `workflow_line` events of session `id` as the gateway's record API serves them,
/// once the session is recorded as ended.
async fn recorded_lines(addr: SocketAddr, id: &str) -> Vec<serde_json::Value> {
    let mut last = String::new();
    for _ in 0..100 {
        let (status, body) = common::http_get(addr, &format!("/v1/sessions/{id}")).await;
        if status == 200 {
            let record: serde_json::Value = serde_json::from_str(&body).expect("the record's JSON");
            if !record["ended_at"].is_null() {
                let events = record["events"].as_array().expect("events");
                return events.iter().filter(|e| e["kind"] == "workflow_line").map(|e| e["data"].clone()).collect();
            }
        }
        last = format!("{status} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("session {id} was not recorded as ended in 10 s: {last}");
}

/// The `workflow_line` entries of the one session's transcript written into `dir` (the
/// writer is a background task: waits for `count` of them).
async fn transcribed_lines(dir: &std::path::Path, count: usize) -> Vec<serde_json::Value> {
    let mut lines = Vec::new();
    for _ in 0..50 {
        let files: Vec<_> =
            std::fs::read_dir(dir).expect("the transcripts").map(|e| e.expect("an entry").path()).collect();
        assert_eq!(files.len(), 1, "one session: {files:?}");
        let text = std::fs::read_to_string(&files[0]).expect("reads the transcript");
        lines = text
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("a JSON line"))
            .filter(|e| e["event"] == "workflow_line")
            .map(|e| e["data"].clone())
            .collect();
        if lines.len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lines
}

fn position(messages: &[ServerMessage], pred: impl Fn(&ServerMessage) -> bool) -> Option<usize> {
    messages.iter().position(pred)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disclosure_is_played_whole_what_was_said_over_it_is_heard_after_it_and_the_record_shows_it() {
    let dir = std::env::temp_dir().join(format!("switchboard-lines-{}", uuid::Uuid::new_v4()));
    let (transcripts, record) = (dir.join("transcripts"), recorder(&dir.join("record")));
    let edit = with_lines(DISCLOSURE, true, None);
    let running = common::banking_edited_recorded(&script(""), edit, transcripts.clone(), record).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let id = session_id(&hello);

    call.say(common::HOURS, 700);
    let moved = call.until(|m| is_final_reply(m, "Noted.")).await;
    assert!(
        moved.iter().any(|m| matches!(m, ServerMessage::WorkflowTransition { to, .. } if to == "route")),
        "{:#?}",
        summary(&moved)
    );
    // The disclosure follows; the caller says "stop" over it for a second and a half.
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    call.say(common::STOP, 1500);
    let disclosed = call.until(|m| is_final_reply(m, "quality and training")).await;
    assert!(!interrupted(&disclosed), "the disclosure was cut: {:#?}", summary(&disclosed));
    assert_eq!(finals(&disclosed, TranscriptRole::Assistant), [DISCLOSURE], "played whole");
    assert!(audio_bytes(&disclosed) > 24_000 * 2 * 2, "seconds of it were spoken");
    assert!(finals(&disclosed, TranscriptRole::User).is_empty(), "the model did not hear the speech over it");

    // Once it is over the model hears what the caller said over it, and answers it.
    let after = call.until(|m| is_final_reply(m, "Sure.")).await;
    assert_eq!(finals(&after, TranscriptRole::User), ["Stop"], "heard after the line: {:#?}", summary(&after));
    assert!(!interrupted(&after), "{:#?}", summary(&after));
    let told = |m: &ServerMessage| matches!(m, ServerMessage::WorkflowLine { node, played: LinePlayed::Whole, uninterruptible: true, reason: None, .. } if node == "route");
    let line = position(&call.seen, told).expect("the client is told the line was played whole");
    let heard = position(
        &call.seen,
        |m| matches!(m, ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, text, .. } if text == "Stop"),
    );
    assert!(heard.is_some_and(|h| h > line), "the caller's words after the line: {:#?}", summary(&call.seen));

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
    let notices = running.sim.sonic_stats().notices.len();
    let metrics = common::metrics(running.addr).await;
    let counted = metric_sum(&metrics, "switchboard_voice_state_notices_total", &[("agent", "triage")]);
    assert!(notices >= 1, "the step taken was told to the live stream");
    assert_eq!(counted, notices as f64, "every notice the stream took is counted");
    // The speech held back over the disclosure, sent to the model after it, is counted.
    let withheld = |outcome| {
        metric_sum(&metrics, "switchboard_voice_withheld_speech_total", &[("agent", "triage"), ("outcome", outcome)])
    };
    assert!(withheld("heard") >= 1.0, "the speech over the line reached the model after it");
    assert_eq!(withheld("truncated"), 0.0, "a second and a half is kept whole");

    // The gateway's record (its API) and the runtime's transcript say it was played whole.
    let recorded = recorded_lines(running.addr, &id).await;
    let transcribed = transcribed_lines(&transcripts, 1).await;
    for lines in [&recorded, &transcribed] {
        assert_eq!(lines.len(), 1, "{lines:?}");
        let data = &lines[0];
        assert_eq!(
            (data["node"].as_str(), data["played"].as_str(), data["uninterruptible"].as_bool()),
            (Some("route"), Some("whole"), Some(true)),
            "{data}"
        );
        assert_eq!(data["text"], DISCLOSURE);
    }
    assert!(recorded[0]["reason"].is_null(), "{:?}", recorded[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_the_model_never_says_is_abandoned_after_its_time_limit_and_the_next_line_is_said() {
    let dir = std::env::temp_dir().join(format!("switchboard-lines-{}", uuid::Uuid::new_v4()));
    let (transcripts, record) = (dir.join("transcripts"), recorder(&dir.join("record")));
    let edit = with_lines(UNSAID, false, Some(NEXT_LINE));
    let sonic = format!("  faults: {{ unsaidLines: [\"{UNSAID}\"] }}");
    let running = common::banking_edited_recorded(&script(&sonic), edit, transcripts.clone(), record).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let id = session_id(&hello);

    // Into `route`, whose line the model does not say; then on to `answer`, whose line
    // waits for it.
    call.say(common::HOURS, 700);
    call.until(|m| is_final_reply(m, "Noted.")).await;
    let asked = Instant::now();
    call.say(common::BALANCE_REQUEST, 700);
    let moved = call.until(|m| is_final_reply(m, "Noted.")).await;
    assert!(
        moved.iter().any(|m| matches!(m, ServerMessage::WorkflowTransition { to, .. } if to == "answer")),
        "{:#?}",
        summary(&moved)
    );
    let abandoned = call.until(|m| matches!(m, ServerMessage::WorkflowLine { .. })).await;
    let waited = asked.elapsed();
    let Some(ServerMessage::WorkflowLine { node, played, reason, .. }) = abandoned.last() else { unreachable!() };
    assert_eq!((node.as_str(), *played), ("route", LinePlayed::Abandoned), "{:#?}", summary(&abandoned));
    let reason = reason.clone().expect("a reason");
    assert!(reason.contains("time limit"), "{reason}");
    // Its limit: 10 s to start and 150 ms a character (14.8 s for this line).
    assert!(waited >= Duration::from_secs(14), "not before its time limit: {waited:?}");

    // The next step's line is said now, whole.
    let said = call.until(|m| is_final_reply(m, NEXT_LINE)).await;
    assert!(audio_bytes(&said) > 0, "said aloud");
    let next = call.until(|m| matches!(m, ServerMessage::WorkflowLine { .. })).await;
    assert!(
        matches!(next.last(), Some(ServerMessage::WorkflowLine { node, played: LinePlayed::Whole, .. }) if node == "answer"),
        "{:#?}",
        summary(&next)
    );
    call.hang_up().await;

    let recorded = recorded_lines(running.addr, &id).await;
    let transcribed = transcribed_lines(&transcripts, 2).await;
    for lines in [&recorded, &transcribed] {
        let how: Vec<_> = lines.iter().map(|l| (l["node"].as_str(), l["played"].as_str())).collect();
        assert_eq!(how, [(Some("route"), Some("abandoned")), (Some("answer"), Some("whole"))], "{lines:?}");
        assert_eq!(lines[0]["reason"].as_str(), Some(reason.as_str()), "{lines:?}");
        assert_eq!((lines[0]["text"].as_str(), lines[1]["text"].as_str()), (Some(UNSAID), Some(NEXT_LINE)));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
