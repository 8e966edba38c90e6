//! Voice turns: audio in -> transcript, SPECULATIVE and FINAL text, paced audio, usage;
//! tool use inside the stream; barge-in.

use std::time::Duration;

use serde_json::json;
use switchboard_models::ToolDefinition;
use switchboard_models::sonic::{ContentKind, GenerationStage, Role, SonicEvent, StopReason};

use crate::common::{Microphone, audio_bytes, config, session, start, texts, until};

const LIMIT: Duration = Duration::from_secs(20);

const SCRIPT: &str = r#"
sonic:
  turnDetection: { silenceMs: { high: 300, medium: 400, low: 600 } }
  phrases: { 1: "What is my balance?", 2: "Wait, stop", 3: "Tell me a story" }
  speech: { msPerChar: 20, responseDelayMs: 50 }
rules:
  - name: balance
    when: { userText: "(?i)balance" }
    reply:
      text: "Let me check."
      toolUse: { name: check_balance, input: { account: "main" } }
      fallbackText: "Your balance is 42 dollars."
  - name: balance-result
    when: { toolResult: { name: check_balance } }
    reply: { text: "You have {balance} dollars." }
  - name: story
    when: { userText: "(?i)story" }
    reply: { text: "Once upon a time there was a bank that never closed, and every customer who called was greeted by a patient voice." }
  - name: stop
    when: { userText: "(?i)stop" }
    reply: { text: "Sure." }
"#;

fn check_balance() -> ToolDefinition {
    ToolDefinition {
        name: "check_balance".into(),
        description: "The balance of an account.".into(),
        input_schema: json!({ "type": "object", "properties": { "account": { "type": "string" } } }),
    }
}

#[tokio::test]
async fn a_spoken_question_gets_a_transcript_text_audio_and_usage() {
    let sim = start(SCRIPT).await;
    let mut config = config();
    config.endpointing_sensitivity = Some(switchboard_models::sonic::EndpointingSensitivity::High);
    let (session, mut events) = session(&sim, config).await;
    let mic = Microphone::start(session.clone());
    mic.say(1, 600);
    let seen = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    mic.stop().await;

    let reply = "Your balance is 42 dollars.";
    assert_eq!(
        texts(&seen),
        vec![
            ("User".into(), Some("Final".into()), "What is my balance?".into()),
            ("Assistant".into(), Some("Speculative".into()), reply.into()),
            ("Assistant".into(), Some("Final".into()), reply.into()),
        ]
    );
    // 20 ms per character of 24 kHz 16-bit mono audio.
    assert_eq!(audio_bytes(&seen), reply.chars().count() * 20 * 48);
    let audio_start = seen.iter().position(|e| matches!(e, SonicEvent::ContentStart { kind: ContentKind::Audio, .. }));
    let audio_end = seen.iter().position(|e| {
        matches!(e, SonicEvent::ContentEnd { kind: ContentKind::Audio, stop_reason: StopReason::EndTurn, .. })
    });
    assert!(audio_start < audio_end && audio_start.is_some(), "{seen:#?}");
    let usage = seen
        .iter()
        .find_map(|e| if let SonicEvent::Usage(usage) = e { Some(*usage) } else { None })
        .expect("a usage event");
    assert!(usage.delta.input_speech > 0 && usage.delta.output_speech > 0 && usage.delta.output_text > 0, "{usage:?}");
    assert_eq!(usage.total_output_tokens, usage.total.output_speech + usage.total.output_text);
    let stats = sim.sonic_stats();
    assert_eq!(stats.replies.len(), 1, "{stats:?}");
    assert_eq!(stats.replies[0].heard.as_deref(), Some("What is my balance?"));
    session.close().await.expect("open");
}

#[tokio::test]
async fn a_tool_call_mid_stream_gets_its_result_and_the_reply_continues() {
    let sim = start(SCRIPT).await;
    let mut config = config();
    config.tools = vec![check_balance()];
    let (session, mut events) = session(&sim, config).await;
    let mic = Microphone::start(session.clone());
    mic.say(1, 600);
    let seen = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::ToolUse { .. })).await;
    let Some(SonicEvent::ToolUse { tool_use_id, name, input }) = seen.last() else { panic!("{seen:#?}") };
    assert_eq!((name.as_str(), input), ("check_balance", &json!({ "account": "main" })));
    assert!(texts(&seen).iter().any(|(_, stage, text)| stage.as_deref() == Some("Final") && text == "Let me check."));
    session.send_tool_result(tool_use_id.clone(), json!({ "balance": 42 })).await.expect("open");
    let rest = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    mic.stop().await;
    let finals: Vec<String> = texts(&rest)
        .into_iter()
        .filter(|(role, stage, _)| role == "Assistant" && stage.as_deref() == Some("Final"))
        .map(|(_, _, text)| text)
        .collect();
    assert_eq!(finals, vec!["You have 42 dollars.".to_owned()]);
    assert!(audio_bytes(&rest) > 0);
    let stats = sim.sonic_stats();
    assert_eq!(stats.tool_results, 1);
    assert_eq!(
        stats.replies.iter().filter_map(|r| r.rule.as_deref()).collect::<Vec<_>>(),
        vec!["balance", "balance-result"]
    );
}

#[tokio::test]
async fn speaking_over_the_model_interrupts_it_and_its_audio_stops() {
    let sim = start(SCRIPT).await;
    let (session, mut events) = session(&sim, config()).await;
    let mic = Microphone::start(session.clone());
    mic.say(3, 500);
    let before = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::Audio { .. })).await;
    let Some(SonicEvent::Audio { content_id: story_audio, .. }) = before.last() else { panic!() };
    let story_audio = story_audio.clone();
    mic.say(2, 400);
    let during = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::Interrupted)).await;
    let after = until(&mut events, LIMIT, |e| {
        matches!(e, SonicEvent::Text { role: Role::Assistant, stage: Some(GenerationStage::Final), text, .. } if text == "Sure.")
    })
    .await;
    mic.stop().await;

    assert!(
        during.iter().any(|e| matches!(e,
        SonicEvent::ContentEnd { content_id, stop_reason: StopReason::Interrupted, .. } if *content_id == story_audio))
    );
    // No audio of the interrupted reply after the interruption.
    assert!(!after.iter().any(|e| matches!(e, SonicEvent::Audio { content_id, .. } if *content_id == story_audio)));
    let story = "Once upon a time there was a bank that never closed, and every customer who called was greeted by a patient voice.";
    let story_bytes = story.chars().count() * 20 * 48;
    let heard = audio_bytes(&before) + audio_bytes(&during);
    assert!(heard > 0 && heard < story_bytes, "{heard} of {story_bytes} bytes");
    // The interrupted reply never had FINAL text; the barge-in utterance was answered.
    assert!(!texts(&during).iter().any(|(_, stage, text)| stage.as_deref() == Some("Final") && text == story));
    assert!(texts(&after).iter().any(|(role, _, text)| role == "User" && text == "Wait, stop"));
    assert_eq!(sim.sonic_stats().interruptions, 1);
}

#[tokio::test]
async fn typed_and_spoken_turns_share_one_session() {
    let sim = start(SCRIPT).await;
    let (session, mut events) = session(&sim, config()).await;
    let mic = Microphone::start(session.clone());
    session.send_text("Tell me a short story").await.expect("open");
    let typed = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    mic.say(2, 500);
    let spoken = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    mic.stop().await;

    let story = "Once upon a time there was a bank that never closed, and every customer who called was greeted by a patient voice.";
    assert!(texts(&typed).iter().any(|(_, stage, text)| stage.as_deref() == Some("Final") && text == story));
    assert!(audio_bytes(&typed) > 0, "typed turns are answered with audio too");
    assert_eq!(
        texts(&spoken)
            .iter()
            .filter(|(_, stage, _)| stage.as_deref() == Some("Final"))
            .map(|(_, _, t)| t.as_str())
            .collect::<Vec<_>>(),
        vec!["Wait, stop", "Sure."]
    );
    let stats = sim.sonic_stats();
    assert_eq!(stats.typed, vec!["Tell me a short story".to_owned()]);
    assert_eq!(stats.streams, 1);
}

#[tokio::test]
async fn without_a_known_phrase_the_nth_utterance_means_what_the_script_says() {
    let sim = start(
        r#"
sonic:
  turnDetection: { silenceMs: { high: 300, medium: 300, low: 300 } }
  phrases: { 1: "What is my balance?" }
  utterances: ["first thing", "second thing"]
  speech: { msPerChar: 10, responseDelayMs: 20 }
default: { text: "Heard: {text}" }
"#,
    )
    .await;
    let (session, mut events) = session(&sim, config()).await;
    let mic = Microphone::start(session.clone());
    mic.say(9, 400);
    let first = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    mic.say(1, 400);
    let second = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    mic.stop().await;
    let user = |events: &[SonicEvent]| texts(events).into_iter().find(|(role, _, _)| role == "User").map(|(_, _, t)| t);
    // Phrase 9 is not in `phrases`: utterance 0 means "first thing". Phrase 1 is known.
    assert_eq!(user(&first).as_deref(), Some("first thing"));
    assert_eq!(user(&second).as_deref(), Some("What is my balance?"));
}

/// Nova 2 Sonic's asynchronous tool calls: while a tool runs the model keeps listening —
/// the user is answered meanwhile, a barge-in does not cancel the call — and the result,
/// when it comes, is still answered.
#[tokio::test]
async fn the_model_keeps_listening_while_a_tool_runs() {
    let sim = start(SCRIPT).await;
    let mut config = config();
    config.tools = vec![check_balance()];
    let (session, mut events) = session(&sim, config).await;
    let mic = Microphone::start(session.clone());
    mic.say(1, 600);
    let seen = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::ToolUse { .. })).await;
    let Some(SonicEvent::ToolUse { tool_use_id, .. }) = seen.last() else { panic!("{seen:#?}") };
    let tool_use_id = tool_use_id.clone();

    // The tool is still running: the user asks for a story and talks over it.
    mic.say(3, 500);
    until(&mut events, LIMIT, |e| matches!(e, SonicEvent::Audio { .. })).await;
    mic.say(2, 400);
    until(&mut events, LIMIT, |e| matches!(e, SonicEvent::Interrupted)).await;
    let story = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    assert!(
        matches!(story.last(), Some(SonicEvent::CompletionEnd { stop_reason: StopReason::Interrupted, .. })),
        "{story:#?}"
    );
    let sure = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    assert!(texts(&sure).iter().any(|(_, stage, text)| stage.as_deref() == Some("Final") && text == "Sure."));

    // Then the result arrives, and is answered.
    session.send_tool_result(tool_use_id, json!({ "balance": 42 })).await.expect("open");
    let answer = until(&mut events, LIMIT, |e| matches!(e, SonicEvent::CompletionEnd { .. })).await;
    mic.stop().await;
    assert!(
        texts(&answer)
            .iter()
            .any(|(_, stage, text)| stage.as_deref() == Some("Final") && text == "You have 42 dollars."),
        "{answer:#?}"
    );
    let stats = sim.sonic_stats();
    assert_eq!((stats.tool_results, stats.interruptions, stats.validation_errors), (1, 1, 0), "{stats:?}");
    assert_eq!(
        stats.replies.iter().filter_map(|r| r.rule.as_deref()).collect::<Vec<_>>(),
        vec!["balance", "story", "stop", "balance-result"]
    );
}
