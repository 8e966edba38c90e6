//! Answering-machine detection on outbound calls (triage's test copy with
//! `spec.telephony.answeringMachine`, its Persona speaking first): a callee who says a
//! short greeting and waits is a person, and the agent talks; one that plays a long
//! monologue and a beep is a machine, left the agent's message after the beep
//! (`leaveMessage`) or hung up on (`hangUp`: the edge's `/metrics` count it as
//! `machine_hung_up`). The callee is a real baresip playing a WAV sox made; what it heard
//! is measured with sox.

use std::time::Duration;

use crate::outbound::call;
use crate::phone::{Callee, free_phone_port};
use crate::stack::{Stack, sample, sessions, stack_edited, wait_for, wait_for_edge_sample};

/// The seconds of the callee's WAV at which its beep ends (0.3 s of silence, a 4 s
/// monologue, 0.2 s of silence, a 0.5 s beep at 1000 Hz).
const BEEP_ENDS: f64 = 5.0;

/// A stack whose edge places calls to `port`, and whose triage detects answering machines
/// (`on_machine`) and speaks first (its greeting is the message a machine records).
fn amd_stack(name: &str, port: u16, on_machine: &str) -> Stack {
    let trunk = format!("sip:127.0.0.1:{port}");
    let telephony = format!("    answeringMachine:\n      onMachine: {on_machine}\n");
    let stack = stack_edited(
        name,
        &["--outbound-trunk", &trunk, "--caller-id", "+4930123456", "--ring-timeout-seconds", "20"],
        &telephony,
        &[],
        |triage| {
            let spoken = triage.replacen("  greeting: ", "  speakFirst: true\n  greeting: ", 1);
            assert_ne!(spoken, triage, "triage.yaml's Persona has a greeting: the test makes it spoken first");
            spoken
        },
    );
    wait_for(
        "the edge takes outbound calls",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("taking outbound calls from the gateway"),
        || stack.edge.log_text(),
    );
    stack
}

/// A callee that answers with a machine's greeting: a long monologue (pink noise under a
/// 4 Hz syllable tremolo, never silent for long, never a tone), then the beep, then silence.
fn machine(stack: &Stack, port: u16) -> Callee {
    let parts: [&[&str]; 5] = [
        &["trim", "0", "0.3"],
        &["synth", "4", "pinknoise", "tremolo", "4", "60", "vol", "0.4"],
        &["trim", "0", "0.2"],
        &["synth", "0.5", "sine", "1000", "vol", "0.5"],
        &["trim", "0", "60"],
    ];
    Callee::listen_saying(&stack.dir, &stack.tools, "machine", "auto", 1, port, &parts)
}

/// The number after `prefix` in `printed` (a line `switchboard call` printed).
fn number_after(printed: &str, prefix: &str) -> Option<u64> {
    printed.lines().find_map(|l| l.split_once(prefix)?.1.split_whitespace().next()?.parse().ok())
}

/// The start (seconds) of the first 250 ms window of `windows` louder than speech's floor.
fn first_voiced(windows: &[f64]) -> Option<f64> {
    windows.iter().position(|rms| *rms > 0.02).map(|i| i as f64 * 0.25)
}

#[test]
fn a_person_who_says_hello_and_waits_is_human_and_hears_the_agent() {
    let port = free_phone_port();
    let stack = amd_stack("amd-human", port, "hangUp");
    // Half a second of silence, the phrase tone (1.5 s), then silence: a person's "Hello?".
    let callee = Callee::listen(&stack, "callee", "auto", 1, port);
    let placed = call(&stack, &callee.uri(), &[]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for(
        "the callee hears the agent",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("the callee first heard the agent"),
        context,
    );
    std::thread::sleep(Duration::from_secs(6));
    callee.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok, "answered: {printed}\n{}", context());
    assert!(printed.contains("answered by: human"), "{printed}\n{}", context());
    // Decided once the greeting (0.5 + 1.5 s) was followed by 0.8 s of silence.
    let decided = number_after(&printed, "(decided ").expect("when it was decided");
    assert!((2600..=4000).contains(&decided), "decided after {decided} ms: {printed}");
    let heard = number_after(&printed, "first heard the agent ").expect("the delay to the agent");
    assert!(heard > decided, "the agent talks after the decision: {heard} ms vs {decided} ms\n{printed}");
    callee.phone.wait_over(Duration::from_secs(10));
    let (_, windows) = callee.phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the callee heard the agent's greeting: {windows:?}\n{}", context());
    let first = first_voiced(&windows).expect("voiced");
    assert!(first >= 2.5, "nothing from the agent while it listened: first sound at {first} s: {windows:?}");
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    assert_eq!(list.as_array().expect("a list").len(), 1, "one session with triage: {list}");
    let text =
        wait_for_edge_sample(&stack, r#"switchboard_sip_calls_total{direction="outbound",outcome="answered"}"#, 1.0);
    let machine = r#"switchboard_sip_calls_total{direction="outbound",outcome="machine_hung_up"}"#;
    assert_eq!(sample(&text, machine), None, "{text}");
}

#[test]
fn a_machine_is_left_the_agents_message_after_its_beep() {
    let port = free_phone_port();
    let stack = amd_stack("amd-message", port, "leaveMessage");
    let callee = machine(&stack, port);
    let placed = call(&stack, &callee.uri(), &[]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for(
        "the machine hears the agent",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("the callee first heard the agent"),
        context,
    );
    std::thread::sleep(Duration::from_secs(6));
    callee.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok, "answered: {printed}\n{}", context());
    assert!(printed.contains("answered by: machine"), "{printed}\n{}", context());
    let decided = number_after(&printed, "(decided ").expect("when it was decided");
    assert!((2600..=4000).contains(&decided), "a machine after 2.5 s of monologue: {decided} ms\n{printed}");
    let log = stack.edge.log_text();
    assert!(log.contains("the message to the machine starts") && log.contains("AfterBeep"), "{log}");
    let heard = number_after(&printed, "first heard the agent ").expect("the delay to the agent");
    assert!(heard as f64 >= BEEP_ENDS * 1000.0, "the agent spoke only after the beep: {heard} ms\n{printed}");
    callee.phone.wait_over(Duration::from_secs(10));
    let (_, windows) = callee.phone.heard(&stack.tools.join("sox"));
    let first = first_voiced(&windows).expect("the machine recorded the agent");
    assert!(
        first >= BEEP_ENDS - 0.25,
        "the recording holds nothing of the agent before the beep: {first} s: {windows:?}"
    );
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the agent's message is on the machine: {windows:?}\n{}", context());
}

#[test]
fn a_machine_is_hung_up_on_with_hang_up() {
    let port = free_phone_port();
    let stack = amd_stack("amd-hangup", port, "hangUp");
    let callee = machine(&stack, port);
    let placed = call(&stack, &callee.uri(), &[]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok, "the call was answered (by the machine): {printed}\n{}", context());
    assert!(printed.contains("answered by: machine"), "{printed}\n{}", context());
    let hung_up =
        |l: &str| l.starts_with("completed") && l.contains("answered by a machine: hung up (onMachine: hangUp)");
    assert!(printed.lines().any(hung_up), "{printed}");
    assert!(!printed.contains("first heard the agent"), "no agent talked: {printed}");
    // The edge's BYE ends the callee's call, with no hang-up of its own.
    callee.phone.wait_over(Duration::from_secs(10));
    let (length, windows) = callee.phone.heard(&stack.tools.join("sox"));
    assert!(length < 5.0, "hung up right after the decision (~2.8 s): {length} s");
    assert_eq!(first_voiced(&windows), None, "the machine recorded nothing: {windows:?}");
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    assert_eq!(list.as_array().expect("a list").len(), 0, "no session for a machine hung up on: {list}");
    // The edge counts the call by its outcome: answered by a machine and hung up on, never
    // `answered` (that is a call with a session), nor under way.
    let series = |outcome: &str| format!(r#"switchboard_sip_calls_total{{direction="outbound",outcome="{outcome}"}}"#);
    let text = wait_for_edge_sample(&stack, &series("machine_hung_up"), 1.0);
    assert_eq!(sample(&text, &series("answered")), None, "{text}");
    assert_eq!(sample(&text, r#"switchboard_sip_calls_active{direction="outbound"}"#), None, "{text}");
}
