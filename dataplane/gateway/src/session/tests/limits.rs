//! Limits and liveness, through the machine's events: rates and key budgets, sizes, a
//! slow client, the idle timeout, and pings that find a silent client or runtime.

use std::time::Duration;

use switchboard_core::protocol::{ErrorCode, ServerMessage, close_code};

use super::{Contains, Drive, addr, error_codes, say, to_client};
use crate::auth::Refusal;
use crate::session::machine::{ClientFrame, Effect, Ending, Event, Machine, Note, RuntimeFrame, SendFailure};

#[test]
fn client_limits_end_the_session_with_their_codes() {
    let mut drive = Drive::live();
    let refusal = Refusal { code: close_code::RATE_LIMITED, message: "key budget".into(), reason: ErrorCode::KeyRate };
    let effects = drive.on(Event::Client(ClientFrame::Binary(vec![0; 4].into()), Err(refusal)));
    assert_eq!(error_codes(&effects), ["key_rate"]);
    assert!(effects.contains_or(&Note::Refused("key_rate")));
    assert_eq!(drive.ending(), Some(&Ending::Close((close_code::RATE_LIMITED, "key rate".into()))));

    let mut drive = Drive::live();
    drive.machine.limits_mut().session_rate = 1;
    drive.machine = rebuild_bucket(drive.machine);
    drive.client(ClientFrame::Binary(vec![0; 4].into()));
    drive.client(ClientFrame::Binary(vec![0; 4].into()));
    let effects = drive.client(ClientFrame::Binary(vec![0; 4].into()));
    assert_eq!(error_codes(&effects), ["session_rate"], "a burst of twice the rate, then refused");

    for (frame, code) in [(ClientFrame::Oversized, close_code::TOO_BIG), (ClientFrame::Close, close_code::NORMAL)] {
        let mut drive = Drive::live();
        drive.client(frame);
        assert!(matches!(drive.ending(), Some(Ending::Close((c, _))) if *c == code));
    }
    let mut drive = Drive::live();
    drive.on(Event::ClientSendFailed(SendFailure::Slow));
    assert!(matches!(drive.ending(), Some(Ending::Close((close_code::SLOW_CLIENT, _)))));
}

/// A driver behind on the client's socket (a slow handoff, a busy machine) reads at once
/// what came over that time: judged by when it could have arrived, that is no flood; the
/// same frames sent at once are.
#[test]
fn a_backlog_read_at_once_is_no_flood_but_a_burst_sent_at_once_is() {
    let mut drive = Drive::live();
    drive.machine.limits_mut().session_rate = 50;
    drive.machine = rebuild_bucket(drive.machine);
    let audio = || ClientFrame::Binary(vec![0; 640].into());
    drive.machine.client_caught_up(drive.now);
    // 20 s of a voice client's frames (50 a second), read 20 s later, all at once: 1,000
    // frames against a burst of 100.
    drive.now += Duration::from_secs(20);
    for n in 0..1000 {
        assert!(error_codes(&drive.client(audio())).is_empty(), "frame {n} of the backlog");
    }
    assert_eq!(drive.ending(), None);
    // Caught up: a burst sent at once is judged as it is, twice the rate and no more.
    drive.machine.client_caught_up(drive.now);
    for n in 0..100 {
        assert!(error_codes(&drive.client(audio())).is_empty(), "frame {n} of the burst");
    }
    assert_eq!(error_codes(&drive.client(audio())), ["session_rate"]);
}

fn rebuild_bucket(machine: Machine) -> Machine {
    machine.with_fresh_client()
}

#[test]
fn an_idle_session_ends_only_once_the_timeout_passed_since_the_last_frame() {
    let mut drive = Drive::live();
    drive.now += Duration::from_secs(50);
    drive.runtime(say("assistant", "still here"));
    drive.now += Duration::from_secs(50);
    assert!(drive.on(Event::IdleDue).is_empty(), "the agent's frame 50 s ago counts");
    assert_eq!(drive.machine.idle_deadline(), drive.now + Duration::from_secs(10));
    drive.now += Duration::from_secs(10);
    let effects = drive.on(Event::IdleDue);
    assert_eq!(error_codes(&effects), ["idle_timeout"]);
    let [ServerMessage::BidiError { message, recoverable: false, .. }] = &to_client(&effects)[..] else {
        panic!("{effects:?}")
    };
    assert!(message.contains("cannot be resumed"), "an idle session ends, and says so: {message}");
    assert!(matches!(drive.ending(), Some(Ending::Close((close_code::IDLE_TIMEOUT, _)))));
}

#[test]
fn silent_sides_are_found_by_pings_a_client_parks_a_runtime_is_left() {
    let pinged = |effects: &[Effect]| {
        (
            effects.iter().any(|e| matches!(e, Effect::PingClient)),
            effects.iter().any(|e| matches!(e, Effect::PingRuntime)),
        )
    };
    let mut drive = Drive::live();
    drive.now += Duration::from_secs(5);
    assert_eq!(pinged(&drive.on(Event::PingDue)), (true, true));
    // Pongs keep both alive but are no activity: the idle deadline does not move.
    let idle = drive.machine.idle_deadline();
    drive.now += Duration::from_secs(10);
    drive.client(ClientFrame::Control);
    drive.on(Event::Runtime(RuntimeFrame::Control));
    assert_eq!(drive.machine.idle_deadline(), idle);
    drive.now += Duration::from_secs(10);
    assert_eq!(pinged(&drive.on(Event::PingDue)), (true, true), "heard 10 s ago: still there");

    // A runtime that answers nothing for the timeout: the session moves to another pod.
    drive.now += Duration::from_secs(5);
    drive.client(ClientFrame::Control);
    drive.now += Duration::from_secs(10);
    let effects = drive.on(Event::PingDue);
    assert!(effects.iter().any(|e| matches!(e, Effect::Note(Note::RuntimeSilent(_)))));
    assert!(effects.iter().any(|e| matches!(e, Effect::CloseRuntime)));
    assert_eq!(drive.opening(), Some(("bank/triage".into(), Some(addr(1)), false)));
    let effects = drive.on(Event::Opened(Ok(addr(2))));
    assert!(matches!(
        &to_client(&effects)[..],
        [ServerMessage::BidiConnectionRestart { reason, .. }] if reason == "runtime_unresponsive"
    ));

    // A client that answers nothing: its session parks for resume (not ended).
    drive.now += Duration::from_secs(16);
    drive.on(Event::Runtime(RuntimeFrame::Control));
    let effects = drive.on(Event::PingDue);
    assert!(effects.iter().any(|e| matches!(e, Effect::Note(Note::ClientSilent(_)))));
    assert_eq!(drive.ending(), Some(&Ending::Park));
}
