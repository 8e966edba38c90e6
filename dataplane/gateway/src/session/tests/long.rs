//! A session older than two hours, through the machine's events with the gateway's
//! default limits: pinged every interval with both sides answering, a typed turn every few
//! minutes, a verified caller. Nothing counts from the session's start: no idle or ping
//! timeout ends it, the runtime always holds an identity assertion younger than its TTL,
//! snapshots keep being taken; and once the client goes silent it parks, and resumes.

use std::time::Duration;

use serde_json::json;
use switchboard_core::assertion::{IDENTITY_KEY, TTL_SECS};
use switchboard_core::protocol::ServerMessage;

use super::{Contains, Drive, addr, say, to_client, to_runtime, typed};
use crate::GatewayConfig;
use crate::session::machine::{ClientFrame, Cx, Effect, Ending, Event, Limits, Machine, Note, Phase, RuntimeFrame};

/// How long the session lives before the client goes silent.
const LIVED: Duration = Duration::from_secs(2 * 3600 + 10 * 60);
/// A typed turn this often: well inside the idle timeout, as a caller who keeps talking.
const TURN_EVERY: Duration = Duration::from_secs(4 * 60);

fn ada() -> serde_json::Value {
    json!({"name": "Ada Lovelace", "accountNumber": "12345678"})
}

/// What one stretch of the session produced.
#[derive(Default)]
struct Seen {
    /// When the runtime was given an assertion (seconds since the session began).
    asserted: Vec<u64>,
    snapshots: usize,
    holds: usize,
    pings: usize,
}

impl Seen {
    fn take(&mut self, effects: &[Effect], at: u64) {
        for effect in effects {
            match effect {
                Effect::AssertIdentity(caller) => {
                    assert_eq!(caller, &ada(), "the verified caller, at {at} s");
                    self.asserted.push(at);
                }
                Effect::Snapshot(_) => self.snapshots += 1,
                Effect::Hold { .. } => self.holds += 1,
                Effect::PingClient => self.pings += 1,
                _ => {}
            }
        }
    }
}

/// One ping interval later: the client and the runtime answered the last pings, the
/// interval's ping is due, and so is an idle check (the driver's timer).
fn tick(drive: &mut Drive, interval: Duration) -> Vec<Effect> {
    drive.now += interval;
    let mut effects = drive.client(ClientFrame::Control);
    effects.extend(drive.on(Event::Runtime(RuntimeFrame::Control)));
    effects.extend(drive.on(Event::PingDue));
    effects.extend(drive.on(Event::IdleDue));
    effects
}

/// A typed turn answered by the runtime, as the relay sees it.
fn turn(drive: &mut Drive, n: u64) -> Vec<Effect> {
    let text = format!("question {n}");
    let mut effects = drive.typed(&text);
    assert_eq!(to_runtime(&effects), [typed(&text, &n.to_string())], "turn {n} reaches the runtime");
    effects.extend(drive.runtime(json!({"type": "bidi_response_start", "turn": n})));
    effects.extend(drive.runtime(say("user", &text)));
    effects.extend(drive.runtime(say("assistant", &format!("answer {n}"))));
    effects.extend(drive.runtime(json!({"type": "bidi_response_complete", "turn": n, "stop_reason": "end_turn"})));
    effects
}

#[test]
fn a_session_older_than_two_hours_keeps_its_caller_asserted_parks_and_resumes() {
    let config = GatewayConfig::default();
    let limits = Limits { record: false, ..Limits::new(&config, true) };
    let interval = limits.ping_interval;
    assert!(TURN_EVERY < limits.idle_timeout && LIVED > 10 * limits.idle_timeout);
    let mut drive = Drive::live();
    *drive.machine.limits_mut() = limits.clone();
    let began = drive.now;
    let at = |drive: &Drive| drive.now.saturating_duration_since(began).as_secs();
    let mut seen = Seen::default();
    let start: serde_json::Value =
        json!({"type": "bidi_connection_start", "session_id": "s", "agent": "triage", "mode": "text", "model": "m"});
    seen.take(&drive.runtime(start.clone()), 0);
    let effects = drive.runtime(json!({"type": "memory_update", "key": IDENTITY_KEY, "value": ada()}));
    seen.take(&effects, 0);
    assert_eq!(seen.asserted, [0], "verified: asserted at once");

    let mut turns = 0;
    let mut next_turn = TURN_EVERY;
    let mut snapshots_per_hour = Vec::new();
    while drive.now.saturating_duration_since(began) < LIVED {
        let effects = tick(&mut drive, interval);
        seen.take(&effects, at(&drive));
        assert!(
            matches!(drive.machine.phase(), Phase::Live),
            "at {} s: {:?} ({effects:?})",
            at(&drive),
            drive.machine.phase()
        );
        if drive.now.saturating_duration_since(began) >= next_turn {
            turns += 1;
            next_turn += TURN_EVERY;
            let effects = turn(&mut drive, turns);
            seen.take(&effects, at(&drive));
            assert_eq!(to_client(&effects).len(), 4, "turn {turns} relayed whole: {effects:?}");
        }
        if at(&drive).is_multiple_of(3600) {
            snapshots_per_hour.push(seen.snapshots);
        }
    }
    let lived = at(&drive);
    assert_eq!(turns, LIVED.as_secs() / TURN_EVERY.as_secs());
    assert_eq!(seen.pings as u64, lived / interval.as_secs(), "every interval pinged, none missed");
    assert_eq!(seen.holds, 1, "one resume key, held as long as the session");

    // The runtime never holds an expired assertion: each is replaced within its TTL.
    let mut last = 0;
    for (i, when) in seen.asserted.iter().copied().chain([lived]).enumerate() {
        assert!(when - last < TTL_SECS, "assertion {i} at {when} s, the one before at {last} s (TTL {TTL_SECS} s)");
        last = when;
    }
    assert!(seen.asserted.len() as u64 >= lived / TTL_SECS, "{} assertions in {lived} s", seen.asserted.len());

    // Snapshots (for a replica taking over) are taken in every hour, not only the first.
    assert!(snapshots_per_hour.len() == 2, "{snapshots_per_hour:?}");
    let (first, second) = (snapshots_per_hour[0], snapshots_per_hour[1]);
    let per_hour = (3600 / TURN_EVERY.as_secs()) as usize;
    assert!(first >= per_hour && second - first >= per_hour, "one a turn at least, by hour: {snapshots_per_hour:?}");
    assert!(seen.snapshots > second, "and after the second hour: {} in all", seen.snapshots);

    // The client goes silent (it answers no ping): parked after the ping timeout, not ended.
    let heard = drive.now;
    let mut effects = Vec::new();
    while !matches!(drive.machine.phase(), Phase::Done(_)) {
        drive.now += interval;
        effects = drive.on(Event::Runtime(RuntimeFrame::Control));
        effects.extend(drive.on(Event::PingDue));
        assert!(drive.now.saturating_duration_since(heard) <= limits.ping_timeout + interval, "detected in time");
    }
    assert!(effects.iter().any(|e| matches!(e, Effect::Note(Note::ClientSilent(_)))), "{effects:?}");
    assert_eq!(drive.ending(), Some(&Ending::Park));
    let parked = drive.machine.take_parked();
    let client_had = parked.replay.seq;
    assert_eq!(parked.kept.memory.get(IDENTITY_KEY), Some(&ada()), "the caller is parked with it");

    // Resumed within the window (on another pod): it opens and goes on where it stopped.
    let resumed_at = drive.now + config.resume_window / 2;
    let directory = drive.directory.clone();
    let cx = Cx { now: resumed_at, directory: &directory, outages: &Default::default() };
    let target = directory.lookup("bank", "triage", crate::directory::Reach::Live).expect("triage");
    let mut machine = Machine::resume(limits, "key".into(), parked, target, Some(client_had), &cx);
    let Phase::Opening(request) = machine.phase() else { panic!("reopening: {:?}", machine.phase()) };
    assert_eq!(request.carried.memory.get(IDENTITY_KEY), Some(&ada()), "the new grant asserts the caller");
    let lines = 2 * turns as usize;
    assert_eq!(request.carried.history.len(), lines, "every turn of {lived} s is carried");
    assert_eq!(request.carried.history.last().map(|l| l.text.as_str()), Some(format!("answer {turns}").as_str()));
    machine.handle(Event::Opened(Ok(addr(2))), &cx);
    let effects: Vec<Effect> = std::iter::from_fn(|| machine.next_effect()).collect();
    assert!(effects.contains_or(&Note::Resumed), "{effects:?}");
    assert!(to_client(&effects).is_empty(), "nothing missed, nothing sent twice: {effects:?}");
    assert!(matches!(machine.phase(), Phase::Live));
    let mut drive = Drive { machine, directory, now: resumed_at, outages: Default::default() };
    let effects = drive.runtime(start.clone());
    assert!(effects.iter().any(|e| matches!(e, Effect::Hold { .. })), "a new token, held: {effects:?}");
    assert!(matches!(
        &to_client(&effects)[..],
        [ServerMessage::BidiConnectionStart { seq: Some(seq), .. }] if *seq == client_had + 1
    ));
    turns += 1;
    let effects = turn(&mut drive, turns);
    assert_eq!(to_client(&effects).len(), 4, "the next turn is relayed: {effects:?}");
    // The resumed runtime's grant carried an assertion: replaced before it expires too.
    let mut asserted = vec![0];
    for _ in 0..(2 * TTL_SECS / interval.as_secs()) {
        let effects = tick(&mut drive, interval);
        let since = drive.now.saturating_duration_since(resumed_at).as_secs();
        asserted.extend(effects.iter().filter(|e| matches!(e, Effect::AssertIdentity(_))).map(|_| since));
        assert!(matches!(drive.machine.phase(), Phase::Live), "{since} s after the resume");
        if since.is_multiple_of(TURN_EVERY.as_secs()) {
            turns += 1;
            turn(&mut drive, turns);
        }
    }
    assert!(asserted.len() >= 3, "replaced again and again after the resume: {asserted:?}");
    assert!(asserted.windows(2).all(|w| w[1] - w[0] < TTL_SECS), "each within the TTL: {asserted:?}");
}
