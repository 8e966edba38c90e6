//! A caller's question is not left unanswered because the model's stream ended mid-reply:
//! through the runtime, the client is told to stop playing the cut reply
//! (`bidi_interruption`), the replacement stream is asked the words again and the client
//! gets one whole reply to them, the caller's transcript once. A stream that ends after
//! the reply asks nothing again; a replacement lost mid-reply too ends the turn as
//! interrupted (the words are asked again once) and the call goes on.

use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ServerMessage, StopReason, TranscriptRole};

use crate::common::{self, Call, Encoding, audio_bytes, finals, is_final_reply, metric_sum, metrics, summary};

const HOURS_REPLY: &str = "We are open from nine to five.";
const HOURS_HEARD: &str = "What are your opening hours?";

fn count(seen: &[ServerMessage], pred: impl Fn(&ServerMessage) -> bool) -> usize {
    seen.iter().filter(|m| pred(m)).count()
}

fn completions(seen: &[ServerMessage]) -> Vec<StopReason> {
    seen.iter()
        .filter_map(|m| match m {
            ServerMessage::BidiResponseComplete { stop_reason, .. } => Some(stop_reason.clone()),
            _ => None,
        })
        .collect()
}

/// Reads for `quiet` more (a duplicate would show up in it).
async fn settle(call: &mut Call, quiet: Duration) {
    call.read_until(tokio::time::Instant::now() + quiet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ended_mid_reply_gets_the_question_answered_once_on_the_replacement() {
    // The reply's audio is 120 ms (30 characters at 4 ms); the stream ends 60 ms into it.
    let running = common::banking(&common::script("  faults: { cutReply: { afterMs: 60, atReply: 0 } }", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::HOURS, 400);
    let restart = call.until(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })).await;
    let reply = call.until(|m| is_final_reply(m, HOURS_REPLY)).await;
    let done = call.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;
    settle(&mut call, Duration::from_millis(1500)).await;
    let seen = call.seen.clone();
    call.hang_up().await;

    let cut = restart.iter().position(|m| matches!(m, ServerMessage::BidiInterruption {})).expect("told to stop");
    assert!(
        matches!(restart.last(), Some(ServerMessage::BidiConnectionRestart { reason, .. }) if reason == "stream_ended"),
        "{:#?}",
        summary(&restart)
    );
    assert!(
        restart[..cut].iter().any(|m| matches!(m, ServerMessage::BidiAudioStream { .. })),
        "some of the cut reply was sent before: {:#?}",
        summary(&restart)
    );
    assert!(audio_bytes(&reply) > 0, "the reply's audio came on the replacement");
    assert_eq!(finals(&seen, TranscriptRole::Assistant).iter().filter(|t| t.contains(HOURS_REPLY)).count(), 1);
    assert_eq!(finals(&seen, TranscriptRole::User), vec![HOURS_HEARD], "the caller's words once");
    assert_eq!(count(&seen, |m| matches!(m, ServerMessage::BidiInterruption {})), 1);
    assert_eq!(count(&seen, |m| matches!(m, ServerMessage::BidiSpeechStarted {})), 1, "no speech made up");
    assert_eq!(completions(&done), vec![StopReason::EndTurn], "one turn, answered");
    assert_eq!(completions(&seen).len(), 1, "{:#?}", summary(&seen));
    let stats = running.sim.sonic_stats();
    assert_eq!((stats.replies_cut, stats.streams, stats.replies_sent), (1, 2, 1), "{stats:?}");
    assert_eq!(stats.typed, vec![HOURS_HEARD], "asked again, as the caller's words");
    assert_eq!(cut_metric(&running).await, (1.0, 0.0));
}

/// `switchboard_voice_replies_cut_total` for triage: (asked again, unanswered).
async fn cut_metric(running: &common::Running) -> (f64, f64) {
    let text = metrics(running.addr).await;
    let outcome = |o| metric_sum(&text, "switchboard_voice_replies_cut_total", &[("agent", "triage"), ("outcome", o)]);
    (outcome("asked_again"), outcome("unanswered"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_words_whose_reply_was_cut_are_answered_once_on_the_replacement() {
    let running = common::banking(&common::script("  faults: { cutReply: { afterMs: 60, atReply: 0 } }", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.send(&ClientMessage::BidiTextInput { text: HOURS_HEARD.into(), id: None });
    call.until(|m| is_final_reply(m, HOURS_REPLY)).await;
    call.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;
    settle(&mut call, Duration::from_millis(1500)).await;
    let seen = call.seen.clone();
    call.hang_up().await;

    assert_eq!(count(&seen, |m| matches!(m, ServerMessage::BidiInterruption {})), 1, "{:#?}", summary(&seen));
    assert_eq!(finals(&seen, TranscriptRole::User), vec![HOURS_HEARD], "the typed words once");
    assert_eq!(finals(&seen, TranscriptRole::Assistant).iter().filter(|t| t.contains(HOURS_REPLY)).count(), 1);
    assert_eq!(completions(&seen), vec![StopReason::EndTurn]);
    let stats = running.sim.sonic_stats();
    assert_eq!(stats.typed, vec![HOURS_HEARD, HOURS_HEARD], "typed, then asked again: {stats:?}");
    assert_eq!((stats.replies_cut, stats.replies_sent), (1, 1), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ended_after_the_reply_asks_nothing_again() {
    // The first stream ends 4 s in; the reply ended about a second in.
    let running = common::banking(&common::script("  faults: { close: { afterMs: 4000, first: 1 } }", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::HOURS, 400);
    call.until(|m| is_final_reply(m, HOURS_REPLY)).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. })).await;
    settle(&mut call, Duration::from_millis(1500)).await;
    let seen = call.seen.clone();
    call.hang_up().await;

    assert_eq!(count(&seen, |m| matches!(m, ServerMessage::BidiInterruption {})), 0, "{:#?}", summary(&seen));
    assert_eq!(finals(&seen, TranscriptRole::Assistant).iter().filter(|t| t.contains(HOURS_REPLY)).count(), 1);
    assert_eq!(completions(&seen), vec![StopReason::EndTurn]);
    let stats = running.sim.sonic_stats();
    assert!(stats.typed.is_empty(), "nothing asked again: {stats:?}");
    assert_eq!(stats.replies.len(), 1, "{stats:?}");
    assert_eq!(cut_metric(&running).await, (0.0, 0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_lost_mid_reply_too_ends_the_turn_and_the_call_goes_on() {
    // The first two replies are cut: the answer, and the replacement's answer asked again.
    let running = common::banking(&common::script("  faults: { cutReply: { afterMs: 60, first: 2 } }", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::HOURS, 400);
    let first = call.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;
    call.say(common::HOURS, 400);
    let second = call.until(|m| is_final_reply(m, HOURS_REPLY)).await;
    call.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;
    settle(&mut call, Duration::from_millis(1500)).await;
    let seen = call.seen.clone();
    call.hang_up().await;

    assert_eq!(completions(&first), vec![StopReason::Interrupted], "{:#?}", summary(&first));
    let answered =
        |m: &[ServerMessage]| finals(m, TranscriptRole::Assistant).iter().filter(|t| t.contains(HOURS_REPLY)).count();
    assert_eq!(answered(&first), 0, "no reply finished: {:#?}", summary(&first));
    assert_eq!(count(&first, |m| matches!(m, ServerMessage::BidiInterruption {})), 2, "both cuts stopped");
    assert_eq!(count(&seen, |m| matches!(m, ServerMessage::BidiConnectionRestart { .. })), 2);
    assert_eq!(finals(&second, TranscriptRole::User), vec![HOURS_HEARD], "the call goes on");
    assert_eq!(answered(&seen), 1);
    assert_eq!(completions(&seen), vec![StopReason::Interrupted, StopReason::EndTurn]);
    let stats = running.sim.sonic_stats();
    assert_eq!((stats.replies_cut, stats.streams), (2, 3), "{stats:?}");
    assert_eq!(stats.typed, vec![HOURS_HEARD], "asked again once");
    assert_eq!(cut_metric(&running).await, (1.0, 1.0), "asked again once, then left unanswered");
}
