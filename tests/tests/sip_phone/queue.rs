//! The gateway's capacity queue on the phone (`switchboard local --capacity-quota`): with one
//! model stream for triage's pool, a first call holds it. A second call whose Agent queues
//! hears `182 Queued` with the gateway's hold message while it waits — past the edge's
//! gateway timeout, which bounds only the gateway's first answer — and is answered when the
//! first hangs up. A second call whose Agent refuses (`spec.capacity.whenFull: refuse`) is
//! answered 503 with `Retry-After` from the gateway's retry hint. baresip's SIP trace (`-s`)
//! shows what the phone received, headers and all.

use std::time::Duration;

use crate::phone::Phone;
use crate::stack::{stack_custom, stack_edited, wait_for, wait_for_edge_sample};

/// One model stream in the pool of triage (`default` account, `us-east-1`).
const ONE_STREAM: [&str; 2] = ["--capacity-quota", "default/us-east-1=1"];

fn answered(edge: &str) -> usize {
    edge.matches("call answered").count()
}

#[test]
fn a_call_waiting_for_the_model_quota_hears_182_queued_and_is_answered_when_its_turn_comes() {
    let stack = stack_custom("queue", &["--gateway-timeout-seconds", "3"], "", &ONE_STREAM);
    // The first phone holds the stream for its WAV: 0.5 + 1.5 + 10 s, then hangs up.
    let first = Phone::dial(&stack, "first", "triage", 10, 60);
    let context = |second: Option<&Phone>| {
        format!(
            "{}\n--- first ---\n{}\n--- second ---\n{}",
            stack.edge.log_text(),
            first.log(),
            second.map(Phone::log).unwrap_or_default()
        )
    };
    wait_for(
        "the first call is answered",
        Duration::from_secs(20),
        || answered(&stack.edge.log_text()) == 1,
        || context(None),
    );
    let second = Phone::dial_traced(&stack, "second", "triage", 2, 60);
    let context = || context(Some(&second));
    wait_for(
        "the second call hears 182 Queued",
        Duration::from_secs(20),
        || second.log().contains("SIP/2.0 182 All our lines are busy at the moment. You are next in line"),
        context,
    );
    let queued_at = std::time::Instant::now();
    assert!(!second.log().contains("Call established"), "not answered while queued: {}", context());
    assert!(stack.edge.log_text().contains("call queued"), "{}", context());
    // The first call ends at the end of its WAV; its stream goes to the second call.
    wait_for(
        "the second call is answered when the first hangs up",
        Duration::from_secs(40),
        || second.log().contains("Call established"),
        context,
    );
    let waited = queued_at.elapsed();
    assert!(
        waited > Duration::from_secs(4),
        "the call waited past the edge's 3 s gateway timeout ({waited:?}), unanswered and not refused: {}",
        context()
    );
    assert!(first.log().contains("terminated") || first.log().contains("session closed"), "{}", context());
    let edge = stack.edge.log_text();
    assert_eq!(answered(&edge), 2, "both calls answered: {}", context());
    assert!(!second.log().contains("SIP/2.0 503"), "{}", context());
    second.wait_over(Duration::from_secs(30));
}

/// triage refuses sessions when its pool is full, instead of queueing them.
fn refusing(triage: String) -> String {
    let edited =
        triage.replacen("spec:\n  mode: hybrid\n", "spec:\n  mode: hybrid\n  capacity:\n    whenFull: refuse\n", 1);
    assert!(edited.contains("whenFull: refuse"), "triage.yaml's Agent moved: {triage}");
    edited
}

#[test]
fn a_call_refused_for_the_model_quota_gets_503_with_retry_after() {
    let local = [&ONE_STREAM[..], &["--capacity-hold-seconds", "40"]].concat();
    let stack = stack_edited("queue-refuse", &[], "", &local, refusing);
    let first = Phone::dial(&stack, "first", "triage", 10, 40);
    wait_for(
        "the first call is answered",
        Duration::from_secs(20),
        || answered(&stack.edge.log_text()) == 1,
        || format!("{}\n--- first ---\n{}", stack.edge.log_text(), first.log()),
    );
    let second = Phone::dial_traced(&stack, "second", "triage", 1, 20);
    second.wait_over(Duration::from_secs(20));
    let log = second.log();
    let context = || format!("{}\n--- second ---\n{log}", stack.edge.log_text());
    let status = log.lines().find(|l| l.starts_with("SIP/2.0 503")).unwrap_or_else(|| panic!("no 503: {}", context()));
    assert!(status.contains("the model quota of default/us-east-1 is full"), "{status}: {}", context());
    let retry_after: u64 = log
        .lines()
        .find_map(|l| l.strip_prefix("Retry-After:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("the 503 carries Retry-After: {}", context()));
    assert!(retry_after > 0, "{retry_after}");
    assert!(
        status.contains(&format!("try again in about {retry_after} s")),
        "Retry-After is the gateway's hint, as its message says: {status}"
    );
    assert!(!log.contains("Call established") && !log.contains("SIP/2.0 182"), "{}", context());
    assert!(stack.edge.log_text().contains("outcome=\"capacity_full\""), "{}", context());
    wait_for_edge_sample(&stack, r#"switchboard_sip_calls_refused_total{reason="capacity_full"}"#, 1.0);
}
