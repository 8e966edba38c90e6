//! Local mode's own SIP edge (`switchboard local --sip-listen`).

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use switchboard_tests::cluster::tools_bin;
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::{Process, switchboard_binary};

use crate::phone::Phone;
use crate::stack::{RTP_PORTS, copy_dir, free_udp_range, get_metrics, sample, wait_for};

/// Local mode answers phones itself (`switchboard local --sip-listen`): the SIP edge runs in
/// its process, with no `switchboard sip` beside it, so the same folder of YAML answers a
/// softphone offline. The call reaches triage, the phone hears its reply, the session is in
/// local mode's record, and the edge's metrics are on local mode's `/metrics` with the
/// gateway's.
#[test]
fn local_mode_answers_a_phone_call_in_process() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let dir = std::env::temp_dir().join(format!("switchboard-sip-local-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let agents = dir.join("agents");
    copy_dir(&repo_root().join("examples/banking"), &agents);
    let record = format!("sqlite:{}", dir.join("record.db").display());
    let rtp = free_udp_range(RTP_PORTS);
    let local = Process::start(
        &binary,
        "local-sip",
        &[
            "local",
            &agents.to_string_lossy(),
            "--port",
            "0",
            "--record-database-url",
            &record,
            "--sip-listen",
            "127.0.0.1:0",
            "--sip-rtp-ports",
            &format!("{}-{}", rtp.0, rtp.1),
        ],
        &[],
        "Chat with: switchboard chat ws://",
    )
    .expect("switchboard local starts");
    let printed = local.log_text();
    let sip: SocketAddr = printed
        .lines()
        .find_map(|l| l.strip_prefix("Phone calls: sip:triage@")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("local mode prints where phones call triage:\n{printed}"));
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
