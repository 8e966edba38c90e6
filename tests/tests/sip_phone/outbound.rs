//! Outbound calls placed with `switchboard call`: answered by a phone that hears the agent,
//! or not answered, or busy; each outcome counted.

use std::process::Command;
use std::time::Duration;

use crate::phone::{Callee, free_phone_port};
use crate::stack::{Stack, gateway_url, metrics, sessions, stack_with, wait_for};

/// `switchboard call` against the stack's gateway, on a thread: its exit status and what it
/// printed.
pub(crate) fn call(stack: &Stack, to: &str, vars: &[&str]) -> std::thread::JoinHandle<(bool, String)> {
    let vars: Vec<&str> = vars.iter().flat_map(|var| ["--var", var]).collect();
    call_with(stack, to, &vars)
}

/// [`call`] with more of `switchboard call`'s arguments (`--trunk`, `--status-callback`).
pub(crate) fn call_with(stack: &Stack, to: &str, args: &[&str]) -> std::thread::JoinHandle<(bool, String)> {
    let mut command = Command::new(&stack.binary);
    command.args(["call", to, "--agent", "triage", "--gateway", &gateway_url(stack), "--follow-seconds", "120"]);
    command.args(args);
    std::thread::spawn(move || {
        let out = command.output().expect("switchboard call runs");
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    })
}

/// A stack whose edge places outbound calls through a trunk at `127.0.0.1:<port>` (the
/// callee), giving up after `ring_seconds`.
pub(crate) fn outbound_stack(name: &str, port: u16, ring_seconds: &str) -> Stack {
    let trunk = format!("sip:127.0.0.1:{port}");
    let stack = stack_with(
        name,
        &["--outbound-trunk", &trunk, "--caller-id", "+4930123456", "--ring-timeout-seconds", ring_seconds],
    );
    stack.taking_outbound_calls()
}

#[test]
fn an_outbound_call_is_answered_by_a_phone_that_hears_the_agent() {
    let port = free_phone_port();
    let stack = outbound_stack("outbound", port, "20");
    let callee = Callee::listen(&stack, "callee", "auto", 4, port);
    let placed = call(&stack, &callee.uri(), &["customer=Ada", "reason=card_blocked"]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for(
        "the call is answered",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("outbound call answered"),
        context,
    );
    // The callee says its phrase and hears the agent's reply; then it hangs up.
    std::thread::sleep(Duration::from_secs(12));
    callee.hang_up();
    let (ok, printed) = placed.join().expect("switchboard call");
    assert!(ok, "the call was answered: {printed}\n{}", context());
    assert!(printed.contains("answered (SIP 200) session gw-"), "{printed}\n{}", context());
    assert!(printed.contains("completed"), "{printed}\n{}", context());
    callee.phone.wait_over(Duration::from_secs(10));
    let (_, windows) = callee.phone.heard(&stack.tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the callee heard the agent: {voiced} voiced windows: {windows:?}\n{}", context());
    // One session with triage in the record, in which the agent heard the callee's tone.
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session for the answered call: {list:?}");
    assert_eq!(list[0]["first_agent"], "default/triage");
    let shown = sessions(&stack, &["show", list[0]["id"].as_str().expect("an id")]);
    assert!(shown.contains("phrase 1"), "the agent heard the callee: {shown}");
    let metrics = metrics(&stack);
    assert!(metrics.contains("switchboard_gateway_outbound_calls_total{outcome=\"completed\"} 1"), "{metrics}");
}

#[test]
fn an_outbound_call_nobody_answers_is_no_answer_and_one_to_a_busy_phone_is_busy() {
    let port = free_phone_port();
    let stack = outbound_stack("busy", port, "8");
    // Rings and never answers; one call at a time, so a second call meanwhile is refused 486.
    let callee = Callee::listen(&stack, "callee", "manual", 1, port);
    let uri = callee.uri();
    let ringing = call(&stack, &uri, &[]);
    let context = || format!("--- edge ---\n{}\n--- callee ---\n{}", stack.edge.log_text(), callee.phone.log());
    wait_for("the callee rings", Duration::from_secs(15), || callee.phone.log().contains("Incoming call"), context);
    let (ok, busy) = call(&stack, &uri, &[]).join().expect("the second call");
    assert!(!ok, "a busy call is not answered: {busy}");
    assert!(busy.contains("busy (SIP 486)"), "{busy}\n{}", context());
    let (ok, unanswered) = ringing.join().expect("the first call");
    assert!(!ok, "{unanswered}");
    assert!(unanswered.contains("ringing (SIP 180)"), "{unanswered}\n{}", context());
    assert!(unanswered.contains("no_answer"), "{unanswered}\n{}", context());
    let metrics = metrics(&stack);
    assert!(metrics.contains("switchboard_gateway_outbound_calls_total{outcome=\"busy\"} 1"), "{metrics}");
    assert!(metrics.contains("switchboard_gateway_outbound_calls_total{outcome=\"no_answer\"} 1"), "{metrics}");
    // Bad input is refused before anything is dialled.
    let (ok, refused) = call(&stack, "0800 123", &[]).join().expect("a bad call");
    assert!(!ok && refused.contains("400") && refused.contains("E.164"), "{refused}");
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    assert_eq!(list.as_array().expect("a list").len(), 0, "no session for calls nobody answered");
}
