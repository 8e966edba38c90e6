//! The caller's audio gathered into larger `audioInput` events
//! ([`switchboard_models::sonic::SonicConfig::audio_chunk`]): fewer events, the same audio
//! in the same order, the same answers, and no frame held longer than the chunk.

use std::time::Duration;

use bytes::Bytes;
use switchboard_models::sonic::SonicEvent;
use tokio::time::Instant;

use crate::common::{Microphone, config, final_replies, session, start, until};

const SCRIPT: &str = r#"
sonic:
  turnDetection: { silenceMs: { high: 300, medium: 300, low: 300 } }
  phrases: { 1: "What is my balance?" }
  speech: { msPerChar: 20, responseDelayMs: 50 }
  recordFrames: true
default: { text: "You said {text}." }
"#;

#[tokio::test]
async fn real_time_frames_go_three_to_an_event_whole_and_in_order_and_are_answered() {
    let sim = start(SCRIPT).await;
    let mut config = config();
    config.audio_chunk = Duration::from_millis(60);
    let (session, mut events) = session(&sim, config).await;
    let mic = Microphone::start(session.clone());
    mic.say(1, 600);
    let seen = until(&mut events, Duration::from_secs(20), |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    let sent = mic.stop().await;
    assert_eq!(final_replies(&seen), vec!["You said What is my balance?."]);

    // The last chunk goes at its deadline (60 ms): wait for it, generously.
    let deadline = Instant::now() + Duration::from_secs(5);
    while sim.sonic_stats().frames.len() < sent.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = sim.sonic_stats();
    let received: Vec<u64> = stats.frames.iter().map(|f| f.fingerprint).collect();
    assert_eq!(received, sent, "every 20 ms frame, once, in order");
    // Real time: three frames to an event, but for chunks a late frame or the end cut short.
    let (events_sent, frames) = (stats.audio_events, sent.len() as u64);
    eprintln!("{frames} frames in {events_sent} audioInput events");
    assert!(events_sent * 2 <= frames, "{events_sent} events for {frames} frames");
    assert!(events_sent * 3 >= frames, "{events_sent} events for {frames} frames");
    session.close().await.expect("open");
}

#[tokio::test]
async fn a_frame_not_followed_by_more_is_sent_once_the_chunk_time_has_passed() {
    let sim = start(SCRIPT).await;
    let mut config = config();
    config.audio_chunk = Duration::from_millis(200);
    let (session, _events) = session(&sim, config).await;
    let sent = Instant::now();
    session.send_audio(Bytes::from(vec![0u8; 640])).await.expect("open");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(sim.sonic_stats().audio_frames, 0, "held for the rest of its chunk");
    let deadline = sent + Duration::from_secs(5);
    while sim.sonic_stats().audio_frames == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waited = sent.elapsed();
    assert_eq!(sim.sonic_stats().audio_frames, 1, "sent after {waited:?}");
    assert_eq!(sim.sonic_stats().audio_events, 1);
    assert!(waited >= Duration::from_millis(200), "not before its deadline: {waited:?}");
    // Generous: the deadline is 200 ms; a loaded machine adds its scheduling delay.
    assert!(waited < Duration::from_secs(2), "{waited:?}");

    session.close().await.expect("open");
}

#[tokio::test]
async fn other_input_sends_the_audio_gathered_before_it_at_once() {
    let sim = start(SCRIPT).await;
    let mut config = config();
    // A chunk this long is not sent by its deadline within the test's wait.
    config.audio_chunk = Duration::from_secs(10);
    let (session, _events) = session(&sim, config).await;
    let sent = Instant::now();
    session.send_audio(Bytes::from(vec![0u8; 640])).await.expect("open");
    session.tell("the caller is verified").await.expect("open");
    while sim.sonic_stats().notices.is_empty() && sent.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = sim.sonic_stats();
    assert_eq!(stats.notices.len(), 1, "the notice arrived");
    assert_eq!((stats.audio_events, stats.audio_frames), (1, 1), "the frame went before it");
    session.close().await.expect("open");
}
