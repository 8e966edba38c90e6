//! What the caller heard (issue 26), end to end: the caller speaks over a story; their
//! client reports how much of it it played (`bidi_audio_played.audio_played_ms`); the
//! conversation keeps only the words heard, so the next model to take the conversation —
//! idv's Nova Sonic stream after the handoff, which opens with the session's history —
//! is told the story stopped there.

use switchboard_core::protocol::{ClientMessage, ServerMessage, TranscriptRole};

use super::common::*;

/// The history entries of the stream `stream` that `role` spoke.
fn history(running: &Running, stream: u64, role: &str) -> Vec<String> {
    let stats = running.sim.sonic_stats();
    stats.history.iter().filter(|(s, r, _)| *s == stream && r == role).map(|(_, _, text)| text.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_model_hears_only_the_part_of_a_cut_reply_the_client_played() {
    let running = banking(&script("", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    // A whole reply first: the runtime learns the voice's pace from it (the simulator
    // speaks 4 ms a character).
    call.say(HOURS, 600);
    call.until(|m| is_final_reply(m, "nine to five")).await;

    call.say(STORY, 600);
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    call.say(STOP, 500);
    let cut = call.until(|m| matches!(m, ServerMessage::BidiInterruption {})).await;
    assert!(!finals(&cut, TranscriptRole::Assistant).iter().any(|t| t.contains("Once upon")), "the story was cut");
    // The client played 60 ms of it: 15 characters at 4 ms each, "Once upon a tim",
    // of which whole words were heard. (The caller's "Stop" ends its utterance at least
    // 500 ms later: the report comes first.)
    call.send(&ClientMessage::BidiAudioPlayed { audio_played_ms: 60 });
    call.until(|m| is_final_reply(m, "Sure.")).await;

    call.say(BALANCE_REQUEST, 700);
    let moved = call.until(|m| is_final_reply(m, "To verify your identity")).await;
    assert!(
        moved.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")),
        "{:#?}",
        summary(&moved)
    );
    call.hang_up().await;

    let stats = running.sim.sonic_stats();
    assert_eq!(stats.streams, 2, "triage's stream, then idv's");
    assert_eq!(stats.interruptions, 1);
    assert!(history(&running, 0, "ASSISTANT").is_empty(), "triage's stream started afresh");
    let told = history(&running, 1, "ASSISTANT");
    assert!(told.iter().any(|t| t.contains("nine to five")), "idv's stream has the conversation: {told:#?}");
    let story: Vec<&String> = told.iter().filter(|t| t.contains("Once")).collect();
    assert_eq!(story.len(), 1, "{told:#?}");
    // Whole words only, and none the client did not play (all that was sent would be
    // at least "Once upon a time there").
    assert_eq!(story[0].trim(), "Once upon a", "the words heard are kept: {told:#?}");
    let users = history(&running, 1, "USER");
    assert!(users.iter().any(|t| t.contains("Tell me a story")), "{users:#?}");
}
