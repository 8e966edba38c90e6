//! Connection lifetime: streams the simulator closes every few seconds while the user
//! keeps talking, proactive rotation, and a voice change — every input frame reaches
//! exactly one stream, and no reply is produced twice.

use std::collections::BTreeMap;
use std::time::Duration;

use switchboard_models::sonic::{RestartReason, Role, SonicEvent, SonicEvents};
use switchboard_sim::SimHandle;

use crate::common::{Microphone, config, final_replies, restarts, session, start};

const PHRASES: &str = r#"{ 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six" }"#;

/// Collects events for `duration`, while `speak` is run at its offsets.
async fn talk(
    events: &mut SonicEvents,
    mic: &Microphone,
    phrases: &[(u64, u32)],
    duration: Duration,
) -> Vec<SonicEvent> {
    let start = tokio::time::Instant::now();
    let mut seen = Vec::new();
    let mut pending = phrases.iter().peekable();
    while start.elapsed() < duration {
        if let Some((_, id)) = pending.next_if(|(at, _)| start.elapsed() >= Duration::from_millis(*at)) {
            mic.say(*id, 400);
        }
        if let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(20), events.recv()).await {
            seen.push(event);
        }
    }
    seen
}

/// Waits until the simulator has received `count` frames in all.
async fn frames_arrived(sim: &SimHandle, count: usize) -> Vec<u64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stats = sim.sonic_stats();
        if stats.frames.len() >= count || tokio::time::Instant::now() >= deadline {
            return stats.frames.iter().map(|f| f.fingerprint).collect();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn counts(fingerprints: &[u64]) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for fingerprint in fingerprints {
        *counts.entry(*fingerprint).or_insert(0) += 1;
    }
    counts
}

/// Every frame sent reached a stream exactly once, and the simulator got nothing else.
fn assert_exactly_once(sent: &[u64], received: &[u64]) {
    let sent_counts = counts(sent);
    assert_eq!(sent_counts.len(), sent.len(), "the test's frames must be unique");
    let received_counts = counts(received);
    let missing: Vec<_> = sent_counts.keys().filter(|f| !received_counts.contains_key(f)).collect();
    let duplicated: Vec<_> = received_counts.iter().filter(|(_, n)| **n > 1).collect();
    let unknown: Vec<_> = received_counts.keys().filter(|f| !sent_counts.contains_key(f)).collect();
    assert!(
        missing.is_empty() && duplicated.is_empty() && unknown.is_empty(),
        "{} sent, {} received; missing {missing:?}, duplicated {duplicated:?}, unknown {unknown:?}",
        sent.len(),
        received.len()
    );
}

#[tokio::test]
async fn streams_closed_every_few_seconds_lose_no_frame_and_repeat_no_reply() {
    closed_streams_lose_no_frame(Duration::ZERO).await;
}

/// The same with the caller's audio gathered into 60 ms events: a chunk pending when its
/// stream goes reaches the next one, and the simulator hears every 20 ms frame once.
#[tokio::test]
async fn with_audio_in_60_ms_events_closed_streams_lose_no_frame_and_repeat_no_reply() {
    closed_streams_lose_no_frame(Duration::from_millis(60)).await;
}

async fn closed_streams_lose_no_frame(audio_chunk: Duration) {
    let sim = start(&format!(
        r#"
sonic:
  turnDetection: {{ silenceMs: {{ high: 300, medium: 300, low: 300 }} }}
  phrases: {PHRASES}
  speech: {{ msPerChar: 20, responseDelayMs: 50 }}
  faults: {{ close: {{ afterMs: 1700 }} }}
  recordFrames: true
default: {{ text: "You said {{text}}." }}
"#
    ))
    .await;
    let mut config = config();
    config.audio_chunk = audio_chunk;
    let (session, mut events) = session(&sim, config).await;
    let mic = Microphone::start(session.clone());
    // A phrase every 1.5 s: an utterance (400 ms), the silence that ends it (300 ms) and
    // its reply (about 300 ms) end half a second before the next phrase, so a slow machine
    // does not turn every reply into one the next words speak over. (A second apart, the
    // slack was a few tens of ms: a full run with two builds beside it answered two of six.)
    let phrases = [(100, 1), (1600, 2), (3100, 3), (4600, 4), (6100, 5), (7600, 6)];
    let seen = talk(&mut events, &mic, &phrases, Duration::from_millis(9300)).await;
    let sent = mic.stop().await;
    session.close().await.expect("open");
    let received = frames_arrived(&sim, sent.len()).await;

    assert_exactly_once(&sent, &received);
    let stats = sim.sonic_stats();
    assert!(stats.scripted_closes >= 3, "{stats:?}");
    // Frames in flight when a stream was closed reached it but no model heard them.
    assert_eq!(stats.audio_frames + stats.frames_after_close, sent.len() as u64);
    eprintln!(
        "{} frames sent in {} events; {} arrived after their stream's close",
        sent.len(),
        stats.audio_events,
        stats.frames_after_close
    );
    if !audio_chunk.is_zero() {
        // Three frames per event but for chunks cut short by a deadline or other input.
        assert!(stats.audio_events * 2 <= sent.len() as u64, "{} events for {} frames", stats.audio_events, sent.len());
    }
    let ended = restarts(&seen).iter().filter(|r| **r == RestartReason::StreamEnded).count();
    assert!(ended >= 3, "{:?}", restarts(&seen));
    // No utterance heard twice, nor answered twice as seen by the client (words a stream
    // lost mid-reply are asked again as text, and answered once); every utterance the
    // client saw heard was answered, but those whose reply the next words spoke over (a
    // reply a stream's close delays can still meet the next phrase).
    let heard: Vec<_> = stats.replies.iter().filter(|r| r.spoken).filter_map(|r| r.heard.clone()).collect();
    assert_eq!(counts_of(&heard).values().max(), Some(&1), "{heard:?}");
    let replies = final_replies(&seen);
    assert_eq!(counts_of(&replies).values().max(), Some(&1), "{replies:?}");
    assert!(replies.len() >= 3, "most utterances are answered: {replies:?}");
    let user: Vec<_> = seen
        .iter()
        .filter_map(|e| match e {
            SonicEvent::Text { role: Role::User, text, .. } => Some(format!("You said {text}.")),
            _ => None,
        })
        .collect();
    let spoken_over = seen.iter().filter(|e| matches!(e, SonicEvent::Interrupted)).count();
    let mut answered = user.iter();
    assert!(replies.iter().all(|r| answered.any(|u| u == r)), "replies in order: {replies:?} to {user:?}");
    assert_eq!(replies.len() + spoken_over, user.len(), "{replies:?} to {user:?}, {spoken_over} spoken over");
}

fn counts_of(items: &[String]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for item in items {
        *counts.entry(item.as_str()).or_insert(0) += 1;
    }
    counts
}

/// The session ends while its stream is being replaced: the first stream fails before it
/// worked, so its replacement waits out a backoff (1-2 s here), and the session is closed
/// in the middle of it. The audio held meanwhile — the chunk being gathered when the
/// stream failed and every frame after it — still reaches a stream, once: the replacement
/// is opened to take it and closed with the session.
#[tokio::test]
async fn a_session_closed_while_its_stream_is_replaced_loses_no_frame() {
    closed_during_replacement(Duration::ZERO).await;
}

/// The same with the caller's audio gathered into 60 ms events.
#[tokio::test]
async fn with_audio_in_60_ms_events_a_session_closed_while_its_stream_is_replaced_loses_no_frame() {
    closed_during_replacement(Duration::from_millis(60)).await;
}

async fn closed_during_replacement(audio_chunk: Duration) {
    let sim = start(
        r#"
sonic:
  faults: { close: { afterMs: 300, exception: internalServer, first: 1 } }
  recordFrames: true
"#,
    )
    .await;
    let mut config = config();
    config.audio_chunk = audio_chunk;
    // The backoff before the replacement: at least 1 s (half of it is fixed).
    config.retry.initial_backoff = Duration::from_secs(2);
    let (session, mut events) = session(&sim, config).await;
    let mic = Microphone::start(session.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while sim.sonic_stats().scripted_closes == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the simulator closes the first stream");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Well inside the backoff: no stream takes input now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = mic.stop().await;
    session.close().await.expect("open");
    let received = frames_arrived(&sim, sent.len()).await;

    assert_exactly_once(&sent, &received);
    let stats = sim.sonic_stats();
    assert_eq!(stats.streams, 2, "the replacement opened to take the held audio: {stats:?}");
    // The first stream heard the frames before its close; the rest went to the second.
    let on_second = stats.frames.iter().filter(|f| f.stream == 1).count();
    assert!(on_second >= 10, "{on_second} of {} frames went to the replacement", sent.len());
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
        assert!(
            !matches!(event, SonicEvent::Restarted { .. } | SonicEvent::Failed(_)),
            "the client is not told of a stream that only took the last input: {event:?}"
        );
    }
}

#[tokio::test]
async fn proactive_rotation_and_a_voice_change_hand_over_at_turn_boundaries() {
    let sim = start(&format!(
        r#"
sonic:
  turnDetection: {{ silenceMs: {{ high: 300, medium: 300, low: 300 }} }}
  phrases: {PHRASES}
  speech: {{ msPerChar: 20, responseDelayMs: 50 }}
  recordFrames: true
default: {{ text: "You said {{text}}." }}
"#
    ))
    .await;
    let mut config = config();
    config.rotate_after = Duration::from_millis(1500);
    config.boundary_quiet = Duration::from_millis(1000);
    let (session, mut events) = session(&sim, config).await;
    let mic = Microphone::start(session.clone());
    let mut seen = talk(&mut events, &mic, &[(100, 1), (1300, 2), (2500, 3)], Duration::from_millis(3600)).await;
    session.change_voice("tiffany").await.expect("open");
    seen.extend(talk(&mut events, &mic, &[(0, 4)], Duration::from_millis(1800)).await);
    let sent = mic.stop().await;
    session.close().await.expect("open");
    let received = frames_arrived(&sim, sent.len()).await;

    assert_exactly_once(&sent, &received);
    let stats = sim.sonic_stats();
    // A proactive hand-over is exact: no frame went to a stream that had stopped listening.
    assert_eq!(stats.frames_after_close, 0, "{stats:?}");
    let reasons = restarts(&seen);
    assert!(reasons.contains(&RestartReason::Rotation), "{reasons:?}");
    assert!(reasons.contains(&RestartReason::VoiceChange), "{reasons:?}");
    assert!(stats.streams >= 3, "{stats:?}");
    // The voice change reached the service: the last stream speaks with the new voice.
    let last_voice = stats.voices.iter().max_by_key(|(stream, _)| *stream).and_then(|(_, v)| v.as_deref());
    assert_eq!(last_voice, Some("tiffany"), "{:?}", stats.voices);
    assert_eq!(stats.voices.first().and_then(|(_, v)| v.as_deref()), Some("matthew"));
    // Replayed history is never answered: one reply per utterance.
    let heard: Vec<_> = stats.replies.iter().filter_map(|r| r.heard.clone()).collect();
    assert_eq!(heard, vec!["one", "two", "three", "four"], "{stats:?}");
    assert_eq!(final_replies(&seen), vec!["You said one.", "You said two.", "You said three.", "You said four."]);
}

#[tokio::test]
async fn a_retryable_stream_error_is_recovered_on_a_new_stream() {
    let sim = start(&format!(
        r#"
sonic:
  turnDetection: {{ silenceMs: {{ high: 300, medium: 300, low: 300 }} }}
  phrases: {PHRASES}
  speech: {{ msPerChar: 20, responseDelayMs: 50 }}
  faults: {{ streamError: {{ kind: modelStreamError, atUtterance: 0 }} }}
  recordFrames: true
default: {{ text: "You said {{text}}." }}
"#
    ))
    .await;
    let (session, mut events) = session(&sim, config()).await;
    let mic = Microphone::start(session.clone());
    let seen = talk(&mut events, &mic, &[(100, 1), (1300, 2)], Duration::from_millis(2600)).await;
    let sent = mic.stop().await;
    session.close().await.expect("open");
    let received = frames_arrived(&sim, sent.len()).await;

    assert_exactly_once(&sent, &received);
    assert_eq!(restarts(&seen), vec![RestartReason::StreamError("stream_interrupted")]);
    // The failed utterance got no reply; the next one was answered on the new stream.
    assert_eq!(final_replies(&seen), vec!["You said two."]);
    let stats = sim.sonic_stats();
    assert_eq!(stats.streams, 2, "{stats:?}");
    assert_eq!(stats.replies.iter().map(|r| r.stream).collect::<Vec<_>>(), vec![1]);
}

#[tokio::test]
async fn streams_that_keep_failing_before_they_work_end_the_session_after_bounded_attempts() {
    let sim = start(
        r#"
sonic:
  faults: { close: { afterMs: 100, exception: internalServer } }
"#,
    )
    .await;
    let mut config = config();
    config.retry.max_attempts = 3;
    let (session, mut events) = session(&sim, config).await;
    let mic = Microphone::start(session.clone());
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        let mut restarts = 0;
        loop {
            match events.recv().await {
                Some(SonicEvent::Failed(error)) => return (restarts, Some(error)),
                Some(SonicEvent::Restarted { .. }) => restarts += 1,
                Some(_) => {}
                None => return (restarts, None),
            }
        }
    })
    .await
    .expect("the session gives up in time");
    mic.stop().await;
    let (restarts, error) = failed;
    assert!(matches!(error, Some(switchboard_models::ModelError::ServiceUnavailable { .. })), "{error:?}");
    assert_eq!(restarts, 2, "two replacements, then the third failure ends it");
    assert_eq!(sim.sonic_stats().streams, 3);
    assert!(events.recv().await.is_none());
}
