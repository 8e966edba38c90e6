//! A phone call's session (its memory holds the call its SIP edge vouched for): who hung up,
//! as its edge's `close` says or the agent's side ending it first.

use std::time::Instant;

use serde_json::json;
use switchboard_core::outbound::HungUpBy;
use switchboard_core::phone::close_text;
use switchboard_core::protocol::{ClientMessage, close_code};

use super::{Drive, addr, directory, limits, to_runtime};
use crate::session::machine::{ClientFrame, Event, Machine};

/// A phone call's session on triage (its memory holds the call its SIP edge vouched for),
/// opened on pod .1.
fn phone_call() -> Drive {
    let directory = directory();
    let target = directory.for_client(None, crate::directory::Reach::Live).expect("triage");
    let now = Instant::now();
    let memory = [(switchboard_core::phone::MEMORY_KEY.to_owned(), json!({}))].into_iter().collect();
    let machine =
        Machine::start_with_memory(limits(), "gw-1".into(), "key".into(), target, None, vec![], memory, now, 1_000);
    let mut drive = Drive { machine, directory, now, outages: Default::default() };
    drive.on(Event::Opened(Ok(addr(1))));
    drive
}

#[test]
fn a_phone_calls_session_keeps_who_hung_up() {
    // The edge's close says the caller hung up; the runtime's close that follows it (the
    // session ending) does not change that, and the close goes on to the runtime as any.
    let mut drive = phone_call();
    let effects = drive.client(ClientFrame::Text(close_text(HungUpBy::Caller).into()));
    assert_eq!(to_runtime(&effects), [ClientMessage::Close {}]);
    drive.closed(close_code::NORMAL);
    assert_eq!(drive.machine.hung_up_by(), Some(HungUpBy::Caller));
    // The agent's side ending it first (its end tool): the agent, whatever the edge says after.
    let mut drive = phone_call();
    drive.closed(close_code::NORMAL);
    assert_eq!(drive.machine.hung_up_by(), Some(HungUpBy::Agent));
    // The edge's media timeout.
    let mut drive = phone_call();
    drive.client(ClientFrame::Text(close_text(HungUpBy::MediaTimeout).into()));
    drive.client(ClientFrame::Close);
    assert_eq!(drive.machine.hung_up_by(), Some(HungUpBy::MediaTimeout));
    // Any other session has nobody who hung up, whatever its client's close says.
    let mut drive = Drive::live();
    drive.client(ClientFrame::Text(close_text(HungUpBy::Caller).into()));
    drive.closed(close_code::NORMAL);
    assert_eq!(drive.machine.hung_up_by(), None);
}
