//! The published schema is what the types generate, and it describes real messages: every
//! client message example is valid and decodes, every server message this version writes is
//! valid, and broken messages are not.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use crate::handoff::{HandoffContext, HandoffKind, HistoryTurn, ReturnStatus, WorkflowSnapshot};
use crate::{
    AudioFormat, ErrorCode, ServerKind, SessionState, StopReason, TokensByModality, TranscriptRole, decode_client,
};

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(SCHEMA_PATH)
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).expect("the schema compiles")
}

fn errors(validator: &jsonschema::Validator, message: &Value) -> Vec<String> {
    validator.iter_errors(message).map(|e| format!("{e} at {}", e.instance_path())).collect()
}

#[test]
fn the_committed_schema_is_what_the_types_generate() {
    let path = committed_path();
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == schema_text(),
        "{} differs from what the protocol types generate; run `{REGENERATE}` and commit the result (then \
         regenerate the clients' types: clients/typescript `npm run generate`, clients/python `python3 generate.py`)",
        path.display()
    );
}

#[test]
fn the_committed_reference_is_what_the_schema_generates() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(REFERENCE_PATH);
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == reference(&schema()),
        "{} differs from what the protocol types generate; run `{REGENERATE}` and commit the result",
        path.display()
    );
}

#[test]
fn the_reference_has_every_message_and_its_fields() {
    let text = reference(&schema());
    for kind in ServerKind::ALL {
        assert!(text.contains(&format!("#### `{}`\n", kind.as_str())), "{} is in the reference", kind.as_str());
    }
    assert!(text.contains("#### `session_start`\n") && text.contains("#### `tool_consent`\n"));
    assert!(text.contains("| `resume_token` | string or null | no |"), "session_start lists its fields");
    assert!(text.contains("| `code` | [ErrorCode](#errorcode) | yes |"), "bidi_error links its code");
    assert!(text.contains("| `busy` |"), "the codes are listed with their meaning");
    assert!(text.contains("| `audio` | string | one of these |"), "bidi_audio_input: audio or data");
}

#[test]
fn the_schema_is_a_valid_draft_2020_12_schema_naming_its_version() {
    let schema = schema();
    jsonschema::meta::validate(&schema).expect("valid against the 2020-12 meta-schema");
    assert_eq!(schema["x-protocol-version"], PROTOCOL_VERSION);
    assert!(schema["$id"].as_str().is_some_and(|id| id.contains(PROTOCOL_VERSION)));
    assert!(schema["title"].as_str().is_some_and(|t| t.ends_with(PROTOCOL_VERSION)));
}

/// The `type` of each message of a `$defs` entry (its `oneOf` of tagged objects), with its
/// description.
fn message_types(schema: &Value, def: &str) -> Vec<(String, String)> {
    schema["$defs"][def]["oneOf"]
        .as_array()
        .expect("a oneOf of messages")
        .iter()
        .map(|variant| {
            let name = variant["properties"]["type"]["const"].as_str().expect("a const type").to_owned();
            (name, variant["description"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

#[test]
fn every_message_is_in_the_schema_with_its_docs() {
    let schema = schema();
    let server = message_types(&schema, "ServerMessage");
    let names: Vec<&str> = server.iter().map(|(name, _)| name.as_str()).collect();
    let kinds: Vec<&str> = ServerKind::ALL.iter().map(|kind| kind.as_str()).collect();
    assert_eq!(names, kinds, "every server message, in order");
    let client = message_types(&schema, "ClientMessage");
    let names: Vec<&str> = client.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "session_start",
            "bidi_audio_input",
            "bidi_audio_input_end",
            "bidi_cancel",
            "bidi_audio_played",
            "session_update",
            "bidi_text_input",
            "bidi_dtmf",
            "tool_consent",
            "client_tool_result",
            "transfer_result",
            "digits_result",
            "close"
        ],
        "every client message but the gateway's identity_assertion"
    );
    for (name, description) in server.iter().chain(&client) {
        assert!(description.len() > 15, "{name} has no description: {description:?}");
        assert!(!description.contains("[`"), "{name}: rustdoc links are tidied: {description}");
    }
    let code = &schema["$defs"]["ErrorCode"]["anyOf"];
    let busy = code.as_array().and_then(|codes| codes.iter().find(|c| c["const"] == "busy")).expect("busy is listed");
    assert!(busy["description"].as_str().is_some_and(|d| d.contains("Wait for")), "{busy}");
    let fields = &schema["$defs"]["SessionStart"]["properties"];
    assert!(fields["resume_token"]["description"].as_str().is_some_and(|d| d.contains("resume")));
}

/// The README's client examples, and more: every client message, plain and with every field.
const CLIENT_EXAMPLES: &[&str] = &[
    r#"{"type":"session_start"}"#,
    r#"{"type":"session_start","agent":"triage","modalities":["audio","text"],"voice":"amy"}"#,
    r#"{"type":"session_start","resume_token":"9f00","last_seq":12}"#,
    r#"{"type":"session_start","continue_from":"gw-1","continue_token":"9f01","candidate":true,"model":"m"}"#,
    r#"{"type":"session_start","modalities":["audio"],"audio":{"input":{"encoding":"mulaw","sample_rate":8000},"output":{"encoding":"mulaw","sample_rate":8000},"binary_output":true}}"#,
    r#"{"type":"session_start","audio":{"input":{"encoding":"pcm16"}}}"#,
    r#"{"type":"bidi_text_input","text":"I'd like to check my balance","id":"c-1"}"#,
    r#"{"type":"bidi_text_input","text":"hi"}"#,
    r#"{"type":"bidi_audio_input","data":"AAAA"}"#,
    r#"{"type":"bidi_audio_input","audio":"AAAA"}"#,
    r#"{"type":"bidi_audio_played","audio_played_ms":1840}"#,
    r#"{"type":"bidi_audio_input_end"}"#,
    r#"{"type":"bidi_cancel"}"#,
    r#"{"type":"session_update","voice":"matthew","modalities":["audio","text"]}"#,
    r#"{"type":"tool_consent","tool_use_id":"t1","approved":true}"#,
    r#"{"type":"client_tool_result","tool_use_id":"t4","result":{"account":"12345678"}}"#,
    r#"{"type":"client_tool_result","tool_use_id":"t4","error":"no handler for pick_account"}"#,
    r#"{"type":"digits_result","tool_use_id":"t6","outcome":"sent","sent":6}"#,
    r#"{"type":"digits_result","tool_use_id":"t6","outcome":"interrupted","sent":1,"message":"the call was put on hold"}"#,
    r#"{"type":"close"}"#,
];

#[test]
fn every_client_example_is_valid_and_decodes() {
    let validator = validator();
    for text in CLIENT_EXAMPLES {
        let message: Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(errors(&validator, &message), Vec::<String>::new(), "{text}");
        assert!(decode_client(text).is_ok(), "a server reads {text}");
    }
}

#[test]
fn broken_messages_are_not_valid() {
    let validator = validator();
    for text in [
        r#"{"type":"bidi_text_input"}"#,
        r#"{"type":"bidi_text_input","text":3}"#,
        r#"{"type":"tool_consent","tool_use_id":"t1"}"#,
        r#"{"type":"client_tool_result","result":{}}"#,
        r#"{"type":"digits_result","tool_use_id":"t6","outcome":"maybe"}"#,
        r#"{"type":"digits_request","tool_use_id":"t6"}"#,
        r#"{"type":"display_card","tool_use_id":"t5","card":{"text":"no title"}}"#,
        r#"{"type":"bidi_audio_played","audio_played_ms":-1}"#,
        r#"{"type":"dance"}"#,
        r#"{"text":"no type"}"#,
        r#"{"type":"identity_assertion","assertion":"x.y.z"}"#,
        r#"{"type":"bidi_response_complete","turn":1}"#,
        r#"{"type":"bidi_session_state","state":"dancing"}"#,
        r#"{"type":"bidi_transcript_stream","role":"narrator","text":"x","delta":false,"is_final":true}"#,
        r#"{"type":"session_start","audio":{"binary_output":"yes"}}"#,
    ] {
        let message: Value = serde_json::from_str(text).expect("JSON");
        assert!(!validator.is_valid(&message), "{text} is not valid");
    }
}

fn context() -> HandoffContext {
    HandoffContext {
        from_agent: "banking".into(),
        kind: HandoffKind::Return,
        reason: "done".into(),
        last_user_message: Some("thanks".into()),
        intent: Some("balance".into()),
        verified_user: Some(json!({"name": "Ada Lovelace"})),
        workflow_state: WorkflowSnapshot {
            agent: "banking".into(),
            node: "answer".into(),
            visited: vec!["start".into(), "answer".into()],
            skills: vec!["balances".into()],
        },
        return_to: Some("triage".into()),
        status: Some(ReturnStatus::Completed),
        summary: Some("balance given".into()),
        memory: [("verifiedUser".to_owned(), json!({"name": "Ada Lovelace"}))].into(),
        history: vec![HistoryTurn { role: TranscriptRole::User, text: "my balance".into() }],
    }
}

/// Server messages with every optional field set, and codes this version does not know.
fn server_messages() -> Vec<ServerMessage> {
    let format = AudioFormat { encoding: "mulaw".into(), sample_rate: Some(8000) };
    let modality = TokensByModality { input_speech: 1, input_text: 2, output_speech: 3, output_text: 4 };
    let mut messages = vec![
        ServerMessage::BidiConnectionStart {
            session_id: "gw-1".into(),
            agent: "triage".into(),
            mode: "hybrid".into(),
            model: "amazon.nova-2-sonic-v1:0".into(),
            resume_token: Some("9f".into()),
            seq: Some(1),
            candidate: true,
        },
        ServerMessage::BidiTranscriptStream {
            role: TranscriptRole::User,
            text: "hi".into(),
            delta: false,
            is_final: true,
            input_id: Some("c-1".into()),
        },
        ServerMessage::BidiResponseComplete { turn: 3, stop_reason: StopReason::Other("guardrail".into()) },
        ServerMessage::BidiUsage {
            input_tokens: 1,
            output_tokens: 2,
            total_tokens: 3,
            modality: Some(modality),
            model: Some("m@eu-west-1".into()),
        },
        ServerMessage::BidiAudioStream { audio: "//7+".into(), format: Some(format) },
        ServerMessage::BidiSessionUpdated { voice: Some("amy".into()), modalities: Some(vec!["text".into()]) },
        ServerMessage::Handoff {
            from: "banking".into(),
            to: "triage".into(),
            kind: HandoffKind::Return,
            context: Box::new(context()),
        },
        ServerMessage::error(ErrorCode::Other("newer_code".into()), "m", false),
        ServerMessage::error_for_input(ErrorCode::Busy, "busy", true, Some("c-2".into())),
    ];
    messages.extend(ErrorCode::ALL.iter().map(|code| ServerMessage::error(code.clone(), "m", true)));
    messages.extend(
        StopReason::ALL
            .iter()
            .map(|reason| ServerMessage::BidiResponseComplete { turn: 1, stop_reason: reason.clone() }),
    );
    messages.extend(
        [
            SessionState::Ready,
            SessionState::Listening,
            SessionState::Processing,
            SessionState::Speaking,
            SessionState::ExecutingTool,
            SessionState::Reconnecting,
            SessionState::Ended,
        ]
        .map(|state| ServerMessage::BidiSessionState { state }),
    );
    messages
}

#[test]
fn every_server_message_this_version_writes_is_valid() {
    let validator = validator();
    for message in server_messages() {
        let value: Value = serde_json::from_str(&message.to_json()).expect("JSON");
        assert_eq!(errors(&validator, &value), Vec::<String>::new(), "{value}");
    }
}

#[test]
fn the_checker_tells_client_and_server_messages_apart() {
    let checker = Checker::new(&schema()).expect("usable");
    let start = json!({"type": "session_start", "agent": "triage"});
    let state = json!({"type": "bidi_session_state", "state": "ready"});
    assert!(checker.client_errors(&start).is_empty() && checker.server_errors(&state).is_empty());
    assert!(!checker.server_errors(&start).is_empty(), "a client message is no server message");
    assert!(!checker.client_errors(&state).is_empty(), "and the other way round");
}

#[test]
fn descriptions_read_as_text() {
    assert_eq!(
        plain("One\nparagraph [`ErrorCode`].\n\nTwo [`x`](crate::x)."),
        "One paragraph `ErrorCode`.\n\nTwo `x`."
    );
    assert_eq!(plain("Example:\n\n```json\n{\"a\": 1}\n```"), "Example:\n\n```json\n{\"a\": 1}\n```");
    assert_eq!(unlink("a [`b` c"), "a [`b` c", "an unclosed link is kept");
}
