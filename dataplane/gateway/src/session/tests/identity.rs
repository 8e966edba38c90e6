//! The verified caller's identity assertion, through the machine's events: a caller
//! verified during the session is asserted to its runtime at once and again before the
//! assertion expires; a new runtime session gets one in its grant instead; a client's own
//! `identity_assertion` is refused and never reaches a runtime.

use std::time::Duration;

use serde_json::json;
use switchboard_core::assertion::REFRESH_AFTER_SECS;

use super::{Drive, addr, error_codes, to_runtime};
use crate::session::machine::{ClientFrame, Effect, Event, Phase, RuntimeFrame};

fn ada() -> serde_json::Value {
    json!({"name": "Ada Lovelace", "accountNumber": "12345678"})
}

fn remember(key: &str, value: serde_json::Value) -> serde_json::Value {
    json!({"type": "memory_update", "key": key, "value": value})
}

/// The callers the effects ask to assert.
fn asserted(effects: &[Effect]) -> Vec<serde_json::Value> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::AssertIdentity(caller) => Some(caller.clone()),
            _ => None,
        })
        .collect()
}

/// Moves the clock on by `seconds`, both sides still answering pings.
fn later(drive: &mut Drive, seconds: u64) -> Vec<Effect> {
    drive.now += Duration::from_secs(seconds);
    drive.client(ClientFrame::Control);
    drive.on(Event::Runtime(RuntimeFrame::Control));
    drive.on(Event::PingDue)
}

#[test]
fn a_caller_verified_during_the_session_is_asserted_to_its_runtime_at_once() {
    let mut drive = Drive::live();
    assert!(asserted(&drive.runtime(remember("intent", json!("balance")))).is_empty(), "not an identity");
    let effects = drive.runtime(remember("verifiedUser", ada()));
    assert_eq!(asserted(&effects), [ada()]);
    let relayed = effects.iter().position(|e| matches!(e, Effect::Client(_)));
    let assertion = effects.iter().position(|e| matches!(e, Effect::AssertIdentity(_)));
    assert!(relayed.is_some() && assertion.is_some(), "the client still sees the memory update: {effects:?}");
    assert!(asserted(&drive.runtime(remember("verifiedUser", ada()))).is_empty(), "the same caller again");
    let alan = json!({"name": "Alan Turing", "accountNumber": "87654321"});
    assert_eq!(asserted(&drive.runtime(remember("verifiedUser", alan.clone()))), [alan], "another caller");
    assert!(asserted(&drive.runtime(remember("verifiedUser", json!(null)))).is_empty(), "cleared: nothing to assert");
    assert!(asserted(&later(&mut drive, 2 * REFRESH_AFTER_SECS)).is_empty(), "and nothing to refresh");
}

#[test]
fn the_runtimes_assertion_is_replaced_before_it_expires() {
    let mut drive = Drive::live();
    drive.runtime(remember("verifiedUser", ada()));
    assert!(asserted(&later(&mut drive, 5)).is_empty(), "fresh");
    assert!(asserted(&later(&mut drive, REFRESH_AFTER_SECS - 10)).is_empty(), "not due yet");
    assert_eq!(asserted(&later(&mut drive, 10)), [ada()], "due");
    assert!(asserted(&later(&mut drive, 5)).is_empty(), "replaced: fresh again");
}

#[test]
fn a_new_runtime_session_gets_the_assertion_in_its_grant_not_in_a_frame() {
    let mut drive = Drive::live();
    drive.runtime(remember("verifiedUser", ada()));
    drive.now += Duration::from_secs(REFRESH_AFTER_SECS - 1);
    drive.on(Event::Runtime(RuntimeFrame::Lost));
    let Phase::Opening(request) = drive.machine.phase() else { panic!("reopening: {:?}", drive.machine.phase()) };
    assert_eq!(request.carried.memory.get("verifiedUser"), Some(&ada()), "the grant is signed with the caller");
    let effects = drive.on(Event::Opened(Ok(addr(2))));
    assert!(asserted(&effects).is_empty(), "the grant carries it");
    assert!(asserted(&later(&mut drive, 5)).is_empty(), "the grant's assertion is fresh");
    assert_eq!(asserted(&later(&mut drive, REFRESH_AFTER_SECS)), [ada()]);
}

#[test]
fn a_clients_identity_assertion_is_refused_and_never_reaches_a_runtime() {
    let mut drive = Drive::live();
    for frame in [
        r#"{"type":"identity_assertion","assertion":"eyJ.eyJ.sig"}"#,
        r#"{"type":"identity\u005fassertion","assertion":"eyJ.eyJ.sig"}"#,
        r#"{"type":"bidi_text_input","text":"hi","type":"identity_assertion","assertion":"x"}"#,
    ] {
        let effects = drive.client(ClientFrame::Text(frame.into()));
        assert_eq!(error_codes(&effects), ["identity_refused"], "{frame}");
        assert!(to_runtime(&effects).is_empty(), "not relayed: {frame}");
        assert!(matches!(drive.machine.phase(), Phase::Live), "the session goes on");
    }
    assert!(drive.machine.unsent().is_empty(), "nor kept for the next runtime");
    // Sent instead of session_start, it is refused once the session opens.
    let first = r#"{"type":"identity_assertion","assertion":"eyJ.eyJ.sig"}"#;
    let mut drive = Drive::starting(Some(first.into()));
    let effects = drive.on(Event::Opened(Ok(addr(1))));
    assert_eq!(error_codes(&effects), ["identity_refused"]);
    assert!(to_runtime(&effects).is_empty());
}
