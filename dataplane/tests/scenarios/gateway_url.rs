//! Scenarios against a gateway URL (`--gateway`): `switchboard local` in another process,
//! a scenario file given by path and, as an AgentTest's Job runs it, a folder of scenarios
//! and nothing else with the summary in a file.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{read_summary, root, scenario_dir, switchboard_test, text};

/// Stops the child process when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn scenarios_run_against_a_gateway_url() {
    let mut local = Child(
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["local", "examples/banking", "--port", "0"])
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("switchboard local starts"),
    );
    let stdout = local.0.stdout.take().expect("stdout");
    // "Agent triage (default): ws://127.0.0.1:PORT/v1/session?agent=triage"; the rest of
    // its output is read too, so that its prints never meet a closed pipe.
    let (found, url) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some((_, rest)) = line.split_once(": ws://") {
                let _ = found.send(format!("ws://{rest}"));
            }
        }
    });
    let url = url.recv_timeout(Duration::from_secs(30)).expect("local mode prints its URL");
    let gateway = url.split('?').next().expect("a URL").to_owned();
    let out = switchboard_test(&["examples/banking/tests/unknown-request.yaml", "--gateway", &gateway]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("against {gateway}")), "{stdout}");
    assert!(stdout.contains("ok: 1 scenario(s), 1 passed"), "{stdout}");
    // As an AgentTest's Job runs it: a folder of scenarios and nothing else (no agents to
    // read), against the gateway, the summary in a file.
    let dir = scenario_dir(&[(
        "scenario-01.yaml",
        &std::fs::read_to_string(root().join("examples/banking/tests/unknown-request.yaml")).expect("scenario"),
    )]);
    let summary_file = dir.join("summary.json");
    let args =
        [dir.to_str().expect("utf-8"), "--gateway", &gateway, "--summary-file", summary_file.to_str().expect("utf-8")];
    let out = switchboard_test(&args);
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let summary = read_summary(&summary_file);
    assert!(summary.ok() && summary.total == 1 && summary.first_divergence.is_none(), "{summary:?}");
    let _ = std::fs::remove_dir_all(&dir);
    drop(local);
}
