//! Model fallback and model choice on real sockets (issue 28): the runtime's real
//! aws-sdk client against the Bedrock simulator, which fails named models (and regions) the
//! way the service does. A throttled or unavailable text model falls back in order — to
//! another model, then to the same model in another region — the turn completes, and
//! `switchboard_model_fallbacks_total` counts each move, and the turn's tokens and
//! latencies are labelled with the model that answered; an invalid request never falls
//! back. A session may choose only a model its Agent offers.

use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, SessionStart};

use crate::common::{self, Client, metric_sum};

/// The triage agent with two fallbacks: Nova Pro in its own region, then Nova Lite in
/// us-west-2; and Nova Micro offered to sessions.
fn with_fallbacks(name: &str, text: String) -> String {
    if name != "triage.yaml" {
        return text;
    }
    let model = "spec:\n  model:\n    fallbacks:\n      - { modelId: amazon.nova-pro-v1:0 }\n      - { modelId: amazon.nova-lite-v1:0, region: us-west-2 }\n    sessionModels: [amazon.nova-micro-v1:0]\n  mode: hybrid\n";
    let edited = text.replacen("spec:\n  mode: hybrid\n", model, 1);
    assert_ne!(edited, text, "the triage Agent was edited");
    edited
}

/// The bundled banking script with `faults` (a `modelFaults:` list) added.
fn script(faults: &str) -> String {
    format!("{}\nmodelFaults:\n{faults}", switchboard_sim::BANKING_SCRIPT_YAML)
}

async fn one_turn(url: &str, start: SessionStart) -> Vec<ServerMessage> {
    let mut client = Client::connect(url).await;
    client.send(&ClientMessage::SessionStart(start)).await;
    let mut seen = client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    client.say("what are your opening hours?").await;
    let turn = client
        .until(|m| {
            matches!(m, ServerMessage::BidiResponseComplete { .. })
                || matches!(m, ServerMessage::BidiError { recoverable: false, .. })
        })
        .await;
    seen.extend(turn);
    seen
}

fn assistant_text(messages: &[ServerMessage]) -> String {
    messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiTranscriptStream { role, text, is_final: true, .. }
                if *role == switchboard_core::protocol::TranscriptRole::Assistant =>
            {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_model_falls_back_to_the_next_model_then_region_and_the_turn_completes() {
    let faults = "  - { model: amazon.nova-lite-v1:0, region: us-east-1, error: { kind: throttling } }\n  - { model: amazon.nova-pro-v1:0, error: { kind: modelNotReady } }\n";
    let running = common::banking_edited_scripted(with_fallbacks, &script(faults)).await;
    let start = SessionStart { agent: Some("triage".into()), ..Default::default() };
    let messages = one_turn(&running.url(""), start).await;
    let errors: Vec<_> = messages.iter().filter(|m| matches!(m, ServerMessage::BidiError { .. })).collect();
    assert!(errors.is_empty(), "no error reaches the client: {errors:?}");
    assert!(assistant_text(&messages).contains("You said"), "the last fallback answered: {messages:#?}");
    let reported: Vec<_> = messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiUsage { model, .. } => Some(model.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(reported, [Some("amazon.nova-lite-v1:0@us-west-2")], "the usage names who answered: {messages:#?}");

    let (_, metrics) = common::get(running.runtime_addr, "/metrics").await;
    let name = "switchboard_model_fallbacks_total";
    let first = [("agent", "triage"), ("from", "amazon.nova-lite-v1:0"), ("to", "amazon.nova-pro-v1:0")];
    assert_eq!(metric_sum(&metrics, name, &[first[0], first[1], first[2], ("reason", "throttled")]), 1.0, "{metrics}");
    let second = [("from", "amazon.nova-pro-v1:0"), ("to", "amazon.nova-lite-v1:0@us-west-2")];
    assert_eq!(metric_sum(&metrics, name, &[second[0], second[1], ("reason", "service_unavailable")]), 1.0);
    assert_eq!(metric_sum(&metrics, name, &[]), 2.0, "nothing else fell back");

    // Tokens and latencies name the model that answered, not the Agent's textModelId.
    let answered = ("model", "amazon.nova-lite-v1:0@us-west-2");
    let primary = ("model", "amazon.nova-lite-v1:0");
    let tokens = "switchboard_tokens_total";
    assert!(metric_sum(&metrics, tokens, &[("agent", "triage"), answered, ("direction", "output")]) > 0.0, "{metrics}");
    assert_eq!(metric_sum(&metrics, tokens, &[("agent", "triage"), primary]), 0.0, "{metrics}");
    for histogram in ["switchboard_turn_latency_seconds", "switchboard_time_to_first_token_seconds"] {
        let count = format!("{histogram}_count");
        assert_eq!(metric_sum(&metrics, &count, &[("agent", "triage"), answered]), 1.0, "{histogram}: {metrics}");
        assert_eq!(metric_sum(&metrics, &count, &[("agent", "triage"), primary]), 0.0, "{histogram}: {metrics}");
    }
    let usage = "gen_ai_client_token_usage_count";
    let requested = ("gen_ai_request_model", "amazon.nova-lite-v1:0@us-west-2");
    assert!(metric_sum(&metrics, usage, &[("agent", "triage"), requested]) > 0.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_request_or_denied_access_never_falls_back() {
    let faults = "  - { model: amazon.nova-lite-v1:0, region: us-east-1, error: { kind: accessDenied } }\n";
    let running = common::banking_edited_scripted(with_fallbacks, &script(faults)).await;
    let start = SessionStart { agent: Some("triage".into()), ..Default::default() };
    let messages = one_turn(&running.url(""), start).await;
    let errors: Vec<(ErrorCode, &str)> = messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiError { code, message, .. } => Some((code.clone(), message.as_str())),
            _ => None,
        })
        .collect();
    assert!(
        matches!(errors.as_slice(), [(ErrorCode::ModelError, message)] if message.contains("access to the model was denied")),
        "{messages:#?}"
    );
    let (_, metrics) = common::get(running.runtime_addr, "/metrics").await;
    assert_eq!(metric_sum(&metrics, "switchboard_model_fallbacks_total", &[]), 0.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_may_choose_only_a_model_its_agent_offers() {
    // Only the agent's own model fails: a session on Nova Micro never meets it.
    let faults = "  - { model: amazon.nova-lite-v1:0, error: { kind: validation } }\n";
    let running = common::banking_edited_scripted(with_fallbacks, &script(faults)).await;
    let chosen = SessionStart {
        agent: Some("triage".into()),
        model: Some("amazon.nova-micro-v1:0".into()),
        ..common::signed_start(&running.key, "triage", Default::default())
    };
    let messages = one_turn(&running.runtime_url(""), chosen).await;
    let announced = messages.iter().find_map(|m| match m {
        ServerMessage::BidiConnectionStart { model, .. } => Some(model.as_str()),
        _ => None,
    });
    assert_eq!(announced, Some("amazon.nova-micro-v1:0"));
    assert!(assistant_text(&messages).contains("You said"), "Nova Micro answered: {messages:#?}");

    // Through the gateway: the choice reaches the runtime of the agent it was made for.
    let via_gateway = SessionStart {
        agent: Some("triage".into()),
        model: Some("amazon.nova-micro-v1:0".into()),
        ..Default::default()
    };
    let messages = one_turn(&running.url(""), via_gateway).await;
    let announced = messages.iter().find_map(|m| match m {
        ServerMessage::BidiConnectionStart { model, .. } => Some(model.as_str()),
        _ => None,
    });
    assert_eq!(announced, Some("amazon.nova-micro-v1:0"), "{messages:#?}");
    assert!(assistant_text(&messages).contains("You said"), "Nova Micro answered: {messages:#?}");

    let mut refused = Client::connect(&running.runtime_url("")).await;
    let start = SessionStart {
        model: Some("anthropic.claude-3-haiku-20240307-v1:0".into()),
        ..common::signed_start(&running.key, "triage", Default::default())
    };
    refused.send(&ClientMessage::SessionStart(start)).await;
    let error = refused.next().await;
    let Some(Ok(ServerMessage::BidiError { code, message, recoverable, .. })) = error else {
        panic!("a bidi_error first: {error:?}");
    };
    assert_eq!((code, recoverable), (ErrorCode::ModelNotAllowed, false));
    assert!(message.contains("amazon.nova-micro-v1:0") && message.contains("amazon.nova-lite-v1:0"), "{message}");
    let said = refused.next().await;
    assert!(matches!(&said, Some(Ok(ServerMessage::BidiConnectionClose { .. }))), "{said:?}");
    let closed = refused.next().await;
    assert!(matches!(closed, Some(Err((4400, _)))), "then the session is closed: {closed:?}");
}

/// The triage agent (hybrid) whose Nova Sonic stream falls back to us-west-2.
fn with_voice_fallback(name: &str, text: String) -> String {
    if name != "triage.yaml" {
        return text;
    }
    let model = "spec:\n  model:\n    voiceFallback: { region: us-west-2 }\n  mode: hybrid\n";
    let edited = text.replacen("spec:\n  mode: hybrid\n", model, 1);
    assert_ne!(edited, text, "the triage Agent was edited");
    edited
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_voice_model_opens_in_the_fallback_region_and_answers() {
    let faults = "  - { model: amazon.nova-2-sonic-v1:0, region: us-east-1, error: { kind: throttling } }\n";
    let running = common::banking_edited_scripted(with_voice_fallback, &script(faults)).await;
    let start = SessionStart {
        modalities: vec!["audio".into(), "text".into()],
        ..common::signed_start(&running.key, "triage", Default::default())
    };
    let mut client = Client::connect(&running.runtime_url("")).await;
    client.send(&ClientMessage::SessionStart(start)).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    // Hybrid: typed text goes into the Nova Sonic stream, which answers in text and audio.
    client.say("hello there").await;
    let turn = client
        .until(|m| {
            matches!(m, ServerMessage::BidiResponseComplete { .. })
                || matches!(m, ServerMessage::BidiError { recoverable: false, .. })
        })
        .await;
    let errors: Vec<_> = turn.iter().filter(|m| matches!(m, ServerMessage::BidiError { .. })).collect();
    assert!(errors.is_empty(), "the fallback stream answered: {errors:?}");
    assert!(turn.iter().any(|m| matches!(m, ServerMessage::BidiAudioStream { .. })), "with audio: {turn:#?}");
    let (_, metrics) = common::get(running.runtime_addr, "/metrics").await;
    let labels = [
        ("agent", "triage"),
        ("mode", "hybrid"),
        ("from", "amazon.nova-2-sonic-v1:0"),
        ("to", "amazon.nova-2-sonic-v1:0@us-west-2"),
        ("reason", "throttled"),
    ];
    assert_eq!(metric_sum(&metrics, "switchboard_model_fallbacks_total", &labels), 1.0, "{metrics}");
}
