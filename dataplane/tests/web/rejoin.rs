//! The console's Reconnect over WebRTC: a voice session in Chromium on a WebRTC call to
//! local mode whose media and data channel go through a UDP relay the browser driver runs
//! (rejoin.cjs). With the relay cut (the caller's network gone) the page notices the call
//! dropped and offers Reconnect; with the network back, Reconnect resumes the same session
//! on a new WebRTC call (the gateway detaches it from the dead call and parks it for the
//! resume): the page says WebRTC, what the conversation showed is still shown, and it goes
//! on (a typed line hands over to idv, heard on the new call; Start voice puts the
//! microphone, off after Reconnect, on the new call). The record holds one session
//! with both halves; the dead call ends at the edge with the resume.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use switchboard_local::{self as local, LocalOptions};

use crate::browser::{recorder, tools_bin, wav};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_reconnects_a_dropped_webrtc_call_to_the_same_session() {
    let bin = tools_bin();
    // The microphone says nothing: the conversation is typed, the replies spoken on the call.
    let (dir, script_path, _) = crate::browser::call_files("web-rejoin", 100, 100, 100, 100, 100);
    let wav_path = dir.join("silence.wav");
    std::fs::write(&wav_path, wav(&switchboard_sim::sonic::audio::silence(1000))).expect("writes the WAV");
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let options = LocalOptions { sim_script: Some(script_path), ..LocalOptions::default() };
    let local = local::start_recording(&examples, options, Some(recorder(&dir, &[]))).await.expect("local mode starts");
    let url = format!("http://{}/", local.server.local_addr().expect("addr"));
    let edge = local.webrtc.clone();
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web/rejoin.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-console");
    std::fs::create_dir_all(&shots).expect("the screenshots' folder");
    let chromium = super::which("chromium");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node").arg(driver).arg(playwright).arg(&url).arg(&wav_path).arg(chromium).arg(&shots).output()
    })
    .await
    .expect("the driver finishes")
    .expect("runs node");
    assert!(out.status.success(), "the browser run failed: {}", String::from_utf8_lossy(&out.stderr));
    let result: Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("the driver prints one JSON line");
    eprintln!(
        "noticed the drop after {} ms; before {}, after {}",
        result["noticedMs"], result["before"], result["after"]
    );

    let before = &result["before"];
    assert_eq!(result["ticked"], true, "WebRTC is the default");
    assert_eq!(before["kind"], "webrtc", "{result}");
    assert_eq!(before["state"], "connected", "{result}");
    assert!(result["relayed"].as_u64().unwrap_or_default() > 0, "the call went through the relay: {result}");
    // The drop: noticed by the page, offered as Reconnect (focused).
    let banner = result["banner"].as_str().unwrap_or_default();
    assert!(banner.contains("1006"), "the banner says the connection dropped: {banner}");
    assert_eq!(result["focused"], "reconnect", "{result}");
    // Reconnect: the same session on a new WebRTC call.
    let after = &result["after"];
    assert_eq!(after["sessionId"], before["sessionId"], "the same session: {result}");
    assert_eq!(after["kind"], "webrtc", "the page says WebRTC: {result}");
    assert_eq!(after["text"], "WebRTC", "{result}");
    assert_eq!(after["state"], "connected", "{result}");
    assert_ne!(after["location"], before["location"], "a new call: {result}");
    assert_eq!(after["starts"], before["starts"].as_u64().unwrap_or_default() + 1, "one resume: {result}");
    assert_eq!(result["offers"], 2, "two calls offered: {result}");
    assert_eq!(result["parked"], 1.0, "the gateway parked the session: {result}");
    assert_eq!(result["resumed"], 1.0, "the gateway resumed it once: {result}");
    // What the conversation showed is still shown, and it went on.
    let lines = |log: &Value| -> Vec<(String, String)> {
        let items = log.as_array().expect("the log");
        let said = items.iter().filter(|i| i["kind"] == "user" || i["kind"] == "assistant");
        said.map(|i| {
            (i["kind"].as_str().unwrap_or_default().to_owned(), i["text"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
    };
    let (shown, resumed) = (lines(&result["logBefore"]), lines(&result["logResumed"]));
    assert!(resumed.starts_with(&shown), "kept: {shown:?}\n{resumed:?}");
    let greetings = shown.iter().filter(|(_, text)| text.contains("through to Example Bank")).count();
    assert_eq!(greetings, 1, "the greeting once, though typed over: {shown:?}");
    assert_eq!(result["streaming"], 0, "no reply left streaming: {result}");
    let log = result["log"].as_array().expect("the log");
    assert!(
        log.iter().any(|i| i["kind"] == "handoff" && i["from"] == "triage" && i["to"] == "idv"),
        "the resumed session handed over: {log:?}"
    );
    assert_eq!(result["end"]["sessionId"], before["sessionId"], "{result}");
    // The microphone, off after Reconnect, goes on the new call with Start voice.
    assert_eq!(result["micAfterReconnect"], "Start voice", "{result}");
    let mic = &result["micOnNewCall"];
    assert_eq!(mic["button"], "Stop voice", "{result}");
    let sent = mic["sent"].as_u64().unwrap_or_default() - mic["sentBefore"].as_u64().unwrap_or_default();
    assert!(sent >= 50, "a second of the microphone sent on the new call: {mic}");
    let stats = &result["stats"];
    assert!(stats["packetsReceived"].as_u64().unwrap_or_default() > 0, "idv heard on the new call: {stats}");

    // The record: one session, both halves in it.
    let events = result["record"]["events"].as_array().expect("the session's record");
    let said = |words: &str| events.iter().any(|e| e["kind"] == "user" && e.to_string().contains(words));
    assert!(said("Hello") && said("check my balance"), "both halves in one session: {events:?}");
    // The dead call does not linger at the edge: it ended once the resume took its session
    // (or, on a slow machine, when the edge gave up on it first); the new one with the session.
    assert_eq!(result["closedCall"], true, "{result}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while edge.live() > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let calls = |outcome: &str| edge.metrics.calls.with_label_values(&[outcome]).get();
    assert_eq!((edge.live(), calls("ended") + calls("ice_failed")), (0, 2.0), "{}", edge.metrics.render());
    let _ = std::fs::remove_dir_all(&dir);
}
