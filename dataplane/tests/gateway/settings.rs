//! `session_update` through the gateway: what a runtime applied (`bidi_session_updated`)
//! holds for the rest of the session. A caller who picks another voice at triage keeps it
//! after the handoff: idv's pod opens its own Nova Sonic stream in that voice, not its
//! Persona's.

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionUpdate};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::Script;
use switchboard_sim::sonic::voice_frequency;

use crate::fleet::Fleet;
use crate::voice_common::{self as common, Call, Encoding, audio_pitch, is_final_reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_the_caller_chose_mid_session_holds_after_the_handoff() {
    let script = Script::parse(&common::script("", "")).expect("the voice script");
    let fleet = Fleet::with_script(&[], Auth::default(), GatewayConfig::default(), Store::default(), script).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.send(&ClientMessage::SessionUpdate(SessionUpdate { voice: Some("amy".into()), ..SessionUpdate::default() }));
    call.until(|m| matches!(m, ServerMessage::BidiSessionUpdated { voice: Some(v), .. } if v == "amy")).await;

    call.say(common::BALANCE_REQUEST, 700);
    let to_idv = call.until(|m| is_final_reply(m, "To verify your identity")).await;
    let idv_start = to_idv
        .iter()
        .position(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv"))
        .expect("idv's pod takes over");
    let (amy, max) = (voice_frequency(Some("amy")), voice_frequency(Some("matthew")));
    assert!((amy - max).abs() > 20.0, "the two voices sound different: {amy:.1} Hz, {max:.1} Hz");
    let heard = audio_pitch(&to_idv[idv_start..]);
    assert!((heard - amy).abs() < 3.0, "idv speaks in the caller's choice: {heard:.1} Hz, not {amy:.1} Hz");
    let voices: Vec<Option<String>> = fleet.sim.sonic_stats().voices.into_iter().map(|(_, voice)| voice).collect();
    assert_eq!(voices.last(), Some(&Some("amy".to_owned())), "idv's pod opened its stream in amy: {voices:?}");
    call.hang_up().await;
}
