//! Long conversations on real sockets (issue 26): local mode's runtime and its real
//! aws-sdk client against the Bedrock simulator. A conversation past a small
//! `model.contextTokens` is compacted, the session's text model writes the summary of the
//! turns cut off, and the next model call's system prompt carries it; a model that refuses
//! the context as too long (the simulator's `contextWindow`, answered as Bedrock answers)
//! gets the call again once, compacted harder, and the turn completes.

use std::time::Duration;

use switchboard_core::protocol::{ErrorCode, ServerMessage};

use crate::common::{self, Client, replies};

/// Triage's Agent with `model` settings (YAML lines under `model:`).
fn triage_model(settings: &'static str) -> impl Fn(&str, String) -> String {
    move |name: &str, text: String| {
        if name != "triage.yaml" {
            return text;
        }
        let edited =
            text.replacen("spec:\n  mode: hybrid\n", &format!("spec:\n  model:\n{settings}  mode: hybrid\n"), 1);
        assert_ne!(edited, text, "the triage Agent was edited");
        edited
    }
}

/// `words` four-byte words (one simulator token, one token of the runtime's estimate each)
/// after `lead`.
fn long_text(lead: &str, words: usize) -> String {
    format!("{lead}{}", " abc".repeat(words))
}

async fn started(running: &common::Running) -> Client {
    let mut client = Client::start(&running.url(""), Some("triage")).await;
    // The Persona's greeting.
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client
}

const SUMMARIES: &str = r#"
timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }
rules:
  - name: summarise
    when: { system: "^You summarise the earlier part of a conversation", userText: "(?s)Caller: (?P<first>topic [a-z]+)" }
    reply: { text: "Earlier the caller spoke about {first}." }
  - name: recall
    when:
      system: "Summary of the earlier conversation:\\n(?P<summary>Earlier the caller spoke about topic [a-z]+\\.)(?:\\n|$)"
      userText: "(?i)^what do you remember"
    reply: { text: "I remember: {summary}" }
default: { text: "Noted." }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_conversation_carries_the_models_summary_into_the_next_call() {
    let running = common::banking_edited_scripted(triage_model("    contextTokens: 1024\n"), SUMMARIES).await;
    let mut client = started(&running).await;
    // Two turns of 2,000 words each pass the budget's high-water mark (768 tokens): the
    // second turn's call compacts the first away and asks for its summary.
    for topic in ["topic alpha", "topic bravo"] {
        client.say(&long_text(topic, 500)).await;
        let turn = client.turn().await;
        assert_eq!(replies(&turn), ["Noted."], "{turn:#?}");
    }
    let written = running.state.shared.metrics.summaries.with_label_values(&["triage", "written"]);
    let deadline = tokio::time::Instant::now() + common::PATIENCE;
    while written.get() < 1 {
        assert!(tokio::time::Instant::now() < deadline, "the summary is written in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The model's summary of the first turn, not its first characters, is in the prompt
    // (this call compacts the second turn too: its excerpt follows the summary).
    client.say("What do you remember?").await;
    let turn = client.turn().await;
    assert_eq!(replies(&turn), ["I remember: Earlier the caller spoke about topic alpha."], "{turn:#?}");
    let failed = running.state.shared.metrics.summaries.with_label_values(&["triage", "failed"]);
    assert_eq!(failed.get(), 0);
}

const WINDOW: &str = r#"
timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }
contextWindow: 4000
rules:
  - name: summarise
    when: { system: "^You summarise the earlier part of a conversation" }
    reply: { text: "The caller sent a long first message." }
  - name: compacted
    when: { system: "Summary of the earlier conversation:\\nuser: first abc", userText: "^(second|third)" }
    reply: { text: "Answered from the summary." }
default: { text: "Noted." }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_length_refusal_is_answered_by_compacting_and_calling_once_more() {
    // The Agent's budget (Nova Lite's default) is far above the model's window here, as
    // when a budget is set too high: only the model's refusal says the context is too long.
    let running = common::banking_edited_scripted(|_: &str, text: String| text, WINDOW).await;
    let mut client = started(&running).await;
    let errors = |kind: &str| running.state.shared.metrics.errors.with_label_values(&["triage", kind]).get();
    // The system prompt and tools (under 1,700 tokens) and the first turn (2,250) fit the
    // window of 4,000; with the second (1,750) they do not.
    client.say(&long_text("first", 2250)).await;
    assert_eq!(replies(&client.turn().await), ["Noted."]);
    client.say(&long_text("second", 1750)).await;
    let turn = client.turn().await;
    assert_eq!(replies(&turn), ["Answered from the summary."], "{turn:#?}");
    assert!(!turn.iter().any(|m| matches!(m, ServerMessage::BidiError { .. })), "{turn:#?}");
    assert_eq!(errors("model_validation"), 1, "one refusal, answered by the retry");
    // A turn too long on its own is refused again after the retry: the turn fails with a
    // clear error and the session goes on.
    client.say(&long_text("third", 5000)).await;
    let turn = client.turn().await;
    let refused = turn.iter().find_map(|m| match m {
        ServerMessage::BidiError { code: ErrorCode::ModelError, message, recoverable: true, .. } => Some(message),
        _ => None,
    });
    assert!(refused.is_some_and(|m| m.contains("too long")), "{turn:#?}");
    assert_eq!(errors("model_validation"), 3, "the refusal and the retry's");
    client.say("hello").await;
    assert_eq!(replies(&client.turn().await), ["Noted."]);
}
