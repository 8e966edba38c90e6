//! Languages on a call (issue 42; the Persona's `languages`), through the real gateway, one
//! real runtime process per agent and the simulator: triage speaks English with `tiffany`
//! and Spanish with `lupe`. A caller who speaks Spanish (a phrase the simulator hears as a
//! Spanish sentence) gets Spanish for the rest of the call: the runtime switches to a new
//! Nova Sonic stream with the Spanish voice — the simulator sees the voice id change, and
//! the next reply is spoken at that voice's pitch — and a system prompt that says to speak
//! Spanish; the session's memory (and so the record) holds `language: es-US`, and the
//! runtime counts the switch. An English caller stays in English.

use std::sync::Arc;
use std::time::Duration;

use switchboard_core::protocol::ServerMessage;
use switchboard_crds::RuntimeSpec;
use switchboard_crds::persona::{Language, TurnTaking};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_record::{Recorder, Store};
use switchboard_sim::Script;
use switchboard_sim::sonic::voice_frequency;

use crate::fleet::Fleet;
use crate::record::{ended, recorder, session_id};
use crate::voice_common::{self as common, Call, Encoding, audio_pitch, is_final_reply, metric_sum, metrics};

/// The phrase the caller says in Spanish.
const SPANISH: u32 = 7;
const SPANISH_TEXT: &str = "Hola, quiero saber el saldo de mi cuenta, por favor";
/// What the caller asks next, in Spanish too.
const SPANISH_NEXT: u32 = 8;
const SPANISH_NEXT_TEXT: &str = "Y a que hora abren ustedes la oficina manana";

/// A fleet whose triage Persona also speaks Spanish with `lupe`.
async fn fleet(record: Option<Arc<Recorder>>) -> Fleet {
    let yaml = common::script("", "").replace(
        "    6: \"What are your opening hours?\"",
        &format!(
            "    6: \"What are your opening hours?\"\n    {SPANISH}: \"{SPANISH_TEXT}\"\n    {SPANISH_NEXT}: \"{SPANISH_NEXT_TEXT}\""
        ),
    );
    let script = Script::parse(&yaml).expect("the voice script");
    let triage = |spec: &mut RuntimeSpec| {
        if spec.agent.name == "triage" {
            let persona = &mut spec.persona.spec;
            persona.turn_taking = TurnTaking::default();
            persona.turn_taking.silence.after_seconds = 0;
            persona.languages = vec![Language { code: "es-US".into(), voice: "lupe".into() }];
        }
    };
    let (auth, config, store) = (Auth::default(), GatewayConfig::default(), ResumeStore::default());
    Fleet::edited(&[], auth, config, store, script, record, triage).await
}

async fn within<T>(what: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), what).await.expect("in time")
}

fn switches(text: &str, language: &str) -> f64 {
    metric_sum(text, "switchboard_voice_language_switches_total", &[("agent", "triage"), ("language", language)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spanish_speaking_caller_gets_spanish_for_the_rest_of_the_call() {
    let dir = std::env::temp_dir().join(format!("switchboard-languages-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (recorder, _stop) = recorder(store.clone(), None);
    let fleet = fleet(Some(recorder)).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let id = session_id(&hello);

    // English first: nothing changes.
    call.say(common::HOURS, 700);
    let english = within(call.until(|m| is_final_reply(m, "nine to five"))).await;
    let tiffany = voice_frequency(Some("tiffany"));
    assert!((audio_pitch(&english) - tiffany).abs() < 3.0, "tiffany speaks first: {:.1} Hz", audio_pitch(&english));

    // Spanish: the call switches at the end of this turn.
    call.say(SPANISH, 900);
    let switched = within(call.until(|m| matches!(m, ServerMessage::BidiConnectionRestart { .. }))).await;
    let memory = switched.iter().find_map(|m| match m {
        ServerMessage::MemoryUpdate { key, value } if key == "language" => Some(value.clone()),
        _ => None,
    });
    assert_eq!(memory, Some(serde_json::json!("es-US")), "the session's memory: {:#?}", common::summary(&switched));
    let restart = switched.iter().rev().find_map(|m| match m {
        ServerMessage::BidiConnectionRestart { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(restart.as_deref(), Some("voice_change"));

    // The next reply comes from the new stream, in the Spanish voice.
    call.say(SPANISH_NEXT, 900);
    let spanish = within(call.until(|m| is_final_reply(m, "abren ustedes"))).await;
    let lupe = voice_frequency(Some("lupe"));
    assert!((lupe - tiffany).abs() > 10.0, "the two voices sound different");
    let heard = audio_pitch(&spanish);
    assert!((heard - lupe).abs() < 3.0, "lupe speaks now: {heard:.1} Hz (lupe {lupe:.1}, tiffany {tiffany:.1})");

    let stats = fleet.sim.sonic_stats();
    let voices: Vec<_> = stats.voices.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(voices.first(), Some(&Some("tiffany".to_owned())), "{voices:?}");
    assert_eq!(voices.last(), Some(&Some("lupe".to_owned())), "the simulator saw the voice change: {voices:?}");
    let (stream, _) = stats.voices.last().expect("a stream");
    let prompt = stats.system_prompts.iter().find(|(s, _)| s == stream).map(|(_, p)| p.clone()).expect("its prompt");
    assert!(prompt.contains("only in Spanish (es-US)"), "{prompt}");
    let first = stats.system_prompts.front().map(|(_, p)| p.clone()).expect("the first prompt");
    assert!(!first.contains("Spanish"), "{first}");

    let text = metrics(fleet.pods.iter().find(|p| p.agent == "triage").expect("triage").addr).await;
    assert_eq!(switches(&text, "es-US"), 1.0, "{text}");
    assert_eq!(switches(&text, "en-US"), 0.0, "{text}");

    call.hang_up().await;
    let record = ended(&store, &id).await;
    let language = record.events.iter().find(|e| e.kind == "memory" && e.data["key"] == "language");
    assert!(language.is_some_and(|e| e.data["value"] == "es-US"), "the record says so: {:#?}", record.events);
}
