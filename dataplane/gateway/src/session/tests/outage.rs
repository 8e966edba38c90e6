//! Outage notices ([`crate::session::machine`]'s `outage`): a session under way is told
//! when its Agent's switch (or its namespace's) flips, goes on, and is told once per change.

use std::sync::Arc;

use serde_json::json;
use switchboard_core::protocol::ServerMessage;
use switchboard_crds::agent::{Breaker, Person};
use switchboard_crds::routing::{NamespaceOutage, RouteOutage};

use super::{Drive, complete, handoff, say, to_client};
use crate::directory::Directory;
use crate::session::machine::{Effect, Event, Phase};

fn outage(active: bool) -> RouteOutage {
    RouteOutage {
        active,
        person: Some(Person { name: "advisor".into(), address: "+442079460001".into(), description: String::new() }),
        message: Some("Putting you through to an advisor.".into()),
        breaker: Breaker::default(),
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
        [("bank/triage".into(), true, crate::outage::DEFAULT_MESSAGE.into(), None)]
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
