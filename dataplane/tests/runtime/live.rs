//! Issue 26 in text sessions, through the gateway of local mode with real WebSocket
//! clients: the session's state as it changes, consent answered by typed words (and asked
//! again when unclear), a consent that times out, `bidi_cancel`, `session_update` and the
//! bad cases of each (a specific, recoverable `bidi_error`; the session goes on), and the
//! runtime's health endpoint counting live sessions.

use switchboard_core::protocol::{ClientMessage, ErrorCode, ServerMessage, SessionState, SessionUpdate, StopReason};
use switchboard_runtime::ServerConfig;

use crate::common::{self, Client, replies};

fn states(messages: &[ServerMessage]) -> Vec<SessionState> {
    messages
        .iter()
        .filter_map(|m| if let ServerMessage::BidiSessionState { state } = m { Some(*state) } else { None })
        .collect()
}

fn is_error(message: &ServerMessage, wanted: &ErrorCode) -> bool {
    matches!(message, ServerMessage::BidiError { code, recoverable: true, .. } if code == wanted)
}

/// From the greeting to the consent request for opening a dispute on tx-1003.
async fn up_to_consent(client: &mut Client) -> Vec<ServerMessage> {
    client.verify_at_idv().await;
    client.say("I want to dispute a payment").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "disputes")).await;
    client.turn().await;
    client.say("dispute payment tx-1003").await;
    client.until(|m| matches!(m, ServerMessage::ConsentRequest { name, .. } if name == "open_dispute")).await;
    client.until(|m| matches!(m, ServerMessage::BidiSessionState { .. })).await
}

#[tokio::test]
async fn a_text_session_shows_its_state_as_it_changes_and_health_counts_it() {
    let running = common::banking(ServerConfig::default()).await;
    let (code, body) = common::get(running.runtime_addr, "/healthz").await;
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON health");
    assert_eq!((code, health["status"].as_str(), health["active_sessions"].as_u64()), (200, Some("ok"), Some(0)));
    let mut client = Client::start(&running.url(""), Some("triage")).await;
    let opened = client.until(|m| matches!(m, ServerMessage::BidiSessionState { .. })).await;
    assert_eq!(states(&opened), [SessionState::Ready], "{opened:?}");
    let (_, body) = common::get(running.runtime_addr, "/healthz").await;
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON health");
    assert_eq!(health["active_sessions"], 1, "{health}");
    assert_eq!(health["draining"], false);

    client.say("What are your opening hours?").await;
    let turn = client.until(|m| matches!(m, ServerMessage::BidiSessionState { state: SessionState::Ready })).await;
    assert_eq!(states(&turn), [SessionState::Processing, SessionState::Ready], "{turn:?}");
    let start = turn.iter().position(|m| matches!(m, ServerMessage::BidiResponseStart { .. }));
    let processing = turn.iter().position(|m| matches!(m, ServerMessage::BidiSessionState { .. }));
    assert!(start < processing, "processing follows the turn's start: {turn:?}");
    client.send(&ClientMessage::Close {}).await;
    let closing = client.until(|m| matches!(m, ServerMessage::BidiConnectionClose { .. })).await;
    assert_eq!(states(&closing), [SessionState::Ended]);
}

#[tokio::test]
async fn a_typed_answer_decides_a_consent_and_an_unclear_one_is_asked_again() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = Client::start(&running.url(""), Some("triage")).await;
    let asked = up_to_consent(&mut client).await;
    assert_eq!(states(&asked), [SessionState::Ready], "the user's turn: {asked:?}");

    client.send(&ClientMessage::BidiTextInput { text: "what does that mean?".into(), id: Some("q".into()) }).await;
    let again = client.until(|m| matches!(m, ServerMessage::ConsentRequest { .. })).await;
    assert!(
        again.iter().any(|m| matches!(m, ServerMessage::BidiError { code: ErrorCode::ConsentUnclear, recoverable: true, input_id: Some(id), .. } if id == "q")),
        "{again:?}"
    );
    assert!(!again.iter().any(|m| matches!(m, ServerMessage::ToolStart { .. } | ServerMessage::ToolComplete { .. })));

    client.send(&ClientMessage::BidiTextInput { text: "Yes, go ahead".into(), id: Some("a".into()) }).await;
    let done = client.turn().await;
    assert!(
        done.iter().any(|m| matches!(m, ServerMessage::BidiTranscriptStream { input_id: Some(id), .. } if id == "a")),
        "the answer is taken up: {done:?}"
    );
    assert!(done.iter().any(|m| matches!(m, ServerMessage::ToolComplete { name, .. } if name == "open_dispute")));
    assert!(states(&done).contains(&SessionState::ExecutingTool), "{done:?}");
    assert!(replies(&done).iter().any(|r| r.contains("Your dispute is open")), "{done:?}");

    // A consent answer with nothing pending is refused; the session goes on.
    client.send(&ClientMessage::ToolConsent { tool_use_id: "t-none".into(), approved: true }).await;
    client.until(|m| is_error(m, &ErrorCode::NoConsentPending)).await;
    client.say("thanks").await;
    client.turn().await;
}

#[tokio::test]
async fn an_unanswered_consent_times_out_and_the_model_is_told() {
    let running = common::banking_edited(|name, text| match name {
        "disputes.yaml" => {
            text.replace("      consent: required\n", "      consent: required\n      consentTimeoutSeconds: 1\n")
        }
        _ => text,
    })
    .await;
    let mut client = Client::start(&running.url(""), Some("triage")).await;
    up_to_consent(&mut client).await;
    let expired = client.turn().await;
    assert!(
        expired.iter().any(|m| matches!(m, ServerMessage::ToolError { name, kind, .. } if name == "open_dispute" && kind == "consent_timeout")),
        "{expired:?}"
    );
    assert!(!expired.iter().any(|m| matches!(m, ServerMessage::ToolComplete { .. })), "the tool did not run");
    assert!(!replies(&expired).is_empty(), "the model answered the timeout: {expired:?}");
    client.send(&ClientMessage::ToolConsent { tool_use_id: "late".into(), approved: true }).await;
    client.until(|m| is_error(m, &ErrorCode::NoConsentPending)).await;
}

#[tokio::test]
async fn cancel_stops_a_tool_wait_and_bad_controls_get_specific_errors() {
    let running = common::banking(ServerConfig::default()).await;
    let mut client = Client::start(&running.url(""), Some("triage")).await;
    up_to_consent(&mut client).await;
    client.send(&ClientMessage::BidiCancel {}).await;
    let cancelled = client.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;
    assert!(
        cancelled.iter().any(|m| matches!(m, ServerMessage::ToolError { kind, .. } if kind == "cancelled")),
        "{cancelled:?}"
    );
    assert!(matches!(
        cancelled.last(),
        Some(ServerMessage::BidiResponseComplete { stop_reason: StopReason::Cancelled, .. })
    ));
    // The consent wait was already the user's turn (`ready`): no state change to send.
    assert!(states(&cancelled).is_empty(), "{cancelled:?}");
    // The conversation goes on, well formed (the model sees the cancelled call's result).
    client.say("dispute payment tx-1003").await;
    let next = client.turn().await;
    assert!(!replies(&next).is_empty(), "{next:?}");

    // Controls that do not apply get their own errors; the session goes on.
    client.send(&ClientMessage::BidiCancel {}).await;
    let nothing = client.until(|m| is_error(m, &ErrorCode::NothingToCancel)).await;
    let said = ErrorCode::NothingToCancel.for_people();
    assert!(
        matches!(nothing.last(), Some(ServerMessage::BidiError { user_message, suggestion, .. })
            if user_message == said.message && suggestion == said.suggestion),
        "the words for people reach the client through the gateway: {:?}",
        nothing.last()
    );
    client.send_raw(r#"{"type":"session_update","voice":"amy","speed":2}"#).await;
    let unknown = client.until(|m| is_error(m, &ErrorCode::UnknownSetting)).await;
    assert!(matches!(unknown.last(), Some(ServerMessage::BidiError { message, .. }) if message.contains("speed")));
    let voice = SessionUpdate { voice: Some("amy".into()), ..SessionUpdate::default() };
    client.send(&ClientMessage::SessionUpdate(voice)).await;
    client.until(|m| is_error(m, &ErrorCode::UnsupportedModality)).await;
    let audio = SessionUpdate { modalities: Some(vec!["audio".into()]), ..SessionUpdate::default() };
    client.send(&ClientMessage::SessionUpdate(audio)).await;
    let no_audio = client.until(|m| is_error(m, &ErrorCode::UnsupportedModality)).await;
    assert!(
        matches!(no_audio.last(), Some(ServerMessage::BidiError { message, .. }) if message.contains("new session")),
        "{no_audio:?}"
    );
    client.send_raw(r#"{"type":"session_update","model":"another"}"#).await;
    client.until(|m| is_error(m, &ErrorCode::FixedSetting)).await;
    // What a text session can be set to is acknowledged with what now holds.
    let text = SessionUpdate { modalities: Some(vec!["TEXT".into()]), ..SessionUpdate::default() };
    client.send(&ClientMessage::SessionUpdate(text)).await;
    let updated = client.until(|m| matches!(m, ServerMessage::BidiSessionUpdated { .. })).await;
    assert!(
        matches!(updated.last(), Some(ServerMessage::BidiSessionUpdated { voice: None, modalities: Some(m) }) if m == &["text"]),
        "{updated:?}"
    );
    client.send(&ClientMessage::BidiAudioInputEnd {}).await;
    client.until(|m| is_error(m, &ErrorCode::UnsupportedModality)).await;

    client.say("thanks").await;
    client.turn().await;
}
