//! The host app's part of a conversation in the console, in a real browser (issue 42): local
//! mode on a copy of the Example Bank whose banking agent also has a tool the client runs
//! (`pick_account`, its result checked against an output schema, awaited 10 s), whose idv
//! step `choose` opens with a line played whole, and one of whose customer's transactions
//! is named with HTML. In Chromium:
//!
//! - asked for recent transactions, banking shows them as a card while it says the newest:
//!   the title, text, each transaction and its amount as text (the HTML in a name shown as
//!   written, never run), the link a web link opened with `rel=noopener`; a card whose link
//!   is not a web address is drawn with no link;
//! - asked which account, the console shows the client tool call and the person answers it:
//!   a result the agent takes, one the schema refuses, "Cannot do it", and no answer — the
//!   server's timeout applies and the card says the agent was told; the agent's words
//!   follow each;
//! - by voice, idv's line is said whole and drawn in plain words, live and from History;
//! - the Agent's outage switch (local mode's `tools/outage.yaml`) flipped on tells the
//!   conversation under way, which goes on; a new conversation gets the fallback in the
//!   banner; flipped off, the conversation under way is told.
//!
//! The browser scenes are in hostapp.cjs; screenshots go where main.rs's do.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use switchboard_local::{self as local, LocalOptions};

use super::browser::{call_files, recorder, tools_bin};

/// The line idv's `choose` step says, played whole.
const LINE: &str = "You are verified. Example Bank will never ask you for a one-time passcode.";
/// A transaction's name with HTML in it, as the bank's data has it.
const HTML_NAME: &str = "<img src=x onerror=window.pwned=1>Corner Cafe";
/// What the outage switch file says to callers.
const CLOSED: &str = "The bank's assistants are closed today.";

/// The simulator's rules for the client tool, before the bank's own.
const RULES: &str = r#"  - name: pick-account
    when: { userText: "(?i)which account", tools: [pick_account] }
    reply: { toolUse: { name: pick_account, input: { question: "Which account do you mean?" } } }
  - name: picked-account
    when: { toolResult: { name: pick_account, status: success } }
    reply: { text: "You chose account {account}." }
  - name: pick-account-failed
    when: { toolResult: { name: pick_account, status: error } }
    reply: { text: "The app could not tell me: {result}" }
"#;

/// The client tool, in banking's tools.
const PICK_ACCOUNT: &str = r#"    - name: pick_account
      description: Ask the customer's app which of their accounts they mean.
      inputSchema:
        type: object
        properties: { question: { type: string } }
      client:
        timeoutSeconds: 10
        outputSchema:
          type: object
          properties: { account: { type: string, pattern: "^[0-9]{8}$" } }
          required: [account]
"#;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a folder");
    for entry in std::fs::read_dir(from).expect("the example") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copied");
        }
    }
}

/// Replaces `from` (which must be there, once) with `to` in `file`.
fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).expect("reads the file");
    assert_eq!(text.matches(from).count(), 1, "{} has {from:?} once", file.display());
    std::fs::write(file, text.replacen(from, to, 1)).expect("writes the file");
}

/// The Example Bank, copied into `dir` and changed as the module says.
fn bank(dir: &Path) -> PathBuf {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let bank = dir.join("agents");
    copy_dir(&examples, &bank);
    let banking = bank.join("banking.yaml");
    edit(&banking, "show_card]", "show_card, pick_account]");
    edit(
        &banking,
        "      builtin:\n        kind: showCard\n",
        &format!("      builtin:\n        kind: showCard\n{PICK_ACCOUNT}"),
    );
    edit(
        &bank.join("idv.yaml"),
        "    - id: choose\n      kind: decision\n",
        &format!("    - id: choose\n      kind: decision\n      say: {{ text: \"{LINE}\", uninterruptible: true }}\n"),
    );
    edit(&bank.join("tools/accounts.yaml"), "\"Corner Cafe\"", &format!("\"{HTML_NAME}\""));
    bank
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_cards_client_tools_workflow_lines_and_outage_notices_in_a_real_browser() {
    let bin = tools_bin();
    // The microphone: as main.rs's (the request, then the identity details).
    let (dir, script_path, wav_path) = call_files("web-host", 1500, 1000, 5000, 1200, 8000);
    let script = std::fs::read_to_string(&script_path).expect("the script");
    assert_eq!(script.matches("\nrules:\n").count(), 1, "the bank's script has one list of rules");
    std::fs::write(&script_path, script.replacen("\nrules:\n", &format!("\nrules:\n{RULES}"), 1)).expect("written");
    let bank = bank(&dir);
    let options = LocalOptions { sim_script: Some(script_path), ..LocalOptions::default() };
    let local = local::start_recording(&bank, options, Some(recorder(&dir, &[]))).await.expect("local mode starts");
    let url = format!("http://{}/", local.server.local_addr().expect("addr"));
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web/hostapp.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let chromium = super::which("chromium");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-console");
    std::fs::create_dir_all(&shots).expect("the screenshots' folder");
    let switch = bank.join(switchboard_local::outage::OUTAGE_FILE);
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(driver)
            .arg(playwright)
            .arg(&url)
            .arg(&wav_path)
            .arg(chromium)
            .arg(&shots)
            .arg(&switch)
            .arg(CLOSED)
            .output()
            .expect("runs node")
    })
    .await
    .expect("the driver finishes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser run failed: {stderr}");
    let result: Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("the driver prints one JSON line");
    let _ = std::fs::remove_dir_all(&dir);

    card(&result["card"]);
    client_tool(&result["tools"]);
    line(&result["line"]);
    outage(&result["outage"]);
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
}

/// The card of recent transactions, and one whose link is not a web address.
fn card(card: &Value) {
    assert_eq!(card["title"], "Recent transactions", "{card}");
    assert_eq!(card["text"], "Newest first.", "{card}");
    let fields = card["fields"].as_array().expect("the fields");
    let labels: Vec<&str> = fields.iter().map(|f| f[0].as_str().unwrap_or_default()).collect();
    assert_eq!(labels, ["Streamly subscription", HTML_NAME], "each transaction, as text: {card}");
    let amounts: Vec<f64> = fields.iter().filter_map(|f| f[1].as_str().and_then(|v| v.parse().ok())).collect();
    assert_eq!(amounts, [-49.99, -3.4], "and its amount: {card}");
    assert_eq!(card["images"], 0, "the HTML in a name is not drawn as markup: {card}");
    assert_eq!(card["pwned"], false, "nor run: {card}");
    let link = &card["link"];
    assert_eq!(
        (link["href"].as_str(), link["text"].as_str(), link["rel"].as_str(), link["target"].as_str()),
        (
            Some("https://bank.example/transactions"),
            Some("All transactions"),
            Some("noopener noreferrer"),
            Some("_blank")
        ),
        "{card}"
    );
    let said = card["said"].as_str().unwrap_or_default();
    assert!(said.contains("Streamly subscription"), "banking says the newest while the card shows: {said}");
    let unsafe_link = &card["notWeb"];
    assert_eq!(unsafe_link["links"], 0, "a javascript: link is not a link: {unsafe_link}");
    assert!(unsafe_link["text"].as_str().unwrap_or_default().contains("javascript:alert(1)"), "{unsafe_link}");
}

/// The client tool calls: answered, refused by the schema, "Cannot do it", unanswered.
fn client_tool(tools: &Value) {
    let expect = [
        ("ok", "took the result", "You chose account 12345678."),
        ("client_bad_result", "refused the result", "The app could not tell me"),
        ("client_error", "could not do it", "could not run pick_account"),
        ("client_timeout", "Nobody answered in time", "The app could not tell me"),
    ];
    let calls = tools.as_array().expect("the calls");
    assert_eq!(calls.len(), expect.len(), "{tools}");
    for (call, (outcome, says, reply)) in calls.iter().zip(expect) {
        assert_eq!(call["outcome"], outcome, "{call}");
        assert!(call["card"].as_str().unwrap_or_default().contains("pick_account runs in this client"), "{call}");
        assert!(call["card"].as_str().unwrap_or_default().contains("Which account do you mean?"), "{call}");
        assert!(call["ended"].as_str().unwrap_or_default().contains(says), "the card says how it ended: {call}");
        assert!(call["reply"].as_str().unwrap_or_default().contains(reply), "the agent goes on: {call}");
    }
    let waited = calls[3]["waitedMs"].as_f64().unwrap_or(0.0);
    assert!((9_000.0..30_000.0).contains(&waited), "the server's 10 s timeout applied: {waited} ms");
}

/// idv's line, said whole, live and from History.
fn line(line: &Value) {
    for shown in [&line["live"], &line["past"]] {
        assert_eq!(shown["node"], "choose", "{line}");
        assert_eq!(shown["played"], "whole", "{line}");
        let text = shown["text"].as_str().unwrap_or_default();
        assert!(text.contains("in full; the caller could not cut it"), "in plain words: {text}");
        assert!(text.contains(LINE), "the line's words: {text}");
    }
    assert_eq!(line["transport"], "webrtc", "the voice session ran over WebRTC: {line}");
    assert!(line["heard"].as_u64().unwrap_or(0) > 0, "the line was heard: {line}");
}

/// The outage switch flipped on and off.
fn outage(outage: &Value) {
    let on = outage["on"].as_str().unwrap_or_default();
    assert!(on.contains("triage is in outage mode") && on.contains("goes on") && on.contains(CLOSED), "{on}");
    let banner = outage["banner"].as_str().unwrap_or_default();
    assert!(banner.contains("outage mode") && banner.contains(CLOSED), "a new conversation's banner: {banner}");
    let status = outage["status"].as_str().unwrap_or_default();
    assert!(status.contains("(4513)"), "the new conversation was closed with 4513: {status}");
    let off = outage["off"].as_str().unwrap_or_default();
    assert!(off.contains("out of outage mode"), "{off}");
    assert_eq!(outage["goesOn"], true, "the conversation under way is still open: {outage}");
}
