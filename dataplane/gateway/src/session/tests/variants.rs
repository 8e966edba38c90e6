//! Variants (`spec.variants`): the machine picks one per Agent when the session first
//! opens on it — by weight, or by the verified caller it carries — and keeps it across a
//! move, new weights and a resume.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use switchboard_core::protocol::close_code;
use switchboard_crds::routing::RouteVariant;

use super::{Drive, addr, directory, handoff, limits};
use crate::directory::{Directory, Reach};
use crate::session::machine::{ClientFrame, Cx, Ending, Event, Machine, Phase, RuntimeFrame};

/// `directory` with Agent `agent` running `weights`.
fn weighted(directory: &Directory, agent: &str, weights: &[(&str, u32)]) -> Directory {
    let mut table = directory.table().clone();
    let variants = weights.iter().map(|(name, weight)| RouteVariant { name: (*name).into(), weight: *weight });
    table.variants.insert(format!("bank/{agent}"), variants.collect());
    directory.with_table(Arc::new(table))
}

/// A session `id` on triage, opening.
fn start(directory: &Directory, id: &str) -> Drive {
    let target = directory.for_client(None, Reach::Live).expect("triage");
    let now = Instant::now();
    let machine = Machine::start(limits(), id.into(), "key".into(), target, None, vec![], None, now, 1_000);
    Drive { machine, directory: directory.clone(), now, outages: Default::default() }
}

/// The variant the runtime session being opened is asked for.
fn asked(drive: &Drive) -> Option<String> {
    match drive.machine.phase() {
        Phase::Opening(request) => request.variant.clone(),
        other => panic!("not opening: {other:?}"),
    }
}

#[test]
fn sessions_split_by_weight_and_keep_their_variant_across_a_move_new_weights_and_a_resume() {
    let split = weighted(&directory(), "triage", &[("control", 50), ("zoe", 50)]);
    let zoe = (0..400).filter(|i| asked(&start(&split, &format!("gw-{i}"))).as_deref() == Some("zoe")).count();
    assert!((140..=260).contains(&zoe), "about half of 400: {zoe}");
    assert_eq!(asked(&start(&directory(), "gw-1")), None, "an Agent without variants: none");

    let mut drive = start(&split, "gw-7");
    let mine = asked(&drive).expect("a variant");
    let other = if mine == "zoe" { "control" } else { "zoe" };
    drive.on(Event::Opened(Ok(addr(1))));
    assert_eq!(drive.machine.variant(), Some(mine.as_str()));
    // All new sessions go to the other variant now; this one stays on its own.
    drive.directory = weighted(&directory(), "triage", &[(mine.as_str(), 0), (other, 100)]);
    assert_eq!(asked(&start(&drive.directory, "gw-8")).as_deref(), Some(other));
    drive.on(Event::Runtime(RuntimeFrame::Lost));
    assert_eq!(asked(&drive), Some(mine.clone()), "moved to another pod on its variant");
    drive.on(Event::Opened(Ok(addr(2))));
    drive.client(ClientFrame::Gone);
    assert_eq!(drive.ending(), Some(&Ending::Park));
    let parked = drive.machine.take_parked();
    assert_eq!(parked.variants.get("bank/triage"), Some(&mine));
    let target = drive.directory.lookup("bank", "triage", Reach::Live).expect("triage");
    let cx = Cx { now: drive.now, directory: &drive.directory, outages: &drive.outages };
    let resumed = Machine::resume(limits(), "key".into(), parked, target, None, &cx);
    let resumed =
        Drive { machine: resumed, directory: drive.directory.clone(), now: drive.now, outages: Default::default() };
    assert_eq!(asked(&resumed), Some(mine), "resumed on its variant");
}

/// A handoff from triage to idv carrying `memory`.
fn handoff_with(memory: serde_json::Value) -> serde_json::Value {
    let mut message = handoff("idv");
    message["context"]["memory"] = memory;
    message
}

/// The variant of idv a session `id` gets when triage hands it over with `memory`.
fn idv_variant(directory: &Directory, id: &str, memory: &serde_json::Value) -> Option<String> {
    let mut drive = start(directory, id);
    drive.on(Event::Opened(Ok(addr(1))));
    drive.runtime(handoff_with(memory.clone()));
    drive.closed(close_code::HANDOFF);
    asked(&drive)
}

#[test]
fn a_verified_caller_gets_the_same_variant_in_every_session() {
    let split = weighted(&directory(), "idv", &[("control", 50), ("zoe", 50)]);
    for caller in ["Ada", "Grace", "Alan"] {
        let verified = json!({"verifiedUser": {"name": caller}});
        let picks: std::collections::BTreeSet<_> =
            (0..20).map(|i| idv_variant(&split, &format!("gw-{caller}-{i}"), &verified).expect("a variant")).collect();
        assert_eq!(picks.len(), 1, "{caller} keeps one variant across sessions: {picks:?}");
    }
    // Not verified: placed by the session, so sessions land on both.
    let anonymous = json!({"intent": "balance"});
    let picks: std::collections::BTreeSet<_> =
        (0..40).map(|i| idv_variant(&split, &format!("gw-{i}"), &anonymous).expect("a variant")).collect();
    assert_eq!(picks.len(), 2, "{picks:?}");
}
