//! Turn-taking on a call (issue 42; the Persona's `turnTaking`), through the real gateway,
//! one real runtime process per agent, and the simulator — which, as Nova Sonic does, stops
//! its reply as soon as it hears speech: a backchannel shorter than `minInterruptionMs`
//! while the agent speaks does not cut its reply and a real interruption does; a greeting
//! played whole is not cut however long the caller talks over it; a silent caller is
//! re-prompted, then told goodbye and the call is ended with its reason in the record; a
//! call that reaches its time limit is warned, then ended — by the call's clock, which a
//! handoff to another agent does not restart. The timeouts are the Persona's settings,
//! short here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_crds::RuntimeSpec;
use switchboard_crds::persona::{PersonaSpec, TurnTaking};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_record::{Recorder, Store};
use switchboard_sim::Script;

use crate::fleet::Fleet;
use crate::record::{ended, recorder, session_id};
use crate::voice_common::{self as common, Call, Encoding, audio_bytes, finals, is_final_reply, metric_sum, metrics};

/// What triage says when it is asked for a story: about six seconds of speech here.
const STORY: &str = "Once upon a time there was a bank";
/// A disclosure the greeting makes, played whole.
const DISCLOSURE: &str =
    "This call is recorded for quality and training purposes, and the advice given is general information only.";

/// The voice script, speaking at `ms_per_char` (30: about as fast as a person).
pub(crate) fn script(ms_per_char: u32) -> Script {
    let yaml = common::script("", "").replace("msPerChar: 4,", &format!("msPerChar: {ms_per_char},"));
    Script::parse(&yaml).expect("the voice script")
}

/// A fleet whose triage Persona is changed by `edit` (its turn-taking from the defaults,
/// silence off), recording into `record` when given.
pub(crate) async fn fleet(ms_per_char: u32, record: Option<Arc<Recorder>>, edit: impl Fn(&mut PersonaSpec)) -> Fleet {
    let triage = move |spec: &mut RuntimeSpec| {
        if spec.agent.name == "triage" {
            let persona = &mut spec.persona.spec;
            persona.turn_taking = TurnTaking::default();
            persona.turn_taking.silence.after_seconds = 0;
            edit(persona);
        }
    };
    let (auth, config, store) = (Auth::default(), GatewayConfig::default(), ResumeStore::default());
    Fleet::edited(&[], auth, config, store, script(ms_per_char), record, triage).await
}

/// triage's runtime metrics.
pub(crate) async fn triage_metrics(fleet: &Fleet) -> String {
    let pod = fleet.pods.iter().find(|p| p.agent == "triage").expect("triage's pod");
    metrics(pod.addr).await
}

fn interruptions(text: &str, outcome: &str) -> f64 {
    metric_sum(text, "switchboard_voice_interruptions_total", &[("agent", "triage"), ("outcome", outcome)])
}

/// Waits for `what` for at most 20 s (each test stays well under the CI's 30 s).
async fn within<T>(what: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), what).await.expect("in time")
}

fn interrupted(messages: &[ServerMessage]) -> bool {
    messages.iter().any(|m| matches!(m, ServerMessage::BidiInterruption {}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backchannel_does_not_cut_the_reply_and_a_real_interruption_does() {
    let fleet = fleet(30, None, |_| {}).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;

    // "Mm-hm" (250 ms of speech, under the default 400 ms) a second into the story.
    call.say(common::STORY, 700);
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    call.say(common::HOURS, 250);
    let story = within(call.until(|m| is_final_reply(m, STORY))).await;
    assert!(!interrupted(&story), "the backchannel cut the reply: {:#?}", common::summary(&story));
    let told = finals(&story, TranscriptRole::Assistant);
    assert!(told.last().is_some_and(|t| t.ends_with("one more question about their account.")), "whole: {told:?}");
    assert!(
        !finals(&story, TranscriptRole::User).iter().any(|t| t.contains("opening hours")),
        "the model never heard the backchannel: {:#?}",
        common::summary(&story)
    );
    assert!(audio_bytes(&story) > 24_000 * 2 * 4, "about six seconds of the story were spoken");

    // "Stop" for a second: the caller means it.
    call.say(common::STORY, 700);
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    call.say(common::STOP, 1000);
    let stopped = within(call.until(|m| is_final_reply(m, "Sure."))).await;
    let cut = stopped.iter().position(|m| matches!(m, ServerMessage::BidiInterruption {}));
    let answer = stopped.iter().position(|m| is_final_reply(m, "Sure."));
    assert!(cut.is_some() && cut < answer, "interrupted, then answered: {:#?}", common::summary(&stopped));
    assert_eq!(finals(&stopped, TranscriptRole::User), ["Stop"], "the model heard the whole interruption");

    let text = triage_metrics(&fleet).await;
    assert_eq!(interruptions(&text, "ignored"), 1.0, "{text}");
    assert_eq!(interruptions(&text, "taken"), 1.0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_greeting_played_whole_is_not_cut_by_the_caller_talking_over_it() {
    let fleet = fleet(30, None, |p| {
        p.speak_first = true;
        p.greeting = Some(DISCLOSURE.into());
        p.turn_taking.uninterruptible_greeting = true;
    })
    .await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    // The caller talks over the disclosure for a second and a half.
    tokio::time::sleep(Duration::from_millis(500)).await;
    call.say(common::STOP, 1500);
    let greeted = within(call.until(|m| is_final_reply(m, "quality and training"))).await;
    assert!(!interrupted(&greeted), "the disclosure was cut: {:#?}", common::summary(&greeted));
    assert_eq!(finals(&greeted, TranscriptRole::Assistant), [DISCLOSURE], "played whole");
    assert!(audio_bytes(&greeted) > 24_000 * 2 * 2, "seconds of it were spoken");
    let text = triage_metrics(&fleet).await;
    assert_eq!(interruptions(&text, "ignored"), 1.0, "{text}");
    assert_eq!(interruptions(&text, "taken"), 0.0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_caller_is_re_prompted_then_the_call_is_ended_with_its_reason_recorded() {
    let dir = std::env::temp_dir().join(format!("switchboard-turns-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (recorder, _stop) = recorder(store.clone(), None);
    let fleet = fleet(4, Some(recorder), |p| {
        p.turn_taking.silence.after_seconds = 1;
        p.turn_taking.silence.max_prompts = 2;
    })
    .await;
    let started = Instant::now();
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let id = session_id(&hello);
    let first = within(call.until(|m| is_final_reply(m, "Are you still there?"))).await;
    assert!(audio_bytes(&first) > 0, "asked aloud");
    assert!(started.elapsed() >= Duration::from_millis(900), "not before the quiet period");
    call.until(|m| is_final_reply(m, "Are you still there?")).await;
    let goodbye = call.until(|m| is_final_reply(m, "end the call now. Goodbye.")).await;
    assert!(audio_bytes(&goodbye) > 0, "the goodbye was said");
    let (code, reason) = call.closed().await;
    assert_eq!(code, 1000);
    assert!(reason.starts_with("idle:"), "{reason}");
    let prompts = finals(&call.seen, TranscriptRole::Assistant).iter().filter(|t| t.contains("still there")).count();
    assert_eq!(prompts, 2, "{:#?}", common::summary(&call.seen));

    let record = ended(&store, &id).await;
    let end = record.events.iter().find(|e| e.kind == "session_end").expect("a session_end event");
    assert!(end.data["reason"].as_str().is_some_and(|r| r.starts_with("idle:")), "{end:?}");
    let text = triage_metrics(&fleet).await;
    let reprompts = metric_sum(&text, "switchboard_voice_reprompts_total", &[("agent", "triage")]);
    let idle = metric_sum(&text, "switchboard_voice_calls_ended_total", &[("agent", "triage"), ("reason", "idle")]);
    assert_eq!((reprompts, idle), (2.0, 1.0), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_at_its_time_limit_is_warned_then_ended() {
    let fleet = fleet(4, None, |p| {
        p.turn_taking.max_call.seconds = 10;
        p.turn_taking.max_call.warning_seconds = 4;
    })
    .await;
    let started = Instant::now();
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    // The caller is busy talking to the agent meanwhile.
    call.say(common::HOURS, 700);
    call.until(|m| is_final_reply(m, "nine to five")).await;
    let warned = within(call.until(|m| is_final_reply(m, "almost out of time"))).await;
    let at = started.elapsed();
    assert!(at >= Duration::from_millis(5500), "the warning came {at:?} into a 10 s call, 4 s before its end");
    assert!(audio_bytes(&warned) > 0, "said aloud");
    call.until(|m| is_final_reply(m, "time limit for this call")).await;
    let (code, reason) = call.closed().await;
    assert_eq!(code, 1000);
    assert!(reason.starts_with("max_duration:"), "{reason}");
    let ended_at = started.elapsed();
    assert!(ended_at >= Duration::from_millis(9500), "not before the limit: {ended_at:?}");
    let text = triage_metrics(&fleet).await;
    let ends =
        metric_sum(&text, "switchboard_voice_calls_ended_total", &[("agent", "triage"), ("reason", "max_duration")]);
    assert_eq!(ends, 1.0, "{text}");
}

/// A call handed from triage to idv keeps its clock: `maxCall` counts from the call's
/// start (the gateway carries it in each runtime session's grant), so idv warns and ends
/// the call when the call's limit comes — not a full `maxCall` after the handoff, as a
/// clock started afresh by idv's session would. The margins are wide: the handoff comes
/// ten seconds in, so a fresh clock would warn and end at least ten seconds later than the
/// call's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_handed_to_another_agent_ends_at_its_own_limit_not_a_fresh_one() {
    const LIMIT: Duration = Duration::from_secs(24);
    const WARNING: Duration = Duration::from_secs(6);
    let both = |spec: &mut RuntimeSpec| {
        if ["triage", "idv"].contains(&spec.agent.name.as_str()) {
            let turn_taking = &mut spec.persona.spec.turn_taking;
            *turn_taking = TurnTaking::default();
            turn_taking.silence.after_seconds = 0;
            turn_taking.max_call.seconds = LIMIT.as_secs() as u32;
            turn_taking.max_call.warning_seconds = WARNING.as_secs() as u32;
        }
    };
    let (auth, config, store) = (Auth::default(), GatewayConfig::default(), ResumeStore::default());
    let fleet = Fleet::edited(&[], auth, config, store, script(4), None, both).await;
    let started = Instant::now();
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(started.elapsed())).await;
    call.say(common::BALANCE_REQUEST, 700);
    let to_idv = within(call.until(|m| is_final_reply(m, "To verify your identity"))).await;
    assert!(
        to_idv.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")),
        "{:#?}",
        common::summary(&to_idv)
    );
    let handed_at = started.elapsed();
    assert!(handed_at < LIMIT - WARNING, "the handoff came before the warning was due: {handed_at:?}");

    let warned = within(call.until(|m| is_final_reply(m, "almost out of time"))).await;
    let warned_at = started.elapsed();
    assert!(audio_bytes(&warned) > 0, "said aloud, by idv");
    assert!(
        warned_at < handed_at + (LIMIT - WARNING) - Duration::from_secs(5),
        "warned {warned_at:?} into the call: by the call's clock (due at {:?}), not idv's (at {:?} or later)",
        LIMIT - WARNING,
        handed_at + (LIMIT - WARNING)
    );
    within(call.until(|m| is_final_reply(m, "time limit for this call"))).await;
    let (code, reason) = call.closed().await;
    let ended_at = started.elapsed();
    assert_eq!(code, 1000);
    assert!(reason.starts_with("max_duration:"), "{reason}");
    assert!(ended_at >= LIMIT - Duration::from_millis(500), "not before the call's limit: {ended_at:?}");
    assert!(
        ended_at < handed_at + LIMIT - Duration::from_secs(5),
        "ended {ended_at:?} into the call: at the call's limit ({LIMIT:?}), not a fresh one after the handoff (at {:?} or later)",
        handed_at + LIMIT
    );
    let pod = fleet.pods.iter().find(|p| p.agent == "idv").expect("idv's pod");
    let text = metrics(pod.addr).await;
    let ends =
        metric_sum(&text, "switchboard_voice_calls_ended_total", &[("agent", "idv"), ("reason", "max_duration")]);
    assert_eq!(ends, 1.0, "idv ended it: {text}");
}
