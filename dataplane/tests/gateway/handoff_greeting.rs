//! After a transfer the receiving agent speaks first (issue 26): idv's Persona is given
//! `speakFirst: true` and a greeting, and a caller triage transfers to it hears that
//! greeting — spoken by idv's own pod, in idv's voice (Max), transcribed — and then idv's
//! answer to the request they brought; in text the greeting is idv's first line. Through
//! the real gateway, one real runtime process per agent, the simulator.

use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_crds::RuntimeSpec;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::Script;
use switchboard_sim::sonic::voice_frequency;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::voice_common::{self as common, Call, Encoding, audio_bytes, audio_pitch, finals, is_final_reply};

const IDV_GREETING: &str = "Hi, this is Max from Example Bank's security team.";

/// idv greets the callers transferred to it.
fn idv_speaks_first(spec: &mut RuntimeSpec) {
    if spec.agent.name == "idv" {
        spec.persona.spec.speak_first = true;
        spec.persona.spec.greeting = Some(IDV_GREETING.to_owned());
    }
}

async fn fleet(script: Script) -> Fleet {
    let (auth, config, store) = (Auth::default(), GatewayConfig::default(), Store::default());
    Fleet::edited(&[], auth, config, store, script, None, idv_speaks_first).await
}

fn position(messages: &[ServerMessage], pred: impl Fn(&ServerMessage) -> bool) -> usize {
    messages.iter().position(pred).unwrap_or_else(|| panic!("not found in {:#?}", common::summary(messages)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_transferred_by_voice_hears_the_agents_greeting_in_its_voice_then_its_answer() {
    let fleet = fleet(Script::parse(&common::script("", "")).expect("the voice script")).await;
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "triage")).await;

    call.say(common::BALANCE_REQUEST, 700);
    let to_idv = call.until(|m| is_final_reply(m, "To verify your identity")).await;
    let idv_start =
        position(&to_idv, |m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv"));
    let idv = &to_idv[idv_start..];
    // idv's lines, in order: its greeting, then its answer to the carried request.
    let lines = finals(idv, TranscriptRole::Assistant);
    assert_eq!(lines.len(), 2, "{:#?}", common::summary(idv));
    assert_eq!(lines[0], IDV_GREETING, "the greeting comes first, with the words the model said");
    assert!(lines[1].starts_with("To verify your identity"), "{lines:?}");
    assert!(finals(idv, TranscriptRole::User).is_empty(), "no instruction shown as the caller's: {idv:?}");
    // Each line was spoken before it was shown, and the answer's audio after the greeting's line.
    let greeted = position(idv, |m| is_final_reply(m, IDV_GREETING));
    let (greeting, answer) = (&idv[..greeted], &idv[greeted..]);
    assert!(audio_bytes(greeting) > 0, "the greeting was spoken");
    assert!(audio_bytes(answer) > 0, "the answer was spoken after the greeting");
    // Both in idv's voice (Max: matthew), not triage's (Ava: tiffany).
    let (ava, max) = (voice_frequency(Some("tiffany")), voice_frequency(Some("matthew")));
    assert!((ava - max).abs() > 20.0, "the two voices sound different: {ava:.1} Hz, {max:.1} Hz");
    for (what, audio) in [("greeting", greeting), ("answer", answer)] {
        let pitch = audio_pitch(audio);
        assert!((pitch - max).abs() < 3.0, "idv's {what} in Max's voice: {pitch:.1} Hz, not {max:.1} Hz");
    }
    // idv's stream was asked to greet first, and was sent the request only afterwards: the
    // simulator's replies on idv's stream, in order.
    let stats = fleet.sim.sonic_stats();
    let idv_stream =
        stats.voices.iter().find(|(_, voice)| voice.as_deref() == Some("matthew")).expect("idv's stream").0;
    let replies: Vec<_> =
        stats.replies.iter().filter(|r| r.stream == idv_stream).map(|r| (r.rule.clone(), r.text.clone())).collect();
    assert_eq!(replies.first(), Some(&(Some("speak-first".to_owned()), Some(IDV_GREETING.to_owned()))), "{replies:?}");
    assert!(replies.get(1).and_then(|r| r.1.as_deref()).is_some_and(|t| t.starts_with("To verify")), "{replies:?}");
    assert_eq!(replies.len(), 2, "the greeting and the answer, once each: {replies:?}");
    // The turn of the carried request ends once, after the answer.
    let completes = idv.iter().filter(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).count();
    assert_eq!(completes, 0, "the greeting's end did not end the request's turn: {:#?}", common::summary(idv));
    call.until(|m| matches!(m, ServerMessage::BidiResponseComplete { .. })).await;

    // Then the conversation goes on as usual.
    call.say(common::IDV_DETAILS, 900);
    call.until(|m| is_final_reply(m, "you're verified")).await;
    call.hang_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_transferred_in_text_gets_the_agents_greeting_as_its_first_line() {
    let fleet = fleet(switchboard_sim::banking_script().expect("the banking script")).await;
    let mut client = Client::start(&fleet.url, Some("triage")).await;
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    client.say("I'd like to check my balance").await;
    let to_idv =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert!(to_idv.iter().any(|m| matches!(m, ServerMessage::Handoff { to, .. } if to == "idv")), "{to_idv:?}");
    let answer = client.turn().await;
    let lines = replies(&answer);
    assert_eq!(lines.len(), 2, "{answer:#?}");
    assert_eq!(lines[0], IDV_GREETING, "idv greets first");
    assert!(lines[1].contains("eight-digit account number"), "then answers the request: {lines:?}");
    let greeted = position(&answer, |m| is_final_reply(m, IDV_GREETING));
    let started = position(&answer, |m| matches!(m, ServerMessage::BidiResponseStart { .. }));
    assert!(greeted < started, "the greeting line comes before the answer's turn: {answer:#?}");

    // The model answered the caller, not its own greeting: the next turn goes on as usual.
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    assert!(!replies(&verified).iter().any(|r| r == IDV_GREETING), "the greeting comes once: {verified:?}");
}
