//! The Example Bank call by voice: triage (hybrid, asked for audio) hands over to identity
//! verification (voice, another Persona voice), which checks the caller with its HTTP
//! tool mid-stream and remembers them, then hands over to banking (hybrid), which answers
//! the caller by voice too, in its own Persona's voice, with its balance tool; a caller who
//! wants to dispute a payment hears disputes (hybrid) in its own voice. Plus barge-in, and
//! typed and spoken turns in one hybrid session.

use switchboard_core::HandoffKind;
use switchboard_core::protocol::{ClientMessage, ServerMessage, TranscriptRole};

use switchboard_sim::sonic::voice_frequency;

use crate::common::{self, Call, Encoding, audio_bytes, audio_pitch, finals, is_final_reply, metric_sum, summary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_banking_call_verifies_the_caller_mid_stream_and_hands_over() {
    let running = common::banking(&common::script("", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    let hello = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    assert!(
        matches!(&hello[0], ServerMessage::BidiConnectionStart { agent, mode, model, .. }
            if agent == "triage" && mode == "hybrid" && model == "amazon.nova-2-sonic-v1:0"),
        "{hello:?}"
    );

    // "I'd like to check my balance": triage answers by voice and transfers to idv, whose
    // Persona speaks with another voice; idv answers the carried request by voice.
    call.say(common::BALANCE_REQUEST, 700);
    let to_idv = call.until(|m| is_final_reply(m, "To verify your identity")).await;
    assert_eq!(finals(&to_idv, TranscriptRole::User).first().map(String::as_str), Some("I'd like to check my balance"));
    assert!(
        to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { from, to, kind: HandoffKind::Transfer, .. } if from == "triage" && to == "idv")),
        "{:#?}",
        summary(&to_idv)
    );
    // The gateway opened the session on idv, whose stream speaks with its Persona's voice
    // (tiffany -> matthew: the simulator's stats below).
    assert!(
        to_idv.iter().any(
            |m| matches!(m, ServerMessage::BidiConnectionStart { agent, mode, .. } if agent == "idv" && mode == "voice")
        ),
        "{:#?}",
        summary(&to_idv)
    );
    assert!(
        to_idv.iter().any(|m| matches!(
            m,
            ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, delta: true, is_final: false, .. }
        )),
        "SPECULATIVE text arrives as deltas"
    );
    let start_of_idv =
        to_idv.iter().position(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv"));
    let start_of_idv = start_of_idv.expect("idv takes over");
    assert!(audio_bytes(&to_idv[..start_of_idv]) > 0, "triage spoke");
    assert!(audio_bytes(&to_idv[start_of_idv..]) > 0, "idv spoke");

    // The details: the identity check runs mid-stream against the demo tool server, the
    // verified user is remembered, and the model goes on from the tool result.
    call.say(common::IDV_DETAILS, 900);
    let verified = call.until(|m| is_final_reply(m, "you're verified")).await;
    let tool = verified.iter().find_map(|m| match m {
        ServerMessage::ToolComplete { name, result, .. } if name == "perform_idv_check" => Some(result.clone()),
        _ => None,
    });
    assert_eq!(tool.expect("the identity check ran")["verified"], true);
    let memory = verified.iter().find_map(|m| match m {
        ServerMessage::MemoryUpdate { key, value } if key == "verifiedUser" => Some(value.clone()),
        _ => None,
    });
    assert_eq!(memory.expect("the verified user is remembered")["accountNumber"], "12345678");
    assert!(finals(&verified, TranscriptRole::Assistant).iter().any(|t| t.starts_with("Thanks Ada Lovelace")));
    assert!(audio_bytes(&verified) > 0);
    let usage: Vec<_> = verified
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiUsage { modality: Some(tokens), .. } => Some(*tokens),
            _ => None,
        })
        .collect();
    assert!(usage.iter().any(|u| u.input_speech > 0), "speech in: {usage:?}");
    assert!(usage.iter().any(|u| u.output_speech > 0 && u.output_text > 0), "speech and text out: {usage:?}");

    // "My balance please": the workflow now allows the transfer to banking, a hybrid agent:
    // the session has audio, so banking answers by voice (its own Nova Sonic stream, in its
    // Persona's voice, amy) with its balance tool, and takes the caller's audio.
    call.say(common::MY_BALANCE, 600);
    let balance = call.until(|m| is_final_reply(m, "1234.56")).await;
    assert!(
        balance.iter().any(|m| matches!(m, ServerMessage::Handoff { to, context, .. } if to == "banking" && context.verified_user.is_some())),
        "{:#?}",
        summary(&balance)
    );
    let banking_start = balance
        .iter()
        .position(|m| {
            matches!(m, ServerMessage::BidiConnectionStart { agent, mode, model, .. }
            if agent == "banking" && mode == "hybrid" && model == "amazon.nova-2-sonic-v1:0")
        })
        .expect("banking takes over, on Nova Sonic");
    let banking_said = &balance[banking_start..];
    assert!(audio_bytes(banking_said) > 0, "banking spoke: {:#?}", summary(banking_said));
    let (amy, heard) = (voice_frequency(Some("amy")), audio_pitch(banking_said));
    assert!((heard - amy).abs() < 3.0, "banking in Amy's voice: {heard:.1} Hz, not {amy:.1} Hz");
    assert!(
        banking_said.iter().any(|m| matches!(m, ServerMessage::ToolComplete { name, .. } if name == "check_balance")),
        "{:#?}",
        summary(banking_said)
    );
    assert!(
        !call.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "unsupported_modality")),
        "no agent of the call refused its audio: {:#?}",
        summary(&call.seen)
    );
    let sent = call.hang_up().await;
    assert!(sent.len() > 50);

    let stats = running.sim.sonic_stats();
    assert_eq!(
        stats.voices.iter().map(|(_, v)| v.clone().unwrap_or_default()).collect::<Vec<_>>(),
        vec!["tiffany", "matthew", "amy"]
    );
    assert_eq!(stats.tool_results, 2, "idv's identity check and banking's balance, both over Nova Sonic");
    let text = common::metrics(running.addr).await;
    assert!(metric_sum(&text, "switchboard_time_to_first_audio_seconds_count", &[("agent", "idv")]) >= 1.0, "{text}");
    assert!(metric_sum(&text, "switchboard_tokens_total", &[("agent", "idv"), ("modality", "speech")]) > 0.0);
    assert!(metric_sum(&text, "switchboard_gateway_handoffs_total", &[("from", "default/triage")]) >= 1.0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speaking_over_the_agent_interrupts_it_at_once() {
    let running = common::banking(&common::script("", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.say(common::STORY, 600);
    call.until(|m| matches!(m, ServerMessage::BidiAudioStream { .. })).await;
    call.say(common::STOP, 500);
    let cut = call.until(|m| matches!(m, ServerMessage::BidiInterruption {})).await;
    let after = call.until(|m| is_final_reply(m, "Sure.")).await;
    call.hang_up().await;
    let story = "Once upon a time";
    assert!(!finals(&cut, TranscriptRole::Assistant).iter().any(|t| t.starts_with(story)), "the story was cut");
    assert!(!finals(&after, TranscriptRole::Assistant).iter().any(|t| t.starts_with(story)));
    assert!(finals(&after, TranscriptRole::User).iter().any(|t| t == "Stop"));
    assert!(
        cut.iter().chain(&after).any(
            |m| matches!(m, ServerMessage::BidiResponseComplete { stop_reason, .. } if stop_reason == "interrupted")
        ),
        "the interrupted turn is completed as interrupted: {:#?}",
        summary(&after)
    );
    assert_eq!(running.sim.sonic_stats().interruptions, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hybrid_session_takes_typed_and_spoken_turns_in_one_stream() {
    let running = common::banking(&common::script("", "")).await;
    let mut call = Call::start(&running.url(), "triage", &["audio", "text"], Encoding::Json).await;
    call.send(&ClientMessage::BidiTextInput { text: "What are your opening hours?".into(), id: None });
    let typed = call.until(|m| is_final_reply(m, "nine to five")).await;
    assert_eq!(finals(&typed, TranscriptRole::User), vec!["What are your opening hours?".to_owned()]);
    assert!(audio_bytes(&typed) > 0, "typed turns are answered with audio too");
    call.say(common::STORY, 600);
    let spoken = call.until(|m| is_final_reply(m, "Once upon a time")).await;
    assert_eq!(finals(&spoken, TranscriptRole::User), vec!["Tell me a story".to_owned()]);
    call.hang_up().await;
    let stats = running.sim.sonic_stats();
    assert_eq!(stats.streams, 1, "one stream carried both turns");
    assert_eq!(stats.typed, vec!["What are your opening hours?".to_owned()]);
}

/// A voice the agent's model does not have is refused with a recoverable `invalid_voice`
/// error, and the Persona's voice speaks; a voice it has is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requested_voice_is_checked_against_the_model() {
    let running = common::banking(&common::script("", "")).await;
    let mut call =
        Call::start_with_voice(&running.url(), "triage", &["audio"], Encoding::Binary, Some("hal9000")).await;
    let opened = call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::HOURS, 600);
    let answered = call.until(|m| is_final_reply(m, "nine to five")).await;
    let all: Vec<_> = opened.iter().chain(answered.iter()).collect();
    assert!(
        all.iter().any(|m| matches!(m, ServerMessage::BidiError { code, recoverable: true, message, .. }
            if code == "invalid_voice" && message.contains("hal9000") && message.contains("its voices are"))),
        "{all:?}"
    );
    assert!(audio_bytes(&answered) > 0, "the Persona's voice speaks");
    call.hang_up().await;
    let mut chosen =
        Call::start_with_voice(&running.url(), "triage", &["audio"], Encoding::Binary, Some("matthew")).await;
    let opened = chosen.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    chosen.say(common::HOURS, 600);
    let answered = chosen.until(|m| is_final_reply(m, "nine to five")).await;
    assert!(!opened.iter().chain(answered.iter()).any(|m| matches!(m, ServerMessage::BidiError { .. })));
    chosen.hang_up().await;
    let voices: Vec<Option<String>> = running.sim.sonic_stats().voices.into_iter().map(|(_, v)| v).collect();
    let persona = voices.first().cloned().flatten().expect("a voice");
    assert_ne!(persona, "hal9000", "the unknown voice never reached the model");
    assert_eq!(voices.last().cloned().flatten().as_deref(), Some("matthew"), "{voices:?}");
}

/// A verified voice caller who wants to dispute a payment is handed from idv to disputes
/// (hybrid), which answers by voice in its own Persona's voice (olivia) with its
/// transactions tool, rather than going quiet as a text-only agent would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_caller_handed_to_disputes_hears_it_in_its_own_voice() {
    const DISPUTE: u32 = 7;
    let phrases = "    6: \"What are your opening hours?\"\n";
    let script = common::script("", "");
    assert!(script.contains(phrases), "the voice script's phrases");
    let script = script.replacen(phrases, &format!("{phrases}    {DISPUTE}: \"I want to dispute a payment\"\n"), 1);
    let running = common::banking(&script).await;
    let mut call = Call::start(&running.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.say(common::BALANCE_REQUEST, 700);
    call.until(|m| is_final_reply(m, "To verify your identity")).await;
    call.say(common::IDV_DETAILS, 900);
    call.until(|m| is_final_reply(m, "you're verified")).await;

    call.say(DISPUTE, 800);
    let disputes = call.until(|m| is_final_reply(m, "Is that the one you want to dispute")).await;
    let start = disputes
        .iter()
        .position(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, mode, .. } if agent == "disputes" && mode == "hybrid"))
        .unwrap_or_else(|| panic!("disputes takes over, hybrid: {:#?}", summary(&disputes)));
    let said = &disputes[start..];
    assert!(
        said.iter().any(|m| matches!(m, ServerMessage::ToolComplete { name, .. } if name == "get_transactions")),
        "{:#?}",
        summary(said)
    );
    assert!(audio_bytes(said) > 0, "disputes spoke: {:#?}", summary(said));
    let (olivia, heard) = (voice_frequency(Some("olivia")), audio_pitch(said));
    assert!((heard - olivia).abs() < 3.0, "disputes in Olivia's voice: {heard:.1} Hz, not {olivia:.1} Hz");
    assert!(
        !call.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "unsupported_modality")),
        "{:#?}",
        summary(&call.seen)
    );
    call.hang_up().await;
    let voices: Vec<String> =
        running.sim.sonic_stats().voices.iter().map(|(_, v)| v.clone().unwrap_or_default()).collect();
    assert_eq!(voices, ["tiffany", "matthew", "olivia"]);
}
