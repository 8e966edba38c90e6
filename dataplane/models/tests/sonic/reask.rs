//! A stream lost in the middle of a reply: the replacement is asked the user's words again
//! (once), and answers them whole; a stream lost after the reply asks nothing; a
//! replacement lost mid-reply too lets the words go and the conversation goes on.

use std::time::Duration;

use switchboard_models::sonic::{GenerationStage, RestartReason, Role, SonicEvent, SonicEvents};
use switchboard_sim::SimHandle;

use crate::common::{Microphone, config, final_replies, restarts, session, start, until};

const LIMIT: Duration = Duration::from_secs(20);

fn script(faults: &str) -> String {
    script_echoing(faults, false)
}

/// [`script`]; `echo`: the simulator shows text input as a USER transcript first.
fn script_echoing(faults: &str, echo: bool) -> String {
    format!(
        r#"
sonic:
  turnDetection: {{ silenceMs: {{ high: 300, medium: 300, low: 300 }} }}
  phrases: {{ 1: "one", 2: "two" }}
  speech: {{ msPerChar: 20, responseDelayMs: 50 }}
  faults: {{ {faults} }}
  echoText: {echo}
default: {{ text: "You said {{text}}." }}
"#
    )
}

fn is_final_reply(event: &SonicEvent) -> bool {
    matches!(event, SonicEvent::Text { role: Role::Assistant, stage: Some(GenerationStage::Final), .. })
}

fn user_texts(events: &[SonicEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            SonicEvent::Text { role: Role::User, text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn cuts(events: &[SonicEvent]) -> Vec<bool> {
    events.iter().filter_map(|e| if let SonicEvent::ReplyCut { reasked } = e { Some(*reasked) } else { None }).collect()
}

/// Reads events for `quiet` more, after what was expected came (nothing more may come).
async fn settle(events: &mut SonicEvents, quiet: Duration) -> Vec<SonicEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + quiet;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        seen.push(event);
    }
    seen
}

/// The history stream `stream` was given, as (role, text).
fn history_of(sim: &SimHandle, stream: u64) -> Vec<(String, String)> {
    sim.sonic_stats().history.iter().filter(|(s, _, _)| *s == stream).map(|(_, r, t)| (r.clone(), t.clone())).collect()
}

#[tokio::test]
async fn a_stream_lost_mid_reply_has_its_replacement_answer_the_words_once() {
    let sim = start(&script("cutReply: { afterMs: 100, atReply: 1 }")).await;
    let (session, mut events) = session(&sim, config()).await;
    let mic = Microphone::start(session.clone());
    mic.say(1, 400);
    let mut seen = until(&mut events, LIMIT, is_final_reply).await;
    mic.say(2, 400);
    seen.extend(until(&mut events, LIMIT, is_final_reply).await);
    seen.extend(settle(&mut events, Duration::from_millis(1500)).await);
    mic.stop().await;
    session.close().await.expect("open");

    // Reply 1 ("You said two.", 260 ms of audio) was cut 100 ms in; the replacement was
    // asked "two" and answered it whole, once.
    assert_eq!(cuts(&seen), vec![true], "{seen:#?}");
    assert_eq!(restarts(&seen), vec![RestartReason::StreamEnded]);
    assert_eq!(final_replies(&seen), vec!["You said one.", "You said two."]);
    assert_eq!(user_texts(&seen), vec!["one", "two"], "the user's words once each");
    let stats = sim.sonic_stats();
    assert_eq!((stats.replies_cut, stats.streams, stats.replies_sent), (1, 2, 2), "{stats:?}");
    assert_eq!(stats.typed, vec!["two"], "asked again as interactive text");
    let asked: Vec<_> = stats.replies.iter().map(|r| (r.stream, r.heard.as_deref(), r.spoken)).collect();
    assert_eq!(asked, vec![(0, Some("one"), true), (0, Some("two"), true), (1, Some("two"), false)]);
    // The replacement's history ends before the words asked again; nothing of the cut
    // reply is in it.
    assert_eq!(history_of(&sim, 1), vec![("USER".into(), "one".into()), ("ASSISTANT".into(), "You said one.".into())]);
}

#[tokio::test]
async fn a_replacement_that_echoes_the_words_asked_again_reports_them_once() {
    let sim = start(&script_echoing("cutReply: { afterMs: 100, atReply: 0 }", true)).await;
    let (session, mut events) = session(&sim, config()).await;
    let mic = Microphone::start(session.clone());
    mic.say(1, 400);
    let mut seen = until(&mut events, LIMIT, is_final_reply).await;
    seen.extend(settle(&mut events, Duration::from_millis(1000)).await);
    // Typed text's echo still reaches the caller of the session (the runtime knows it).
    session.send_text("two").await.expect("open");
    seen.extend(until(&mut events, LIMIT, is_final_reply).await);
    seen.extend(settle(&mut events, Duration::from_millis(1000)).await);
    mic.stop().await;
    session.close().await.expect("open");

    assert_eq!(cuts(&seen), vec![true], "{seen:#?}");
    assert_eq!(final_replies(&seen), vec!["You said one.", "You said two."]);
    assert_eq!(user_texts(&seen), vec!["one", "two"], "the echo of the words asked again is held back");
    let stats = sim.sonic_stats();
    assert_eq!(stats.typed, vec!["one", "two"], "{stats:?}");
    assert_eq!(stats.replies_cut, 1, "{stats:?}");
}

#[tokio::test]
async fn a_stream_lost_after_the_reply_asks_nothing_again() {
    // The first stream ends 4 s in: well after "one" (said from 0 to 0.4 s) was answered
    // (0.7 s to 1 s).
    let sim = start(&script("close: { afterMs: 4000, first: 1 }")).await;
    let (session, mut events) = session(&sim, config()).await;
    let mic = Microphone::start(session.clone());
    mic.say(1, 400);
    let mut seen = until(&mut events, LIMIT, is_final_reply).await;
    seen.extend(until(&mut events, LIMIT, |e| matches!(e, SonicEvent::Restarted { .. })).await);
    mic.say(2, 400);
    seen.extend(until(&mut events, LIMIT, is_final_reply).await);
    seen.extend(settle(&mut events, Duration::from_millis(1500)).await);
    mic.stop().await;
    session.close().await.expect("open");

    assert!(cuts(&seen).is_empty(), "{seen:#?}");
    assert_eq!(final_replies(&seen), vec!["You said one.", "You said two."]);
    let stats = sim.sonic_stats();
    assert!(stats.typed.is_empty(), "nothing asked again: {stats:?}");
    assert_eq!(stats.replies.len(), 2, "{stats:?}");
    assert_eq!(history_of(&sim, 1), vec![("USER".into(), "one".into()), ("ASSISTANT".into(), "You said one.".into())]);
}

#[tokio::test]
async fn a_replacement_lost_mid_reply_too_lets_the_words_go_and_the_conversation_goes_on() {
    // Replies 0 and 1 are cut: "one" and the replacement's answer to it asked again.
    let sim = start(&script("cutReply: { afterMs: 100, first: 2 }")).await;
    let (session, mut events) = session(&sim, config()).await;
    let mic = Microphone::start(session.clone());
    mic.say(1, 400);
    let mut seen = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::ReplyCut { reasked: false })).await;
    seen.extend(until(&mut events, LIMIT, |e| matches!(e, SonicEvent::Restarted { .. })).await);
    mic.say(2, 400);
    seen.extend(until(&mut events, LIMIT, is_final_reply).await);
    seen.extend(settle(&mut events, Duration::from_millis(1500)).await);
    mic.stop().await;
    session.close().await.expect("open");

    assert_eq!(cuts(&seen), vec![true, false], "asked again once, then let go: {seen:#?}");
    assert_eq!(final_replies(&seen), vec!["You said two."], "the next words are answered");
    let stats = sim.sonic_stats();
    assert_eq!((stats.replies_cut, stats.streams), (2, 3), "{stats:?}");
    assert_eq!(stats.typed, vec!["one"], "asked again once");
    // The words let go stay in the history, unanswered; the next stream's reply is to the
    // new words.
    assert_eq!(history_of(&sim, 2), vec![("USER".into(), "one".into())]);
}
