//! `switchboard load`, run as a user runs it: the real binary against `switchboard local`
//! (the real binary too, with its Bedrock simulator), voice callers speaking a turn —
//! rendered by the simulator's Polly endpoint, so its Nova Sonic hears the words and the
//! agents hand over — and text callers typing the balance
//! conversation; each report is checked against what the simulator itself counted
//! (`GET /stats`). Then the failures: a gateway that is down (every session `connect
//! refused`, a non-zero exit) and one at its session limit (the refusals counted by code
//! as capacity refusals).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;

#[path = "../support/served.rs"]
#[allow(dead_code)]
mod served;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A `switchboard local` process, killed on drop.
struct Local {
    child: std::process::Child,
    /// The gateway, `ws://127.0.0.1:PORT`.
    gateway: String,
    /// The simulator's endpoint and the certificate it is trusted by.
    sim: String,
    cert: String,
    home: PathBuf,
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// The simulator's Nova Sonic for many callers on one machine: the Example Bank's script,
/// a 300 ms end-of-turn pause and short replies (still paced in real time), so that a
/// session lasts seconds, not tens of them.
const QUICK_SONIC: &str = "sonic:
  turnDetection: { silenceMs: { high: 300, medium: 300, low: 300 } }
  speech: { msPerChar: 10, chunkMs: 40, responseDelayMs: 100 }
";

/// Starts `switchboard local examples/banking` on a free port with `more` arguments, its
/// simulator on the Example Bank's script with [`QUICK_SONIC`].
fn local(more: &[&str]) -> Local {
    let home = std::env::temp_dir().join(format!("switchboard-load-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&home).expect("a folder");
    let script = home.join("sim.yaml");
    std::fs::write(&script, format!("{}\n{QUICK_SONIC}", switchboard_sim::BANKING_SCRIPT_YAML)).expect("script");
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["local", "examples/banking", "--port", "0"])
        .arg("--sim-script")
        .arg(&script)
        .args(more)
        .current_dir(root())
        .env("XDG_DATA_HOME", &home)
        .env("SWITCHBOARD_LOG", "warn")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("switchboard local starts");
    let stdout = child.stdout.take().expect("stdout");
    let (found, lines) = std::sync::mpsc::channel();
    // Its output is read to the end, so that its prints never meet a closed pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = found.send(line);
        }
    });
    let (mut gateway, mut sim) = (None, None);
    while gateway.is_none() || sim.is_none() {
        let line = lines.recv_timeout(Duration::from_secs(60)).expect("local mode prints its addresses");
        if let Some(rest) = line.strip_prefix("Bedrock simulator on ") {
            let (endpoint, cert) = rest.split_once(" (trust ").expect("the simulator's certificate");
            sim = Some((endpoint.to_owned(), cert.trim_end_matches(')').to_owned()));
        } else if let Some((_, rest)) = line.split_once("(default): ws://") {
            gateway = rest.split('/').next().map(|addr| format!("ws://{addr}"));
        }
    }
    let (sim, cert) = sim.expect("sim");
    Local { child, gateway: gateway.expect("gateway"), sim, cert, home }
}

/// The simulator's counters (`GET /stats`).
fn sim_stats(local: &Local) -> serde_json::Value {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let trust = switchboard_models::net::Trust::from_file(Some(std::path::Path::new(&local.cert))).expect("trust");
        let client = trust.client().expect("client");
        let uri: http::Uri = format!("{}/stats", local.sim).parse().expect("uri");
        let response = client.get(uri).await.expect("the simulator answers");
        assert!(response.status().is_success(), "{response:?}");
        let body = response.into_body().collect().await.expect("body").to_bytes();
        serde_json::from_slice(&body).expect("JSON")
    })
}

/// Runs `switchboard load <args> --json`: its exit code, its report and what it wrote to stderr.
fn load(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, serde_json::Value, String, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("load")
        .args(args)
        .arg("--json")
        .current_dir(root())
        .env_remove("RUST_LOG")
        .env_remove("SWITCHBOARD_LOG")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .envs(env.iter().copied())
        .output()
        .expect("switchboard load runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (out.status.code(), report, stderr, started.elapsed())
}

fn count(value: &serde_json::Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("a count: {value}"))
}

/// How much the counter at `path` of the simulator's stats grew (absent: 0).
fn delta(before: &serde_json::Value, after: &serde_json::Value, path: &[&str]) -> u64 {
    let at = |v: &serde_json::Value| path.iter().fold(v.clone(), |v, k| v[*k].clone());
    let n = |v: serde_json::Value| if v.is_null() { 0 } else { count(&v) };
    n(at(after)) - n(at(before))
}

/// `callers` voice callers, `rate` a second, at most `concurrency` at once, each asking for
/// its balance aloud: triage hands over to identity verification, which answers. Checks the
/// report and that the simulator heard every spoken turn once.
fn voice_callers(local: &Local, callers: u64, rate: u32, concurrency: u32) {
    let before = sim_stats(local);
    let aws = [("AWS_ACCESS_KEY_ID", "AKIDLOADTEST"), ("AWS_SECRET_ACCESS_KEY", "not-a-secret")];
    let (count_s, rate_s, concurrency_s) = (callers.to_string(), rate.to_string(), concurrency.to_string());
    let args = [
        local.gateway.as_str(),
        "--scenario",
        "dataplane/tests/load/transfer-by-voice.yaml",
        "--callers",
        &count_s,
        "--rate",
        &rate_s,
        "--concurrency",
        &concurrency_s,
        // Generous: this checks what was counted, not how fast (a loaded machine is slow).
        "--turn-timeout",
        "90",
        // The Example Bank's triage speaks first: every caller hears its greeting out.
        "--greeting",
        "--speech-endpoint-url",
        &local.sim,
        "--speech-ca-file",
        &local.cert,
    ];
    let (code, report, stderr, took) = load(&args, &aws);
    let after = sim_stats(local);
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");
    eprintln!("{callers} voice callers took {took:?}: {report}");
    let sessions = &report["sessions"];
    assert_eq!((count(&sessions["started"]), count(&sessions["completed"])), (callers, callers), "{report:#}");
    assert_eq!(count(&report["turns"]["spoken"]), callers, "{report:#}");
    assert_eq!(count(&report["handoffs"]), callers, "{report:#}");
    assert_eq!(count(&report["time_to_first_audio_ms"]["count"]), callers, "{report:#}");
    assert_eq!(count(&report["handoff_gap_ms"]["count"]), callers, "{report:#}");
    assert!(report["errors"].as_object().is_some_and(|e| e.is_empty()), "{report:#}");
    // The simulator heard every spoken turn, once: its utterances are the report's turns,
    // its replies sent the turns answered plus triage's spoken greeting in each session (the
    // Example Bank's triage speaks first; the callers wait for it to end), and it opened a
    // Nova Sonic stream per session and one more per handoff.
    let grew = |path: &[&str]| delta(&before, &after, path);
    assert_eq!(grew(&["sonic", "utterances"]), callers, "{before}\n{after}");
    assert_eq!(grew(&["sonic", "streams"]), 2 * callers, "{before}\n{after}");
    assert_eq!(grew(&["sonic", "repliesSent"]), 2 * callers, "{before}\n{after}");
}

/// Issue 43's load test: 200 voice callers against local mode, 4 new a second, at most 40
/// at once. It needs the machine to itself (a debug build's 200 sessions cost about 72
/// core-seconds: among the rest of the suite on two cores they time out), so `./test.sh`
/// runs it in a stage of its own after the suite (`--run-ignored only -E 'binary(load)'`).
#[test]
#[ignore = "needs the machine to itself: ./test.sh runs it in its own stage"]
fn two_hundred_voice_callers_load_local_mode_and_the_report_matches_what_the_simulator_saw() {
    let local = local(&[]);
    voice_callers(&local, 200, 4, 40);
}

#[test]
fn voice_and_text_callers_load_local_mode_and_the_report_matches_what_the_simulator_saw() {
    let local = local(&[]);
    // Ten voice callers beside the rest of the suite (two hundred have a stage of their own).
    voice_callers(&local, 10, 10, 10);

    // Text callers type the balance conversation: three turns, two handoffs each.
    let before = sim_stats(&local);
    let args = [
        local.gateway.as_str(),
        "--scenario",
        "examples/banking/tests/balance.yaml",
        "--mode",
        "text",
        "--callers",
        "40",
    ];
    let (code, report, stderr, _) = load(&[&args[..], &["--rate", "40", "--think-ms", "100"]].concat(), &[]);
    let after = sim_stats(&local);
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");
    assert_eq!(count(&report["sessions"]["completed"]), 40, "{report:#}");
    assert_eq!(count(&report["turns"]["typed"]), 120, "{report:#}");
    assert_eq!(count(&report["handoffs"]), 80, "{report:#}");
    assert_eq!(count(&report["time_to_first_token_ms"]["count"]), 120, "{report:#}");
    // Each typed turn is one Converse stream at least, and each handoff another (the next
    // agent answers); no Nova Sonic stream was opened for text.
    let grew = |path: &[&str]| delta(&before, &after, path);
    let converse = grew(&["operations", "requests", "converseStream"]);
    assert!(converse >= 120 + 80, "{converse} ConverseStream requests for 120 turns and 80 handoffs\n{after}");
    assert_eq!(grew(&["sonic", "streams"]), 0, "{before}\n{after}");
}

#[test]
fn a_gateway_that_is_down_or_full_gives_codes_and_a_non_zero_exit() {
    // Down: nothing listens on the port (held: no other process can take it meanwhile).
    let closed = served::ClosedPort::new();
    let gateway = format!("ws://{}", closed.addr());
    let args = [&gateway, "--scenario", "examples/banking/tests/balance.yaml", "--mode", "text", "--callers", "3"];
    let (code, report, stderr, took) = load(&[&args[..], &["--rate", "20"]].concat(), &[]);
    assert_eq!(code, Some(1), "{report:#}\n{stderr}");
    assert!(stderr.contains("3 of 3 session(s) did not complete"), "{stderr}");
    assert_eq!(count(&report["failed_by_code"]["connect refused"]), 3, "{report:#}");
    assert!(took < Duration::from_secs(30), "{took:?}");

    // Full: local mode takes two sessions at once; ten callers arrive together.
    let local = local(&["--max-sessions", "2"]);
    let args = [
        local.gateway.as_str(),
        "--scenario",
        "examples/banking/tests/balance.yaml",
        "--mode",
        "text",
        "--callers",
        "10",
    ];
    let (code, report, stderr, _) = load(&[&args[..], &["--rate", "200"]].concat(), &[]);
    assert_eq!(code, Some(1), "{report:#}\n{stderr}");
    let sessions = &report["sessions"];
    let (completed, failed, refused) =
        (count(&sessions["completed"]), count(&sessions["failed"]), count(&sessions["refused_for_capacity"]));
    assert_eq!(completed + failed, 10, "{report:#}");
    assert!(completed >= 1 && refused >= 1, "{report:#}");
    assert_eq!(refused, failed, "every failure is a capacity refusal: {report:#}");
    let refusals: u64 = report["capacity_refusals"].as_object().expect("codes").values().map(count).sum();
    assert_eq!(refusals, refused, "{report:#}");
}
