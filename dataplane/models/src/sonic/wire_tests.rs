use serde_json::{Value, json};

use super::*;
use crate::ToolDefinition;
use crate::sonic::EndpointingSensitivity;

fn out(name: &str, body: Value) -> Vec<u8> {
    json!({ "event": { name: body } }).to_string().into_bytes()
}

#[test]
fn setup_events_carry_inference_turn_detection_voice_and_tools() {
    let mut config = SonicConfig::new("be brief");
    config.endpointing_sensitivity = Some(EndpointingSensitivity::Low);
    config.tools = vec![ToolDefinition {
        name: "check_balance".into(),
        description: "Balance.".into(),
        input_schema: json!({"type": "object"}),
    }];
    let session = session_start(&config);
    assert_eq!(session.pointer("/event/sessionStart/inferenceConfiguration/maxTokens"), Some(&json!(1024)));
    assert_eq!(
        session.pointer("/event/sessionStart/turnDetectionConfiguration/endpointingSensitivity"),
        Some(&json!("LOW"))
    );
    let prompt = prompt_start("p", &config, "tiffany");
    assert_eq!(prompt.pointer("/event/promptStart/audioOutputConfiguration/voiceId"), Some(&json!("tiffany")));
    assert_eq!(prompt.pointer("/event/promptStart/audioOutputConfiguration/sampleRateHertz"), Some(&json!(24000)));
    // The schema travels as a JSON string, as the service expects.
    let schema = prompt.pointer("/event/promptStart/toolConfiguration/tools/0/toolSpec/inputSchema/json");
    assert_eq!(schema, Some(&json!("{\"type\":\"object\"}")));
    let audio = audio_input("p", "a", &[1, 2, 3]);
    assert_eq!(audio.pointer("/event/audioInput/content"), Some(&json!("AQID")));
    // The direct writer produces the same event.
    let writer = AudioInputWriter::new("p", "a\"b");
    for pcm in [&[1u8, 2, 3][..], &[1, 2, 3, 4], &[0; 640], &[]] {
        let written: Value = serde_json::from_slice(&writer.event(pcm)).expect("JSON");
        assert_eq!(written, audio_input("p", "a\"b", pcm));
    }
}

#[test]
fn output_events_are_typed_with_their_stage_and_role() {
    let mut parser = OutputParser::default();
    let ids = json!({"sessionId": "s", "promptName": "p", "completionId": "c"});
    let with = |extra: Value| {
        let mut body = ids.clone();
        body.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        body
    };
    let started = parser
        .parse(&out(
            "contentStart",
            with(json!({"contentId": "t", "type": "TEXT", "role": "ASSISTANT",
            "additionalModelFields": "{\"generationStage\":\"SPECULATIVE\"}"})),
        ))
        .expect("parses");
    assert!(matches!(
        &started[..],
        [SonicEvent::ContentStart {
            stage: Some(GenerationStage::Speculative),
            role: Role::Assistant,
            kind: ContentKind::Text,
            ..
        }]
    ));
    let text = parser
        .parse(&out("textOutput", with(json!({"contentId": "t", "role": "ASSISTANT", "content": "Hi"}))))
        .expect("parses");
    assert!(
        matches!(&text[..], [SonicEvent::Text { stage: Some(GenerationStage::Speculative), text, .. }] if text == "Hi")
    );
    let tool = parser
        .parse(&out(
            "toolUse",
            with(json!({"contentId": "x", "toolUseId": "id", "toolName": "f", "content": "{\"a\":1}"})),
        ))
        .expect("parses");
    assert!(matches!(&tool[..], [SonicEvent::ToolUse { input, .. }] if *input == json!({"a": 1})));
    let bad = parser.parse(&out("toolUse", with(json!({"toolUseId": "id", "toolName": "f", "content": "{"}))));
    assert!(matches!(bad, Err(ModelError::InvalidToolInput { .. })));
    let usage = parser
        .parse(&out(
            "usageEvent",
            with(json!({"details": {"delta": {"input": {"speechTokens": 3, "textTokens": 1}, "output": {"speechTokens": 5, "textTokens": 2}},
            "total": {"input": {"speechTokens": 30, "textTokens": 10}, "output": {"speechTokens": 50, "textTokens": 20}}},
            "totalInputTokens": 40, "totalOutputTokens": 70, "totalTokens": 110})),
        ))
        .expect("parses");
    let [SonicEvent::Usage(usage)] = &usage[..] else { panic!("{usage:?}") };
    assert_eq!((usage.delta.input_speech, usage.delta.output_text, usage.total.output_speech), (3, 2, 50));
    assert!(parser.parse(&out("somethingNew", json!({}))).expect("tolerated").is_empty());
    assert!(parser.parse(b"not json").is_err());
}

#[test]
fn an_interruption_is_reported_once_per_completion() {
    let mut parser = OutputParser::default();
    parser
        .parse(&out("contentStart", json!({"contentId": "a", "type": "AUDIO", "role": "ASSISTANT"})))
        .expect("parses");
    let ended =
        parser.parse(&out("contentEnd", json!({"contentId": "a", "stopReason": "INTERRUPTED"}))).expect("parses");
    assert!(matches!(
        &ended[..],
        [
            SonicEvent::ContentEnd { kind: ContentKind::Audio, stop_reason: StopReason::Interrupted, .. },
            SonicEvent::Interrupted
        ]
    ));
    let marker = parser
        .parse(&out("textOutput", json!({"contentId": "f", "content": "{ \"interrupted\" : true }"})))
        .expect("parses");
    assert!(marker.is_empty(), "{marker:?}");
    parser.parse(&out("completionStart", json!({"completionId": "c2"}))).expect("parses");
    let again = parser
        .parse(&out("textOutput", json!({"contentId": "g", "content": "{\"interrupted\": true}"})))
        .expect("parses");
    assert!(matches!(&again[..], [SonicEvent::Interrupted]));
}

#[test]
fn audio_output_is_passed_on_as_checked_base64() {
    let mut parser = OutputParser::default();
    let body = json!({"sessionId": "s", "promptName": "p", "contentId": "a", "content": "AQIDBA=="});
    let events = parser.parse(&out("audioOutput", body)).expect("parses");
    let [SonicEvent::Audio { content_id, pcm }] = &events[..] else { panic!("{events:?}") };
    assert_eq!((content_id.as_str(), pcm.len(), pcm.as_base64()), ("a", 4, "AQIDBA=="));
    assert_eq!(pcm.decode().as_ref(), &[1, 2, 3, 4]);
    // Not the compact prefix (spaces): the general parser gives the same.
    let spaced = br#"{ "event": { "audioOutput": { "contentId": "a", "content": "AQID" } } }"#;
    assert!(matches!(&parser.parse(spaced).expect("parses")[..], [SonicEvent::Audio { pcm, .. }] if pcm.len() == 3));
    assert!(parser.parse(&out("audioOutput", json!({"contentId": "a", "content": "not base64!"}))).is_err());
    assert!(parser.parse(br#"{"event":{"audioOutput":{"contentId":"a","content":"QQ="}}}"#).is_err());
}
