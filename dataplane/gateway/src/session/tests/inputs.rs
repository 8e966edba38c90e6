//! Typed inputs through the machine, by id: identical texts told apart, each sent again
//! after a move until a runtime takes it up, each echo handed the client with its own id.

use serde_json::json;
use switchboard_core::protocol::{ClientMessage, ServerMessage, TranscriptRole};

use super::{Drive, addr, say, to_client, to_runtime, typed};
use crate::session::machine::{ClientFrame, Event, RuntimeFrame};

fn typed_with(drive: &mut Drive, text: &str, id: Option<&str>) -> Vec<ClientMessage> {
    let frame = json!({"type": "bidi_text_input", "text": text, "id": id}).to_string();
    to_runtime(&drive.client(ClientFrame::Text(frame.into())))
}

fn echo(text: &str, id: &str) -> serde_json::Value {
    let mut line = say("user", text);
    line["input_id"] = json!(id);
    line
}

/// The user's lines the client got: text and id.
fn echoes(messages: &[ServerMessage]) -> Vec<(String, Option<String>)> {
    messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, text, input_id, .. } => {
                Some((text.clone(), input_id.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn two_identical_inputs_in_flight_across_a_move_are_each_taken_up_once() {
    let mut drive = Drive::live();
    assert_eq!(
        typed_with(&mut drive, "yes", Some("a")),
        [typed("yes", "1:a")],
        "the gateway's id, the client's inside"
    );
    assert_eq!(typed_with(&mut drive, "yes", Some("a")), [typed("yes", "2:a")], "unique even when the client's is not");
    assert_eq!(typed_with(&mut drive, "yes", None), [typed("yes", "3")]);
    // The runtime takes up the second only, then is lost.
    let effects = drive.runtime(echo("yes", "2:a"));
    assert_eq!(echoes(&to_client(&effects)), [("yes".to_owned(), Some("a".to_owned()))], "the client's own id");
    drive.on(Event::Runtime(RuntimeFrame::Lost));
    let effects = drive.on(Event::Opened(Ok(addr(2))));
    assert_eq!(to_runtime(&effects), [typed("yes", "1:a"), typed("yes", "3")], "the two not taken up, by id");
    // The next runtime takes them up in order; each is answered once.
    let first = drive.runtime(echo("yes", "1:a"));
    let second = drive.runtime(echo("yes", "3"));
    assert_eq!(echoes(&to_client(&first)), [("yes".to_owned(), Some("a".to_owned()))]);
    assert_eq!(echoes(&to_client(&second)), [("yes".to_owned(), None)], "no id given, none back");
    assert!(drive.machine.kept().in_flight.is_empty());
    assert_eq!(drive.machine.turn(), 3);
    // Nothing is left to send again after another move.
    drive.on(Event::Runtime(RuntimeFrame::Lost));
    let effects = drive.on(Event::Opened(Ok(addr(1))));
    assert!(to_runtime(&effects).is_empty(), "{effects:?}");
}

#[test]
fn inputs_typed_while_no_runtime_is_open_go_to_the_next_with_their_ids() {
    let mut drive = Drive::live();
    drive.on(Event::Runtime(RuntimeFrame::Lost));
    assert!(typed_with(&mut drive, "yes", Some("a")).is_empty(), "held while opening");
    assert!(typed_with(&mut drive, "yes", Some("b")).is_empty());
    let effects = drive.on(Event::Opened(Ok(addr(2))));
    assert_eq!(to_runtime(&effects), [typed("yes", "1:a"), typed("yes", "2:b")]);
}

#[test]
fn keys_pressed_go_to_the_runtime_as_they_came_and_never_into_the_record() {
    use crate::session::machine::{Effect, Recorded};
    let mut drive = Drive::live();
    let keys = json!({"type": "bidi_dtmf", "digits": "4321#"}).to_string();
    let effects = drive.client(ClientFrame::Text(keys.clone().into()));
    assert_eq!(to_runtime(&effects), [ClientMessage::BidiDtmf { digits: "4321#".into() }]);
    let recorded = |effects: &[Effect]| effects.iter().any(|e| matches!(e, Effect::Record(Recorded::Client(_))));
    assert!(!recorded(&effects), "keys may be a PIN: never recorded: {effects:?}");
    // However the type is written; and typed text still is recorded.
    let escaped = r#"{"digits":"99","type":"bidi_\u0064tmf"}"#;
    assert!(!recorded(&drive.client(ClientFrame::Text(escaped.into()))));
    let text = json!({"type": "bidi_text_input", "text": "hello"}).to_string();
    assert!(recorded(&drive.client(ClientFrame::Text(text.into()))));
}
