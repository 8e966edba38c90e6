//! Transfers: the agent puts the caller through to a person whose phone answers, or one who
//! cannot be reached comes back to the agent as a typed result.

use std::path::{Path, PathBuf};
use std::time::Duration;

use switchboard_tests::cluster::tools_bin;

use crate::phone::Phone;
use crate::stack::{dead_port, stack_custom, the_session, wait_for};

/// A simulator script for the transfer tests: the caller's tone (phrase 1) asks for
/// `person`; the agent calls `transfer_to_person`, and says sorry when it fails.
pub(crate) fn transfer_script(stack_dir: &Path, person: &str) -> PathBuf {
    let script = format!(
        "sonic:\n  phrases:\n    1: \"Put me through to the {person} please\"\n\
         rules:\n\
         \x20 - name: transfer\n\
         \x20   when: {{ userText: \"(?i)through to the (?P<who>[a-z]+)\" }}\n\
         \x20   reply: {{ toolUse: {{ name: transfer_to_person, input: {{ person: \"{{who}}\", reason: \"the caller asked\" }} }} }}\n\
         \x20 - name: transfer-failed\n\
         \x20   when: {{ toolResult: {{ name: transfer_to_person, status: error }} }}\n\
         \x20   reply: {{ text: \"Sorry, nobody could take your call right now.\" }}\n\
         default: {{ text: \"Hello from the bank.\" }}\n"
    );
    std::fs::create_dir_all(stack_dir).expect("a folder");
    let path = stack_dir.join("transfer-script.yaml");
    std::fs::write(&path, script).expect("the script");
    path
}

/// The people triage may put a caller through to: `advisor` at `advisor`'s phone, and
/// `nobody` at a port where nothing answers.
pub(crate) fn people(advisor: u16, nobody: u16) -> String {
    format!(
        "    transferTimeoutSeconds: 10\n    people:\n\
         \x20     - {{ name: advisor, address: \"sip:advisor@127.0.0.1:{advisor}\", description: Accounts }}\n\
         \x20     - {{ name: nobody, address: \"sip:nobody@127.0.0.1:{nobody}\" }}\n"
    )
}

#[test]
fn the_agent_transfers_the_caller_to_a_person_whose_phone_rings_and_answers() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-transfer-script-{}", std::process::id()));
    let script = transfer_script(&dir, "advisor");
    let script_arg = script.to_string_lossy().into_owned();
    // The person's phone first (its port goes into the Agent), in a stack-less folder.
    let tools = tools_bin().expect("tests/tools/install.sh");
    let (person, port) = Phone::answering(&dir, &tools, "advisor", "advisor", 60);
    let stack = stack_custom("transfer", &[], &people(port, dead_port()), &["--sim-script", &script_arg]);
    let caller = Phone::dial(&stack, "caller", "triage", 25, 60);
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", stack.edge.log_text(), caller.log(), person.log());
    wait_for(
        "the transfer ends",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("transfer ended"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(edge.contains("outcome=\"transferred\""), "the person answered: {}", context());
    caller.put_through_to(&person, "advisor", context);
    // The agent's leg ends: the session ends saying to whom, and the edge hangs its leg up.
    wait_for(
        "the agent's session ends",
        Duration::from_secs(10),
        || stack.edge.log_text().contains("call ended"),
        context,
    );
    // The record is written behind the session: wait for its end.
    wait_for(
        "the record says the caller was transferred, and to whom",
        Duration::from_secs(20),
        || the_session(&stack).contains("transferred to advisor"),
        || the_session(&stack),
    );
    let shown = the_session(&stack);
    assert!(shown.contains("transfer_to_person"), "the tool call is in the record: {shown}");
    assert!(shown.contains("hung up by transfer"), "the record says the transfer ended the call: {shown}");
    drop(person);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_person_who_cannot_be_reached_comes_back_to_the_agent_as_a_typed_result() {
    let dir = std::env::temp_dir().join(format!("switchboard-sip-transfer-nobody-{}", std::process::id()));
    let script = transfer_script(&dir, "nobody");
    let script_arg = script.to_string_lossy().into_owned();
    let stack = stack_custom("nobody", &[], &people(dead_port(), dead_port()), &["--sim-script", &script_arg]);
    let caller = Phone::dial(&stack, "caller", "triage", 25, 60);
    let context = || format!("{}\n--- caller ---\n{}", stack.edge.log_text(), caller.log());
    wait_for(
        "the transfer ends",
        Duration::from_secs(40),
        || stack.edge.log_text().contains("transfer ended"),
        context,
    );
    let edge = stack.edge.log_text();
    assert!(!edge.contains("outcome=\"transferred\""), "nobody answered: {}", context());
    // The caller is still with the agent, which heard why and said sorry.
    caller.wait_over(Duration::from_secs(45));
    let shown = the_session(&stack);
    assert!(shown.contains("transfer_"), "the model got a transfer_<outcome> error: {shown}");
    assert!(shown.contains("Sorry, nobody could take your call"), "the agent told the caller: {shown}");
    assert!(!shown.contains("transferred to"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}
