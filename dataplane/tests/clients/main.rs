//! The client libraries of `clients/` against the real `switchboard` binary: each suite
//! (`clients/<language>/run-tests.sh`, which installs its pinned dependencies into
//! ~/.cache/switchboard) starts `switchboard local examples/banking` itself and talks to it
//! as an app would — text through handoffs, consent, resume after a cut connection, the
//! server's errors, voice. Every text frame those sessions received is written to a file
//! and checked here against the published schema (`schema/protocol.schema.json`), with the
//! message types each suite must have seen, so the schema is proven on real sessions. The
//! TypeScript client's browser parts (Microphone, Player) run in headless Chromium with a WAV
//! as the microphone: a voice turn, the reply played, a barge-in that stops it and reports
//! what was heard. Both packages carry the protocol's version, and install as published
//! (`npm pack`; `python -m build`'s sdist and wheel) into fresh projects where they hold a
//! text turn with the real binary.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use switchboard_core::protocol::schema::{Checker, SCHEMA_PATH};
use tools::tools_bin;

#[path = "../support/tools.rs"]
mod tools;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `clients/<client>/run-tests.sh` against the binary under test; returns the server
/// messages its sessions received.
fn run_suite(client: &str) -> Vec<serde_json::Value> {
    let log =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{client}-protocol-{}.jsonl", uuid::Uuid::new_v4()));
    let script = root().join("clients").join(client).join("run-tests.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("SWITCHBOARD_BIN", env!("CARGO_BIN_EXE_switchboard"))
        .env("SWITCHBOARD_PROTOCOL_LOG", &log)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .expect("runs the suite's script");
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the {client} client's tests failed:\n{output}");
    eprintln!("{output}");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("a frame that is not JSON ({e}): {line}")))
        .collect()
}

/// Every message is valid against the published schema, and every type of `expected` is
/// among them.
fn check_against_schema(client: &str, messages: &[serde_json::Value], expected: &[&str]) {
    let text = std::fs::read_to_string(root().join(SCHEMA_PATH)).expect("the published schema");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    let checker = Checker::new(&schema).expect("the schema compiles");
    for message in messages {
        let errors = checker.server_errors(message);
        assert!(errors.is_empty(), "a server message the schema does not describe: {message}\n{}", errors.join("\n"));
    }
    let seen: BTreeSet<&str> = messages.iter().filter_map(|m| m["type"].as_str()).collect();
    let missing: Vec<&&str> = expected.iter().filter(|t| !seen.contains(**t)).collect();
    assert!(missing.is_empty(), "the {client} suite's sessions never received {missing:?} (seen: {seen:?})");
    eprintln!("{client}: {} server messages of {} types, all valid against {SCHEMA_PATH}", messages.len(), seen.len());
}

/// What both suites' sessions see: a conversation through handoffs with tools, its state
/// and usage, errors, and a voice turn.
const COMMON: &[&str] = &[
    "bidi_connection_start",
    "bidi_transcript_stream",
    "bidi_response_start",
    "bidi_response_complete",
    "bidi_usage",
    "bidi_session_state",
    "tool_start",
    "tool_complete",
    "consent_request",
    "handoff",
    "memory_update",
    "workflow_transition",
    "bidi_error",
    "bidi_speech_started",
    "bidi_connection_close",
];

#[test]
fn the_typescript_client_works_against_local_mode_and_its_messages_match_the_schema() {
    let messages = run_suite("typescript");
    // Its voice session changes voice (reply audio comes as binary frames).
    let expected = [COMMON, &["bidi_session_updated", "bidi_connection_restart"]].concat();
    check_against_schema("typescript", &messages, &expected);
}

#[test]
fn the_python_client_works_against_local_mode_and_its_messages_match_the_schema() {
    let messages = run_suite("python");
    // Its voice session takes reply audio as base64 JSON and barges in; its consent is declined.
    let expected = [COMMON, &["bidi_audio_stream", "bidi_interruption", "tool_error"]].concat();
    check_against_schema("python", &messages, &expected);
}

#[test]
fn the_typescript_clients_microphone_and_player_work_in_chromium() {
    let playwright = tools_bin().join("../node_modules/playwright-core");
    let out = Command::new("bash")
        .arg(root().join("clients/typescript/run-tests.sh"))
        .arg("--browser")
        .env("SWITCHBOARD_BIN", env!("CARGO_BIN_EXE_switchboard"))
        .env("SWITCHBOARD_PLAYWRIGHT", playwright)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .expect("runs the browser test");
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser test failed:\n{output}");
    eprintln!("{output}");
}

/// Runs `clients/<client>/run-tests.sh --package` against the binary under test.
fn run_package_test(client: &str) {
    let out = Command::new("bash")
        .arg(root().join("clients").join(client).join("run-tests.sh"))
        .arg("--package")
        .env("SWITCHBOARD_BIN", env!("CARGO_BIN_EXE_switchboard"))
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .expect("runs the package test");
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the {client} package test failed:\n{output}");
    assert!(output.contains("triage -> idv"), "{output}");
    eprintln!("{output}");
}

#[test]
fn the_typescript_package_installs_from_its_tarball_and_holds_a_text_turn() {
    run_package_test("typescript");
}

#[test]
fn the_python_package_installs_from_its_sdist_and_wheel_and_holds_a_text_turn() {
    run_package_test("python");
}

/// The packages' versions are the protocol's (the schema's `x-protocol-version`): a client
/// release says which protocol it speaks.
#[test]
fn the_packages_are_versioned_with_the_protocol() {
    let read = |path: &str| std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let json = |path: &str| -> serde_json::Value { serde_json::from_str(&read(path)).expect("JSON") };
    let schema = json(SCHEMA_PATH);
    let protocol = schema["x-protocol-version"].as_str().expect("the schema's x-protocol-version");
    let package = json("clients/typescript/package.json");
    assert_eq!(package["version"], protocol, "clients/typescript/package.json");
    let lock = json("clients/typescript/package-lock.json");
    assert_eq!(lock["version"], protocol, "clients/typescript/package-lock.json");
    assert_eq!(lock["packages"][""]["version"], protocol, "clients/typescript/package-lock.json's own package");
    let pyproject = read("clients/python/pyproject.toml");
    let versions: Vec<&str> =
        pyproject.lines().filter_map(|l| l.strip_prefix("version = \"")?.strip_suffix('"')).collect();
    assert_eq!(versions, [protocol], "clients/python/pyproject.toml's [project] version");
    for readme in ["clients/typescript/README.md", "clients/python/README.md"] {
        assert!(read(readme).contains(&format!("(version {protocol})")), "{readme} names the protocol's version");
    }
}
