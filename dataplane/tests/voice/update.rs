//! `session_update.modalities` (issue 26) in a hybrid session with audio: the caller
//! switches to text — no reply audio, the microphone no longer reaches the model, typed
//! turns go on in the same stream — and back to audio. Settings fixed at the start
//! (`audio`, `model`, ...) and unknown modalities are refused, and nothing of that update
//! applies.

use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, SessionUpdate, TranscriptRole};
use tokio_tungstenite::tungstenite::Message;

use super::common::*;

fn is_error(message: &ServerMessage, wanted: &ErrorCode) -> bool {
    matches!(message, ServerMessage::BidiError { code, recoverable: true, .. } if code == wanted)
}

fn modalities(set: &[&str]) -> ClientMessage {
    let modalities = Some(set.iter().map(|m| (*m).to_owned()).collect());
    ClientMessage::SessionUpdate(SessionUpdate { modalities, ..SessionUpdate::default() })
}

/// Types the hours question and reads up to its answer.
async fn ask_hours(call: &mut Call) -> Vec<ServerMessage> {
    call.send(&ClientMessage::BidiTextInput { text: "What are your opening hours?".into(), id: None });
    let answer = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert_eq!(finals(&answer, TranscriptRole::User), ["What are your opening hours?"], "{:#?}", summary(&answer));
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hybrid_caller_switches_to_text_and_back_and_fixed_settings_stay_as_they_were() {
    let running = banking(&script("", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio", "text"], Encoding::Binary).await;

    // Refused updates change nothing, though they also name modalities.
    call.send_raw(Message::text(r#"{"type":"session_update","modalities":["text"],"audio":{"binaryOutput":true}}"#));
    let fixed = call.until(|m| is_error(m, &ErrorCode::FixedSetting)).await;
    assert!(matches!(fixed.last(), Some(ServerMessage::BidiError { message, .. }) if message.contains("audio")));
    call.send_raw(Message::text(r#"{"type":"session_update","modalities":["audio","video"]}"#));
    let unknown = call.until(|m| is_error(m, &ErrorCode::UnsupportedModality)).await;
    assert!(matches!(unknown.last(), Some(ServerMessage::BidiError { message, .. }) if message.contains("video")));
    assert!(audio_bytes(&ask_hours(&mut call).await) > 0, "still a call with audio");

    // Text only: answered without audio, and the microphone's frames stop reaching the model.
    call.send(&modalities(&["text"]));
    let updated = call.until(|m| matches!(m, ServerMessage::BidiSessionUpdated { .. })).await;
    assert!(
        matches!(updated.last(), Some(ServerMessage::BidiSessionUpdated { voice: None, modalities: Some(m) }) if m == &["text"]),
        "acknowledged with what now holds: {:#?}",
        summary(&updated)
    );
    let typed = ask_hours(&mut call).await;
    assert_eq!(audio_bytes(&typed), 0, "no reply audio: {:#?}", summary(&typed));
    let before = running.sim.sonic_stats().audio_frames;
    // The microphone sends a frame every 20 ms all along: 25 in this time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(running.sim.sonic_stats().audio_frames, before, "the microphone is not listened to");
    let errors = call.seen.iter().filter(|m| matches!(m, ServerMessage::BidiError { .. })).count();
    assert_eq!(errors, 2, "only the two refusals: {:#?}", summary(&call.seen));

    // Audio again: spoken and typed turns both answered aloud, in the same stream.
    call.send(&modalities(&["audio", "text"]));
    assert!(audio_bytes(&ask_hours(&mut call).await) > 0, "reply audio is back");
    call.say(STORY, 600);
    let spoken = call.until(|m| is_final_reply(m, "Once upon a time")).await;
    assert_eq!(finals(&spoken, TranscriptRole::User), ["Tell me a story"]);
    assert!(audio_bytes(&spoken) > 0);
    call.hang_up().await;
    let stats = running.sim.sonic_stats();
    assert_eq!(stats.streams, 1, "one stream all along");
    assert!(stats.audio_frames > before, "the microphone is listened to again");
}
