//! Warm transfers: triage lists the advisor with `transfer: warm`. The caller asks for the
//! advisor; the caller hears the edge's hold chime while the advisor's phone (a second
//! baresip, answering at once, taking only A-law) rings; the advisor hears the agent's
//! brief (the simulator's reply to the answered transfer, in the agent's voice), then the
//! caller; the caller hears the chime, then the advisor. A person whose phone does not
//! answer comes back to the agent as `no_answer`, and the caller hears the agent again.

use std::time::Duration;

use switchboard_tests::cluster::tools_bin;

use crate::phone::{Options, Phone};
use crate::stack::{dead_port, stack_custom, the_session, wait_for};

/// The hold chime's two notes (`switchboard_sip::media::hold`: C5 then E5).
const CHIME_HZ: [f64; 2] = [523.25, 659.25];
/// The caller's second tone, once put through: no phrase of the simulator's (400 + 100 n Hz).
const CALLER_HZ: f64 = 950.0;
/// The person's tone, after a silence that outlasts the brief: no phrase either.
const PERSON_HZ: f64 = 1150.0;
/// What the agent tells the person.
const BRIEF: &str = "Ada Lovelace is calling about a card payment she does not know.";

/// The simulator's script: phrase 1 asks for `person`; the agent transfers; an answered
/// (warm) transfer is briefed; a failed one is apologised for.
fn warm_script(dir: &std::path::Path, person: &str) -> std::path::PathBuf {
    let script = format!(
        "sonic:\n  phrases:\n    1: \"Put me through to the {person} please\"\n\
         rules:\n\
         \x20 - name: transfer\n\
         \x20   when: {{ userText: \"(?i)through to the (?P<who>[a-z]+)\" }}\n\
         \x20   reply: {{ toolUse: {{ name: transfer_to_person, input: {{ person: \"{{who}}\", reason: \"the caller asked\" }} }} }}\n\
         \x20 - name: brief\n\
         \x20   when: {{ toolResult: {{ name: transfer_to_person, status: success }} }}\n\
         \x20   reply: {{ text: \"{BRIEF}\" }}\n\
         \x20 - name: transfer-failed\n\
         \x20   when: {{ toolResult: {{ name: transfer_to_person, status: error }} }}\n\
         \x20   reply: {{ text: \"Sorry, nobody could take your call right now.\" }}\n\
         default: {{ text: \"Hello from the bank.\" }}\n"
    );
    std::fs::create_dir_all(dir).expect("a folder");
    let path = dir.join("warm-script.yaml");
    std::fs::write(&path, script).expect("the script");
    path
}

/// Triage's people, both warm: `advisor` at `advisor`'s phone, `nobody` where nothing answers.
fn warm_people(advisor: u16, nobody: u16) -> String {
    format!(
        "    transferTimeoutSeconds: 8\n    people:\n\
         \x20     - {{ name: advisor, address: \"sip:advisor@127.0.0.1:{advisor}\", transfer: warm }}\n\
         \x20     - {{ name: nobody, address: \"sip:nobody@127.0.0.1:{nobody}\", transfer: warm }}\n"
    )
}

/// 250 ms windows in which a tone was heard clearly.
fn windows_with(tone: &[f64], over: f64) -> Vec<usize> {
    tone.iter().enumerate().filter(|(_, a)| **a > over).map(|(i, _)| i).collect()
}

/// Windows in which either note of the chime was heard.
fn chime_windows(phone: &Phone, sox: &std::path::Path) -> Vec<usize> {
    let (low, high) = (phone.heard_tone(sox, CHIME_HZ[0]), phone.heard_tone(sox, CHIME_HZ[1]));
    (0..low.len().min(high.len())).filter(|i| low[*i] > 0.03 || high[*i] > 0.03).collect()
}

#[test]
fn a_warm_transfer_holds_the_caller_briefs_the_person_then_puts_them_through() {
    // Beside the stack's own folder, which it empties as it starts.
    let dir = std::env::temp_dir().join(format!("switchboard-sip-warm-script-{}", std::process::id()));
    let script = warm_script(&dir, "advisor");
    let script_arg = script.to_string_lossy().into_owned();
    let tools = tools_bin().expect("tests/tools/install.sh");
    // The person: answers at once, silent for 16 s (the brief, the bridge), then its tone.
    let options =
        Options { lead: Some(16), tone: Some((20.0, PERSON_HZ as u32)), codec: Some("PCMA"), ..Options::default() };
    let (person, port) =
        Phone::start_with(&dir, &tools, "advisor", "advisor", 20, 150, "udp", ";answermode=auto", "", None, options);
    let stack = stack_custom("warm", &[], &warm_people(port, dead_port()), &["--sim-script", &script_arg]);
    // The caller: phrase 1, 18 s of silence (hold, brief), 20 s of its tone; then it hangs up.
    let dial = format!("/dial sip:triage@{};transport=udp", stack.sip);
    let options = Options { then: Some((CALLER_HZ as u32, 20)), ..Options::default() };
    let (caller, _) =
        Phone::start_with(&stack.dir, &stack.tools, "caller", "caller", 18, 120, "udp", "", "", Some(&dial), options);
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", stack.edge.log_text(), caller.log(), person.log());
    wait_for(
        "the caller and the person are bridged",
        Duration::from_secs(60),
        || stack.edge.log_text().contains("the caller and the person are bridged"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(edge.contains("warm=true") && edge.contains("dialling the person"), "{}", context());
    assert!(edge.contains("outcome=\"transferred\""), "the person answered: {}", context());
    assert!(!edge.contains("(REFER)"), "a warm transfer dials: {}", context());
    wait_for("the bridge ends", Duration::from_secs(60), || stack.edge.log_text().contains("bridge ended"), context);
    assert!(stack.edge.log_text().contains("then the caller hung up"), "{}", context());
    caller.wait_over(Duration::from_secs(10));
    person.wait_over(Duration::from_secs(10));
    let sox = stack.tools.join("sox");
    // The person heard the agent's brief first (its voice, neither the chime nor the
    // caller), then the caller.
    let from_caller = windows_with(&person.heard_tone(&sox, CALLER_HZ), 0.1);
    assert!(from_caller.len() >= 8, "the person heard the caller: {from_caller:?}\n{}", context());
    let (_, loudness) = person.heard(&sox);
    let brief: Vec<usize> = (0..from_caller[0]).filter(|i| loudness[*i] > 0.02).collect();
    assert!(brief.len() >= 4, "the person heard the agent before the caller: {loudness:?}\n{}", context());
    assert!(chime_windows(&person, &sox).is_empty(), "the person never hears the chime: {}", context());
    // The caller heard the chime, then the person, and no chime once put through.
    let chime = chime_windows(&caller, &sox);
    let from_person = windows_with(&caller.heard_tone(&sox, PERSON_HZ), 0.1);
    assert!(chime.len() >= 3, "the caller heard the hold chime: {chime:?}\n{}", context());
    assert!(from_person.len() >= 8, "the caller heard the person: {from_person:?}\n{}", context());
    assert!(chime.iter().all(|w| *w < from_person[0]), "the chime stops when put through: {chime:?} {from_person:?}");
    // The record: the warm transfer, the brief, and the session ended after it.
    wait_for(
        "the record says the agent briefed the person and left",
        Duration::from_secs(20),
        || the_session(&stack).contains("transferred to advisor (warm"),
        || the_session(&stack),
    );
    let shown = the_session(&stack);
    assert!(shown.contains(BRIEF), "the brief is in the record: {shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_warm_transfer_nobody_answers_comes_back_to_the_agent_off_hold() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-warm-nobody-script-{}", std::process::id()));
    let script = warm_script(&dir, "nobody");
    let script_arg = script.to_string_lossy().into_owned();
    let stack =
        stack_custom("warm-nobody", &[], &warm_people(dead_port(), dead_port()), &["--sim-script", &script_arg]);
    let caller = Phone::dial(&stack, "caller", "triage", 25, 60);
    let context = || format!("{}\n--- caller ---\n{}", stack.edge.log_text(), caller.log());
    wait_for(
        "the transfer ends",
        Duration::from_secs(60),
        || stack.edge.log_text().contains("transfer ended"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(edge.contains("warm=true") && edge.contains("dialling the person"), "{}", context());
    assert!(edge.contains("outcome=\"no_answer\""), "nobody answered in time: {}", context());
    assert!(!edge.contains("bridged"), "{}", context());
    caller.wait_over(Duration::from_secs(45));
    let shown = the_session(&stack);
    assert!(shown.contains("transfer_no_answer"), "the model got the typed outcome: {shown}");
    assert!(shown.contains("Sorry, nobody could take your call"), "the agent told the caller: {shown}");
    // The caller heard the chime while the phone rang, then the agent again (its voice,
    // louder than the chime's quiet, after the last chime).
    let sox = stack.tools.join("sox");
    let chime = chime_windows(&caller, &sox);
    assert!(chime.len() >= 3, "the caller heard the hold chime: {chime:?}\n{}", context());
    let (_, loudness) = caller.heard(&sox);
    let last = *chime.last().unwrap_or(&0);
    let after: Vec<usize> = (last + 1..loudness.len()).filter(|i| loudness[*i] > 0.02).collect();
    assert!(after.len() >= 4, "the agent spoke to the caller again: {loudness:?}\n{}", context());
    let _ = std::fs::remove_dir_all(&dir);
}
