//! Model stream lifetime through the runtime: the simulator closes every stream after a
//! couple of seconds while the user keeps talking — every frame the client sent reached
//! exactly one stream and no reply is spoken twice; a fatal error is not retried and
//! reaches the client as a `bidi_error`.

use std::collections::BTreeMap;
use std::time::Duration;

use switchboard_core::protocol::{ServerMessage, TranscriptRole, close_code};
use switchboard_runtime::ServerConfig;
use switchboard_sim::Operation;

use crate::common::{self, Call, Encoding, finals, is_final_reply, summary};

fn counts<T: Ord + Clone>(items: &[T]) -> BTreeMap<T, usize> {
    let mut counts = BTreeMap::new();
    for item in items {
        *counts.entry(item.clone()).or_insert(0) += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_closed_every_two_seconds_lose_no_frame_and_repeat_no_reply() {
    let running = common::banking(&common::script("  faults: { close: { afterMs: 2000 } }", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let phrases = [common::HOURS, common::STOP, common::HOURS, common::STOP, common::HOURS];
    let started = tokio::time::Instant::now();
    for (i, phrase) in phrases.iter().enumerate() {
        // One utterance every 1.6 s, whatever the streams do.
        tokio::time::sleep_until(started + Duration::from_millis(1600 * i as u64)).await;
        call.say(*phrase, 400);
    }
    // Keep the microphone open (silence) for a while after the last utterance, reading.
    let deadline = started + Duration::from_millis(1600 * phrases.len() as u64 + 2500);
    call.read_until(deadline).await;
    let seen = call.seen.clone();
    let sent = call.hang_up().await;

    // Every frame sent reached exactly one stream (frames in flight at a close reached the
    // closing stream, counted as arriving after its close).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let received = loop {
        let stats = running.sim.sonic_stats();
        if stats.frames.len() >= sent.len() || tokio::time::Instant::now() >= deadline {
            break stats.frames.iter().map(|f| f.fingerprint).collect::<Vec<_>>();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (sent_counts, received_counts) = (counts(&sent), counts(&received));
    assert_eq!(sent_counts.len(), sent.len(), "the test's frames are unique");
    let missing = sent_counts.keys().filter(|f| !received_counts.contains_key(f)).count();
    let duplicated = received_counts.values().filter(|n| **n > 1).count();
    let unknown = received_counts.keys().filter(|f| !sent_counts.contains_key(f)).count();
    assert_eq!(
        (missing, duplicated, unknown),
        (0, 0, 0),
        "{} frames sent, {} received: missing, duplicated, unknown",
        sent.len(),
        received.len()
    );
    let stats = running.sim.sonic_stats();
    assert!(stats.scripted_closes >= 3, "{stats:?}");
    // The runtime gathers the caller's frames into 60 ms events by default: three frames an
    // event but for chunks cut short by a stream's loss, other input or the hang-up.
    assert!(stats.audio_events * 2 <= sent.len() as u64, "{} events for {} frames", stats.audio_events, sent.len());
    let restarts = seen.iter().filter(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })).count();
    assert!(restarts >= 3, "the client is told of each restart: {:#?}", summary(&seen));
    // No utterance heard twice by the simulator, nor answered twice as the client saw it
    // (words a stream lost mid-reply are asked again as text: `spoken` is false then).
    let heard: Vec<String> = stats.replies.iter().filter(|r| r.spoken).filter_map(|r| r.heard.clone()).collect();
    assert!(heard.len() <= phrases.len(), "{heard:?}");
    let user = finals(&seen, TranscriptRole::User);
    assert!(user.len() <= phrases.len() && user.len() >= 3, "most utterances were heard once: {user:?}");
    // Every reply the simulator sent whole reached the client once, and every utterance
    // the client saw heard got one: a reply a close cut is asked for again on the next
    // stream (which lives 2 s; a reply takes well under half a second). triage's greeting,
    // said before any utterance, is the runtime's own line, not a reply.
    let first_heard = seen
        .iter()
        .position(|m| matches!(m, ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, .. }))
        .unwrap_or(seen.len());
    let replies = finals(&seen[first_heard..], TranscriptRole::Assistant);
    let whole = usize::try_from(stats.replies_sent).expect("a count");
    assert_eq!(replies.len(), whole, "one final per reply sent whole: {replies:?} for {heard:?}");
    assert!(whole <= heard.len(), "no reply repeated: {whole} sent for {heard:?}");
    // (The phrases come 1.6 s apart; should the next words speak over a reply, that one
    // is not owed any more.)
    let spoken_over = usize::try_from(stats.interruptions).expect("a count");
    assert_eq!(
        replies.len() + spoken_over,
        user.len(),
        "each utterance heard was answered, or spoken over: {:#?}",
        summary(&seen)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_model_error_is_not_retried_and_reaches_the_client() {
    let running = common::banking(&common::script("", "faults: { error: { kind: accessDenied } }")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    let (code, reason) = call.closed().await;
    let error = call.seen.iter().find_map(|m| match m {
        ServerMessage::BidiError { code, message, recoverable, .. } => {
            Some((code.clone(), message.clone(), *recoverable))
        }
        _ => None,
    });
    let (error_code, message, recoverable) = error.expect("a bidi_error");
    assert_eq!(error_code, "model_access_denied", "{message}");
    assert!(!recoverable);
    assert!(message.contains("access"), "{message}");
    assert_eq!(code, close_code::INTERNAL, "{reason}");
    call.hang_up().await;
    let stats = running.sim.stats();
    assert_eq!(stats.requests(Operation::InvokeModelWithBidirectionalStream), 1, "not retried: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_stream_opens_with_the_prompt_of_the_sessions_state_now() {
    // The caller reaches idv as callers do: triage (stream 1) hands over on the request.
    // idv's first stream (stream 2) ends 8 s after it opened, well after the caller was
    // verified on it; triage's ended at the handoff, before its 8 s.
    let running = common::banking(&common::script("  faults: { close: { afterMs: 8000, first: 2 } }", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::BALANCE_REQUEST, 700);
    call.until(|m| is_final_reply(m, "To verify your identity")).await;
    call.say(common::IDV_DETAILS, 900);
    let verified = call.until(|m| is_final_reply(m, "you're verified")).await;
    assert!(
        !verified.iter().any(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })),
        "the first stream lived through the identity check: {:#?}",
        summary(&verified)
    );
    let restart = call.until(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })).await;
    assert!(
        matches!(restart.last(), Some(ServerMessage::BidiConnectionRestart { reason, .. }) if reason == "stream_ended"),
        "{:#?}",
        summary(&restart)
    );
    call.hang_up().await;

    // The client hears of the switch once the new stream is open; the simulator may still
    // be reading that stream's first events.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let prompts = loop {
        let prompts = running.sim.sonic_stats().system_prompts;
        if prompts.len() >= 3 || tokio::time::Instant::now() >= deadline {
            break prompts;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(prompts.len(), 3, "triage's stream, then idv's two: {prompts:#?}");
    assert!(!prompts[1].1.contains("Ada Lovelace"), "idv's first stream opened before the check: {}", prompts[1].1);
    assert!(
        prompts[2].1.contains("Ada Lovelace") && prompts[2].1.contains("12345678"),
        "the replacement opened with the verified caller in its prompt: {}",
        prompts[2].1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_rotated_at_the_configured_age_at_a_quiet_moment() {
    let server = ServerConfig { voice_rotate_after: Duration::from_secs(1), ..ServerConfig::default() };
    let running = common::banking_with(&common::script("", ""), server).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::HOURS, 400);
    call.until(|m| is_final_reply(m, "We are open from nine to five.")).await;
    // The stream is past its age now; the swap waits for a quiet moment (no speech either
    // way), then the conversation goes on on the new stream.
    let rotated = call.until(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })).await;
    assert!(
        matches!(rotated.last(), Some(ServerMessage::BidiConnectionRestart { reason, generation }) if reason == "rotation" && *generation == 2),
        "{:#?}",
        summary(&rotated)
    );
    call.say(common::HOURS, 400);
    call.until(|m| is_final_reply(m, "We are open from nine to five.")).await;
    call.hang_up().await;
    let stats = running.sim.sonic_stats();
    assert!(stats.streams >= 2, "{stats:?}");
    assert_eq!(stats.scripted_closes, 0);
}
