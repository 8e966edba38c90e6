//! The Example Bank answers the phone as it ships (`switchboard local examples/banking`, the
//! README's phone tour): triage claims the bank's number and its Persona speaks first, so a
//! caller who says nothing hears the greeting, whether they dial the number or
//! `sip:triage@`; and a caller who asks for a person is put through to the example's
//! advisor (a second baresip answering as `advisor`) by a REFER their phone follows.

use std::path::Path;
use std::time::Duration;

use switchboard_crds::catalog::Catalog;
use switchboard_tests::cluster::tools_bin;
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::switchboard_binary;

use crate::local::{sip_address, start_local, start_local_with};
use crate::phone::{Options, Phone};
use crate::stack::wait_for;
use crate::transfer::transfer_script;

/// Triage's greeting in the Example Bank.
const GREETING: &str = "Hello, you're through to Example Bank. I'm Ava. How can I help you today?";

/// The number and the advisor's address triage has in `examples/banking`, read as local
/// mode reads them.
fn the_examples_phone() -> (String, String) {
    let catalog = Catalog::load_paths(&[repo_root().join("examples/banking")]).expect("the example loads");
    let triage = catalog.agent("default", "triage").expect("the example has triage");
    let telephony = &triage.spec.telephony;
    assert!(catalog.validate_agent(triage).is_empty(), "{:?}", catalog.validate_agent(triage));
    let advisor = telephony.person("advisor").expect("the example's triage lists an advisor");
    (telephony.numbers.first().expect("the example's triage claims a number").clone(), advisor.address.clone())
}

/// The sessions local mode recorded in `record`: `sessions list --json`.
fn sessions(binary: &Path, record: &str) -> Vec<serde_json::Value> {
    let out = std::process::Command::new(binary)
        .args(["sessions", "list", "--json", "--record-database-url", record])
        .output()
        .expect("switchboard sessions");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    list.as_array().expect("a list").clone()
}

/// `sessions show ID`.
fn show(binary: &Path, record: &str, id: &str) -> String {
    let out = std::process::Command::new(binary)
        .args(["sessions", "show", id, "--record-database-url", record])
        .output()
        .expect("switchboard sessions show");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A caller who says nothing hears triage's greeting, dialling the example's number and
/// dialling triage by name; each call is one session of triage whose record opens with it.
#[test]
fn the_example_bank_greets_a_silent_caller_at_its_number_and_by_name() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let (number, _) = the_examples_phone();
    assert_eq!(number, "+442079460000", "a fictional number (Ofcom's drama range), as the docs say");
    let (dir, record, local) = start_local(&binary, "switchboard-sip-example", "local-sip-example");
    let sip = sip_address(&local);
    for (name, user) in [("by-number", number.as_str()), ("by-name", "triage")] {
        let dial = format!("/dial sip:{user}@{sip};transport=udp");
        // Ten seconds of silence, then the phone hangs up.
        let options = Options { silent: true, ..Options::default() };
        let (phone, _) = Phone::start_with(&dir, &tools, name, "caller", 8, 30, "udp", "", "", Some(&dial), options);
        phone.wait_over(Duration::from_secs(40));
        let log = phone.log();
        assert!(log.contains("Call established"), "{name}: {log}\n--- local ---\n{}", local.log_text());
        let (_, windows) = phone.heard(&tools.join("sox"));
        let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
        // The simulator speaks 60 ms a character: the greeting is about 4.4 s (17 windows).
        assert!(voiced >= 12, "{name}: the silent caller heard triage's greeting: {windows:?}");
    }
    wait_for(
        "both calls are in the record",
        Duration::from_secs(20),
        || sessions(&binary, &record).len() == 2,
        || format!("{:?}", sessions(&binary, &record)),
    );
    for session in sessions(&binary, &record) {
        assert_eq!(session["first_agent"], "default/triage", "{session}");
        let shown = show(&binary, &record, session["id"].as_str().expect("an id"));
        assert!(shown.contains(GREETING), "the session opens with the greeting: {shown}");
    }
    drop(local);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A caller at the example's number asks triage for a person (the simulator hears phrase 1
/// as "Put me through to the advisor please"): triage's `transfer_to_person` refers the
/// caller's phone to the example's advisor, whose phone takes the call, and local mode's
/// record says the caller was transferred to the advisor.
#[test]
fn the_example_banks_triage_puts_a_caller_through_to_its_advisor() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let (number, address) = the_examples_phone();
    let people_dir = std::env::temp_dir().join(format!("switchboard-sip-example-people-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&people_dir);
    let script = transfer_script(&people_dir, "advisor");
    let (person, port) = Phone::answering(&people_dir, &tools, "advisor", "advisor", 90);
    // The example's advisor answers on port 5080, as in the README's tour; tests run side by
    // side, so here the advisor's phone is on a port reserved for this test, and only the
    // port of the example's address changes (its name, user and cold transfer are kept).
    assert_eq!(address, "sip:advisor@127.0.0.1:5080", "the tour's advisor");
    let extra = ["--sim-script", &script.to_string_lossy()];
    let (dir, record, local) =
        start_local_with(&binary, "switchboard-sip-example-advisor", "local-sip-advisor", &extra, |triage| {
            let moved = triage.replace(&address, &format!("sip:advisor@127.0.0.1:{port}"));
            assert_ne!(moved, triage, "triage.yaml names its advisor");
            moved
        });
    let sip = sip_address(&local);
    // It asks for the advisor at once, over the greeting (a caller who knows what they want
    // talks over it: the greeting is not uninterruptible).
    let dial = format!("/dial sip:{number}@{sip};transport=udp");
    let (caller, _) = Phone::start(&dir, &tools, "caller", "caller", 25, 60, "udp", "", "", Some(&dial));
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", local.log_text(), caller.log(), person.log());
    wait_for("the transfer ends", Duration::from_secs(45), || local.log_text().contains("transfer ended"), context);
    assert!(local.log_text().contains("outcome=\"transferred\""), "the advisor answered: {}", context());
    caller.put_through_to(&person, "advisor", context);
    wait_for(
        "the record says the caller was transferred to the advisor",
        Duration::from_secs(20),
        || {
            let list = sessions(&binary, &record);
            list.len() == 1
                && show(&binary, &record, list[0]["id"].as_str().unwrap_or_default()).contains("transferred to advisor")
        },
        || format!("{:?}", sessions(&binary, &record)),
    );
    let list = sessions(&binary, &record);
    let shown = show(&binary, &record, list[0]["id"].as_str().expect("an id"));
    assert!(shown.contains(GREETING), "the caller was greeted first: {shown}");
    drop(person);
    drop(local);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&people_dir);
}
