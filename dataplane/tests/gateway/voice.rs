//! A voice call through the gateway: triage (hybrid, asked for audio) on one pod hands the
//! caller to idv (voice) on another, which verifies them by voice with its tool, then to
//! banking (hybrid) on a third, which tells the balance by voice: one client socket, audio
//! both ways throughout, each agent's own Nova Sonic stream opened by its own pod — and
//! each agent speaks in its own Persona's voice (the simulator speaks each voice id at its
//! own pitch).

use switchboard_core::HandoffKind;
use switchboard_core::protocol::{ClientMessage, ServerMessage, TranscriptRole};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::Script;

use crate::fleet::Fleet;
use switchboard_sim::sonic::voice_frequency;

use crate::voice_common::{self as common, Call, Encoding, audio_bytes, audio_pitch, finals, is_final_reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_call_moves_across_pods_heard_in_each_agent_s_own_voice() {
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
    let banking_start = balance
        .iter()
        .position(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, mode, .. } if agent == "banking" && mode == "hybrid"))
        .unwrap_or_else(|| panic!("banking's pod took over, hybrid: {:#?}", common::summary(&balance)));
    // banking (hybrid) answers the caller by voice, in its Persona's (Amy's) voice.
    let amy = voice_frequency(Some("amy"));
    assert!((amy - ava).abs() > 20.0 && (amy - max).abs() > 20.0, "three voices: {ava:.1}, {max:.1}, {amy:.1} Hz");
    assert!(audio_bytes(&balance[banking_start..]) > 0, "banking spoke, from its own pod");
    let heard = audio_pitch(&balance[banking_start..]);
    assert!((heard - amy).abs() < 3.0, "banking's answer in Amy's voice: {heard:.1} Hz, not {amy:.1} Hz");
    let voices: Vec<Option<String>> = fleet.sim.sonic_stats().voices.into_iter().map(|(_, voice)| voice).collect();
    assert_eq!(voices.last(), Some(&Some("amy".to_owned())), "banking's pod opened its agent's voice: {voices:?}");
    // Audio streamed from the first frame on, and through each move, is never refused as
    // if it were sent to a text session, nor ignored as by a text-only agent.
    assert!(
        !call
            .seen
            .iter()
            .any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "unsupported_frame" || code == "unsupported_modality")),
        "{:?}",
        common::summary(&call.seen)
    );
    // Done with banking, typed (banking is hybrid: the words go into its Nova Sonic stream):
    // back to triage, which speaks again (tests/cluster's pods test does the same on pods).
    call.send(&ClientMessage::BidiTextInput { text: "That's all, thanks".into(), id: None });
    let back = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;
    assert!(
        back.iter().any(|m| matches!(m, ServerMessage::Handoff { from, to, kind: HandoffKind::Return, .. } if from == "banking" && to == "triage")),
        "{:?}",
        common::summary(&back)
    );
    call.say(common::HOURS, 700);
    let hours = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert!(audio_bytes(&hours) > 0, "triage speaks again: {:?}", common::summary(&hours));
    let metrics = fleet.gateway.metrics.render();
    for needle in [
        r#"switchboard_gateway_handoffs_total{from="bank/triage",to="bank/idv"} 1"#,
        r#"switchboard_gateway_handoffs_total{from="bank/idv",to="bank/banking"} 1"#,
        r#"switchboard_gateway_handoffs_total{from="bank/banking",to="bank/triage"} 1"#,
    ] {
        assert!(metrics.contains(needle), "{needle} in\n{metrics}");
    }
}
