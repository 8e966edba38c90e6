//! What a call reaches: `switchboard local` (the Example Bank's test copy) and `switchboard
//! sip` in front of it, each test's in a folder of its own; and what they recorded and
//! counted (the record through `switchboard sessions`, the gateway's and the edge's metrics).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use switchboard_tests::cluster::tools_bin;
use switchboard_tests::ports;
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::{Process, switchboard_binary};

use crate::phone::Phone;

/// The number triage claims in the Example Bank (`examples/banking/triage.yaml`).
pub(crate) const TRIAGE_NUMBER: &str = "+442079460000";

/// `triage` (the text of triage.yaml) with its Agent's `spec.telephony` block replaced by
/// `lines` (YAML indented by four spaces). Panics when the example has no such block, or
/// when it no longer claims [`TRIAGE_NUMBER`].
pub(crate) fn with_telephony(triage: &str, lines: &str) -> String {
    let start = triage.find("\n  telephony:\n").expect("triage.yaml's Agent has a spec.telephony block") + 1;
    let body = start + "  telephony:\n".len();
    let block_len: usize = triage[body..]
        .split_inclusive('\n')
        .take_while(|line| line.starts_with("    ") || line.trim().is_empty())
        .map(str::len)
        .sum();
    let block = &triage[body..body + block_len];
    assert!(
        block.contains(&format!("numbers: [\"{TRIAGE_NUMBER}\"]")),
        "the Example Bank's triage no longer claims {TRIAGE_NUMBER}:\n{block}"
    );
    format!("{}  telephony:\n{lines}{}", &triage[..start], &triage[body + block_len..])
}

/// RTP ports the edge may use in one test (five pairs).
pub(crate) const RTP_PORTS: u16 = 10;

/// `switchboard local` (with the Example Bank, its `disputes` made a text-only agent a
/// caller can name) and `switchboard sip` in front of it, in a folder of their own.
pub(crate) struct Stack {
    pub(crate) dir: PathBuf,
    pub(crate) tools: PathBuf,
    pub(crate) binary: PathBuf,
    pub(crate) record: String,
    pub(crate) sip: SocketAddr,
    pub(crate) rtp: (u16, u16),
    pub(crate) edge: Process,
    pub(crate) local: Process,
}

impl Stack {
    /// This stack once its edge takes outbound calls (it has connected to the gateway's
    /// calls channel).
    pub(crate) fn taking_outbound_calls(self) -> Self {
        wait_for(
            "the edge takes outbound calls",
            Duration::from_secs(20),
            || self.edge.log_text().contains("taking outbound calls from the gateway"),
            || self.edge.log_text(),
        );
        self
    }

    /// What the edge, local mode and `phone` logged, for a failed assertion's message.
    pub(crate) fn logs(&self, phone: &Phone) -> String {
        format!("{}\n--- local ---\n{}\n--- baresip ---\n{}", self.edge.log_text(), self.local.log_text(), phone.log())
    }
}

/// A simulator script of a test's own (`switchboard local --sim-script`), written in a folder
/// of its own; the folder is removed on drop unless the test failed.
pub(crate) struct SimScript {
    pub(crate) dir: PathBuf,
    /// The flag's value: the script's path.
    pub(crate) arg: String,
}

impl SimScript {
    /// `yaml` written for the test `name`.
    pub(crate) fn write(name: &str, yaml: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("switchboard-sip-{name}-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let path = dir.join("script.yaml");
        std::fs::write(&path, yaml).expect("the script");
        Self { arg: path.to_string_lossy().into_owned(), dir }
    }
}

impl Drop for SimScript {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a folder");
    for entry in std::fs::read_dir(from).expect("the examples") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("a copy");
        }
    }
}

/// The first of `count` ports in a row, each free now over UDP and TCP (an even first),
/// reserved for this test ([`ports`]: below the kernel's ephemeral range, where no socket
/// bound to port 0 takes it before its program binds it).
pub(crate) fn free_udp_tcp_ports(count: u16) -> u16 {
    ports::free_ports(count, ports::UDP_TCP)
}

/// An even UDP port with `count - 1` after it, free now and reserved for this test (the
/// edge binds them call by call: no other test's pick lands in the range meanwhile).
pub(crate) fn free_udp_range(count: u16) -> (u16, u16) {
    let first = ports::free_ports(count, ports::UDP);
    (first, first + count - 1)
}

pub(crate) fn stack(name: &str) -> Stack {
    stack_with(name, &[])
}

/// [`stack`] with more flags for `switchboard sip` (trunks, say).
pub(crate) fn stack_with(name: &str, edge_args: &[&str]) -> Stack {
    stack_custom(name, edge_args, "", &[])
}

/// [`stack_with`] with more of triage's `spec.telephony` (`triage_telephony`: YAML lines
/// indented by four spaces) and more flags for `switchboard local` (a simulator script).
pub(crate) fn stack_custom(name: &str, edge_args: &[&str], triage_telephony: &str, local_args: &[&str]) -> Stack {
    stack_edited(name, edge_args, triage_telephony, local_args, |triage| triage)
}

/// [`stack_custom`] with triage.yaml (its test copy, number claimed) edited by `edit`.
pub(crate) fn stack_edited(
    name: &str,
    edge_args: &[&str],
    triage_telephony: &str,
    local_args: &[&str],
    edit: impl Fn(String) -> String,
) -> Stack {
    stack_through(name, edge_args, triage_telephony, local_args, edit, str::to_owned)
}

/// [`stack_edited`] whose edge reaches the gateway at the URL `through` makes of local mode's
/// session URL (a relay the test controls in between, say).
pub(crate) fn stack_through(
    name: &str,
    edge_args: &[&str],
    triage_telephony: &str,
    local_args: &[&str],
    edit: impl Fn(String) -> String,
    through: impl FnOnce(&str) -> String,
) -> Stack {
    stack_with_env(name, edge_args, triage_telephony, local_args, edit, through, &[])
}

/// [`stack_through`] with more environment for both processes (`env`, after the stack's
/// own `SWITCHBOARD_LOG`, which it may replace): an OpenTelemetry exporter's, a log level.
pub(crate) fn stack_with_env(
    name: &str,
    edge_args: &[&str],
    triage_telephony: &str,
    local_args: &[&str],
    edit: impl Fn(String) -> String,
    through: impl FnOnce(&str) -> String,
    env: &[(&str, &str)],
) -> Stack {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let dir = std::env::temp_dir().join(format!("switchboard-sip-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let agents = dir.join("agents");
    copy_dir(&repo_root().join("examples/banking"), &agents);
    // disputes, exposed and text-only in this copy (the example's is hybrid): an agent a
    // caller can name that takes no calls (488).
    let disputes = agents.join("disputes.yaml");
    let text = std::fs::read_to_string(&disputes).expect("disputes.yaml");
    assert!(text.contains("expose: false"), "disputes.yaml is not exposed: the test exposes it");
    assert!(text.contains("\n  mode: hybrid\n"), "disputes.yaml is hybrid: the test makes it text-only");
    let text = text.replace("expose: false", "expose: true").replacen("\n  mode: hybrid\n", "\n  mode: text\n", 1);
    std::fs::write(&disputes, text).expect("write");
    // triage's telephony: the example's number, and the test's people and settings in place
    // of the example's (its advisor listens on a fixed port; a test's person on its own).
    let triage = agents.join("triage.yaml");
    let text = std::fs::read_to_string(&triage).expect("triage.yaml");
    let claimed = with_telephony(&text, &format!("    numbers: [\"{TRIAGE_NUMBER}\"]\n{triage_telephony}"));
    // The example's triage speaks first; these tests were written for one that listens first
    // (their phones speak at once), so this copy does unless `edit` turns it back on
    // (amd.rs). example.rs and local.rs call the example as it ships.
    let listening = claimed.replacen("\n  speakFirst: true\n", "\n  speakFirst: false\n", 1);
    assert_ne!(listening, claimed, "the Example Bank's triage speaks first");
    std::fs::write(&triage, edit(listening)).expect("write");
    let record = format!("sqlite:{}", dir.join("record.db").display());
    let agents_arg = agents.to_string_lossy().into_owned();
    let local = Process::start(
        &binary,
        "local",
        // Its own SIP edge off: the test's `switchboard sip` answers and places the calls.
        &[
            &["local", &agents_arg, "--port", "0", "--record-database-url", &record, "--sip-listen", "off"][..],
            local_args,
        ]
        .concat(),
        &[&[("SWITCHBOARD_LOG", "info,switchboard_sim=debug")][..], env].concat(),
        "Chat with: switchboard chat ws://",
    )
    .expect("switchboard local starts");
    let log = local.log_text();
    let gateway = log
        .lines()
        .find_map(|l| l.split_once("Chat with: switchboard chat ").map(|(_, url)| url.trim().to_owned()))
        .expect("local mode prints its session URL");
    let gateway = through(&gateway);
    let rtp = free_udp_range(RTP_PORTS);
    let edge = Process::start(
        &binary,
        "sip",
        &[
            &[
                "sip",
                "--listen",
                "127.0.0.1:0",
                "--rtp-ports",
                &format!("{}-{}", rtp.0, rtp.1),
                "--gateway",
                &gateway,
                "--metrics-listen",
                "127.0.0.1:0",
            ][..],
            edge_args,
        ]
        .concat(),
        &[&[("SWITCHBOARD_LOG", "info,switchboard_sip_edge=debug")][..], env].concat(),
        "SIP edge ready",
    )
    .expect("switchboard sip starts");
    let sip = edge
        .log_text()
        .lines()
        .find_map(|l| l.split_once("listening on udp://").and_then(|(_, a)| a.split_whitespace().next()?.parse().ok()))
        .expect("the edge logs its SIP address");
    Stack { dir, tools, binary, record, sip, rtp, edge, local }
}

pub(crate) fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}:\n{}", context());
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn sessions(stack: &Stack, args: &[&str]) -> String {
    let out = Command::new(&stack.binary)
        .args(["sessions"])
        .args(args)
        .args(["--record-database-url", &stack.record])
        .output()
        .expect("switchboard sessions");
    assert!(out.status.success(), "switchboard sessions {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
pub(crate) fn gateway_url(stack: &Stack) -> String {
    stack
        .local
        .log_text()
        .lines()
        .find_map(|l| l.split_once("Chat with: switchboard chat ").map(|(_, url)| url.trim().to_owned()))
        .expect("local mode prints its session URL")
}

/// The gateway's `/metrics` (local mode serves them to this machine).
pub(crate) fn metrics(stack: &Stack) -> String {
    let url = gateway_url(stack);
    get_metrics(url.trim_start_matches("ws://").split('/').next().expect("host:port"))
}

/// `GET /metrics` of `authority` (host:port), the whole answer.
pub(crate) fn get_metrics(authority: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(authority).expect("the metrics endpoint");
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").expect("request");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("metrics");
    assert!(text.starts_with("HTTP/1.1 200"), "GET /metrics at {authority}: {text}");
    text
}

/// The edge's own `/metrics` (`--metrics-listen`, where it logs it serves them).
pub(crate) fn edge_metrics(stack: &Stack) -> String {
    let log = stack.edge.log_text();
    let authority = log
        .lines()
        .find_map(|l| l.split_once("metrics on http://").and_then(|(_, a)| a.split('/').next()))
        .unwrap_or_else(|| panic!("the edge logs where it serves its metrics:\n{log}"))
        .to_owned();
    get_metrics(&authority)
}

/// The value of one series (`name{labels}` exactly as rendered) in a `/metrics` text.
pub(crate) fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Waits until the edge's `series` reads `value` (a call's task counts its end a moment
/// after the phone has hung up); returns the metrics then.
pub(crate) fn wait_for_edge_sample(stack: &Stack, series: &str, value: f64) -> String {
    let mut text = String::new();
    wait_for(
        &format!("the edge's {series} is {value}"),
        Duration::from_secs(10),
        || {
            text = edge_metrics(stack);
            sample(&text, series) == Some(value)
        },
        || format!("{}\n--- edge ---\n{}", edge_metrics(stack), stack.edge.log_text()),
    );
    text
}

/// A port where nothing listens, UDP or TCP: free now and reserved for this test, so no
/// other test's phone or server is handed it while this one expects silence there.
pub(crate) fn dead_port() -> u16 {
    ports::free_port(ports::UDP_TCP)
}

/// The record of the one session: its `sessions show` text.
pub(crate) fn the_session(stack: &Stack) -> String {
    let list: serde_json::Value = serde_json::from_str(&sessions(stack, &["list", "--json"])).expect("JSON");
    let list = list.as_array().expect("a list");
    assert_eq!(list.len(), 1, "one session: {list:?}");
    sessions(stack, &["show", list[0]["id"].as_str().expect("an id")])
}
