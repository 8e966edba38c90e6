//! A voice call through the gateway: triage (hybrid, asked for audio) on one pod hands the
//! caller to idv (voice) on another, which verifies them by voice with its tool, then to
//! banking (text-only): one client socket, audio both ways until banking, each agent's own
//! Nova Sonic stream opened by its own pod — and each agent speaks in its own Persona's
//! voice (the simulator speaks each voice id at its own pitch).

use switchboard_core::HandoffKind;
use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::Script;

use crate::fleet::Fleet;
use switchboard_sim::sonic::voice_frequency;

use crate::voice_common::{self as common, Call, Encoding, audio_bytes, audio_pitch, finals, is_final_reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_call_moves_across_pods_with_audio_until_the_text_only_agent() {
    let script = Script::parse(&common::script("", "")).expect("the voice script");
    let fleet = Fleet::with_script(&[], Auth::default(), GatewayConfig::default(), Store::default(), script).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    assert!(
        matches!(&hello[0], ServerMessage::BidiConnectionStart { agent, mode, resume_token: Some(_), .. }
            if agent == "triage" && mode == "hybrid"),
        "{hello:?}"
    );

    call.say(common::BALANCE_REQUEST, 700);
    let to_idv = call.until(|m| is_final_reply(m, "To verify your identity")).await;
    assert_eq!(finals(&to_idv, TranscriptRole::User).first().map(String::as_str), Some("I'd like to check my balance"));
    assert!(
        to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { from, to, kind: HandoffKind::Transfer, .. } if from == "triage" && to == "idv")),
        "{to_idv:?}"
    );
    let idv_start = to_idv
        .iter()
        .position(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, mode, .. } if agent == "idv" && mode == "voice"))
        .expect("idv's pod takes over, as a voice session");
    assert!(audio_bytes(&to_idv[..idv_start]) > 0, "triage spoke");
    assert!(audio_bytes(&to_idv[idv_start..]) > 0, "idv spoke, from its own pod");
    // Each in its own voice: triage's Persona is Ava (tiffany), idv's is Max (matthew).
    let (ava, max) = (voice_frequency(Some("tiffany")), voice_frequency(Some("matthew")));
    assert!((ava - max).abs() > 20.0, "the two voices sound different: {ava:.1} Hz, {max:.1} Hz");
    let (before, after) = (audio_pitch(&to_idv[..idv_start]), audio_pitch(&to_idv[idv_start..]));
    assert!((before - ava).abs() < 3.0, "triage's handoff line in Ava's voice: {before:.1} Hz, not {ava:.1} Hz");
    assert!((after - max).abs() < 3.0, "idv's line in Max's voice: {after:.1} Hz, not {max:.1} Hz");
    // idv's line is its own: its transcript comes after its audio, from idv's session.
    let idv_line = finals(&to_idv[idv_start..], TranscriptRole::Assistant);
    assert_eq!(idv_line.len(), 1, "{:#?}", common::summary(&to_idv[idv_start..]));
    assert!(idv_line[0].starts_with("To verify your identity"), "{idv_line:?}");
    let voices: Vec<Option<String>> = fleet.sim.sonic_stats().voices.into_iter().map(|(_, voice)| voice).collect();
    assert_eq!(voices, [Some("tiffany".to_owned()), Some("matthew".to_owned())], "each pod opened its agent's voice");

    call.say(common::IDV_DETAILS, 900);
    let verified = call.until(|m| is_final_reply(m, "you're verified")).await;
    let check = verified.iter().find_map(|m| match m {
        ServerMessage::ToolComplete { name, result, .. } if name == "perform_idv_check" => Some(result.clone()),
        _ => None,
    });
    assert_eq!(check.expect("the identity check ran mid-stream")["verified"], true);
    assert!(verified.iter().any(|m| matches!(m, ServerMessage::MemoryUpdate { key, .. } if key == "verifiedUser")));

    call.say(common::MY_BALANCE, 700);
    let balance = call.until(|m| is_final_reply(m, "1234.56")).await;
    assert!(
        balance.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")),
        "banking's pod took over: {balance:?}"
    );
    assert!(
        balance.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "unsupported_modality")),
        "banking is text-only and says so: {balance:?}"
    );
    // Audio streamed from the first frame on, and through each move, is never refused as
    // if it were sent to a text session.
    assert!(
        !call.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "unsupported_frame")),
        "{:?}",
        common::summary(&call.seen)
    );
    let metrics = fleet.gateway.metrics.render();
    for needle in [
        r#"switchboard_gateway_handoffs_total{from="bank/triage",to="bank/idv"} 1"#,
        r#"switchboard_gateway_handoffs_total{from="bank/idv",to="bank/banking"} 1"#,
    ] {
        assert!(metrics.contains(needle), "{needle} in\n{metrics}");
    }
}
