//! A long voice conversation compacts too (issue 26): past triage's small
//! `model.contextTokens`, the oldest turns are summarised by the text model (the
//! simulator's Converse, as Bedrock's), and a replacement Nova Sonic stream (a rotation)
//! opens with that summary in its SYSTEM prompt and replays only the recent turns — not
//! the newest 40 KB of everything.

use std::time::Duration;

use switchboard_core::protocol::ServerMessage;
use switchboard_runtime::ServerConfig;
use switchboard_sim::Operation;

use crate::common::{self, Call, Encoding, is_final_reply};

const SUMMARY: &str = "Summary of the earlier conversation:\nThe caller began with \"What are your opening hours?\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_stream_opens_with_the_summary_and_the_recent_turns() {
    let small_budget = |copy: &std::path::Path| {
        let triage = copy.join("triage.yaml");
        let text = std::fs::read_to_string(&triage).expect("reads triage.yaml");
        let edited =
            text.replacen("spec:\n  mode: hybrid\n", "spec:\n  model:\n    contextTokens: 1024\n  mode: hybrid\n", 1);
        assert_ne!(edited, text, "the triage Agent was edited");
        std::fs::write(&triage, edited).expect("writes triage.yaml");
    };
    // Streams are replaced at every quiet moment past a second of age.
    let server = ServerConfig { voice_rotate_after: Duration::from_secs(1), ..ServerConfig::default() };
    let running = common::banking_edited_with(&common::script("", ""), small_budget, server).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::HOURS, 400);
    call.until(|m| is_final_reply(m, "We are open from nine to five.")).await;
    // Stories until the conversation passes the budget's high-water mark (with triage's
    // prompt, a few thousand bytes) and a stream opened after the summary (its prompt
    // carries it) has taken over (its history was replayed).
    let mut summarised = None;
    for _ in 0..40 {
        call.say(common::STORY, 300);
        call.until(|m| is_final_reply(m, "Once upon a time")).await;
        let stats = running.sim.sonic_stats();
        summarised = stats
            .system_prompts
            .iter()
            .filter(|(_, prompt)| prompt.contains(SUMMARY))
            .map(|(stream, _)| *stream)
            .find(|stream| stats.history.iter().any(|(s, _, _)| s == stream));
        if summarised.is_some() {
            break;
        }
    }
    call.hang_up().await;
    let stream = summarised.expect("a stream opened with the model's summary in its prompt took over");
    assert!(running.sim.stats().requests(Operation::ConverseStream) >= 1, "the text model wrote it");
    let stats = running.sim.sonic_stats();
    let replayed: Vec<&(u64, String, String)> = stats.history.iter().filter(|(s, _, _)| *s == stream).collect();
    assert!(!replayed.is_empty(), "the recent turns are replayed");
    assert_eq!(replayed[0].1, "USER", "{replayed:#?}");
    assert!(
        !replayed.iter().any(|(_, _, text)| text.contains("opening hours")),
        "the summarised turn is not replayed: {replayed:#?}"
    );
    // The stream before the summary replayed the first turn (it was not forgotten before).
    let earlier = stats.history.iter().any(|(s, _, text)| *s < stream && text.contains("opening hours"));
    assert!(earlier, "a stream before the compaction replayed the first turn: {:#?}", stats.history);
}
