//! The dial-and-bridge transfer's rules, one test each, and random event sequences.

use proptest::prelude::*;

use super::*;
use crate::sdp::{Codec, Direction};

fn media(port: u16) -> Negotiated {
    Negotiated {
        remote: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        codec: Codec::Pcma,
        payload_type: 8,
        telephone_event: Some(101),
        telephone_event_clock: 8000,
        opus: None,
        remote_ptime: None,
        direction: Direction::SendRecv,
        rtcp_mux: false,
        srtp: None,
        proto: "RTP/AVP".to_owned(),
    }
}

fn refused(status: u16) -> TransferProgress {
    TransferProgress::Ended(TransferEnd::Refused { status, reason: "R".into() })
}

fn rejected(status: u16) -> CallEvent {
    CallEvent::Ended(EndReason::Rejected { status, reason: "R".into() })
}

#[test]
fn methods_read_from_their_names_and_others_are_refused_with_the_choices() {
    assert_eq!("refer".parse::<Method>(), Ok(Method::Refer));
    assert_eq!("dial".parse::<Method>(), Ok(Method::Dial));
    let error = "bridge".parse::<Method>().expect_err("unknown");
    assert!(error.contains("refer") && error.contains("dial") && error.contains("bridge"), "{error}");
}

#[test]
fn a_refused_refer_dials_the_person_and_other_refer_ends_are_the_transfers_end() {
    for status in [403, 405, 420, 488, 489, 501] {
        let (mut transfer, steps) = Transfer::start(Method::Refer);
        assert_eq!(steps, [Step::Refer]);
        assert_eq!(transfer.refer(TransferProgress::Accepted), []);
        assert_eq!(transfer.refer(refused(status)), [Step::Dial], "{status}");
        assert_eq!(transfer.phase(), &Phase::Dialling);
    }
    // A busy refusal, or the target's own answer, is the end: the person was tried.
    let (mut transfer, _) = Transfer::start(Method::Refer);
    assert_eq!(transfer.refer(refused(486)), [Step::Report(TransferEnd::Refused { status: 486, reason: "R".into() })]);
    assert!(transfer.is_over());
    let (mut transfer, _) = Transfer::start(Method::Refer);
    let answered = TransferEnd::Target { status: 200, reason: "OK".into() };
    assert_eq!(transfer.refer(TransferProgress::Ended(answered.clone())), [Step::Report(answered)]);
    assert_eq!(transfer.refer(refused(501)), [], "nothing after the end");
}

#[test]
fn the_person_answering_reports_transferred_and_the_sessions_end_bridges_the_legs() {
    let (mut transfer, steps) = Transfer::start(Method::Dial);
    assert_eq!(steps, [Step::Dial]);
    assert_eq!(transfer.person(&CallEvent::Progress(100)), []);
    assert_eq!(transfer.phase(), &Phase::Dialling);
    assert_eq!(transfer.person(&CallEvent::Progress(180)), []);
    assert_eq!(transfer.phase(), &Phase::Ringing);
    let steps = transfer.person(&CallEvent::Established(media(4000)));
    assert_eq!(steps, [Step::Report(TransferEnd::Target { status: 200, reason: "OK".into() })]);
    // A re-INVITE from the person before the bridge: the bridge takes the newer media.
    assert_eq!(transfer.person(&CallEvent::MediaChanged(media(4002))), []);
    assert_eq!(transfer.session_ended(), [Step::Bridge(media(4002))]);
    assert_eq!(transfer.phase(), &Phase::Bridged);
    assert!(transfer.has_person());
    assert_eq!(transfer.session_ended(), [], "once");
    assert_eq!(transfer.person(&CallEvent::Ended(EndReason::RemoteHangUp)), [Step::HangUp(Leg::Caller)]);
    assert!(transfer.is_over());
}

#[test]
fn a_person_who_does_not_answer_is_the_same_end_a_refer_would_give() {
    let cases = [
        (rejected(486), TransferEnd::Target { status: 486, reason: "R".into() }),
        (rejected(603), TransferEnd::Target { status: 603, reason: "R".into() }),
        (rejected(404), TransferEnd::Target { status: 404, reason: "R".into() }),
        (CallEvent::Ended(EndReason::NoAnswer), TransferEnd::TimedOut),
    ];
    for (event, end) in cases {
        let (mut transfer, _) = Transfer::start(Method::Dial);
        transfer.person(&CallEvent::Progress(180));
        assert_eq!(transfer.person(&event), [Step::Report(end)], "{event:?}");
        assert!(transfer.is_over());
        assert_eq!(transfer.session_ended(), [], "no bridge after a failed transfer");
    }
    let (mut transfer, _) = Transfer::start(Method::Dial);
    let end = TransferEnd::Target { status: 404, reason: "the person's host does not resolve".into() };
    assert_eq!(transfer.dial_failed(end.clone()), [Step::Report(end)]);
    let event = CallEvent::Ended(EndReason::MediaRefused("no codec".into()));
    let (mut transfer, _) = Transfer::start(Method::Dial);
    assert!(
        matches!(transfer.person(&event).as_slice(), [Step::Report(TransferEnd::Abandoned(why))] if why.contains("no codec"))
    );
}

#[test]
fn hanging_up_on_either_side_takes_the_other_leg_with_it() {
    // The caller leaves while the person's phone rings: it is cancelled and the agent told.
    let (mut transfer, _) = Transfer::start(Method::Dial);
    transfer.person(&CallEvent::Progress(180));
    let steps = transfer.caller_ended();
    assert_eq!(steps[0], Step::HangUp(Leg::Person));
    assert!(matches!(&steps[1], Step::Report(TransferEnd::Abandoned(_))), "{steps:?}");
    // The agent's session ends while it rings: the person's leg is cancelled.
    let (mut transfer, _) = Transfer::start(Method::Dial);
    assert_eq!(transfer.session_ended(), [Step::HangUp(Leg::Person)]);
    // Bridged: the caller's BYE ends the person's leg.
    let (mut transfer, _) = Transfer::start(Method::Dial);
    transfer.person(&CallEvent::Established(media(4000)));
    transfer.session_ended();
    assert_eq!(transfer.caller_ended(), [Step::HangUp(Leg::Person)]);
    assert_eq!(transfer.person(&CallEvent::Ended(EndReason::RemoteHangUp)), [], "over");
    // Answered, the session not yet over, the person hangs up: the caller's leg goes.
    let (mut transfer, _) = Transfer::start(Method::Dial);
    transfer.person(&CallEvent::Established(media(4000)));
    assert_eq!(transfer.person(&CallEvent::Ended(EndReason::RemoteHangUp)), [Step::HangUp(Leg::Caller)]);
    assert_eq!(transfer.session_ended(), []);
    // A REFER under way: no person's leg to hang up.
    let (mut transfer, _) = Transfer::start(Method::Refer);
    assert_eq!(transfer.caller_ended(), []);
}

fn answered() -> Step {
    Step::Report(TransferEnd::Target { status: 200, reason: "OK".into() })
}

#[test]
fn a_warm_transfer_holds_the_caller_briefs_the_person_then_bridges() {
    let (mut transfer, steps) = Transfer::warm();
    assert_eq!(steps, [Step::Hold, Step::Dial], "the caller on hold, the person dialled at once");
    assert!(transfer.is_warm() && !transfer.is_briefing());
    assert_eq!(transfer.person(&CallEvent::Progress(180)), []);
    let steps = transfer.person(&CallEvent::Established(media(4000)));
    assert_eq!(steps, [Step::Brief(media(4000)), answered()], "the person takes the caller's place; the agent told");
    assert!(transfer.is_briefing() && transfer.has_person());
    assert_eq!(transfer.person(&CallEvent::MediaChanged(media(4002))), []);
    // The brief is over: the session ends and the legs are bridged with the newer media.
    assert_eq!(transfer.session_ended(), [Step::Bridge(media(4002))]);
    assert_eq!(transfer.phase(), &Phase::Bridged);
    assert_eq!(transfer.caller_ended(), [Step::HangUp(Leg::Person)]);
    assert!(transfer.is_over());
}

#[test]
fn a_warm_transfer_that_fails_takes_the_caller_off_hold_with_why() {
    let cases = [
        (rejected(486), TransferEnd::Target { status: 486, reason: "R".into() }),
        (rejected(603), TransferEnd::Target { status: 603, reason: "R".into() }),
        (CallEvent::Ended(EndReason::NoAnswer), TransferEnd::TimedOut),
    ];
    for (event, end) in cases {
        let (mut transfer, _) = Transfer::warm();
        transfer.person(&CallEvent::Progress(180));
        assert_eq!(transfer.person(&event), [Step::Unhold, Step::Report(end)], "{event:?}");
        assert!(transfer.is_over());
    }
    let (mut transfer, _) = Transfer::warm();
    let unreachable = TransferEnd::Target { status: 404, reason: "no such host".into() };
    assert_eq!(transfer.dial_failed(unreachable.clone()), [Step::Unhold, Step::Report(unreachable)]);
    // The person hangs up during the brief: the caller is back, and the agent hears it.
    let (mut transfer, _) = Transfer::warm();
    transfer.person(&CallEvent::Established(media(4000)));
    let steps = transfer.person(&CallEvent::Ended(EndReason::RemoteHangUp));
    assert_eq!(steps[0], Step::Unhold);
    assert!(matches!(&steps[1], Step::Report(TransferEnd::Abandoned(why)) if why.contains("briefed")), "{steps:?}");
    assert_eq!(transfer.session_ended(), [], "no bridge: the person is gone");
}

#[test]
fn a_caller_who_hangs_up_during_a_warm_transfer_takes_the_persons_leg_with_them() {
    let (mut transfer, _) = Transfer::warm();
    let steps = transfer.caller_ended();
    assert_eq!(steps[0], Step::HangUp(Leg::Person));
    assert!(matches!(&steps[1], Step::Report(TransferEnd::Abandoned(_))), "{steps:?}");
    let (mut transfer, _) = Transfer::warm();
    transfer.person(&CallEvent::Established(media(4000)));
    assert_eq!(transfer.caller_ended(), [Step::HangUp(Leg::Person)], "during the brief: BYE to the person");
    assert_eq!(transfer.session_ended(), []);
}

#[derive(Clone, Debug)]
enum Input {
    Refer(u16),
    Person(u8),
    DialFailed,
    SessionEnded,
    CallerEnded,
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        prop_oneof![Just(100u16), Just(180), Just(200), Just(405), Just(486), Just(501), Just(603)]
            .prop_map(Input::Refer),
        (0u8..6).prop_map(Input::Person),
        Just(Input::DialFailed),
        Just(Input::SessionEnded),
        Just(Input::CallerEnded),
    ]
}

fn person_event(kind: u8) -> CallEvent {
    match kind {
        0 => CallEvent::Progress(180),
        1 => CallEvent::Established(media(4000)),
        2 => rejected(486),
        3 => CallEvent::Ended(EndReason::NoAnswer),
        4 => CallEvent::MediaChanged(media(4002)),
        _ => CallEvent::Ended(EndReason::RemoteHangUp),
    }
}

proptest! {
    #[test]
    fn any_sequence_reports_at_most_once_and_bridges_only_what_answered(
        kind in 0u8..3,
        inputs in proptest::collection::vec(input(), 0..24),
    ) {
        let (mut transfer, mut all) = match kind {
            0 => Transfer::start(Method::Refer),
            1 => Transfer::start(Method::Dial),
            _ => Transfer::warm(),
        };
        let warm = transfer.is_warm();
        for input in inputs {
            let before = transfer.phase().clone();
            let steps = match input {
                Input::Refer(status) => {
                    let progress = match status {
                        100 | 180 => TransferProgress::Trying(status),
                        200 => TransferProgress::Ended(TransferEnd::Target { status, reason: "OK".into() }),
                        _ => TransferProgress::Ended(TransferEnd::Refused { status, reason: "R".into() }),
                    };
                    transfer.refer(progress)
                }
                Input::Person(kind) => transfer.person(&person_event(kind)),
                Input::DialFailed => transfer.dial_failed(TransferEnd::TimedOut),
                Input::SessionEnded => transfer.session_ended(),
                Input::CallerEnded => transfer.caller_ended(),
            };
            if before == Phase::Over {
                prop_assert!(steps.is_empty(), "nothing after the end: {steps:?}");
            }
            for step in &steps {
                if let Step::Bridge(_) = step {
                    let from = if warm { matches!(before, Phase::Briefing(_)) } else { matches!(before, Phase::Answered(_)) };
                    prop_assert!(from, "bridged from {before:?}");
                }
                if step == &Step::HangUp(Leg::Person) {
                    prop_assert!(transfer_had_person(&before), "{before:?}");
                }
                if matches!(step, Step::Hold | Step::Brief(_) | Step::Unhold) {
                    prop_assert!(warm, "only a warm transfer holds or briefs: {step:?}");
                }
            }
            all.extend(steps);
        }
        let reports = all.iter().filter(|s| matches!(s, Step::Report(_))).count();
        // A warm transfer's person who leaves during the brief is a second report.
        let briefed = all.iter().any(|s| matches!(s, Step::Brief(_)));
        prop_assert!(reports <= if warm && briefed { 2 } else { 1 }, "{all:?}");
        if warm {
            let unholds = all.iter().filter(|s| **s == Step::Unhold).count();
            prop_assert!(unholds <= 1, "{all:?}");
            if let Some(i) = all.iter().position(|s| *s == Step::Unhold) {
                prop_assert!(!all[i..].iter().any(|s| matches!(s, Step::Bridge(_))), "never bridged after unhold: {all:?}");
            }
        }
        let dials = all.iter().filter(|s| **s == Step::Dial).count();
        prop_assert!(dials <= 1, "one person's leg at most: {all:?}");
        if let Some(i) = all.iter().position(|s| matches!(s, Step::Bridge(_))) {
            let answered = Step::Report(TransferEnd::Target { status: 200, reason: "OK".into() });
            prop_assert!(all[..i].contains(&answered), "bridged only after `transferred`: {all:?}");
        }
    }
}

fn transfer_had_person(phase: &Phase) -> bool {
    matches!(phase, Phase::Dialling | Phase::Ringing | Phase::Answered(_) | Phase::Briefing(_) | Phase::Bridged)
}
