use std::collections::BTreeMap;

use http_body_util::BodyExt;

use super::*;
use crate::sonic::audio::{Detection, TurnDetector};

fn request(fields: serde_json::Value) -> Vec<u8> {
    let mut body = serde_json::json!({ "Text": "My balance please", "VoiceId": "Joanna", "OutputFormat": "pcm" });
    for (key, value) in fields.as_object().expect("an object") {
        if value.is_null() {
            body.as_object_mut().expect("an object").remove(key);
        } else {
            body[key] = value.clone();
        }
    }
    body.to_string().into_bytes()
}

fn refused(fields: serde_json::Value) -> PollyError {
    render(&request(fields), &Spoken::default(), &BTreeMap::new()).expect_err("refused")
}

#[test]
fn bad_requests_get_the_error_polly_gives() {
    let voice = refused(serde_json::json!({ "VoiceId": "Bogus" }));
    assert_eq!((voice.status, voice.code), (400, "ValidationException"));
    assert!(voice.message.contains("Value 'Bogus' at 'voiceId'") && voice.message.contains("Joanna"), "{voice:?}");
    let format = refused(serde_json::json!({ "OutputFormat": "wav" }));
    assert!(format.message.contains("Value 'wav' at 'outputFormat'"), "{format:?}");
    let engine = refused(serde_json::json!({ "Engine": "turbo" }));
    assert!(engine.message.contains("Value 'turbo' at 'engine'"), "{engine:?}");
    assert!(refused(serde_json::json!({ "TextType": "html" })).message.contains("at 'textType'"));
    let missing = refused(serde_json::json!({ "Text": null }));
    assert!(missing.message.contains("Value null at 'text'"), "{missing:?}");
    assert!(refused(serde_json::json!({ "VoiceId": null })).message.contains("at 'voiceId'"));
    let rate = refused(serde_json::json!({ "SampleRate": "22050" }));
    assert_eq!((rate.status, rate.code), (400, "InvalidSampleRateException"));
    let long = refused(serde_json::json!({ "Text": "a".repeat(MAX_TEXT_CHARS + 1) }));
    assert_eq!(long.code, "TextLengthExceededException");
    let marks = refused(serde_json::json!({ "SpeechMarkTypes": ["word"] }));
    assert_eq!(marks.code, "MarksNotSupportedForFormatException");
    let lexicon = refused(serde_json::json!({ "LexiconNames": ["bank"] }));
    assert_eq!((lexicon.status, lexicon.code), (404, "LexiconNotFoundException"));
    // What Polly makes and the simulator does not: said as such.
    assert!(refused(serde_json::json!({ "OutputFormat": "mp3" })).message.contains("pcm only"));
    assert!(refused(serde_json::json!({ "TextType": "ssml" })).message.contains("text only"));
    assert!(refused(serde_json::json!({ "Text": "  " })).message.contains("no words"));
    let garbage = render(b"{not json", &Spoken::default(), &BTreeMap::new()).expect_err("refused");
    assert_eq!((garbage.status, garbage.code), (400, "SerializationException"));
}

/// The phrase id the turn detector hears in `pcm` (16 kHz) followed by silence.
fn heard(pcm: &[u8]) -> Option<u32> {
    let mut detector = TurnDetector::new(&crate::script::sonic::TurnDetection::default(), 500);
    let mut audio = pcm.to_vec();
    audio.resize(audio.len() + 64_000, 0);
    let detections: Vec<Detection> = audio.chunks(640).flat_map(|frame| detector.push(frame)).collect();
    detections.into_iter().find_map(|d| match d {
        Detection::UtteranceEnded(u) => Some(u.phrase_id),
        _ => None,
    })?
}

#[test]
fn a_text_becomes_the_phrase_tone_of_its_id_and_keeps_it() {
    let spoken = Spoken::default();
    let script: BTreeMap<u32, String> = [(1, "Stop".to_owned()), (3, "Hello".to_owned())].into();
    let say = |text: &str, rate: &str| {
        let body = request(serde_json::json!({ "Text": text, "SampleRate": rate, "Engine": "neural" }));
        render(&body, &spoken, &script).expect("rendered")
    };
    let (first, characters) = say("My balance please", "16000");
    assert_eq!(characters, 17);
    assert_eq!(first.len() as u64, PHRASE_MS * 16 * 2, "1.2 s of 16 kHz PCM16");
    assert_eq!(heard(&first), Some(2), "the lowest id the script leaves free");
    assert_eq!(say("Hello", "16000").0, phrase_tone(3, PHRASE_MS, AMPLITUDE), "the script's id");
    assert_eq!(say("Bye", "16000").0, phrase_tone(4, PHRASE_MS, AMPLITUDE));
    assert_eq!(say("My balance please", "16000").0, first, "the same text, the same id");
    assert_eq!(say("My balance please", "8000").0.len(), first.len() / 2, "8 kHz: half the samples");
    assert_eq!(spoken.snapshot(), [(2, "My balance please".to_owned()), (4, "Bye".to_owned())].into());
    assert_eq!((spoken.text_of(4).as_deref(), spoken.text_of(1)), (Some("Bye"), None));
}

#[test]
fn past_the_last_phrase_id_a_quota_error_says_why() {
    let spoken = Spoken::default();
    let script: BTreeMap<u32, String> = [(5, "Hello".to_owned())].into();
    for i in 0..MAX_PHRASE_ID - 1 {
        spoken.phrase_of(&format!("text {i}"), &script).expect("an id");
    }
    let error = spoken.phrase_of("one too many", &script).expect_err("no id left");
    assert_eq!((error.status, error.code), (402, "ServiceQuotaExceededException"));
    assert!(error.message.contains("35 phrases"), "{error:?}");
    assert_eq!(spoken.phrase_of("text 0", &script), Ok(1), "texts already spoken keep their ids");
    assert_eq!(spoken.phrase_of("Hello", &script), Ok(5));
}

#[tokio::test]
async fn errors_go_as_polly_sends_them() {
    let response =
        handle(&request(serde_json::json!({ "VoiceId": "Bogus" })), &Spoken::default(), &BTreeMap::new(), "r1");
    assert_eq!(response.status(), 400);
    assert_eq!(response.headers()["x-amzn-errortype"], "ValidationException");
    let body = response.into_body().collect().await.expect("body").to_bytes();
    let json: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert!(json["message"].as_str().is_some_and(|m| m.contains("'Bogus'")), "{json}");
    let ok = handle(&request(serde_json::json!({})), &Spoken::default(), &BTreeMap::new(), "r2");
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["content-type"], "audio/pcm");
    assert_eq!(ok.headers()["x-amzn-RequestCharacters"], "17");
}
