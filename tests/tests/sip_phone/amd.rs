//! Answering-machine detection on outbound calls (triage's test copy with
//! `spec.telephony.answeringMachine`, its Persona speaking first): a callee who says a
//! short greeting and waits is a person, and the agent talks; one that plays a long
//! monologue and a beep is a machine, left the agent's message after the beep
//! (`leaveMessage`) or hung up on (`hangUp`: the edge's `/metrics` count it as
//! `machine_hung_up`). The session knows who answered: the simulated model answers the
//! callee's next words by a rule that reads `answeredBy` from its system prompt, and the
//! message a machine is left is the Agent's `answeringMachine.message` (a person hears the
//! Persona's greeting instead). The callee is a real baresip playing a WAV sox made; what it
//! heard is measured with sox.

use std::time::Duration;

use crate::outbound::call;
use crate::phone::{Callee, free_phone_port};
use crate::stack::{Stack, sample, sessions, stack_edited, wait_for, wait_for_edge_sample};

/// The callee's second phrase (600 Hz, 1.5 s): "Who is this?" to the simulator.
const PHRASE_2: &[&str] = &["synth", "1.5", "sine", "600", "vol", "0.5"];

/// The seconds of the callee's WAV at which its beep ends (0.3 s of silence, a 4 s
/// monologue, 0.2 s of silence, a 0.5 s beep at 1000 Hz).
const BEEP_ENDS: f64 = 5.0;

/// Triage's greeting in the Example Bank: what a person hears first.
const GREETING: &str = "Hello, you're through to Example Bank. I'm Ava. How can I help you today?";

/// The message triage's test copy leaves on machines (`answeringMachine.message`).
const MESSAGE: &str = "This is Example Bank about your card. Please call us back today.";

/// What the simulated model answers to the callee's second phrase (its tone at 600 Hz), by
/// who answered as its system prompt says (the call in memory: `outboundCall`).
const TO_A_PERSON: &str = "You answered in person, so I am talking with you.";
const TO_A_MACHINE: &str = "This is your voicemail, so I am leaving a message.";

/// The simulator's script: the callee's second phrase is answered by rules that read who
/// answered from the system prompt alone.
fn knows_who_answered(name: &str) -> std::path::PathBuf {
    let script = format!(
        "sonic:\n  phrases:\n    2: \"Who is this?\"\n\
         rules:\n\
         \x20 - name: person\n\
         \x20   when: {{ system: '\"answeredBy\":\"human\"', userText: \"(?i)who is this\" }}\n\
         \x20   reply: {{ text: \"{TO_A_PERSON}\" }}\n\
         \x20 - name: machine\n\
         \x20   when: {{ system: '\"answeredBy\":\"machine\"', userText: \"(?i)who is this\" }}\n\
         \x20   reply: {{ text: \"{TO_A_MACHINE}\" }}\n\
         default: {{ text: \"I do not know who answered.\" }}\n"
    );
    let path = std::env::temp_dir().join(format!("switchboard-sip-{name}-script-{}.yaml", std::process::id()));
    std::fs::write(&path, script).expect("the script");
    path
}

/// A stack whose edge places calls to `port`, and whose triage detects answering machines
/// (`on_machine`; with `leaveMessage` it leaves [`MESSAGE`]) and speaks first, on the
/// simulator running [`knows_who_answered`].
fn amd_stack(name: &str, port: u16, on_machine: &str) -> Stack {
    let trunk = format!("sip:127.0.0.1:{port}");
    let message = if on_machine == "leaveMessage" { format!("      message: \"{MESSAGE}\"\n") } else { String::new() };
    let telephony = format!("    answeringMachine:\n      onMachine: {on_machine}\n{message}");
    let script = knows_who_answered(name);
    let stack = stack_edited(
        name,
        &["--outbound-trunk", &trunk, "--caller-id", "+4930123456", "--ring-timeout-seconds", "20"],
        &telephony,
        &["--sim-script", &script.to_string_lossy()],
        |triage| {
            let spoken = triage.replacen("\n  speakFirst: false\n", "\n  speakFirst: true\n", 1);
            assert_ne!(spoken, triage, "the stack's triage listens first: the test makes it speak first");
            spoken
        },
    );
    stack.taking_outbound_calls()
}

/// A callee that answers with a machine's greeting: a long monologue (pink noise under a
/// 4 Hz syllable tremolo, never silent for long, never a tone), then the beep, then 12 s of
/// silence (the message is recorded), then a second sound (phrase 2), which has the
/// simulated model answer once more, saying whom it knows it talks to; then silence.
fn machine(stack: &Stack, port: u16) -> Callee {
    let parts: [&[&str]; 7] = [
        &["trim", "0", "0.3"],
        &["synth", "4", "pinknoise", "tremolo", "4", "60", "vol", "0.4"],
        &["trim", "0", "0.2"],
        &["synth", "0.5", "sine", "1000", "vol", "0.5"],
        &["trim", "0", "12"],
        PHRASE_2,
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
    let stack = amd_stack("amd-human", port, "leaveMessage");
    // Half a second of silence, the phrase tone (1.5 s), then silence: a person's "Hello?";
    // 12 s later (the agent has greeted them) they ask who is calling (phrase 2).
    let hello: &[&str] = &["synth", "1.5", "sine", "500", "vol", "0.5", "pad", "0.5", "12"];
    let parts = [hello, PHRASE_2, &["trim", "0", "60"]];
    let callee = Callee::listen_saying(&stack.dir, &stack.tools, "callee", "auto", 1, port, &parts);
    let placed = call(&stack, &callee.uri(), &[]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for(
        "the callee hears the agent",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("the callee first heard the agent"),
        context,
    );
    // The greeting, the second phrase (14 s into the call: the simulator hears its end
    // about 3 s later) and the model's answer to it.
    std::thread::sleep(Duration::from_secs(24));
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
    // The session knew a person answered: the model's rule for a person answered them.
    let shown = told(&stack, TO_A_PERSON);
    assert!(!shown.contains(TO_A_MACHINE) && !shown.contains("I do not know who answered"), "{shown}");
    assert!(
        shown.contains(GREETING) && !shown.contains(MESSAGE),
        "a person hears the greeting, not the message: {shown}"
    );
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
    // The message (from the beep's end, 5 s into the call), the machine's second sound (at
    // 17 s: the simulator hears its end about 3 s later) and the model's answer to it.
    std::thread::sleep(Duration::from_secs(24));
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
    // The message left is the one the Agent declares (answeringMachine.message, said first),
    // and the session knew it talked to a machine: the model's rule for one answered.
    let shown = told(&stack, TO_A_MACHINE);
    let (message, known) = (shown.find(MESSAGE), shown.find(TO_A_MACHINE));
    assert!(message.is_some_and(|m| known.is_some_and(|k| m < k)), "the message first, then the answer: {shown}");
    assert!(!shown.contains(GREETING), "the machine is left the message, not the greeting: {shown}");
    assert!(!shown.contains(TO_A_PERSON), "{shown}");
}

/// The record of the one session once it holds `text` (it is written behind the session):
/// its `sessions show` text.
fn told(stack: &Stack, text: &str) -> String {
    let shown = || {
        let list: serde_json::Value = serde_json::from_str(&sessions(stack, &["list", "--json"])).expect("JSON");
        let list = list.as_array().expect("a list").clone();
        assert_eq!(list.len(), 1, "one session with triage: {list:?}");
        sessions(stack, &["show", list[0]["id"].as_str().expect("an id")])
    };
    wait_for(&format!("the record holds {text:?}"), Duration::from_secs(20), || shown().contains(text), shown);
    shown()
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
