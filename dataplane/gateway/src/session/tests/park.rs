//! Parking and resuming, through the machine's events.

use std::time::Instant;

use serde_json::json;
use switchboard_core::protocol::{ServerMessage, close_code};

use super::{
    Contains, Drive, addr, complete, directory, directory_with, handoff, limits, say, to_client, to_runtime, typed,
};
use crate::resume::Replay;
use crate::session::machine::{
    ClientFrame, Cx, Effect, Ending, Event, Machine, Note, OpenError, Phase, Recorded, SendFailure,
};

#[test]
fn a_client_gone_mid_turn_lets_the_runtime_finish_then_parks() {
    let mut drive = Drive::live();
    drive.typed("hello");
    drive.runtime(say("user", "hello"));
    let effects = drive.client(ClientFrame::Gone);
    assert!(effects.is_empty());
    assert!(drive.machine.settle_deadline().is_some(), "settling");
    let effects = drive.runtime(say("assistant", "Hi"));
    assert!(
        matches!(effects[..], [Effect::Record(Recorded::Server(_))]),
        "recorded, kept for replay, not sent: {effects:?}"
    );
    assert!(drive.ending().is_none());
    drive.runtime(complete());
    assert_eq!(drive.ending(), Some(&Ending::Park));
    let parked = drive.machine.take_parked();
    let replayed: Vec<_> = parked.replay.since(Some(0)).frames;
    assert_eq!(replayed.len(), 3, "every frame, the ones after the client left too");

    // Between turns: parked at once. Ended by the agent meanwhile: nothing to park.
    let mut drive = Drive::live();
    drive.client(ClientFrame::Gone);
    assert_eq!(drive.ending(), Some(&Ending::Park));
    let mut drive = Drive::live();
    drive.typed("bye");
    drive.on(Event::ClientSendFailed(SendFailure::Gone));
    drive.closed(close_code::NORMAL);
    assert_eq!(drive.ending(), Some(&Ending::Detach));
    let mut drive = Drive::live();
    drive.typed("transfer me");
    drive.on(Event::Superseded);
    drive.runtime(handoff("idv"));
    drive.closed(close_code::HANDOFF);
    assert_eq!(drive.ending(), Some(&Ending::Park), "the handoff is made on resume");
    assert!(drive.machine.take_parked().handoff.is_some());
    let mut drive = Drive::live();
    drive.typed("slow");
    drive.client(ClientFrame::Gone);
    drive.on(Event::SettleDue);
    assert_eq!(drive.ending(), Some(&Ending::Park), "the grace is bounded");
}

/// A handoff's target answers the request that brought the caller within the same turn: a
/// client gone between the target's opening and its reply lets it answer, then parks (parked
/// at once, the target's session closed before its answer, which no resume asked again).
#[test]
fn a_client_gone_right_after_a_handoff_lets_the_target_answer_then_parks() {
    let mut drive = Drive::live();
    drive.runtime(handoff("idv"));
    drive.closed(close_code::HANDOFF);
    drive.on(Event::Opened(Ok(addr(3))));
    drive.client(ClientFrame::Gone);
    assert!(drive.ending().is_none() && drive.machine.settle_deadline().is_some(), "settling for the answer");
    drive.runtime(say("assistant", "To verify your identity, your name please."));
    drive.runtime(complete());
    assert_eq!(drive.ending(), Some(&Ending::Park));
    let replayed = drive.machine.take_parked().replay.since(Some(0)).frames;
    assert!(
        replayed.iter().any(|f| matches!(f, crate::resume::Frame::Text(t) if t.as_str().contains("To verify"))),
        "the target's answer waits for the client: {replayed:?}"
    );
}

#[test]
fn a_draining_gateway_moves_its_sessions_when_the_store_is_shared() {
    let mut drive = Drive::live();
    let effects = drive.on(Event::Draining);
    assert!(matches!(&effects[..], [Effect::CloseClient((close_code::GOING_AWAY, _))]));
    assert_eq!(drive.ending(), Some(&Ending::Park));
    let mut drive = Drive::live();
    drive.machine.limits_mut().movable = false;
    assert!(drive.on(Event::Draining).is_empty());
    assert!(matches!(drive.machine.phase(), Phase::Live), "it drains in place");
    drive.on(Event::Shutdown);
    assert!(matches!(drive.ending(), Some(Ending::Close((close_code::GOING_AWAY, _)))));
}

#[test]
fn a_resumed_session_reopens_then_sends_what_was_missed_and_says_what_is_gone() {
    let mut drive = Drive::live();
    drive.typed("one");
    for i in 0..5 {
        drive.runtime(say("assistant", &format!("line {i}")));
    }
    drive.client(ClientFrame::Gone);
    let mut parked = drive.machine.take_parked();
    // The oldest two are no longer held.
    let mut replay = Replay::default();
    for frame in parked.replay.since(Some(0)).frames {
        replay.record(frame, 3, 1 << 20);
    }
    parked.replay = replay;
    let directory = directory();
    let cx = Cx { now: Instant::now(), directory: &directory, outages: &Default::default() };
    let target = directory.lookup("bank", "triage", crate::directory::Reach::Live).expect("triage");
    let mut machine = Machine::resume(limits(), "key".into(), parked, target, Some(1), &cx);
    assert!(
        matches!(machine.phase(), Phase::Opening(request) if request.carried.handoff.is_none() && request.carried.history.len() == 5)
    );
    machine.handle(Event::Opened(Ok(addr(2))), &cx);
    let effects: Vec<Effect> = std::iter::from_fn(|| machine.next_effect()).collect();
    assert_eq!(to_runtime(&effects), [typed("one", "1")]);
    let sent = to_client(&effects);
    assert!(matches!(&sent[0], ServerMessage::BidiTranscriptStream { text, .. } if text == "line 2"), "{sent:?}");
    assert_eq!(sent.len(), 4, "three held lines, then the gap: {sent:?}");
    assert!(matches!(&sent[3], ServerMessage::BidiError { code, .. } if code == "replay_gap"));

    // It cannot be opened: it goes back to the store.
    let parked = drive_parked();
    let target = directory.lookup("bank", "triage", crate::directory::Reach::Live).expect("triage");
    let mut machine = Machine::resume(limits(), "key".into(), parked, target, None, &cx);
    let no_pod = OpenError::NoReadyPod { agent: "triage".into() };
    machine.handle(Event::Opened(Err(no_pod.clone())), &cx);
    assert!(matches!(machine.phase(), Phase::Done(Ending::ResumeFailed(m)) if *m == no_pod));
}

fn drive_parked() -> crate::resume::Parked {
    let mut drive = Drive::live();
    drive.client(ClientFrame::Gone);
    drive.machine.take_parked()
}

#[test]
fn a_handoff_made_while_the_client_was_away_happens_on_resume_or_is_told_to_the_source() {
    for (target_ok, expected) in [(true, "bank/idv"), (false, "bank/triage")] {
        let mut drive = Drive::live();
        drive.typed("transfer me");
        drive.client(ClientFrame::Gone);
        drive.runtime(handoff("idv"));
        drive.closed(close_code::HANDOFF);
        let parked = drive.machine.take_parked();
        let directory = if target_ok { directory() } else { directory_with(&[("triage", &[1])]) };
        let cx = Cx { now: Instant::now(), directory: &directory, outages: &Default::default() };
        let target = directory.lookup("bank", "triage", crate::directory::Reach::Live).expect("triage");
        let mut machine = Machine::resume(limits(), "key".into(), parked, target, None, &cx);
        assert!(
            matches!(machine.phase(), Phase::Opening(r) if r.target.key() == expected && r.carried.handoff.is_some() == target_ok)
        );
        machine.handle(Event::Opened(Ok(addr(3))), &cx);
        let effects: Vec<Effect> = std::iter::from_fn(|| machine.next_effect()).collect();
        assert!(effects.contains_or(&Note::Resumed));
        assert!(matches!(machine.phase(), Phase::Live));
        if !target_ok {
            let last = machine.kept().history.last().expect("a line");
            assert!(last.text.contains("transfer to idv did not happen"), "{}", last.text);
        }
    }
}

#[test]
fn a_resumed_voice_client_gets_the_audio_of_the_reply_in_progress_only() {
    let mut drive = Drive::live();
    let audio = |n: usize| json!({"type": "bidi_audio_stream", "audio": format!("{n:04}{}", "A".repeat(2000))});
    drive.runtime(json!({"type": "bidi_response_start", "turn": 1}));
    for n in 0..5 {
        drive.runtime(audio(n));
    }
    drive.runtime(complete());
    let played = drive.machine.replay().seq;
    drive.runtime(json!({"type": "bidi_response_start", "turn": 2}));
    drive.runtime(audio(100));
    drive.client(ClientFrame::Gone);
    drive.runtime(audio(101));
    drive.runtime(complete());
    assert_eq!(drive.ending(), Some(&Ending::Park));
    let parked = drive.machine.take_parked();
    assert!(parked.replay.bytes() < 3 * 2100, "the first reply's audio is not held: {}", parked.replay.bytes());
    // A client that heard the first reply and left in the second gets the second's audio.
    let missed = parked.replay.since(Some(played));
    let texts: Vec<String> = missed
        .frames
        .iter()
        .map(|f| match f {
            crate::resume::Frame::Text(t) => t.as_str().chars().take(40).collect(),
            crate::resume::Frame::Binary(_) => "binary".into(),
        })
        .collect();
    assert_eq!(missed.frames.len(), 4, "{texts:?}");
    assert_eq!(missed.gap, None);
}
