//! Decoding and writing the session protocol's messages.

use super::*;

#[test]
fn client_messages_round_trip_with_type_tags() {
    let text = r#"{"type":"bidi_text_input","text":"hi"}"#;
    assert_eq!(decode_client(text).ok(), Some(ClientMessage::BidiTextInput { text: "hi".into(), id: None }));
    let with_id = r#"{"type":"bidi_text_input","text":"hi","id":"c-1"}"#;
    let input = ClientMessage::BidiTextInput { text: "hi".into(), id: Some("c-1".into()) };
    assert_eq!(decode_client(with_id).ok(), Some(input.clone()));
    assert_eq!(serde_json::to_string(&input).ok().as_deref(), Some(with_id));
    let consent = r#"{"type":"tool_consent","tool_use_id":"t1","approved":true}"#;
    assert!(matches!(decode_client(consent), Ok(ClientMessage::ToolConsent { approved: true, .. })));
    assert!(matches!(decode_client(r#"{"type":"close"}"#), Ok(ClientMessage::Close {})));
    let data = r#"{"type":"bidi_audio_input","data":"AAAA"}"#;
    assert_eq!(decode_client(data).ok(), Some(ClientMessage::BidiAudioInput { audio: "AAAA".into() }));
    assert!(matches!(decode_client(r#"{"type":"bidi_audio_input_end"}"#), Ok(ClientMessage::BidiAudioInputEnd {})));
    assert!(matches!(decode_client(r#"{"type":"bidi_cancel"}"#), Ok(ClientMessage::BidiCancel {})));
    let transfer = r#"{"type":"transfer_result","tool_use_id":"t4","outcome":"no_answer"}"#;
    assert!(matches!(
        decode_client(transfer),
        Ok(ClientMessage::TransferResult { outcome: crate::TransferOutcome::NoAnswer, .. })
    ));
    let bad = decode_client(r#"{"type":"transfer_result","tool_use_id":"t4","outcome":"maybe"}"#);
    assert!(matches!(bad, Err(crate::DecodeError::Malformed { .. })), "{bad:?}");
    let digits = r#"{"type":"digits_result","tool_use_id":"t5","outcome":"interrupted","sent":2}"#;
    assert_eq!(
        decode_client(digits).ok(),
        Some(ClientMessage::DigitsResult {
            tool_use_id: "t5".into(),
            outcome: crate::DigitsOutcome::Interrupted,
            sent: 2,
            message: String::new(),
        })
    );
    let unsent = r#"{"type":"digits_result","tool_use_id":"t5","outcome":"unsupported"}"#;
    assert!(matches!(decode_client(unsent), Ok(ClientMessage::DigitsResult { sent: 0, .. })), "sent defaults to 0");
    for outcome in crate::DigitsOutcome::ALL {
        assert_eq!(serde_json::to_value(outcome).ok(), Some(serde_json::json!(outcome.as_str())));
    }
    let start = r#"{"type":"session_start","agent":"triage"}"#;
    assert!(matches!(decode_client(start), Ok(ClientMessage::SessionStart(s)) if s.agent.as_deref() == Some("triage")));
}

#[test]
fn decode_errors_are_classified() {
    assert_eq!(decode_client("{not json").map_err(|e| e.code()).err(), Some(ErrorCode::InvalidJson));
    assert_eq!(decode_client(r#"{"type":"dance"}"#).map_err(|e| e.code()).err(), Some(ErrorCode::UnknownType));
    assert_eq!(decode_client(r#"{"text":"x"}"#).map_err(|e| e.code()).err(), Some(ErrorCode::UnknownType));
    assert_eq!(
        decode_client(r#"{"type":"bidi_text_input"}"#).map_err(|e| e.code()).err(),
        Some(ErrorCode::MalformedMessage)
    );
}

#[test]
fn only_the_gateway_sends_identity_assertions_however_a_client_spells_them() {
    let plain = r#"{"type":"identity_assertion","assertion":"x.y.z"}"#;
    assert!(matches!(decode_client(plain), Ok(ClientMessage::IdentityAssertion { .. })), "runtimes read it");
    assert!(gateway_only(plain));
    assert!(gateway_only(r#"{"type":"identity\u005fassertion","assertion":"x"}"#), "an escape");
    assert!(gateway_only(r#"{"type":"bidi_text_input","type":"identity_assertion","assertion":"x"}"#));
    assert!(!gateway_only(r#"{"type":"bidi_text_input","text":"identity_assertion"}"#), "only the type counts");
    assert!(!gateway_only(r#"{"type":"bidi_text_input","text":"a \"quote\""}"#));
    assert!(!gateway_only(r#"{"type":"bidi_audio_input","audio":"AAAA"}"#));
}

#[test]
fn server_messages_carry_snake_case_type() {
    let json = ServerMessage::error(ErrorCode::InvalidJson, "bad", true).to_json();
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid json");
    assert_eq!(value["type"], "bidi_error");
    assert_eq!(value["code"], "invalid_json");
    assert_eq!(value["recoverable"], true);
    let done = ServerMessage::BidiResponseComplete { turn: 2, stop_reason: StopReason::Handoff };
    assert_eq!(done.to_json(), r#"{"type":"bidi_response_complete","turn":2,"stop_reason":"handoff"}"#);
}

#[test]
fn a_session_start_is_recognised_however_its_json_is_spelled() {
    assert!(is_session_start(r#"{"type":"session_start"}"#));
    assert!(is_session_start(r#"{ "type" : "session_start", "voice": "matthew" }"#), "spaces");
    assert!(is_session_start(r#"{"voice":"matthew","type":"session_start"}"#), "another field first");
    assert!(is_session_start(r#"{"type":"session\u005fstart"}"#), "an escape");
    assert!(!is_session_start(r#"{"type":"bidi_text_input","text":"session_start"}"#), "only the type counts");
    assert!(!is_session_start(r#"{"type":"session_start""#), "not JSON");
    assert!(!is_session_start(r#"{"type":"bidi_audio_input","audio":"AAAA"}"#));
}

#[test]
fn a_dtmf_frame_is_known_however_its_json_is_written() {
    use super::{ClientMessage, decode_client, is_dtmf};
    let plain = r#"{"type":"bidi_dtmf","digits":"12#"}"#;
    assert!(is_dtmf(plain));
    assert_eq!(decode_client(plain).ok(), Some(ClientMessage::BidiDtmf { digits: "12#".into() }));
    assert!(is_dtmf(r#"{ "digits":"1", "type" : "bidi_\u0064tmf"}"#), "an escape, another order");
    assert!(is_dtmf(r#"{"type":"bidi_text_input","type":"bidi_dtmf","digits":"1"}"#), "the last type counts");
    assert!(!is_dtmf(r#"{"type":"bidi_dtmf","type":"bidi_text_input","text":"hi"}"#), "nor can it hide text");
    assert!(!is_dtmf(r#"{"type":"bidi_text_input","text":"bidi_dtmf"}"#), "only the type counts");
}
