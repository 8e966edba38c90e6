//! A caller who went away is not a silent caller: a session whose client dropped without a
//! goodbye, and stayed away longer than the Persona's silence handling takes to end a call
//! (`turnTaking.silence`: 2 s, one re-prompt, here), resumes — it was parked, not ended as
//! idle; no re-prompt or goodbye was said to nobody (none is replayed, none is in the
//! record, none counted); and its silence clock starts afresh once the caller is back: the
//! re-prompt comes the quiet period after the resume, and the call ends as idle only after
//! it. Through the real gateway, one real runtime process per agent, and the simulator;
//! voice dropped between turns and mid-reply (the runtime finishes the turn, then the
//! session parks), and text. Also a client whose network goes quiet without closing
//! anything (no FIN, no pong): until the gateway's ping timeout notices and parks the
//! session it is still attached, and the runtime, which hears no more of its audio, does
//! not take that for the caller's silence (without that, it re-prompted nobody and ended
//! the resumable session as idle seconds before the gateway would have parked it).

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use switchboard_crds::RuntimeSpec;
use switchboard_crds::persona::TurnTaking;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_record::Store;
use tokio_tungstenite::tungstenite::Message;

use crate::fleet::Fleet;
use crate::record::{recorder, session_id};
use crate::resume::{position, resume_start};
use crate::turn_taking::{script, triage_metrics};
use crate::voice_common::{self as common, Call, Encoding, audio_bytes, finals, is_final_reply, metric_sum};

/// The quiet period before the re-prompt.
const QUIET: Duration = Duration::from_secs(2);
/// The re-prompt, and the goodbye after it (the defaults' lines).
const PROMPT: &str = "Are you still there?";
const GOODBYE: &str = "end the call now. Goodbye.";
/// How long the caller stays away: past a quiet period, its one re-prompt, another quiet
/// period and the goodbye (about 4.5 s at the simulator's speed) with a wide margin, and
/// well inside the gateway's 30 s resume window.
const AWAY: Duration = Duration::from_secs(10);

/// A fleet whose triage re-prompts a silent caller once after [`QUIET`], then ends the
/// call; keeping the record in a file store (returned).
async fn silence_fleet() -> (Fleet, Store, tokio_util::sync::CancellationToken) {
    silence_fleet_with(QUIET, GatewayConfig::default()).await
}

/// [`silence_fleet`] re-prompting after `quiet`, its gateway configured by `config`.
async fn silence_fleet_with(
    quiet: Duration,
    config: GatewayConfig,
) -> (Fleet, Store, tokio_util::sync::CancellationToken) {
    let dir = std::env::temp_dir().join(format!("switchboard-silence-resume-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (recorder, stop) = recorder(store.clone(), None);
    let triage = move |spec: &mut RuntimeSpec| {
        if spec.agent.name == "triage" {
            let turn_taking = &mut spec.persona.spec.turn_taking;
            *turn_taking = TurnTaking::default();
            turn_taking.silence.after_seconds = quiet.as_secs() as u32;
            turn_taking.silence.max_prompts = 1;
        }
    };
    let fleet =
        Fleet::edited(&[], Auth::default(), config, ResumeStore::default(), script(4), Some(recorder), triage).await;
    (fleet, store, stop)
}

/// (re-prompts, calls ended as idle) by triage's runtime.
async fn silence_counts(fleet: &Fleet) -> (f64, f64) {
    let text = triage_metrics(fleet).await;
    let reprompts = metric_sum(&text, "switchboard_voice_reprompts_total", &[("agent", "triage")]);
    let idle = metric_sum(&text, "switchboard_voice_calls_ended_total", &[("agent", "triage"), ("reason", "idle")]);
    (reprompts, idle)
}

fn is_silence_line(m: &ServerMessage) -> bool {
    is_final_reply(m, PROMPT) || is_final_reply(m, GOODBYE)
}

/// The caller is away for [`AWAY`]: the session waits parked, nothing said, nothing ended.
async fn away(fleet: &Fleet) {
    tokio::time::sleep(AWAY).await;
    parked_and_unsaid(fleet).await;
}

/// The session waits parked; nothing was said to nobody, nothing ended.
async fn parked_and_unsaid(fleet: &Fleet) {
    assert_eq!(silence_counts(fleet).await, (0.0, 0.0), "no re-prompt and no idle end while the caller was away");
    let gateway = fleet.gateway.metrics.render();
    let parked = r#"switchboard_gateway_sessions_parked_total{agent="bank/triage"} 1"#;
    assert!(gateway.contains(parked), "{parked} in\n{gateway}");
}

/// The resumed call, back at `resumed_at` and silent since: re-prompted once a quiet period
/// later (not at once: the clock started afresh), told goodbye, ended as idle — by one
/// re-prompt after the resume, none before it — with the record saying so.
async fn re_prompted_afresh(call: Call, resumed_at: Instant, fleet: &Fleet, store: &Store, id: &str) {
    re_prompted_after(call, resumed_at, QUIET, fleet, store, id).await;
}

/// [`re_prompted_afresh`] for a Persona that re-prompts after `quiet`.
async fn re_prompted_after(
    mut call: Call,
    resumed_at: Instant,
    quiet: Duration,
    fleet: &Fleet,
    store: &Store,
    id: &str,
) {
    let prompt = tokio::time::timeout(Duration::from_secs(20), call.until(|m| is_final_reply(m, PROMPT)))
        .await
        .expect("re-prompted in time");
    let at = resumed_at.elapsed();
    assert!(at >= quiet - Duration::from_millis(500), "re-prompted {at:?} after the resume: the clock ran on");
    assert!(at < quiet + Duration::from_secs(8), "re-prompted {at:?} after the resume");
    assert!(audio_bytes(&prompt) > 0, "asked aloud");
    call.until(|m| is_final_reply(m, GOODBYE)).await;
    let (code, reason) = call.closed().await;
    assert_eq!(code, 1000);
    assert!(reason.starts_with("idle:"), "{reason}");
    assert_eq!(silence_counts(fleet).await, (1.0, 1.0), "one re-prompt, after the resume, then the idle end");

    // The record: one session, parked then resumed, one re-prompt — said after the resume.
    let record = ended_as_idle(store, id).await;
    let kinds: Vec<&str> = record.events.iter().map(|e| e.kind.as_str()).collect();
    let parked = record
        .events
        .iter()
        .position(|e| e.kind == "session_end" && e.data["reason"].is_null())
        .unwrap_or_else(|| panic!("the park is in the record: {kinds:?}"));
    let prompts: Vec<usize> = (record.events.iter().enumerate())
        .filter(|(_, e)| e.data.to_string().contains(PROMPT))
        .map(|(i, _)| i)
        .collect();
    assert!(!prompts.is_empty(), "the re-prompt is in the record: {kinds:?}");
    assert!(prompts.iter().all(|i| *i > parked), "no re-prompt before the park: {prompts:?} vs {parked} in {kinds:?}");
}

/// The record of session `id` once it holds its idle end.
async fn ended_as_idle(store: &Store, id: &str) -> switchboard_record::store::SessionRecord {
    for _ in 0..200 {
        if let Ok(Some(record)) = store.show(id).await
            && record
                .events
                .iter()
                .any(|e| e.kind == "session_end" && e.data["reason"].as_str().is_some_and(|r| r.starts_with("idle:")))
        {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("session {id} was not recorded as ended idle within 20 s: {:?}", store.show(id).await);
}

/// Resumes `before`'s session: the messages up to the resumed start (what was missed
/// first), which hold no re-prompt or goodbye, and the call.
async fn resume(fleet: &Fleet, before: &[ServerMessage]) -> (Call, Instant, Vec<ServerMessage>) {
    let (token, last_seq) = position(before);
    let mut call = Call::resume(&fleet.url, &token, last_seq, Encoding::Binary).await;
    let missed = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let resumed_at = Instant::now();
    assert!(!missed.iter().any(is_silence_line), "nothing was said to nobody: {:#?}", common::summary(&missed));
    (call, resumed_at, missed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_caller_away_between_turns_longer_than_the_silence_handling_resumes_and_is_re_prompted_afresh() {
    let (fleet, store, _stop) = silence_fleet().await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let id = session_id(&hello);
    call.say(common::HOURS, 700);
    call.until(|m| is_final_reply(m, "nine to five")).await;
    // The answer is over; the line is about to go quiet: the client drops.
    let before = call.seen.clone();
    call.vanish().await;
    away(&fleet).await;

    let (call, resumed_at, _) = resume(&fleet, &before).await;
    re_prompted_afresh(call, resumed_at, &fleet, &store, &id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_caller_away_mid_reply_longer_than_the_silence_handling_resumes_and_is_re_prompted_afresh() {
    let (fleet, store, _stop) = silence_fleet().await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let id = session_id(&hello);
    call.say(common::STORY, 600);
    // The agent starts its reply; the client drops two chunks into it. The runtime finishes
    // the turn (the park grace), then the session parks.
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    let before = call.seen.clone();
    assert!(!before.iter().any(|m| is_final_reply(m, "Once upon a time")), "dropped mid-reply");
    call.vanish().await;
    away(&fleet).await;

    let (call, resumed_at, missed) = resume(&fleet, &before).await;
    let told = finals(&missed, TranscriptRole::Assistant);
    assert!(
        told.iter().any(|t| t.starts_with("Once upon a time")),
        "the rest of the reply is replayed: {:#?}",
        common::summary(&missed)
    );
    re_prompted_afresh(call, resumed_at, &fleet, &store, &id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_caller_away_longer_than_the_silence_handling_resumes_and_goes_on() {
    let (fleet, _store, _stop) = silence_fleet().await;
    let mut client = crate::client::Client::start(&fleet.url, Some("triage")).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    client.say("What are your opening hours?").await;
    let hours = client.turn().await;
    assert!(crate::client::replies(&hours).iter().any(|r| r.contains("nine to five")), "{hours:?}");
    let (token, last_seq) = position(&client.seen);
    drop(client);
    tokio::time::sleep(AWAY).await;

    let mut back = crate::client::Client::connect(&fleet.url).await;
    back.send(&resume_start(&token, last_seq)).await;
    let missed = back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    assert!(!missed.iter().any(is_silence_line), "{missed:?}");
    // Quiet for two quiet periods: nothing is said, the session stays.
    let deadline = Instant::now() + QUIET * 2 + Duration::from_secs(1);
    while let Some(next) = back.next_within(deadline.saturating_duration_since(Instant::now())).await {
        match next {
            Some(Ok(message)) => assert!(!is_silence_line(&message), "{message:?}"),
            other => panic!("the session ended while the caller was back and quiet: {other:?}"),
        }
    }
    back.say("What are your opening hours?").await;
    let again = back.turn().await;
    assert!(crate::client::replies(&again).iter().any(|r| r.contains("nine to five")), "{again:?}");
    assert_eq!(silence_counts(&fleet).await, (0.0, 0.0));
}

/// A voice client whose network goes quiet: no close, no FIN, no pong — it stops sending
/// (its audio too) and reading. The gateway notices at its ping timeout (8 s here) and parks
/// the session; until then the session is attached, and the runtime hears no audio from
/// the caller for longer than its silence handling takes (a 3 s quiet period, one
/// re-prompt, the goodbye: about 7 s). The caller comes back (a new connection, resuming)
/// after 14 s: the session resumes — nothing was said to nobody, nothing ended — and its
/// silence clock starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_client_whose_network_goes_quiet_is_not_ended_as_silent_before_the_gateway_parks_it() {
    const QUIET_HERE: Duration = Duration::from_secs(3);
    let config = GatewayConfig {
        ping_interval: Duration::from_secs(1),
        ping_timeout: Duration::from_secs(8),
        ..GatewayConfig::default()
    };
    let (fleet, store, _stop) = silence_fleet_with(QUIET_HERE, config).await;
    let (mut ws, _) = tokio_tungstenite::connect_async(fleet.url.as_str()).await.expect("websocket connects");
    let start =
        SessionStart { agent: Some("triage".into()), modalities: vec!["audio".into()], ..SessionStart::default() };
    let start = serde_json::to_string(&ClientMessage::SessionStart(start)).expect("json");
    ws.send(Message::text(start)).await.expect("sends");
    let mut before = Vec::new();
    while !before.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })) {
        match tokio::time::timeout(common::PATIENCE, ws.next()).await.expect("the session starts in time") {
            Some(Ok(Message::Text(text))) => before.push(serde_json::from_str(text.as_str()).expect("protocol JSON")),
            Some(Ok(_)) => {}
            other => panic!("the session did not start: {other:?}"),
        }
    }
    let started = Instant::now();
    let id = session_id(&before);
    // Half a second of the microphone (a quiet caller), then the network goes.
    for _ in 0..25 {
        ws.send(Message::binary(vec![0u8; common::FRAME_BYTES])).await.expect("sends audio");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gone = Instant::now();
    assert!(gone - started < QUIET_HERE - Duration::from_secs(1), "gone well before a re-prompt was due");
    tokio::time::sleep(Duration::from_secs(14)).await;
    parked_and_unsaid(&fleet).await;
    drop(ws);

    let (call, resumed_at, missed) = resume(&fleet, &before).await;
    assert!(!missed.iter().any(is_silence_line), "{:#?}", common::summary(&missed));
    re_prompted_after(call, resumed_at, QUIET_HERE, &fleet, &store, &id).await;
}
