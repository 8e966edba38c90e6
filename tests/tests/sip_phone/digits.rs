//! Keys the agent presses (`send_digits`, an Agent with `spec.telephony.sendDigits`): the
//! agent navigates another phone system's menu, here played by baresip, which logs each
//! telephone event it receives (`received event: '1' (end=0)`). The keys reach the phone
//! as RFC 4733 events in order, each once; the agent hears they went; the call and its
//! keys are in the record. On an inbound call from a G.711 phone, and on an outbound call
//! the agent places to a phone system that speaks only Opus (the RTP clock at 48 kHz).

use std::time::Duration;

use crate::outbound::call;
use crate::phone::{Callee, Phone, free_phone_port};
use crate::stack::{SimScript, sessions, stack_custom, the_session, wait_for};

/// The keys the agent presses: a pause (`w`) between the second and third.
const DIGITS: &str = "12w34#";

/// The simulator's script: the caller's tone (phrase 1) asks the agent to choose an option;
/// the agent calls `send_digits`, then says whether the keys went.
fn digits_script(name: &str) -> SimScript {
    let script = format!(
        "sonic:\n  phrases:\n    1: \"Please choose the lost card option\"\n\
         rules:\n\
         \x20 - name: press\n\
         \x20   when: {{ userText: \"(?i)lost card option\" }}\n\
         \x20   reply: {{ toolUse: {{ name: send_digits, input: {{ digits: \"{DIGITS}\" }} }} }}\n\
         \x20 - name: pressed\n\
         \x20   when: {{ toolResult: {{ name: send_digits, status: success }} }}\n\
         \x20   reply: {{ text: \"Done, I chose the lost card option.\" }}\n\
         \x20 - name: failed\n\
         \x20   when: {{ toolResult: {{ name: send_digits, status: error }} }}\n\
         \x20   reply: {{ text: \"Sorry, the keys did not go.\" }}\n\
         default: {{ text: \"Hello from the bank.\" }}\n"
    );
    SimScript::write(name, &script)
}

/// The keys baresip says it received, in order: each event's start (`end=0`).
fn received_keys(log: &str) -> String {
    log.lines()
        .filter_map(|line| {
            let rest = line.split_once("received event: '")?.1;
            let (key, flags) = rest.split_once('\'')?;
            flags.contains("end=0").then(|| key.to_owned())
        })
        .collect()
}

#[test]
fn keys_the_agent_sends_reach_the_phone_as_telephone_events_in_order() {
    let script = digits_script("digits");
    let stack = stack_custom("digits", &[], "    sendDigits: true\n", &["--sim-script", &script.arg]);
    let phone = Phone::dial(&stack, "caller", "triage", 15, 40);
    let context = || stack.logs(&phone);
    wait_for(
        "the edge pressed the keys",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("keys pressed"),
        context,
    );
    assert!(stack.edge.log_text().contains("outcome=\"sent\""), "every key went: {}", context());
    // The phone got every key once, in order (the pause is no key).
    wait_for(
        "the phone logged the last key",
        Duration::from_secs(5),
        || received_keys(&phone.log()).len() >= 5,
        context,
    );
    let log = phone.log();
    let events: Vec<&str> = log.lines().filter_map(|l| l.find("received event").map(|at| &l[at..])).collect();
    eprintln!("the phone received:\n{}", events.join("\n"));
    assert_eq!(received_keys(&phone.log()), DIGITS.replace('w', ""), "{}", context());
    let ends = phone.log().lines().filter(|l| l.contains("received event: '") && l.contains("end=1")).count();
    assert_eq!(ends, 5, "each key released once, however many end packets: {}", context());
    // The phone hangs up at the end of its WAV; the record is written behind the session.
    phone.wait_over(Duration::from_secs(40));
    wait_for(
        "the record has the session",
        Duration::from_secs(30),
        || sessions(&stack, &["list", "--json"]).contains("\"id\""),
        || sessions(&stack, &["list", "--json"]),
    );
    wait_for(
        "the record has the keys the agent pressed",
        Duration::from_secs(30),
        || the_session(&stack).contains("send_digits"),
        || the_session(&stack),
    );
    let shown = the_session(&stack);
    assert!(shown.contains(DIGITS), "the keys are in the record (no secret): {shown}");
    assert!(!shown.contains("digits_"), "no tool error: {shown}");
}

#[test]
fn an_agent_on_an_outbound_call_presses_keys_on_a_phone_system_that_speaks_opus() {
    let script = digits_script("digits-out");
    let port = free_phone_port();
    let trunk = format!("sip:127.0.0.1:{port}");
    let stack = stack_custom(
        "digits-out",
        &["--outbound-trunk", &trunk, "--caller-id", "+4930123456", "--ring-timeout-seconds", "20"],
        "    sendDigits: true\n",
        &["--sim-script", &script.arg],
    )
    .taking_outbound_calls();
    // The phone system answers at once and says its phrase (the menu), in Opus only.
    let menu = Callee::listen_speaking(&stack, "menu", port, "opus/48000/1");
    let placed = call(&stack, &menu.uri(), &[]);
    let context = || {
        format!(
            "{}\n--- local ---\n{}\n--- menu ---\n{}",
            stack.edge.log_text(),
            stack.local.log_text(),
            menu.phone.log()
        )
    };
    wait_for(
        "the edge pressed the keys",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("keys pressed"),
        context,
    );
    assert!(stack.edge.log_text().contains("outcome=\"sent\""), "every key went: {}", context());
    wait_for(
        "the menu logged the last key",
        Duration::from_secs(5),
        || received_keys(&menu.phone.log()).len() >= 5,
        context,
    );
    assert_eq!(received_keys(&menu.phone.log()), DIGITS.replace('w', ""), "{}", context());
    let log = menu.phone.log();
    assert!(log.contains("Set audio encoder: opus 48000Hz"), "the call speaks Opus: {}", context());
    menu.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok, "the call was answered: {printed}\n{}", context());
}
