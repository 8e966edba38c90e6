//! G.722 (wideband) calls: a real baresip that speaks only G.722 (its g722 module, which is
//! spandsp's codec) calls the SIP edge and talks with the agent: the agent hears its phrase
//! tone (the edge decodes G.722 to 16 kHz PCM16 for the session) and the phone hears the
//! agent (encoded from the session's 16 kHz PCM16). A phone that offers PCMU first and G.722
//! after is answered in G.722, the rule the edge states: wideband wherever it is offered.

use std::time::Duration;

use crate::phone::{Options, Phone};
use crate::stack::{Stack, sessions, stack, wait_for};

/// baresip's name for G.722 in `audio_codecs` (its clock rate is the audio's, 16 kHz).
const G722: &str = "G722/16000/1";

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

/// The phone's call: established in G.722 both ways (its own log says so), the agent heard
/// in its recording.
fn talked_in_g722(stack: &Stack, phone: &Phone) {
    phone.wait_over(Duration::from_secs(45));
    let log = phone.log();
    let context = || format!("{log}\n--- edge ---\n{}", stack.edge.log_text());
    assert!(log.contains("Call established"), "{}", context());
    assert!(
        log.contains("Set audio decoder: G722 16000Hz") && log.contains("Set audio encoder: G722 16000Hz"),
        "the phone speaks G.722 both ways: {}",
        context()
    );
    let (_, windows) = phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    let loudest = windows.iter().copied().fold(0.0, f64::max);
    assert!(voiced >= 4 && loudest < 0.9, "the phone heard the agent: {voiced} voiced windows: {windows:?}");
}

#[test]
fn a_g722_phone_and_the_agent_hear_each_other_and_g722_wins_over_g711() {
    let stack = stack("g722");
    // A phone with G.722 only: before this edge spoke it, a 488.
    let only = dial(&stack, "g722-only", G722);
    talked_in_g722(&stack, &only);
    // A phone offering PCMU first: the edge still answers in G.722.
    let both = dial(&stack, "pcmu-then-g722", "PCMU,G722/16000/1");
    talked_in_g722(&stack, &both);
    wait_for(
        "the edge logs both calls' media",
        Duration::from_secs(10),
        || codecs_relayed(&stack).len() == 2,
        || stack.edge.log_text(),
    );
    assert_eq!(codecs_relayed(&stack), ["G722", "G722"], "{}", stack.edge.log_text());
    // The agent heard each phone's tone through G.722 as phrase 1, once per call.
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 2, "a session for each call: {list:?}");
    for session in list {
        let shown = sessions(&stack, &["show", session["id"].as_str().expect("an id")]);
        let user_lines: Vec<&str> = shown.lines().filter(|l| l.contains(" user ")).collect();
        assert!(
            user_lines.len() == 1 && user_lines[0].contains("phrase 1"),
            "the agent heard the caller's tone: {shown}"
        );
    }
}
