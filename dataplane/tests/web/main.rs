//! Local mode's web console in a real browser: headless Chromium (Debian) driven by
//! playwright-core (both installed by tests/tools/install.sh), a WAV file as the page's
//! microphone, the conversation record in a fresh SQLite file. The page offers only the
//! agents a session may start with (triage; the agents reached by handoff are shown but
//! cannot be picked) and shows every agent of the folder in the Agents panel as its
//! resources say; a typed conversation through triage -> idv -> banking shows each user
//! line once, each reply under its agent's name, the handoffs as dividers, the tool calls as
//! cards, verifiedUser in the memory view, each turn's figures and the workflow graph
//! following the session; the conversation then opens from History as a read-only
//! transcript and replays as it happened (stopped part way, then whole); by voice, as a
//! caller would, to triage (hybrid), whose simulator hears the request and hands over to
//! idv (voice), which hears the identity details from the same microphone, runs the check,
//! and whose spoken reply arrives and is scheduled for playback, with its first-audio time
//! (over the WebSocket, WebRTC unticked); the same by default over WebRTC (the session on
//! the call's data channel, the microphone and the reply on its Opus tracks, the reply
//! heard in the page and counted by WebRTC's statistics, the page saying "WebRTC", the call
//! ended with the session); WebRTC that cannot connect (the answer's candidates taken out
//! on the way) falling back after its bound to the WebSocket, which the page says, the
//! abandoned call ended (DELETE);
//! push-to-talk on Space sends only while held and ends the turn on release; and a
//! connection cut by a TCP relay between Chromium and local mode resumes from the banner's
//! Reconnect (same session, memory kept, the conversation goes on). Screenshots of the main
//! states are saved under the test's temp folder in target/ (the path is printed). The
//! checks are in checks.rs; the browser scenes in drive.cjs, scenes.cjs and helpers.cjs.
//! The host app's part (display cards, client tool calls, workflow lines, outage notices)
//! is hostapp.rs's; the console behind the gateway's API keys is gateway.rs's; Reconnect
//! after a WebRTC call dropped (its network cut by a UDP relay) is rejoin.rs's.

use std::path::PathBuf;
use std::process::Command;

mod checks;
mod gateway;
mod hostapp;
mod rejoin;

use switchboard_crds::{Catalog, RuntimeSpec};
use switchboard_local::{self as local, LocalOptions};

#[path = "../support/browser.rs"]
mod browser;
#[path = "../support/served.rs"]
#[allow(dead_code)]
mod served;

use browser::{call_files, recorder, tools_bin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_chats_by_text_and_voice_and_opens_past_sessions_in_a_real_browser() {
    let bin = tools_bin();
    // The microphone: silence (triage greets), the request, silence while triage answers
    // and hands over and idv asks for the details, the details, then silence for the reply.
    let (dir, script_path, wav_path) = call_files("web", 1500, 1000, 5000, 1200, 8000);

    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let options = LocalOptions { sim_script: Some(script_path), ..LocalOptions::default() };
    let local =
        local::start_recording(&examples, options, Some(recorder(&dir, &[r"account-status=\bactive\b".to_owned()])))
            .await
            .expect("local mode starts");
    assert_eq!(local.by_handoff, ["banking", "disputes", "idv"], "the agents a client cannot start with");
    let url = format!("http://{}/", local.server.local_addr().expect("addr"));
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web/drive.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let chromium = which("chromium");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-console");
    std::fs::create_dir_all(&shots).expect("the screenshots' folder");
    eprintln!("screenshots: {}", shots.display());
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(driver)
            .arg(playwright)
            .arg(&url)
            .arg(&wav_path)
            .arg(chromium)
            .arg(&shots)
            .output()
            .expect("runs node")
    })
    .await
    .expect("the driver finishes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser run failed: {stderr}");
    let result: serde_json::Value =
        serde_json::from_slice(out.stdout.trim_ascii()).expect("the driver prints one JSON line");
    let _ = std::fs::remove_dir_all(&dir);

    let specs = banking_specs(&examples);
    checks::agents(&result, &specs);
    checks::conversation(&result);
    checks::graph(&result, &specs);
    checks::history(&result);
    checks::replay(&result);
    checks::consent(&result["dispute"]);
    checks::voice(&result["voice"]);
    checks::webrtc_voice(&result["webrtc"]);
    checks::fallback(&result["fallback"]);
    checks::push_to_talk(&result["ptt"]);
    checks::reconnect(&result["reconnect"]);
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
}

/// The folder's agents as local mode resolves them: what the Agents panel and the graph
/// must show.
fn banking_specs(dir: &std::path::Path) -> Vec<RuntimeSpec> {
    let catalog = Catalog::load_paths(&[dir]).expect("the banking example loads");
    catalog.agents().map(|agent| catalog.resolve_agent(agent).expect("resolves")).collect()
}

fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(program)).find(|p| p.is_file()))
        .unwrap_or_else(|| panic!("{program} is not on PATH; tests/tools/install.sh installs it"))
}
