//! Snapshots: what a resume through another replica takes when the gateway holding the
//! session died (see `driver::keeper`), through the machine's events.

use std::time::Instant;

use switchboard_core::protocol::{ServerMessage, close_code};

use super::{Drive, addr, complete, directory, handoff, limits, say, to_client};
use crate::resume::Parked;
use crate::session::machine::{Cx, Effect, Ending, Event, Machine, Phase};

fn snapshots(effects: &[Effect]) -> Vec<&Parked> {
    effects.iter().filter_map(|e| if let Effect::Snapshot(p) = e { Some(&**p) } else { None }).collect()
}

#[test]
fn a_session_is_snapshotted_with_each_typed_input_each_turn_end_and_a_handoff_under_way() {
    let mut drive = Drive::live();
    let effects = drive.typed("hello");
    let taken = snapshots(&effects);
    assert_eq!(taken.len(), 1, "{effects:?}");
    assert_eq!(taken[0].kept.in_flight.len(), 1, "the input is in it: a crash now sends it again");
    let effects = drive.runtime(say("user", "hello"));
    assert!(snapshots(&effects).is_empty(), "mid-turn: none");
    drive.runtime(say("assistant", "Hi"));
    let effects = drive.runtime(complete());
    let taken = snapshots(&effects);
    assert_eq!(taken.len(), 1, "at the turn's end");
    assert!(taken[0].kept.in_flight.is_empty(), "answered: never sent again");
    assert_eq!(taken[0].kept.history.len(), 2);
    assert!(taken[0].handoff.is_none());

    // A handoff: the snapshot holds it, at the source, before the target is opened.
    drive.typed("transfer me");
    drive.runtime(say("user", "transfer me"));
    drive.runtime(handoff("idv"));
    let effects = drive.closed(close_code::HANDOFF);
    let taken = snapshots(&effects);
    assert_eq!(taken.len(), 1, "{effects:?}");
    assert_eq!((taken[0].agent.as_str(), taken[0].handoff.as_ref().map(|h| h.0.as_str())), ("triage", Some("idv")));
    let snapshot = taken[0].clone();
    assert!(drive.opening().is_some(), "the target is being opened");

    // This gateway dies: a resume elsewhere takes the snapshot and makes the handoff.
    let directory = directory();
    let cx = Cx { now: Instant::now(), directory: &directory, outages: &Default::default() };
    let target = directory.lookup("bank", "triage", crate::directory::Reach::Live).expect("triage");
    let last_seq = snapshot.replay.seq;
    let mut machine = Machine::resume(limits(), "key".into(), snapshot, target, Some(last_seq), &cx);
    assert!(
        matches!(machine.phase(), Phase::Opening(r) if r.target.key() == "bank/idv" && r.carried.handoff.is_some())
    );
    machine.handle(Event::Opened(Ok(addr(4))), &cx);
    let effects: Vec<Effect> = std::iter::from_fn(|| machine.next_effect()).collect();
    assert!(to_client(&effects).iter().all(|m| !matches!(m, ServerMessage::BidiError { .. })), "{effects:?}");
}

#[test]
fn without_a_shared_store_nothing_is_snapshotted() {
    let mut drive = Drive::live();
    drive.machine.limits_mut().movable = false;
    let mut effects = drive.typed("hello");
    effects.extend(drive.runtime(say("user", "hello")));
    effects.extend(drive.runtime(complete()));
    assert!(snapshots(&effects).is_empty(), "{effects:?}");
}

#[test]
fn a_client_that_received_more_than_the_snapshot_holds_is_told_and_numbers_go_on_after_its_own() {
    let mut drive = Drive::live();
    drive.typed("hello");
    drive.runtime(say("user", "hello"));
    let snapshot = snapshots(&drive.runtime(complete()))[0].clone();
    let directory = directory();
    let cx = Cx { now: Instant::now(), directory: &directory, outages: &Default::default() };
    let target = directory.lookup("bank", "triage", crate::directory::Reach::Live).expect("triage");
    // The client got 5 more messages after the snapshot before the gateway died.
    let last = snapshot.replay.seq + 5;
    let mut machine = Machine::resume(limits(), "key".into(), snapshot, target, Some(last), &cx);
    machine.handle(Event::Opened(Ok(addr(4))), &cx);
    let effects: Vec<Effect> = std::iter::from_fn(|| machine.next_effect()).collect();
    let told = to_client(&effects);
    assert!(
        matches!(&told[..], [ServerMessage::BidiError { code, recoverable: true, message, .. }]
            if code == "session_restored" && message.contains(&format!("to {last}"))),
        "{told:?}"
    );
    assert_eq!(machine.replay().seq, last + 1, "the notice is numbered after what the client has");
}

#[test]
fn a_session_taken_by_a_resume_elsewhere_closes_here_and_is_not_parked() {
    let mut drive = Drive::live();
    let effects = drive.on(Event::TakenOver);
    assert!(
        matches!(&effects[..], [Effect::CloseClient((close_code::GOING_AWAY, reason)), Effect::CloseRuntime]
            if reason.contains("resumed on another connection")),
        "{effects:?}"
    );
    assert_eq!(drive.ending(), Some(&Ending::TakenOver));
}

#[test]
fn settings_a_runtime_applied_hold_for_the_next_agent_and_a_resume() {
    let mut drive = Drive::live();
    let update = serde_json::json!({"type": "bidi_session_updated", "voice": "amy", "modalities": ["text"]});
    let effects = drive.runtime(update);
    assert!(!to_client(&effects).is_empty(), "the client is told too: {effects:?}");
    drive.runtime(serde_json::json!({"type": "bidi_session_updated", "modalities": ["audio", "text"]}));
    assert_eq!(drive.machine.voice().as_deref(), Some("amy"), "a later update naming no voice keeps it");
    assert_eq!(drive.machine.modalities(), ["audio", "text"]);
    // A handoff opens the target with them; a parked session keeps them.
    drive.runtime(handoff("idv"));
    drive.closed(close_code::HANDOFF);
    assert!(drive.opening().is_some());
    let parked = drive.machine.take_parked();
    assert_eq!((parked.voice.as_deref(), parked.modalities.len()), (Some("amy"), 2));
}

/// A session holding its most history and memory, and a full replay buffer.
fn full_session() -> Drive {
    let mut drive = Drive::live();
    let line = "x".repeat(1000);
    for n in 0..120 {
        drive.runtime(say(if n % 2 == 0 { "user" } else { "assistant" }, &format!("{n} {line}")));
    }
    for n in 0..60 {
        drive.runtime(serde_json::json!({"type": "memory_update", "key": format!("k{n}"), "value": "v".repeat(1000)}));
    }
    drive.runtime(complete());
    drive
}

#[test]
fn a_snapshot_shares_the_sessions_history_memory_and_inputs_instead_of_copying_them() {
    let mut drive = full_session();
    assert!(drive.machine.kept().bytes() > 150_000, "a full session: {} bytes", drive.machine.kept().bytes());
    let effects = drive.typed("hello");
    let taken = snapshots(&effects);
    assert_eq!(taken.len(), 1);
    let (kept, snapshot) = (drive.machine.kept(), &taken[0].kept);
    let shared = kept.history.iter().zip(&snapshot.history).all(|(a, b)| std::sync::Arc::ptr_eq(a, b));
    assert!(shared && kept.history.len() == snapshot.history.len(), "history lines shared, not copied");
    assert!(std::sync::Arc::ptr_eq(&kept.memory, &snapshot.memory), "memory shared, not copied");
    assert!(std::sync::Arc::ptr_eq(&kept.in_flight[0], &snapshot.in_flight[0]), "the input shared");
    assert_eq!(kept, snapshot, "the same state");

    // The session goes on; the snapshot keeps what it was.
    let before = snapshot.clone();
    drive.runtime(say("user", "hello"));
    assert_eq!(drive.machine.kept().history.len(), before.history.len() + 1);
    assert_eq!(taken[0].kept, before, "a snapshot taken is not changed by the session going on");
}

/// What a typed input costs a full session (a snapshot each): `cargo test -p
/// switchboard-gateway --release -- --ignored --nocapture typed_input_cost`.
#[test]
#[ignore = "a benchmark: prints its figure"]
fn typed_input_cost() {
    let mut drive = full_session();
    let rounds = 2000;
    let line = "y".repeat(1000);
    let start = Instant::now();
    // The newest snapshot stays held, as the keeper holds it until the next.
    let mut held = Vec::new();
    for n in 0..rounds {
        held = drive.typed(&format!("input {n} {line}"));
        // Taken up at once, so that inputs in flight stay few.
        drive.runtime(say("user", &format!("input {n} {line}")));
    }
    assert_eq!(snapshots(&held).len(), 1);
    let per = start.elapsed() / rounds;
    println!(
        "typed_input_cost: {per:?} per typed input (and its line) on a session of {} bytes",
        drive.machine.kept().bytes()
    );
}
