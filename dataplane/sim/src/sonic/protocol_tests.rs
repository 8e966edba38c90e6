use serde_json::{Value, json};

use super::*;

fn ev(name: &str, body: Value) -> Value {
    json!({ "event": { name: body } })
}

fn text(role: &str, name: &str, interactive: bool) -> Value {
    ev(
        "contentStart",
        json!({"promptName": "p", "contentName": name, "type": "TEXT", "role": role, "interactive": interactive, "textInputConfiguration": {"mediaType": "text/plain"}}),
    )
}

fn started() -> Protocol {
    let mut protocol = Protocol::default();
    for event in [
        ev(
            "sessionStart",
            json!({"inferenceConfiguration": {"maxTokens": 100}, "turnDetectionConfiguration": {"endpointingSensitivity": "HIGH"}}),
        ),
        ev("promptStart", json!({"promptName": "p"})),
        text("SYSTEM", "s", false),
        ev("textInput", json!({"promptName": "p", "contentName": "s", "content": "be brief"})),
        ev("contentEnd", json!({"promptName": "p", "contentName": "s"})),
    ] {
        protocol.accept(&event).expect("valid");
    }
    protocol
}

fn history(protocol: &mut Protocol, name: &str, role: &str, content: &str) -> Result<Option<Input>, ProtocolError> {
    protocol.accept(&text(role, name, false))?;
    protocol.accept(&ev("textInput", json!({"promptName": "p", "contentName": name, "content": content})))?;
    protocol.accept(&ev("contentEnd", json!({"promptName": "p", "contentName": name})))
}

#[test]
fn a_valid_sequence_yields_inputs() {
    let mut protocol = started();
    assert_eq!(
        history(&mut protocol, "h1", "USER", "hi").expect("ok"),
        Some(Input::History { role: "USER".into(), text: "hi".into() })
    );
    history(&mut protocol, "h2", "ASSISTANT", "hello").expect("ok");
    let audio = ev(
        "contentStart",
        json!({"promptName": "p", "contentName": "a", "type": "AUDIO", "role": "USER", "interactive": true,
        "audioInputConfiguration": {"mediaType": "audio/lpcm", "sampleRateHertz": 16000, "sampleSizeBits": 16, "channelCount": 1, "audioType": "SPEECH", "encoding": "base64"}}),
    );
    assert_eq!(protocol.accept(&audio).expect("ok"), None);
    let frame = ev("audioInput", json!({"promptName": "p", "contentName": "a", "content": "AQI="}));
    assert_eq!(protocol.accept(&frame).expect("ok"), Some(Input::Audio(vec![1, 2])));
    assert!(history(&mut protocol, "late", "USER", "x").is_err(), "history after interactive content");
    assert_eq!(
        protocol.accept(&ev("contentEnd", json!({"promptName": "p", "contentName": "a"}))).expect("ok"),
        Some(Input::AudioEnd)
    );
    assert_eq!(protocol.accept(&ev("promptEnd", json!({"promptName": "p"}))).expect("ok"), Some(Input::PromptEnd));
    assert_eq!(protocol.accept(&ev("sessionEnd", json!({}))).expect("ok"), Some(Input::SessionEnd));
}

#[test]
fn malformed_sequences_are_refused_with_a_reason() {
    let mut fresh = Protocol::default();
    let error = fresh.accept(&ev("promptStart", json!({"promptName": "p"}))).expect_err("no session");
    assert!(error.0.contains("before sessionStart"), "{error}");

    let mut no_system = Protocol::default();
    no_system.accept(&ev("sessionStart", json!({"inferenceConfiguration": {}}))).expect("ok");
    no_system.accept(&ev("promptStart", json!({"promptName": "p"}))).expect("ok");
    let error = no_system.accept(&text("USER", "u", false)).expect_err("system first");
    assert!(error.0.contains("SYSTEM"), "{error}");

    let mut assistant_first = started();
    assert!(
        history(&mut assistant_first, "h", "ASSISTANT", "x").expect_err("user first").0.contains("start with a USER")
    );

    let mut twice = started();
    history(&mut twice, "h1", "USER", "a").expect("ok");
    assert!(history(&mut twice, "h2", "USER", "b").expect_err("alternate").0.contains("alternate"));

    let mut too_long = started();
    let long = "x".repeat(MAX_HISTORY_MESSAGE_BYTES + 1);
    assert!(history(&mut too_long, "h", "USER", &long).expect_err("cap").0.contains("limit"));

    let mut total = started();
    let kb = "y".repeat(MAX_HISTORY_MESSAGE_BYTES);
    let mut failed = None;
    for i in 0..41 {
        let role = if i % 2 == 0 { "USER" } else { "ASSISTANT" };
        if let Err(error) = history(&mut total, &format!("h{i}"), role, &kb) {
            failed = Some((i, error));
            break;
        }
    }
    assert!(matches!(&failed, Some((40, e)) if e.0.contains("exceeds")), "{failed:?}");

    let mut bad_tool = started();
    let result = ev(
        "contentStart",
        json!({"promptName": "p", "contentName": "t", "type": "TOOL", "role": "TOOL", "interactive": false,
        "toolResultInputConfiguration": {"toolUseId": "nope", "type": "TEXT"}}),
    );
    assert!(bad_tool.accept(&result).expect_err("unknown id").0.contains("toolUseId"));

    let mut wrong_rate = started();
    let audio = ev(
        "contentStart",
        json!({"promptName": "p", "contentName": "a", "type": "AUDIO", "role": "USER", "interactive": true,
        "audioInputConfiguration": {"mediaType": "audio/lpcm", "sampleRateHertz": 44100, "sampleSizeBits": 16, "channelCount": 1}}),
    );
    assert!(wrong_rate.accept(&audio).expect_err("rate").0.contains("sample rate"));
}
