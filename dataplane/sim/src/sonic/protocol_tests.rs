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
    assert!(history(&mut protocol, "late", "ASSISTANT", "x").is_err(), "assistant history after interactive content");
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

fn audio_start(name: &str) -> Value {
    ev(
        "contentStart",
        json!({"promptName": "p", "contentName": name, "type": "AUDIO", "role": "USER", "interactive": true,
        "audioInputConfiguration": {"mediaType": "audio/lpcm", "sampleRateHertz": 16000, "sampleSizeBits": 16, "channelCount": 1}}),
    )
}

#[test]
fn session_start_needs_no_inference_configuration_but_checks_what_it_gets() {
    // Strands' default: `{"sessionStart": {}}`.
    let mut bare = Protocol::default();
    assert_eq!(
        bare.accept(&ev("sessionStart", json!({}))).expect("ok"),
        Some(Input::SessionStart { sensitivity: None })
    );
    // LiveKit sends Nova Sonic v1 sessions the sensitivity flat.
    let mut flat = Protocol::default();
    assert_eq!(
        flat.accept(&ev("sessionStart", json!({"endpointingSensitivity": "LOW"}))).expect("ok"),
        Some(Input::SessionStart { sensitivity: Some("LOW".into()) })
    );
    for (body, what) in [
        (json!({"inferenceConfiguration": {"topP": 1.5}}), "topP"),
        (json!({"inferenceConfiguration": {"maxTokens": 0}}), "maxTokens"),
        (json!({"inferenceConfiguration": "fast"}), "must be an object"),
        (json!({"turnDetectionConfiguration": {"endpointingSensitivity": "FAST"}}), "HIGH, MEDIUM or LOW"),
        (json!({"endpointingSensitivity": "low"}), "HIGH, MEDIUM or LOW"),
    ] {
        let error = Protocol::default().accept(&ev("sessionStart", body)).expect_err("refused");
        assert!(error.0.contains(what), "{error}");
    }
}

#[test]
fn teardown_is_lenient_the_way_shipped_clients_end_sessions() {
    // Pipecat: promptEnd with the audio content still open, a last frame, sessionEnd.
    let mut pipecat = started();
    pipecat.accept(&audio_start("a")).expect("ok");
    pipecat.accept(&text("USER", "typing", true)).expect("ok");
    assert_eq!(pipecat.accept(&ev("promptEnd", json!({"promptName": "p"}))).expect("ok"), Some(Input::PromptEnd));
    let late = ev("audioInput", json!({"promptName": "p", "contentName": "a", "content": "AQI="}));
    assert_eq!(pipecat.accept(&late).expect("ignored"), None);
    assert_eq!(pipecat.accept(&ev("sessionEnd", json!({}))).expect("ok"), Some(Input::SessionEnd));
    assert_eq!(pipecat.accept(&late).expect("ignored after sessionEnd too"), None);

    // Strands: the audio content ended, promptEnd, then connectionEnd instead of sessionEnd.
    let mut strands = started();
    strands.accept(&audio_start("a")).expect("ok");
    strands.accept(&ev("contentEnd", json!({"promptName": "p", "contentName": "a"}))).expect("ok");
    strands.accept(&ev("promptEnd", json!({"promptName": "p"}))).expect("ok");
    assert_eq!(strands.accept(&ev("connectionEnd", json!({}))).expect("ok"), Some(Input::SessionEnd));

    // Still refused: other events after promptEnd, anything after the end, promptEnd twice.
    let mut after = started();
    after.accept(&ev("promptEnd", json!({"promptName": "p"}))).expect("ok");
    assert!(after.accept(&text("USER", "x", true)).expect_err("after promptEnd").0.contains("after promptEnd"));
    assert!(after.accept(&ev("promptEnd", json!({"promptName": "p"}))).is_err());
    after.accept(&ev("sessionEnd", json!({}))).expect("ok");
    assert!(after.accept(&ev("connectionEnd", json!({}))).expect_err("ended").0.contains("after sessionEnd"));
}

#[test]
fn typed_text_mid_session_is_answered_and_plain_user_text_is_context() {
    let mut protocol = started();
    protocol.accept(&audio_start("a")).expect("ok");
    protocol.accept(&text("USER", "typed", true)).expect("ok");
    protocol
        .accept(&ev("textInput", json!({"promptName": "p", "contentName": "typed", "content": "hello"})))
        .expect("ok");
    assert_eq!(
        protocol.accept(&ev("contentEnd", json!({"promptName": "p", "contentName": "typed"}))).expect("ok"),
        Some(Input::UserText("hello".into()))
    );
    // Pipecat's appended messages and intermediate tool results: taken in, not answered.
    protocol.accept(&text("USER", "note", false)).expect("ok");
    protocol.accept(&ev("textInput", json!({"promptName": "p", "contentName": "note", "content": "fyi"}))).expect("ok");
    assert_eq!(
        protocol.accept(&ev("contentEnd", json!({"promptName": "p", "contentName": "note"}))).expect("ok"),
        Some(Input::Context("fyi".into()))
    );
    let error = protocol.accept(&text("ASSISTANT", "late", false)).expect_err("assistant history after audio");
    assert!(error.0.contains("before the first interactive content"), "{error}");
}

#[test]
fn a_notice_mid_session_is_context_and_a_second_system_prompt_is_refused() {
    let mut protocol = started();
    protocol.accept(&audio_start("a")).expect("ok");
    protocol.accept(&text("USER", "n1", false)).expect("ok");
    protocol
        .accept(&ev("textInput", json!({"promptName": "p", "contentName": "n1", "content": "verified: Ada"})))
        .expect("ok");
    assert_eq!(
        protocol.accept(&ev("contentEnd", json!({"promptName": "p", "contentName": "n1"}))).expect("ok"),
        Some(Input::Context("verified: Ada".into()))
    );
    let error = protocol.accept(&text("SYSTEM", "s2", false)).expect_err("a second SYSTEM content");
    assert!(error.0.contains("Only one SYSTEM content"), "{error}");
    let mut protocol = started();
    protocol.accept(&audio_start("a")).expect("ok");
    protocol.accept(&text("USER", "n2", false)).expect("ok");
    let empty = protocol.accept(&ev("textInput", json!({"promptName": "p", "contentName": "n2", "content": ""})));
    assert!(empty.expect_err("empty text").0.contains("non-empty string field \"content\""));
    let mut protocol = started();
    protocol.accept(&audio_start("a")).expect("ok");
    let wrong = protocol.accept(&ev("textInput", json!({"promptName": "p", "contentName": "a", "content": "x"})));
    assert!(wrong.expect_err("text into the audio content").0.contains("needs a TEXT content"));
}
