//! Wideband calls (G.722 and Opus): a real baresip that speaks only G.722 (its g722 module,
//! spandsp's codec) or only Opus (its opus module, libopus) calls the SIP edge and talks
//! with the agent: the agent hears its phrase tone (the edge decodes G.722 or Opus to 16 kHz
//! PCM16 for the session) and the phone hears the agent (encoded from the session's 16 kHz
//! PCM16). A phone that offers PCMU first and G.722 after is answered in G.722, and one
//! offering G.722, PCMU and Opus in Opus: the rule the edge states, wideband wherever it is
//! offered, Opus first. The edge's own offers lead with Opus and G.722 too: an outbound call
//! to a phone that speaks only G.722, and one to a phone that speaks only Opus, is answered,
//! the phone hears the agent and the agent hears the phone.

use std::time::Duration;

use crate::outbound::{call, outbound_stack};
use crate::phone::{Callee, Options, Phone, free_phone_port};
use crate::stack::{Stack, sessions, stack, wait_for};

/// baresip's name for G.722 in `audio_codecs` (its clock rate is the audio's, 16 kHz).
const G722: &str = "G722/16000/1";
/// baresip's name for Opus in `audio_codecs`, mono (it offers `opus/48000/2`, RFC 7587's
/// name, with `stereo=0`).
const OPUS: &str = "opus/48000/1";

/// A phone offering `codecs` that dials triage, says phrase 1 (500 Hz) and stays 10 s.
fn dial(stack: &Stack, name: &str, codecs: &'static str) -> Phone {
    let dial = format!("/dial sip:triage@{};transport=udp", stack.sip);
    let options = Options { codec: Some(codecs), ..Options::default() };
    Phone::start_with(&stack.dir, &stack.tools, name, "caller", 10, 30, "udp", "", "", Some(&dial), options).0
}

/// The codec of each call the edge relayed, from its "media relayed" log lines.
fn codecs_relayed(stack: &Stack) -> Vec<String> {
    stack
        .edge
        .log_text()
        .lines()
        .filter(|l| l.contains("media relayed"))
        .filter_map(|l| l.split_once(" codec=").and_then(|(_, rest)| rest.split_whitespace().next()))
        .map(|c| c.trim_matches('"').to_owned())
        .collect()
}

/// The phone's call is over, and it spoke `codec` both ways (baresip's log names it as
/// `G722 16000Hz` or `opus 48000Hz`) and heard the agent in its recording.
fn talked_in(stack: &Stack, phone: &Phone, codec: &str) {
    phone.wait_over(Duration::from_secs(45));
    let log = phone.log();
    let context = || format!("{log}\n--- edge ---\n{}", stack.edge.log_text());
    assert!(log.contains("Call established"), "{}", context());
    assert!(
        log.contains(&format!("Set audio decoder: {codec}")) && log.contains(&format!("Set audio encoder: {codec}")),
        "the phone speaks {codec} both ways: {}",
        context()
    );
    heard_the_agent(stack, phone, &context);
}

/// The phone's recording has the agent in it: voiced, not clipped.
fn heard_the_agent(stack: &Stack, phone: &Phone, context: &dyn Fn() -> String) {
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    let loudest = windows.iter().copied().fold(0.0, f64::max);
    assert!(
        voiced >= 4 && loudest < 0.9,
        "the phone heard the agent: {voiced} voiced windows: {windows:?}\n{}",
        context()
    );
}

/// The record holds `calls` sessions, in each of which the agent heard phrase 1 once.
fn the_agent_heard_each_phone(stack: &Stack, calls: usize) {
    let list: serde_json::Value = serde_json::from_str(&sessions(stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), calls, "a session for each call: {list:?}");
    for session in list {
        let shown = sessions(stack, &["show", session["id"].as_str().expect("an id")]);
        let user_lines: Vec<&str> = shown.lines().filter(|l| l.contains(" user ")).collect();
        assert!(
            user_lines.len() == 1 && user_lines[0].contains("phrase 1"),
            "the agent heard the caller's tone: {shown}"
        );
    }
}

/// Waits for the edge to log `calls` calls' media, and returns their codecs.
fn relayed(stack: &Stack, calls: usize) -> Vec<String> {
    wait_for(
        "the edge logs each call's media",
        Duration::from_secs(10),
        || codecs_relayed(stack).len() == calls,
        || stack.edge.log_text(),
    );
    codecs_relayed(stack)
}

#[test]
fn a_g722_phone_and_the_agent_hear_each_other_and_g722_wins_over_g711() {
    let stack = stack("g722");
    // A phone with G.722 only: before this edge spoke it, a 488.
    let only = dial(&stack, "g722-only", G722);
    talked_in(&stack, &only, "G722 16000Hz");
    // A phone offering PCMU first: the edge still answers in G.722.
    let both = dial(&stack, "pcmu-then-g722", "PCMU,G722/16000/1");
    talked_in(&stack, &both, "G722 16000Hz");
    assert_eq!(relayed(&stack, 2), ["G722", "G722"], "{}", stack.edge.log_text());
    // The agent heard each phone's tone through G.722 as phrase 1, once per call.
    the_agent_heard_each_phone(&stack, 2);
}

#[test]
fn an_opus_phone_and_the_agent_hear_each_other_and_opus_wins_over_g722_and_g711() {
    let stack = stack("opus");
    // A phone with Opus only: before this edge spoke it, a 488.
    let only = dial(&stack, "opus-only", OPUS);
    talked_in(&stack, &only, "opus 48000Hz");
    // A phone offering G.722, then PCMU, then Opus: the edge answers in Opus.
    let all = dial(&stack, "g722-pcmu-opus", "G722/16000/1,PCMU,opus/48000/1");
    talked_in(&stack, &all, "opus 48000Hz");
    assert_eq!(relayed(&stack, 2), ["opus", "opus"], "{}", stack.edge.log_text());
    the_agent_heard_each_phone(&stack, 2);
}

/// An outbound call from triage to a phone that speaks only `codec` (baresip's name), which
/// answers at once, says phrase 1 and hangs up after 12 s: it speaks `spoken` (its log's
/// name) both ways, hears the agent, and the agent hears it.
fn outbound_to_a_phone_speaking(name: &str, codec: &str, spoken: &str) {
    let port = free_phone_port();
    let stack = outbound_stack(name, port, "20");
    let callee = Callee::listen_speaking(&stack, "callee", port, codec);
    let placed = call(&stack, &callee.uri(), &[]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for(
        "the call is answered",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("outbound call answered"),
        context,
    );
    std::thread::sleep(Duration::from_secs(12));
    callee.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok && printed.contains("completed"), "the call was answered: {printed}\n{}", context());
    callee.phone.wait_over(Duration::from_secs(10));
    let log = callee.phone.log();
    assert!(
        log.contains(&format!("Set audio decoder: {spoken}")) && log.contains(&format!("Set audio encoder: {spoken}")),
        "the callee speaks {spoken} both ways: {}",
        context()
    );
    heard_the_agent(&stack, &callee.phone, &context);
    the_agent_heard_each_phone(&stack, 1);
}

#[test]
fn an_outbound_call_to_a_g722_only_phone_is_answered_in_g722_and_both_hear_each_other() {
    outbound_to_a_phone_speaking("outbound-g722", G722, "G722 16000Hz");
}

#[test]
fn an_outbound_call_to_an_opus_only_phone_is_answered_in_opus_and_both_hear_each_other() {
    outbound_to_a_phone_speaking("outbound-opus", OPUS, "opus 48000Hz");
}
