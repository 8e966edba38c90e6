//! Outage notices ([`crate::session::machine`]'s `outage`): a session under way is told
//! when its Agent's switch (or its namespace's) flips or its breaker trips and recovers,
//! goes on, and is told once per change; a new session served in text for an outage opens
//! without audio, drops the audio it is sent, and is told why.

use std::sync::Arc;

use serde_json::json;
use switchboard_core::protocol::ServerMessage;
use switchboard_crds::agent::{Breaker, Person};
use switchboard_crds::routing::{NamespaceOutage, RouteOutage};

use super::{Drive, complete, handoff, say, to_client, to_runtime};
use crate::directory::Directory;
use crate::session::machine::{ClientFrame, Effect, Event, Machine, Phase};

fn outage(active: bool) -> RouteOutage {
    RouteOutage {
        active,
        person: Some(Person {
            name: "advisor".into(),
            address: "+442079460001".into(),
            description: String::new(),
            transfer: Default::default(),
        }),
        message: Some("Putting you through to an advisor.".into()),
        breaker: Breaker::default(),
        text: false,
    }
}

/// `directory` with `agent`'s outage mode `outage` (none: removed).
fn with_outage(directory: &Directory, agent: &str, outage: Option<RouteOutage>) -> Directory {
    let mut table = directory.table().clone();
    match outage {
        Some(outage) => table.outages.insert(format!("bank/{agent}"), outage),
        None => table.outages.remove(&format!("bank/{agent}")),
    };
    directory.with_table(Arc::new(table))
}

fn with_namespace_switch(directory: &Directory, message: Option<&str>) -> Directory {
    let mut table = directory.table().clone();
    table.namespace_outages.insert("bank".into(), NamespaceOutage { message: message.map(str::to_owned) });
    directory.with_table(Arc::new(table))
}

fn outage_notices(effects: &[Effect]) -> Vec<(String, bool, String, Option<String>)> {
    to_client(effects)
        .into_iter()
        .filter_map(|m| match m {
            ServerMessage::BidiSessionOutage { agent, active, message, person, .. } => {
                Some((agent, active, message, person.map(|p| p.address)))
            }
            _ => None,
        })
        .collect()
}

fn start(agent: &str) -> serde_json::Value {
    json!({"type": "bidi_connection_start", "session_id": "s", "agent": agent, "mode": "text", "model": "m"})
}

#[test]
fn a_switch_flipped_on_is_told_once_the_session_goes_on_and_off_is_told_too() {
    let mut drive = Drive::live();
    drive.runtime(start("triage"));
    drive.typed("hello");
    drive.runtime(say("user", "hello"));

    // A breaker alone is not told.
    drive.directory = with_outage(&drive.directory, "triage", Some(outage(false)));
    assert!(outage_notices(&drive.on(Event::OutageSwitched)).is_empty());

    drive.directory = with_outage(&drive.directory, "triage", Some(outage(true)));
    let effects = drive.on(Event::OutageSwitched);
    assert_eq!(
        outage_notices(&effects),
        [("bank/triage".into(), true, "Putting you through to an advisor.".into(), Some("+442079460001".into()))]
    );
    // Numbered and kept like the runtime's messages: a resuming client gets it.
    assert!(matches!(&to_client(&effects)[..], [ServerMessage::BidiSessionOutage { .. }]));
    assert!(effects.iter().any(|e| matches!(e, Effect::Record(_))), "in the record");
    assert_eq!(drive.machine.replay().since(Some(0)).frames.len(), 2);
    // Told once: another flip elsewhere tells nothing more.
    assert!(outage_notices(&drive.on(Event::OutageSwitched)).is_empty());
    // The turn under way goes on and ends as it would.
    let effects = drive.runtime(say("assistant", "We open at nine."));
    assert_eq!(to_client(&effects).len(), 1);
    drive.runtime(complete());
    assert!(matches!(drive.machine.phase(), Phase::Live));

    // Switched off: told so, once.
    drive.directory = with_outage(&drive.directory, "triage", Some(outage(false)));
    assert_eq!(outage_notices(&drive.on(Event::OutageSwitched)), [("bank/triage".into(), false, String::new(), None)]);
    assert!(outage_notices(&drive.on(Event::OutageSwitched)).is_empty());
}

#[test]
fn the_namespace_switch_is_told_with_its_message_and_a_changed_fallback_again() {
    let mut drive = Drive::live();
    drive.runtime(start("triage"));
    drive.directory = with_namespace_switch(&drive.directory, Some("Closed today."));
    assert_eq!(
        outage_notices(&drive.on(Event::OutageSwitched)),
        [("bank/triage".into(), true, "Closed today.".into(), None)]
    );
    drive.directory = with_namespace_switch(&drive.directory, None);
    assert_eq!(
        outage_notices(&drive.on(Event::OutageSwitched)),
        [("bank/triage".into(), true, switchboard_outage::DEFAULT_MESSAGE.into(), None)]
    );
}

#[test]
fn a_session_reaching_a_switched_on_agent_is_told_after_its_start_and_one_leaving_is_not_told_off() {
    let mut drive = Drive::live();
    drive.runtime(start("triage"));
    drive.directory = with_outage(&drive.directory, "idv", Some(outage(true)));
    assert!(outage_notices(&drive.on(Event::OutageSwitched)).is_empty(), "triage is not switched on");
    drive.runtime(handoff("idv"));
    drive.closed(switchboard_core::protocol::close_code::HANDOFF);
    drive.on(Event::Opened(Ok(super::addr(3))));
    let effects = drive.runtime(start("idv"));
    let told = to_client(&effects);
    assert!(
        matches!(&told[..], [ServerMessage::BidiConnectionStart { .. }, ServerMessage::BidiSessionOutage { .. }]),
        "{told:?}"
    );
    assert_eq!(outage_notices(&effects)[0].0, "bank/idv");
    // A second start on the same Agent (a move) tells nothing new.
    assert!(outage_notices(&drive.runtime(start("idv"))).is_empty());
}

#[test]
fn nothing_is_told_before_the_session_is_live() {
    let mut drive = Drive::starting(None);
    drive.directory = with_outage(&drive.directory, "triage", Some(outage(true)));
    assert!(outage_notices(&drive.on(Event::OutageSwitched)).is_empty());
}

/// The outage notices' causes and whether they said `text_only`.
fn causes(effects: &[Effect]) -> Vec<(bool, String, bool)> {
    to_client(effects)
        .into_iter()
        .filter_map(|m| match m {
            ServerMessage::BidiSessionOutage { active, cause, text_only, .. } => Some((active, cause, text_only)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_breaker_trip_and_its_recovery_are_told_once_each() {
    let mut drive = Drive::live();
    drive.runtime(start("triage"));
    drive.directory = with_outage(&drive.directory, "triage", Some(outage(false)));
    drive.outages.breaker("bank/triage", true);
    let effects = drive.on(Event::OutageSwitched);
    assert_eq!(causes(&effects), [(true, "breaker".to_owned(), false)]);
    assert_eq!(outage_notices(&effects)[0].3.as_deref(), Some("+442079460001"), "with the fallback");
    // Reopened while ramping back, or woken by another Agent: nothing new.
    drive.outages.breaker("bank/triage", true);
    assert!(causes(&drive.on(Event::OutageSwitched)).is_empty());
    // The switch turned on over the trip says so; off again, the trip still holds.
    drive.directory = with_outage(&drive.directory, "triage", Some(outage(true)));
    assert_eq!(causes(&drive.on(Event::OutageSwitched)), [(true, "switch".to_owned(), false)]);
    drive.directory = with_outage(&drive.directory, "triage", Some(outage(false)));
    assert_eq!(causes(&drive.on(Event::OutageSwitched)), [(true, "breaker".to_owned(), false)]);
    // Recovered: told off, with the cause, once.
    drive.outages.breaker("bank/triage", false);
    assert_eq!(causes(&drive.on(Event::OutageSwitched)), [(false, "breaker".to_owned(), false)]);
    assert!(causes(&drive.on(Event::OutageSwitched)).is_empty());
    assert!(matches!(drive.machine.phase(), Phase::Live));
}

#[test]
fn a_breaker_turned_off_in_the_spec_is_not_told() {
    let mut drive = Drive::live();
    drive.runtime(start("triage"));
    let mut off = outage(false);
    off.breaker.enabled = false;
    drive.directory = with_outage(&drive.directory, "triage", Some(off));
    drive.outages.breaker("bank/triage", true);
    assert!(causes(&drive.on(Event::OutageSwitched)).is_empty());
}

/// A new session that asked for audio and text, served in text for a tripped breaker.
fn text_only_session() -> Drive {
    let mut drive = Drive::starting(None);
    drive.directory = with_outage(&drive.directory, "triage", Some(RouteOutage { text: true, ..outage(false) }));
    let target = drive.directory.for_client(None, crate::directory::Reach::Live).expect("triage");
    let modalities = vec!["audio".to_owned(), "text".to_owned()];
    let mut machine =
        Machine::start(super::limits(), "gw-2".into(), "key".into(), target, None, modalities, None, drive.now, 1_000);
    machine.serve_text_only("breaker");
    drive.machine = machine;
    drive
}

#[test]
fn a_session_served_in_text_opens_without_audio_is_told_why_and_its_audio_goes_nowhere() {
    let mut drive = text_only_session();
    assert_eq!(drive.machine.modalities(), ["text"], "its runtime sessions open without audio");
    assert_eq!(drive.machine.text_only(), Some("breaker"));
    drive.outages.breaker("bank/triage", true);
    drive.on(Event::Opened(Ok(super::addr(1))));
    let effects = drive.runtime(start("triage"));
    let told = to_client(&effects);
    assert!(
        matches!(&told[..], [ServerMessage::BidiConnectionStart { .. }, ServerMessage::BidiSessionOutage { .. }]),
        "{told:?}"
    );
    assert_eq!(causes(&effects), [(true, "breaker".to_owned(), true)]);

    // Audio, binary or base64, goes nowhere; typed text goes on.
    let binary = drive.client(ClientFrame::Binary(vec![0u8; 640].into()));
    assert!(!binary.iter().any(|e| matches!(e, Effect::Runtime { .. })), "{binary:?}");
    let base64 = json!({"type": "bidi_audio_input", "audio": "AAAA"}).to_string();
    let effects = drive.client(ClientFrame::Text(base64.into()));
    assert!(to_runtime(&effects).is_empty(), "{effects:?}");
    let end = json!({"type": "bidi_audio_input_end"}).to_string();
    assert!(to_runtime(&drive.client(ClientFrame::Text(end.into()))).is_empty());
    assert_eq!(to_runtime(&drive.typed("What are your opening hours?")).len(), 1);

    // Recovered: told off, still text only (the session stays on the text model).
    drive.outages.breaker("bank/triage", false);
    assert_eq!(causes(&drive.on(Event::OutageSwitched)), [(false, "breaker".to_owned(), true)]);
}

#[test]
fn a_session_served_in_text_for_an_outage_over_before_it_started_is_told_so() {
    let mut drive = text_only_session();
    drive.on(Event::Opened(Ok(super::addr(1))));
    // The breaker recovered between its admission and its start.
    assert_eq!(causes(&drive.runtime(start("triage"))), [(false, "breaker".to_owned(), true)]);
    assert!(causes(&drive.runtime(start("triage"))).is_empty(), "told once");
}

#[test]
fn a_session_served_in_text_stays_so_when_it_resumes_and_hears_nothing_twice() {
    let mut drive = text_only_session();
    drive.on(Event::Opened(Ok(super::addr(1))));
    drive.outages.breaker("bank/triage", true);
    assert_eq!(causes(&drive.runtime(start("triage"))).len(), 1);
    drive.client(ClientFrame::Gone);
    let parked = drive.machine.take_parked();
    assert_eq!(parked.text_only.as_deref(), Some("breaker"));
    drive.outages.breaker("bank/triage", false);
    let target = drive.directory.lookup("bank", "triage", crate::directory::Reach::Live).expect("triage");
    let cx = crate::session::machine::Cx { now: drive.now, directory: &drive.directory, outages: &drive.outages };
    drive.machine = Machine::resume(super::limits(), "key".into(), parked, target, None, &cx);
    assert_eq!((drive.machine.modalities(), drive.machine.text_only()), (&["text".to_owned()][..], Some("breaker")));
    drive.on(Event::Opened(Ok(super::addr(2))));
    // Recovered while it was away: its earlier notice was kept for it; nothing new is told.
    assert!(causes(&drive.runtime(start("triage"))).is_empty());
}
