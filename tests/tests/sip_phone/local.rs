//! Local mode's own SIP edge (`switchboard local --sip-listen`): answering calls, placing
//! them with no trunk, and putting a caller through to a person by dialling and bridging
//! (`--sip-transfer-method dial`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use switchboard_tests::cluster::tools_bin;
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::{Process, switchboard_binary};

use crate::bridge::{Seen, bridged_both_ways, caller, person};
use crate::phone::{Callee, Phone, free_phone_port};
use crate::stack::{RTP_PORTS, copy_dir, dead_port, free_udp_range, get_metrics, sample, wait_for, with_telephony};
use crate::transfer::{people, transfer_script};

/// Local mode answers phones itself (`switchboard local --sip-listen`): the SIP edge runs in
/// its process, with no `switchboard sip` beside it, so the same folder of YAML answers a
/// softphone offline. The call reaches triage, the phone hears its reply, the session is in
/// local mode's record, and the edge's metrics are on local mode's `/metrics` with the
/// gateway's.
#[test]
fn local_mode_answers_a_phone_call_in_process() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let (dir, record, local) = start_local(&binary, "switchboard-sip-local", "local-sip");
    let printed = local.log_text();
    let sip = sip_address(&local);
    let dial = format!("/dial sip:triage@{sip};transport=udp");
    let (phone, _) = Phone::start(&dir, &tools, "caller", "caller", 8, 30, "udp", "", "", Some(&dial));
    phone.wait_over(Duration::from_secs(40));
    let log = phone.log();
    assert!(log.contains("Call established"), "{log}\n--- local ---\n{}", local.log_text());
    let (_, windows) = phone.heard(&tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the phone heard triage through local mode's own edge: {windows:?}");
    let out = Command::new(&binary)
        .args(["sessions", "list", "--json", "--record-database-url", &record])
        .output()
        .expect("switchboard sessions");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session for the call: {list:?}");
    assert_eq!(list[0]["first_agent"], "default/triage", "{list:?}");
    let gateway = printed
        .lines()
        .find_map(|l| l.split_once("Chat with: switchboard chat ws://").and_then(|(_, url)| url.split('/').next()))
        .expect("local mode prints its session URL")
        .to_owned();
    let ended = r#"switchboard_sip_calls_ended_total{direction="inbound",outcome="phone_hung_up"}"#;
    let mut text = String::new();
    wait_for(
        "local mode's /metrics counts the call's end",
        Duration::from_secs(10),
        || {
            text = get_metrics(&gateway);
            sample(&text, ended) == Some(1.0)
        },
        || format!("{}\n--- local ---\n{}", get_metrics(&gateway), local.log_text()),
    );
    assert_eq!(sample(&text, r#"switchboard_sip_calls_total{direction="inbound",outcome="answered"}"#), Some(1.0));
    assert_eq!(sample(&text, r#"switchboard_sip_calls_active{direction="inbound"}"#), Some(0.0));
    assert!(text.contains("# TYPE switchboard_gateway_sessions_live gauge"), "the gateway's beside them: {text}");
    drop(local);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Local mode places calls too, with no trunk: `switchboard call sip:USER@HOST:PORT` rings a
/// softphone on this machine at its own address through local mode's own edge, and the
/// agent talks when it answers; a number, which only a trunk routes, fails with what to do.
#[test]
fn local_mode_calls_a_softphone_with_no_trunk() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let (dir, record, local) = start_local(&binary, "switchboard-sip-local-out", "local-sip-out");
    let printed = local.log_text();
    assert!(printed.contains("Outbound calls: switchboard call sip:USER@HOST:PORT --agent triage"), "{printed}");
    let gateway = printed
        .lines()
        .find_map(|l| l.split_once("Chat with: switchboard chat ").map(|(_, url)| url.trim().to_owned()))
        .expect("local mode prints its session URL");
    let port = free_phone_port();
    let phrase: &[&str] = &["synth", "1.5", "sine", "500", "vol", "0.5", "pad", "0.5", "60"];
    let callee = Callee::listen_saying(&dir, &tools, "callee", "auto", 1, port, &[phrase]);
    let call = |to: &str| {
        let mut command = Command::new(&binary);
        command.args(["call", to, "--agent", "triage", "--gateway", &gateway, "--follow-seconds", "60"]);
        std::thread::spawn(move || {
            let out = command.output().expect("switchboard call runs");
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            (out.status.success(), text)
        })
    };
    let placed = call(&callee.uri());
    let context = || format!("--- local ---\n{}\n--- callee ---\n{}", local.log_text(), callee.phone.log());
    wait_for(
        "the softphone answers",
        Duration::from_secs(30),
        || callee.phone.log().contains("Call established"),
        context,
    );
    // The callee says its phrase and hears triage's reply; then it hangs up.
    std::thread::sleep(Duration::from_secs(12));
    callee.hang_up();
    let (ok, out) = placed.join().expect("switchboard call");
    assert!(ok && out.contains("answered (SIP 200) session gw-") && out.contains("completed"), "{out}\n{}", context());
    assert!(out.contains("the callee first heard the agent"), "{out}");
    callee.phone.wait_over(Duration::from_secs(10));
    let (_, windows) = callee.phone.heard(&tools.join("sox"));
    let voiced = windows.iter().filter(|rms| **rms > 0.02).count();
    assert!(voiced >= 4, "the softphone heard triage: {windows:?}\n{}", context());
    let (ok, refused) = call("+442079460018").join().expect("a number");
    assert!(!ok && refused.contains("no outbound trunk routes the number"), "{refused}");
    let out = Command::new(&binary)
        .args(["sessions", "list", "--json", "--record-database-url", &record])
        .output()
        .expect("switchboard sessions");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(list.as_array().expect("a list").len(), 1, "one session for the answered call: {list}");
    drop(local);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Local mode's own edge told to dial (`--sip-transfer-method dial`, as `switchboard sip
/// --transfer-method dial`): the agent's `transfer_to_person` has the edge in local mode's
/// process dial the person (a second baresip, taking only A-law) and bridge the caller to
/// them, never sending the caller's phone a REFER; the two phones hear each other through
/// it, the caller's hang-up ends the person's call, and local mode's record says to whom the
/// caller was transferred.
#[test]
fn local_mode_told_to_dial_calls_the_person_and_bridges_the_caller_to_them() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    // The person's phone and the simulator's script, in a folder of their own (the person's
    // port goes into triage's YAML before local mode starts).
    let people_dir = std::env::temp_dir().join(format!("switchboard-sip-local-dial-people-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&people_dir);
    let script = transfer_script(&people_dir, "advisor");
    let (person, port) = person(&people_dir);
    let people = people(port, dead_port());
    let extra = ["--sim-script", &script.to_string_lossy(), "--sip-transfer-method", "dial"];
    let (dir, record, local) =
        start_local_with(&binary, "switchboard-sip-local-dial", "local-sip-dial", &extra, |triage| {
            with_telephony(&triage, &people)
        });
    let sip = sip_address(&local);
    let caller = caller(&dir, &tools, &format!("sip:triage@{sip};transport=udp"), "");
    let context =
        || format!("{}\n--- caller ---\n{}\n--- person ---\n{}", local.log_text(), caller.log(), person.log());
    let edge_log = || local.log_text();
    let session = || the_session(&binary, &record);
    let seen = Seen { edge_log: &edge_log, session: &session, sox: tools.join("sox") };
    bridged_both_ways(&seen, &caller, &person, &context);
    drop(person);
    drop(local);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&people_dir);
}

/// Where local mode prints that phones call triage.
pub(crate) fn sip_address(local: &Process) -> SocketAddr {
    let printed = local.log_text();
    printed
        .lines()
        .find_map(|l| l.strip_prefix("Phone calls: sip:triage@")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("local mode prints where phones call triage:\n{printed}"))
}

/// The record of the one session in `record`: its `sessions show` text.
pub(crate) fn the_session(binary: &Path, record: &str) -> String {
    let sessions = |args: &[&str]| {
        let out = Command::new(binary)
            .arg("sessions")
            .args(args)
            .args(["--record-database-url", record])
            .output()
            .expect("switchboard sessions");
        assert!(out.status.success(), "switchboard sessions {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let list: serde_json::Value = serde_json::from_str(&sessions(&["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session: {list:?}");
    sessions(&["show", list[0]["id"].as_str().expect("an id")])
}

/// `switchboard local` of a copy of the Example Bank in a fresh temp folder named `name`,
/// answering SIP on loopback (any free port) with a free RTP range and its record in the
/// folder: the folder, the record's URL and the process (logged as `process`).
pub(crate) fn start_local(binary: &Path, name: &str, process: &str) -> (PathBuf, String, Process) {
    start_local_with(binary, name, process, &[], |triage| triage)
}

/// [`start_local`] with more flags for `switchboard local`, and triage.yaml (its copy)
/// edited by `edit`.
pub(crate) fn start_local_with(
    binary: &Path,
    name: &str,
    process: &str,
    more: &[&str],
    edit: impl Fn(String) -> String,
) -> (PathBuf, String, Process) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let agents = dir.join("agents");
    copy_dir(&repo_root().join("examples/banking"), &agents);
    let triage = agents.join("triage.yaml");
    let text = std::fs::read_to_string(&triage).expect("triage.yaml");
    std::fs::write(&triage, edit(text)).expect("write");
    let record = format!("sqlite:{}", dir.join("record.db").display());
    let rtp = free_udp_range(RTP_PORTS);
    let (agents, rtp) = (agents.to_string_lossy().into_owned(), format!("{}-{}", rtp.0, rtp.1));
    let args = [
        "local",
        &agents,
        "--port",
        "0",
        "--record-database-url",
        &record,
        "--sip-listen",
        "127.0.0.1:0",
        "--sip-rtp-ports",
        &rtp,
    ];
    let local = Process::start(binary, process, &[&args[..], more].concat(), &[], "Chat with: switchboard chat ws://")
        .expect("switchboard local starts");
    (dir, record, local)
}
