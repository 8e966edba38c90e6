//! Outage mode on the phone: a call to an Agent switched into outage mode
//! (`spec.outage.active`) never reaches the agent; its fallback takes the call instead. A
//! person: the edge answers and puts the caller through to them (the person's phone rings
//! and answers, as in an agent's transfer); with an outage recording the caller hears it
//! whole first, and a caller who hangs up during it is put through to nobody. Only a
//! message: the call is refused 503 with the message as its reason. The gateway counts
//! each diverted session, and the edge how each fallback went.

use std::time::Duration;

use switchboard_tests::cluster::tools_bin;

use crate::announce::{OUTAGE_HZ, recordings, windows_with};
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
    let played = r#"switchboard_sip_announcements_total{purpose="outage"}"#;
    assert_eq!(sample(&counted, played), None, "no recording: put straight through");
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

/// The default outage recording's tone (triage's own is [`OUTAGE_HZ`]).
const DEFAULT_OUTAGE_HZ: f64 = 2600.0;

#[test]
fn a_call_to_an_agent_in_outage_mode_hears_its_outage_recording_then_is_put_through_to_its_person() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-outage-recorded-person-{}", std::process::id()));
    let played = recordings(
        "outage-person",
        &[
            ("outage.wav", "8000", "1", &["synth", "2", "sine", "2600", "vol", "0.5"]),
            ("default.triage.outage.wav", "8000", "1", &["synth", "2", "sine", "2200", "vol", "0.5"]),
        ],
    );
    let announcements = played.0.to_string_lossy().into_owned();
    let tools = tools_bin().expect("tests/tools/install.sh");
    let (person, port) = Phone::answering(&dir, &tools, "advisor", "advisor", 60);
    let stack = stack_custom("outage-recorded", &["--announcements", &announcements], &switched_on(port, true), &[]);
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
    assert!(edge.contains(r#"file="default.triage.outage.wav""#), "triage's own recording: {}", context());
    assert!(edge.contains("outcome=\"transferred\""), "the person answered: {}", context());
    caller.put_through_to(&person, "advisor", context);
    // The caller's first call (the edge's) held the whole 2 s recording: it played out
    // before the REFER, which would have ended that call.
    let own = windows_with(&caller, OUTAGE_HZ);
    assert!(own >= 7, "the caller heard triage's outage recording whole ({own} windows of 250 ms): {}", context());
    assert_eq!(windows_with(&caller, DEFAULT_OUTAGE_HZ), 0, "not the default one: {}", context());
    let counted = wait_for_edge_sample(&stack, r#"switchboard_sip_outage_fallbacks_total{outcome="transferred"}"#, 1.0);
    for (series, value) in [
        (r#"switchboard_sip_announcements_total{purpose="outage"}"#, 1.0),
        (r#"switchboard_sip_calls_total{direction="inbound",outcome="diverted"}"#, 1.0),
    ] {
        assert_eq!(sample(&counted, series), Some(value), "{series}: {counted}");
    }
    drop(person);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_caller_who_hangs_up_during_the_outage_recording_is_put_through_to_nobody() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-outage-left-person-{}", std::process::id()));
    // 12 s of recording; the caller's phone hangs up at the end of its 3 s WAV.
    let played =
        recordings("outage-left", &[("outage.wav", "8000", "1", &["synth", "12", "sine", "2200", "vol", "0.5"])]);
    let announcements = played.0.to_string_lossy().into_owned();
    let tools = tools_bin().expect("tests/tools/install.sh");
    let (person, port) = Phone::answering(&dir, &tools, "advisor", "advisor", 40);
    let stack = stack_custom("outage-left", &["--announcements", &announcements], &switched_on(port, true), &[]);
    let dialled = std::time::Instant::now();
    let caller = Phone::dial(&stack, "caller", "triage", 1, 30);
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", stack.edge.log_text(), caller.log(), person.log());
    wait_for(
        "the fallback ends when the caller hangs up",
        Duration::from_secs(20),
        || stack.edge.log_text().contains("outage fallback ended"),
        context,
    );
    assert!(
        dialled.elapsed() < Duration::from_secs(11),
        "ended by the hang-up, not the recording's end: {}",
        context()
    );
    let edge = stack.edge.log_text();
    assert!(edge.contains("playing the outage announcement"), "{}", context());
    assert!(edge.contains("outcome=\"caller_left\""), "{}", context());
    assert!(windows_with(&caller, OUTAGE_HZ) >= 4, "the caller heard the recording until hanging up: {}", context());
    // Nobody is called: the person's phone stays idle well past when a REFER would have come.
    std::thread::sleep(Duration::from_secs(3));
    let log = person.log();
    assert!(!log.contains("Incoming call") && !log.contains("Call established"), "{}", context());
    assert!(!caller.log().contains("transferring call"), "the caller's phone got no REFER: {}", context());
    let counted = wait_for_edge_sample(&stack, r#"switchboard_sip_outage_fallbacks_total{outcome="caller_left"}"#, 1.0);
    assert_eq!(sample(&counted, r#"switchboard_sip_announcements_total{purpose="outage"}"#), Some(1.0), "{counted}");
    drop(person);
    let _ = std::fs::remove_dir_all(&dir);
}
