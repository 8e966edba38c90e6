//! Outage mode on the phone: a call to an Agent switched into outage mode
//! (`spec.outage.active`) never reaches the agent; its fallback takes the call instead. A
//! person: the edge answers and puts the caller through to them (the person's phone rings
//! and answers, as in an agent's transfer). Only a message: the call is refused 503 with
//! the message as its reason. The gateway counts each diverted session, and the edge how
//! each fallback went.

use std::time::Duration;

use switchboard_tests::cluster::tools_bin;

use crate::phone::Phone;
use crate::stack::{dead_port, metrics, sample, sessions, stack_custom, wait_for, wait_for_edge_sample};

/// What triage's callers are told while it is in outage mode.
const MESSAGE: &str = "Our assistant is unavailable; please call back later.";

/// triage's `spec.telephony.people` (`advisor` at `port`) and its outage mode switched on,
/// with `advisor` as the fallback's person when `person`.
fn switched_on(port: u16, person: bool) -> String {
    let fallback_person = if person { "      person: advisor\n" } else { "" };
    format!(
        "    people:\n\
         \x20     - {{ name: advisor, address: \"sip:advisor@127.0.0.1:{port}\", description: Accounts }}\n\
         \x20 outage:\n\
         \x20   active: true\n\
         \x20   fallback:\n\
         {fallback_person}\
         \x20     message: \"{MESSAGE}\"\n"
    )
}

/// The gateway's count of triage's sessions sent to the fallback by the switch.
fn fallbacks(metrics: &str) -> Option<u64> {
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix("switchboard_gateway_outage_fallbacks_total{")?;
        (rest.contains("agent=\"default/triage\"") && rest.contains("cause=\"switch\""))
            .then(|| rest.rsplit(' ').next()?.parse().ok())
            .flatten()
    })
}

#[test]
fn a_call_to_an_agent_in_outage_mode_is_put_through_to_its_fallback_person() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-outage-person-{}", std::process::id()));
    // The person's phone first (its port goes into the Agent), in a stack-less folder.
    let tools = tools_bin().expect("tests/tools/install.sh");
    let (person, port) = Phone::answering(&dir, &tools, "advisor", "advisor", 60);
    let stack = stack_custom("outage", &[], &switched_on(port, true), &[]);
    let caller = Phone::dial(&stack, "caller", "triage", 25, 60);
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", stack.edge.log_text(), caller.log(), person.log());
    wait_for(
        "the fallback's transfer ends",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("outage fallback ended"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(edge.contains("putting the caller through to its fallback person"), "{}", context());
    assert!(edge.contains("outcome=\"transferred\""), "the person answered: {}", context());
    caller.put_through_to(&person, "advisor", context);
    // No session reached the agent; the gateway counted the diverted one.
    let list: serde_json::Value = serde_json::from_str(&sessions(&stack, &["list", "--json"])).expect("JSON");
    assert_eq!(list.as_array().map(Vec::len), Some(0), "no session with triage: {list}");
    let metrics = metrics(&stack);
    assert_eq!(fallbacks(&metrics), Some(1), "one session went to the fallback:\n{metrics}");
    assert!(metrics.contains("switchboard_gateway_sessions_refused_total{reason=\"outage\"} 1"), "{metrics}");
    // The edge: the call diverted (not answered by an agent), its fallback transferred.
    let counted = wait_for_edge_sample(&stack, r#"switchboard_sip_outage_fallbacks_total{outcome="transferred"}"#, 1.0);
    assert_eq!(sample(&counted, r#"switchboard_sip_calls_total{direction="inbound",outcome="diverted"}"#), Some(1.0));
    assert_eq!(sample(&counted, r#"switchboard_sip_calls_total{direction="inbound",outcome="answered"}"#), None);
    drop(person);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_call_to_an_agent_in_outage_mode_with_only_a_message_is_refused_with_it() {
    let stack = stack_custom("outage-message", &[], &switched_on(dead_port(), false), &[]);
    let caller = Phone::dial(&stack, "caller", "triage", 1, 20);
    caller.wait_over(Duration::from_secs(20));
    let log = caller.log();
    assert!(
        log.contains(&format!("503 {MESSAGE}")),
        "refused 503 with the Agent's message:\n{log}\n--- edge ---\n{}",
        stack.edge.log_text()
    );
    assert!(!log.contains("Call established"), "{log}");
    assert!(stack.edge.log_text().contains("outcome=\"outage\""), "{}", stack.edge.log_text());
    assert_eq!(fallbacks(&metrics(&stack)), Some(1), "one session went to the fallback");
    let counted = wait_for_edge_sample(&stack, r#"switchboard_sip_outage_fallbacks_total{outcome="message"}"#, 1.0);
    assert_eq!(sample(&counted, r#"switchboard_sip_calls_refused_total{reason="outage"}"#), Some(1.0), "{counted}");
}
