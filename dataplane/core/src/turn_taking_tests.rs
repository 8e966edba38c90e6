use std::time::{Duration, Instant};

use proptest::prelude::*;
use switchboard_crds::persona::TurnTaking;

use super::*;

/// Feeds `frames` (voiced?) of 20 ms; returns what came out: frames forwarded (their
/// numbers), milliseconds dropped, and the speech dropped.
fn run(gate: &mut BargeIn<u32>, frames: &[(bool, Agent)]) -> (Vec<u32>, u64, u32) {
    let (mut forwarded, mut dropped, mut ignored) = (Vec::new(), 0, 0);
    for (n, (voiced, agent)) in frames.iter().enumerate() {
        match gate.push(u32::try_from(n).unwrap_or(0), 20, *voiced, *agent) {
            Gated::Pass(frame) => forwarded.push(frame),
            Gated::Forward(frames) => forwarded.extend(frames),
            Gated::Held => {}
            Gated::Dropped { ms, speech } => {
                dropped += ms;
                ignored += u32::from(speech);
            }
            Gated::Withheld { ms, .. } => {
                dropped += ms;
                ignored += 1;
            }
        }
    }
    (forwarded, dropped, ignored)
}

fn speech(ms: u64, agent: Agent) -> Vec<(bool, Agent)> {
    vec![(true, agent); usize::try_from(ms / 20).unwrap_or(0)]
}

fn quiet(ms: u64, agent: Agent) -> Vec<(bool, Agent)> {
    vec![(false, agent); usize::try_from(ms / 20).unwrap_or(0)]
}

#[test]
fn a_backchannel_over_the_agent_never_reaches_the_model_and_silence_takes_its_place() {
    let mut gate = BargeIn::new(400);
    let frames = [quiet(100, Agent::Speaking), speech(300, Agent::Speaking), quiet(400, Agent::Speaking)].concat();
    let (forwarded, dropped, ignored) = run(&mut gate, &frames);
    assert_eq!(ignored, 1, "one backchannel ignored");
    // The quiet before it and after the gap pass; the speech and the gap are replaced.
    assert_eq!(dropped, 300 + BACKCHANNEL_GAP_MS);
    assert_eq!(forwarded.len() as u64 * 20 + dropped, 800, "every frame is accounted for, once");
    assert!(!gate.holding());
}

#[test]
fn speech_long_enough_is_passed_whole_from_its_first_frame_and_then_as_it_comes() {
    let mut gate = BargeIn::new(400);
    let frames = [quiet(40, Agent::Speaking), speech(1000, Agent::Speaking), quiet(400, Agent::Quiet)].concat();
    let (forwarded, dropped, ignored) = run(&mut gate, &frames);
    assert_eq!((dropped, ignored), (0, 0));
    let all: Vec<u32> = (0..u32::try_from(frames.len()).unwrap_or(0)).collect();
    assert_eq!(forwarded, all, "in order, nothing lost");
}

#[test]
fn speech_over_a_line_played_whole_is_replaced_by_silence_however_long() {
    let mut gate = BargeIn::new(400);
    let frames = [speech(3000, Agent::Uninterruptible), quiet(400, Agent::Uninterruptible)].concat();
    let (forwarded, dropped, ignored) = run(&mut gate, &frames);
    assert_eq!((forwarded.len(), dropped, ignored), (0, 3400, 1));
}

#[test]
fn speech_over_a_line_played_whole_is_withheld_in_order_and_a_click_is_not() {
    let mut gate = BargeIn::new(400);
    let line = Agent::Uninterruptible;
    let frames = [quiet(100, line), speech(1000, line), quiet(BACKCHANNEL_GAP_MS, line)].concat();
    let mut withheld = Vec::new();
    for (n, (voiced, agent)) in frames.iter().enumerate() {
        match gate.push(n, 20, *voiced, *agent) {
            Gated::Withheld { ms, frames } => {
                assert_eq!(ms, 1000 + BACKCHANNEL_GAP_MS, "the speech and its pause");
                withheld.extend(frames);
            }
            Gated::Dropped { speech, .. } => assert!(!speech, "the quiet before it is dropped"),
            other => assert!(matches!(other, Gated::Held), "{other:?}"),
        }
    }
    let expected: Vec<usize> = (5..frames.len()).collect();
    assert_eq!(withheld, expected, "the speech, in order, once");
    // A click (under 100 ms voiced) over the line is dropped, not kept for later.
    let click = [speech(40, line), quiet(BACKCHANNEL_GAP_MS, line)].concat();
    let (forwarded, dropped, ignored) = run(&mut BargeIn::new(400), &click);
    assert_eq!((forwarded.len(), dropped, ignored), (0, 40 + BACKCHANNEL_GAP_MS, 0));
}

#[test]
fn with_no_minimum_or_no_reply_every_frame_passes_at_once() {
    for (min, agent) in [(0, Agent::Speaking), (400, Agent::Quiet)] {
        let mut gate = BargeIn::new(min);
        for n in 0..50u32 {
            assert_eq!(gate.push(n, 20, n % 3 == 0, agent), Gated::Pass(n));
        }
    }
}

#[test]
fn a_reply_that_ends_while_the_caller_speaks_lets_the_held_words_through() {
    let mut gate = BargeIn::new(400);
    let frames = [speech(200, Agent::Speaking), speech(200, Agent::Quiet)].concat();
    let (forwarded, dropped, _) = run(&mut gate, &frames);
    assert_eq!((forwarded.len(), dropped), (20, 0));
}

proptest! {
    /// Whatever the caller and the agent do, every millisecond of the caller's audio goes
    /// to the model once — as itself or as silence — or is still held, and frames keep
    /// their order.
    #[test]
    fn every_frame_is_forwarded_or_replaced_once(
        frames in proptest::collection::vec((any::<bool>(), 0..3u8), 0..300),
        min in 0..800u64,
    ) {
        let agent = |a: u8| match a { 0 => Agent::Quiet, 1 => Agent::Speaking, _ => Agent::Uninterruptible };
        let frames: Vec<(bool, Agent)> = frames.into_iter().map(|(v, a)| (v, agent(a))).collect();
        let mut gate = BargeIn::new(min);
        let (mut out, mut held_ms) = (0u64, 0u64);
        let mut seen = Vec::new();
        for (n, (voiced, agent)) in frames.iter().enumerate() {
            match gate.push(n, 20, *voiced, *agent) {
                Gated::Pass(f) => { out += 20; seen.push(f); held_ms = 0; }
                Gated::Forward(f) => { out += 20 * f.len() as u64; seen.extend(f); held_ms = 0; }
                Gated::Held => { held_ms += 20; }
                Gated::Dropped { ms, .. } | Gated::Withheld { ms, .. } => { out += ms; held_ms = 0; }
            }
        }
        let pending = if gate.holding() { held_ms } else { 0 };
        prop_assert_eq!(out + pending, 20 * frames.len() as u64);
        prop_assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order, once");
    }
}

fn settings() -> ClockSettings {
    ClockSettings::from(&TurnTaking::default())
}

#[test]
fn defaults_suit_a_phone_line() {
    let s = settings();
    assert_eq!(s.silence, Some(Duration::from_secs(10)));
    assert_eq!((s.prompt.as_str(), s.max_prompts), ("Are you still there?", 2));
    assert_eq!((s.max_call, s.warning), (Some(Duration::from_secs(3600)), Some(Duration::from_secs(60))));
}

#[test]
fn silence_is_re_prompted_then_the_call_ends_after_its_goodbye() {
    let t0 = Instant::now();
    let mut clock = CallClock::new(settings(), t0);
    clock.idle(true, t0);
    let s = |n: u64| t0 + Duration::from_secs(n);
    assert_eq!(clock.poll(s(9)), None);
    assert_eq!(clock.deadline(), Some(s(10)));
    assert_eq!(clock.poll(s(10)), Some(Due::Reprompt("Are you still there?".into())));
    // The re-prompt is spoken (not idle), then quiet again.
    clock.idle(false, s(11));
    clock.idle(true, s(12));
    assert_eq!(clock.poll(s(21)), None);
    assert_eq!(clock.poll(s(22)), Some(Due::Reprompt("Are you still there?".into())));
    assert_eq!(clock.prompts(), 2);
    let Some(Due::Goodbye(_, EndReason::Silence)) = clock.poll(s(32)) else { panic!("a goodbye") };
    assert!(clock.ending());
    assert_eq!(clock.poll(s(33)), None, "not before it was said");
    clock.reply_started();
    clock.reply_ended(s(35));
    let Some(Due::End(EndReason::Silence, reason)) = clock.poll(s(35)) else { panic!("the end") };
    assert!(reason.starts_with("idle:"), "{reason}");
    assert_eq!((clock.poll(s(99)), clock.deadline()), (None, None), "once");
}

#[test]
fn the_caller_speaking_starts_the_re_prompts_again_and_an_unsaid_goodbye_ends_in_time() {
    let t0 = Instant::now();
    let mut clock = CallClock::new(settings(), t0);
    let s = |n: u64| t0 + Duration::from_secs(n);
    clock.idle(true, t0);
    assert!(matches!(clock.poll(s(10)), Some(Due::Reprompt(_))));
    clock.caller_spoke();
    clock.idle(false, s(11));
    clock.idle(true, s(12));
    assert!(matches!(clock.poll(s(22)), Some(Due::Reprompt(_))));
    assert!(matches!(clock.poll(s(32)), Some(Due::Reprompt(_))), "two since the caller spoke");
    assert!(matches!(clock.poll(s(42)), Some(Due::Goodbye(..))));
    assert_eq!(clock.deadline(), Some(s(42) + GOODBYE_PATIENCE));
    assert!(matches!(clock.poll(s(42) + GOODBYE_PATIENCE), Some(Due::End(EndReason::Silence, _))));
}

#[test]
fn a_long_call_is_warned_then_ended() {
    let t0 = Instant::now();
    let mut tt = TurnTaking::default();
    tt.max_call.seconds = 20;
    tt.max_call.warning_seconds = 5;
    tt.silence.after_seconds = 0;
    let mut clock = CallClock::new(ClockSettings::from(&tt), t0);
    let s = |n: u64| t0 + Duration::from_secs(n);
    clock.idle(true, t0);
    assert_eq!(clock.deadline(), Some(s(15)));
    assert_eq!(clock.poll(s(14)), None, "silence handling is off");
    assert_eq!(clock.poll(s(15)), Some(Due::Warn("We're almost out of time on this call.".into())));
    assert_eq!(clock.poll(s(16)), None, "one warning");
    assert_eq!(clock.deadline(), Some(s(20)));
    assert!(matches!(clock.poll(s(20)), Some(Due::Goodbye(_, EndReason::MaxDuration))));
    clock.reply_started();
    clock.reply_ended(s(22));
    let Some(Due::End(EndReason::MaxDuration, reason)) = clock.poll(s(22)) else { panic!("the end") };
    assert!(reason.contains("20 s"), "{reason}");
}

fn twenty_seconds_warned_at_fifteen() -> ClockSettings {
    let mut tt = TurnTaking::default();
    tt.max_call.seconds = 20;
    tt.max_call.warning_seconds = 5;
    tt.silence.after_seconds = 0;
    ClockSettings::from(&tt)
}

#[test]
fn a_call_handed_over_keeps_its_clock_and_is_not_warned_twice() {
    let t0 = Instant::now();
    let s = |n: u64| t0 + Duration::from_secs(n);
    // Eight seconds into the call: the warning at 15 s and the end at 20 s are 7 and 12 s away.
    let mut clock = CallClock::going_on(twenty_seconds_warned_at_fifteen(), t0, Duration::from_secs(8));
    assert_eq!(clock.deadline(), Some(s(7)));
    assert_eq!(clock.poll(s(7)), Some(Due::Warn("We're almost out of time on this call.".into())));
    assert_eq!(clock.deadline(), Some(s(12)));
    assert!(matches!(clock.poll(s(12)), Some(Due::Goodbye(_, EndReason::MaxDuration))));
    // Sixteen seconds in: the session before warned; the end is 4 s away.
    let mut late = CallClock::going_on(twenty_seconds_warned_at_fifteen(), t0, Duration::from_secs(16));
    assert_eq!(late.deadline(), Some(s(4)));
    assert_eq!(late.poll(s(3)), None, "no second warning");
    assert!(matches!(late.poll(s(4)), Some(Due::Goodbye(_, EndReason::MaxDuration))));
    // Past its limit already: the goodbye at once.
    let mut over = CallClock::going_on(twenty_seconds_warned_at_fifteen(), t0, Duration::from_secs(25));
    assert!(matches!(over.poll(t0), Some(Due::Goodbye(_, EndReason::MaxDuration))));
}

#[test]
fn the_re_prompts_start_afresh_after_a_handoff() {
    let t0 = Instant::now();
    let s = |n: u64| t0 + Duration::from_secs(n);
    let mut clock = CallClock::going_on(settings(), t0, Duration::from_secs(300));
    assert_eq!(clock.prompts(), 0);
    assert_eq!(clock.deadline(), Some(s(3600 - 60 - 300)), "only the warning is due before the line goes quiet");
    clock.idle(true, t0);
    assert_eq!(clock.poll(s(9)), None, "a handoff is not the caller's silence");
    assert!(matches!(clock.poll(s(10)), Some(Due::Reprompt(_))));
}

#[test]
fn a_caller_away_is_not_silent_and_the_quiet_counts_afresh_once_they_are_back() {
    let t0 = Instant::now();
    let s = |n: u64| t0 + Duration::from_secs(n);
    let mut clock = CallClock::new(settings(), t0);
    clock.idle(true, t0);
    assert!(matches!(clock.poll(s(10)), Some(Due::Reprompt(_))));
    // The caller's audio stops coming: nothing is due however long the line stays quiet.
    clock.caller_away(true, s(12));
    assert_eq!(clock.deadline(), Some(s(3600 - 60)), "only the call's time warning is still due");
    assert_eq!(clock.poll(s(600)), None, "no re-prompt or goodbye to nobody");
    // The line changes state meanwhile (a reply finished): still not counted.
    clock.idle(false, s(601));
    clock.idle(true, s(602));
    assert_eq!(clock.poll(s(700)), None);
    // Back: a full quiet period from now, then the second re-prompt (the first stays said).
    clock.caller_away(false, s(800));
    assert_eq!(clock.deadline(), Some(s(810)));
    assert_eq!(clock.poll(s(809)), None);
    assert!(matches!(clock.poll(s(810)), Some(Due::Reprompt(_))));
    assert_eq!(clock.prompts(), 2);
    // Back while the agent speaks: the quiet counts once the line is quiet.
    clock.caller_away(true, s(811));
    clock.idle(false, s(812));
    clock.caller_away(false, s(813));
    assert_eq!(clock.poll(s(900)), None, "the line is not quiet");
    clock.idle(true, s(901));
    assert!(matches!(clock.poll(s(911)), Some(Due::Goodbye(_, EndReason::Silence))));
}

#[test]
fn a_protected_line_is_uninterruptible_until_its_audio_ends() {
    let now = Instant::now();
    let mut speaker = Speaker::default();
    assert_eq!(speaker.agent(now), Agent::Quiet);
    speaker.reply_started();
    assert_eq!(speaker.agent(now), Agent::Speaking);
    speaker.reply_ended();
    speaker.protect(now);
    assert_eq!(speaker.agent(now), Agent::Uninterruptible, "from the moment it is asked for");
    speaker.reply_started();
    assert_eq!(speaker.agent(now + PROTECT_PATIENCE * 2), Agent::Uninterruptible, "however long it is");
    speaker.reply_ended();
    assert_eq!(speaker.agent(now), Agent::Quiet);
    assert!(!speaker.protected());
    // A line the model never says does not shut the caller out.
    speaker.protect(now);
    assert_eq!(speaker.agent(now + PROTECT_PATIENCE), Agent::Quiet);
    // Nor does one that started and never ended, once it is abandoned.
    speaker.protect(now);
    speaker.reply_started();
    speaker.unprotect();
    assert_eq!(speaker.agent(now), Agent::Speaking, "an interruptible reply from now on");
    speaker.reply_ended();
    assert_eq!(speaker.agent(now), Agent::Quiet);
}
