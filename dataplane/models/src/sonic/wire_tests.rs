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

/// The output events of one spoken reply: the user's transcript (ending `user_stop`),
/// SPECULATIVE text, audio and FINAL text; `interrupted` cuts the audio short.
fn reply(n: u32, user_stop: &str, interrupted: bool) -> Vec<Vec<u8>> {
    let (u, s, a, f) = (format!("u{n}"), format!("s{n}"), format!("a{n}"), format!("f{n}"));
    let stage = |s: &str| json!({ "generationStage": s }).to_string();
    let stop = if interrupted { "INTERRUPTED" } else { "END_TURN" };
    let text = if interrupted { "{ \"interrupted\" : true }".to_owned() } else { format!("answer {n}") };
    vec![
        out(
            "contentStart",
            json!({"contentId": u, "type": "TEXT", "role": "USER", "additionalModelFields": stage("FINAL")}),
        ),
        out("textOutput", json!({"contentId": u, "role": "USER", "content": format!("question {n}")})),
        out("contentEnd", json!({"contentId": u, "type": "TEXT", "stopReason": user_stop})),
        out(
            "contentStart",
            json!({"contentId": s, "type": "TEXT", "role": "ASSISTANT", "additionalModelFields": stage("SPECULATIVE")}),
        ),
        out("textOutput", json!({"contentId": s, "role": "ASSISTANT", "content": format!("answer {n}")})),
        out("contentEnd", json!({"contentId": s, "type": "TEXT", "stopReason": "PARTIAL_TURN"})),
        out("contentStart", json!({"contentId": a, "type": "AUDIO", "role": "ASSISTANT"})),
        out("audioOutput", json!({"contentId": a, "content": "AAAA"})),
        out("contentEnd", json!({"contentId": a, "type": "AUDIO", "stopReason": stop})),
        out(
            "contentStart",
            json!({"contentId": f, "type": "TEXT", "role": "ASSISTANT", "additionalModelFields": stage("FINAL")}),
        ),
        out("textOutput", json!({"contentId": f, "role": "ASSISTANT", "content": text})),
        out("contentEnd", json!({"contentId": f, "type": "TEXT", "stopReason": stop})),
        out("usageEvent", json!({"details": {}})),
    ]
}

/// What the parser reports for `chunks`, as event names (audio and usage left out).
fn framing(chunks: &[Vec<u8>]) -> Vec<String> {
    let mut parser = OutputParser::default();
    let mut names = Vec::new();
    for chunk in chunks {
        for event in parser.parse(chunk).expect("parses") {
            let name = match event {
                SonicEvent::CompletionStart { .. } => "completionStart".to_owned(),
                SonicEvent::CompletionEnd { stop_reason, .. } => format!("completionEnd {stop_reason:?}"),
                SonicEvent::Interrupted => "interrupted".to_owned(),
                SonicEvent::ContentEnd { content_id, .. } => format!("end {content_id}"),
                _ => continue,
            };
            names.push(name);
        }
    }
    names
}

const FRAMED: [&str; 13] = [
    "end u1",
    "end s1",
    "end a1",
    "end f1",
    "completionEnd EndTurn",
    "end u2",
    "end s2",
    "end a2",
    "interrupted",
    "end f2",
    "completionEnd Interrupted",
    "end u3",
    "end s3",
];

#[test]
fn one_completion_end_per_reply_when_the_service_keeps_one_completion_for_the_prompt() {
    // The service: the USER transcript (ending PARTIAL_TURN) before the only
    // completionStart; completionEnd after promptEnd.
    let mut chunks = reply(1, "PARTIAL_TURN", false);
    chunks.insert(3, out("completionStart", json!({"completionId": "c"})));
    chunks.extend(reply(2, "PARTIAL_TURN", true));
    chunks.extend(reply(3, "PARTIAL_TURN", false));
    chunks.push(out("completionEnd", json!({"completionId": "c", "stopReason": "END_TURN"})));
    let names = framing(&chunks);
    assert_eq!(names[..2], ["end u1", "completionStart"]);
    let names: Vec<String> = names.into_iter().filter(|n| n != "completionStart").collect();
    assert_eq!(names[..13], FRAMED);
    assert_eq!(names[13..], ["end a3", "end f3", "completionEnd EndTurn"], "nothing after the last reply's end");
}

#[test]
fn one_completion_end_per_reply_when_each_reply_has_its_own_completion() {
    // Older simulator output: completionStart, transcript (END_TURN), reply, completionEnd.
    let mut chunks = Vec::new();
    for (n, interrupted) in [(1, false), (2, true), (3, false)] {
        chunks.push(out("completionStart", json!({"completionId": format!("c{n}")})));
        chunks.extend(reply(n, "END_TURN", interrupted));
        let stop = if interrupted { "INTERRUPTED" } else { "END_TURN" };
        chunks.push(out("completionEnd", json!({"completionId": format!("c{n}"), "stopReason": stop})));
    }
    let names: Vec<String> = framing(&chunks).into_iter().filter(|n| n != "completionStart").collect();
    assert_eq!(names[..13], FRAMED);
    assert_eq!(names[13..], ["end a3", "end f3", "completionEnd EndTurn"]);
}

#[test]
fn a_tool_call_reply_ends_after_the_answer_to_its_result() {
    let mut parser = OutputParser::default();
    let mut ends = 0;
    let mut feed = |chunk: Vec<u8>| {
        ends += parser
            .parse(&chunk)
            .expect("parses")
            .iter()
            .filter(|e| matches!(e, SonicEvent::CompletionEnd { .. }))
            .count();
    };
    feed(out("contentStart", json!({"contentId": "t", "type": "TOOL", "role": "TOOL"})));
    feed(out("toolUse", json!({"contentId": "t", "toolUseId": "x", "toolName": "lookup", "content": "{}"})));
    feed(out("contentEnd", json!({"contentId": "t", "type": "TOOL", "stopReason": "TOOL_USE"})));
    for chunk in reply(1, "PARTIAL_TURN", false).into_iter().skip(3) {
        feed(chunk);
    }
    feed(out("completionEnd", json!({"completionId": "c", "stopReason": "END_TURN"})));
    assert_eq!(ends, 1);
}
