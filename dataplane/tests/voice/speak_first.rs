//! Speak first (issue 26): a Persona with `speakFirst: true` opens a voice session by
//! saying its greeting — reply audio and a final assistant line, before the caller says
//! anything — and then listens as usual; with `speakFirst: false` the session stays silent
//! until the caller speaks (the greeting is a transcript line only).

use std::time::Duration;

use switchboard_core::protocol::{ServerMessage, TranscriptRole};

use super::common::*;

const GREETING: &str = "Hello, you're through to Example Bank. I'm Ava. How can I help you today?";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_that_speaks_first_greets_the_caller_aloud_before_they_say_anything() {
    let running = banking_speaking_first(&script("", ""), true).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    // The microphone sends only near-silence: nothing is said.
    let greeting = call.until(|m| is_final_reply(m, "Example Bank")).await;
    assert_eq!(finals(&greeting, TranscriptRole::Assistant), vec![GREETING.to_owned()], "{:#?}", summary(&greeting));
    assert!(
        finals(&greeting, TranscriptRole::User).is_empty(),
        "the instruction is not the caller's: {:#?}",
        summary(&greeting)
    );
    let line = greeting.len() - 1;
    assert!(audio_bytes(&greeting[..line]) > 0, "the greeting was spoken before its final line");
    let speculative = greeting.iter().any(|m| {
        matches!(m, ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, is_final: false, .. })
    });
    assert!(speculative, "the greeting's text streamed as it was spoken: {:#?}", summary(&greeting));
    let stats = running.sim.sonic_stats();
    assert_eq!(stats.utterances, 0, "the caller said nothing");
    let greeted: Vec<_> = stats.replies.iter().map(|r| (r.rule.as_deref(), r.text.as_deref())).collect();
    assert_eq!(greeted, vec![(Some("speak-first"), Some(GREETING))], "Nova Sonic was asked to say the greeting");

    // Then the agent listens: the caller's question is answered as usual, by voice.
    call.say(HOURS, 600);
    let answer = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert_eq!(finals(&answer, TranscriptRole::User), vec!["What are your opening hours?".to_owned()]);
    assert!(audio_bytes(&answer) > 0, "the answer was spoken");
    let seen = call.seen.clone();
    assert_eq!(
        finals(&seen, TranscriptRole::Assistant).iter().filter(|t| t.contains("Example Bank")).count(),
        1,
        "the greeting's line comes once: {:#?}",
        summary(&seen)
    );
    call.hang_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_that_does_not_speak_first_stays_silent_until_the_caller_speaks() {
    let running = banking_speaking_first(&script("", ""), false).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    // The greeting is a transcript line at once, as before speakFirst existed.
    call.until(|m| is_final_reply(m, "Example Bank")).await;
    // Well past the time the simulator takes to start speaking (50 ms) and to say the
    // greeting (4 ms a character): no audio, no reply.
    let quiet = tokio::time::sleep(Duration::from_millis(1500));
    tokio::pin!(quiet);
    loop {
        tokio::select! {
            () = &mut quiet => break,
            message = call.next() => assert!(
                !matches!(message, ServerMessage::BidiAudioStream { .. } | ServerMessage::BidiResponseStart { .. }),
                "the agent spoke unprompted: {message:?}"
            ),
        }
    }
    let stats = running.sim.sonic_stats();
    assert!(stats.replies.is_empty() && stats.typed.is_empty(), "nothing was asked of the model: {:?}", stats.replies);
    call.say(HOURS, 600);
    let answer = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert!(audio_bytes(&answer) > 0, "the caller's question is answered by voice");
    call.hang_up().await;
}
