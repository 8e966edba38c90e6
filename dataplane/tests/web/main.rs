//! Local mode's web console in a real browser: headless Chromium (Debian) driven by
//! playwright-core (both installed by tests/tools/install.sh), a WAV file as the page's
//! microphone, the conversation record in a fresh SQLite file. The page offers only the
//! agents a session may start with (triage; the agents reached by handoff are shown but
//! cannot be picked); a typed conversation through triage -> idv -> banking shows each user
//! line once, each reply under its agent's name, the handoffs as dividers, the tool calls as
//! cards, verifiedUser in the memory view and each turn's figures; the conversation then
//! opens from History as a read-only transcript; and by voice, as a caller would, to triage
//! (hybrid), whose simulator hears the request and hands over to idv (voice), which hears
//! the identity details from the same microphone, runs the check, and whose spoken reply
//! arrives and is scheduled for playback. Screenshots of the main states are saved under
//! the test's temp folder in target/ (the path is printed).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use switchboard_dataplane::local::{self, LocalOptions};
use switchboard_dataplane::runtime::ServerConfig;
use switchboard_gateway::record::{RecordConfig, RecordMetrics, Recorder, Redactor, Store};
use switchboard_sim::BANKING_SCRIPT_YAML;
use switchboard_sim::sonic::audio::silence;
use switchboard_sim::sonic::phrase_tone;

/// Phrase 1: the request that makes triage hand over to identity verification.
const BALANCE_REQUEST: u32 = 1;
/// Phrase 2: the identity details, as the banking rules expect them.
const IDV_DETAILS: u32 = 2;

fn tools_bin() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/install.sh");
    let out = Command::new("bash").arg(&script).output().expect("runs tests/tools/install.sh");
    assert!(out.status.success(), "tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim())
}

/// A 16 kHz mono PCM16 WAV file of `pcm`.
fn wav(pcm: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(44 + pcm.len());
    let len = u32::try_from(pcm.len()).expect("small");
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&16_000u32.to_le_bytes());
    out.extend_from_slice(&32_000u32.to_le_bytes()); // byte rate
    out.extend_from_slice(&2u16.to_le_bytes()); // block align
    out.extend_from_slice(&16u16.to_le_bytes()); // bits
    out.extend_from_slice(b"data");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(pcm);
    out
}

fn script() -> String {
    format!(
        r#"{BANKING_SCRIPT_YAML}
sonic:
  turnDetection: {{ silenceMs: {{ high: 400, medium: 400, low: 400 }} }}
  phrases:
    {BALANCE_REQUEST}: "I'd like to check my balance"
    {IDV_DETAILS}: "My name is Ada Lovelace, account 12345678, sort code 12-34-56"
  speech: {{ msPerChar: 4, chunkMs: 40, responseDelayMs: 50 }}
"#
    )
}

/// A recorder writing to a fresh SQLite file in `dir` (nothing left by other runs).
fn recorder(dir: &std::path::Path) -> Arc<Recorder> {
    let store = Store::file(&dir.join("record.db")).expect("the record's SQLite file");
    let config = RecordConfig { flush_interval: Duration::from_millis(50), ..RecordConfig::default() };
    let redactor = Redactor::new(&[]).expect("no custom rules");
    let metrics = RecordMetrics::new().expect("metrics");
    let (recorder, writer) = Recorder::new(store, config, redactor, Default::default(), metrics);
    tokio::spawn(writer.run(tokio_util::sync::CancellationToken::new()));
    recorder
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_chats_by_text_and_voice_and_opens_past_sessions_in_a_real_browser() {
    let bin = tools_bin();
    let dir = std::env::temp_dir().join(format!("switchboard-web-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script_path = dir.join("script.yaml");
    std::fs::write(&script_path, script()).expect("writes the script");
    // The microphone: silence (triage greets), the request, silence while triage answers
    // and hands over and idv asks for the details, the details, then silence for the reply.
    let mut pcm = silence(1500);
    pcm.extend(phrase_tone(BALANCE_REQUEST, 1000, 8000));
    pcm.extend(silence(5000));
    pcm.extend(phrase_tone(IDV_DETAILS, 1200, 8000));
    pcm.extend(silence(8000));
    let wav_path = dir.join("microphone.wav");
    std::fs::write(&wav_path, wav(&pcm)).expect("writes the WAV");

    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let options = LocalOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        bedrock: false,
        sim_script: Some(script_path),
        transcripts: None,
        server: ServerConfig::default(),
        ca_file: None,
        gateway_key: None,
    };
    let local = local::start_recording(&examples, options, Some(recorder(&dir))).await.expect("local mode starts");
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

    let names = |key: &str| -> Vec<String> {
        result[key].as_array().expect(key).iter().filter_map(|a| a.as_str().map(str::to_owned)).collect()
    };
    let (agents, by_handoff) = (names("agents"), names("byHandoff"));
    assert_eq!(agents, ["triage"], "the page offers only the exposed agents to start with: {agents:?}");
    for agent in ["idv", "banking", "disputes"] {
        assert!(by_handoff.iter().any(|a| a == agent), "{agent} is shown, as reached by handoff: {by_handoff:?}");
    }
    assert_eq!(result["selected"], "triage", "the default agent is selected");
    check_conversation(&result);
    check_history(&result);
    check_consent(&result["dispute"]);
    check_voice(&result);
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
}

/// What one transcript shows: `(kind, agent, text)` per element.
fn items(result: &serde_json::Value, key: &str) -> Vec<(String, String, String)> {
    let field = |item: &serde_json::Value, name: &str| item[name].as_str().unwrap_or_default().to_owned();
    result[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is read: {result}"))
        .iter()
        .map(|item| {
            let kind = field(item, "kind");
            let who = match kind.as_str() {
                "handoff" => format!("{}->{}", field(item, "from"), field(item, "to")),
                "tool" => field(item, "name"),
                _ => field(item, "agent"),
            };
            (kind, who, field(item, "text"))
        })
        .collect()
}

/// The banking script's conversation, as a transcript shows it: each typed line exactly
/// once, replies under triage, idv and banking, both handoffs, both tool calls done.
fn check_transcript(shown: &[(String, String, String)], what: &str) {
    let users: Vec<&str> = shown.iter().filter(|(k, _, _)| k == "user").map(|(_, _, t)| t.as_str()).collect();
    assert_eq!(users, LINES, "{what}: each user line exactly once, in order: {shown:#?}");
    for agent in ["triage", "idv", "banking"] {
        assert!(
            shown.iter().any(|(k, a, t)| k == "assistant" && a == agent && !t.is_empty()),
            "{what}: a reply under {agent}'s name: {shown:#?}"
        );
    }
    for route in ["triage->idv", "idv->banking"] {
        assert!(shown.iter().any(|(k, r, _)| k == "handoff" && r == route), "{what}: the divider {route}: {shown:#?}");
    }
    for tool in ["perform_idv_check", "check_balance"] {
        assert!(
            shown.iter().any(|(k, n, t)| k == "tool" && n == tool && t.contains("done")),
            "{what}: the {tool} card, done: {shown:#?}"
        );
    }
    let balance = shown.iter().rposition(|(k, a, _)| k == "assistant" && a == "banking");
    let handoff = shown.iter().position(|(k, r, _)| k == "handoff" && r == "idv->banking");
    assert!(balance > handoff, "{what}: banking answers after the handoff to it: {shown:#?}");
}

const LINES: [&str; 3] = [
    "I'd like to check my balance",
    "My name is Ada Lovelace, account 12345678, sort code 12-34-56",
    "My balance please",
];

fn check_conversation(result: &serde_json::Value) {
    let shown = items(result, "text");
    check_transcript(&shown, "the live conversation");
    let figures: Vec<&str> = shown.iter().filter(|(k, _, _)| k == "figures").map(|(_, _, t)| t.as_str()).collect();
    assert!(figures.len() >= 3, "figures for each turn: {figures:?}");
    for line in &figures {
        assert!(line.contains("first token") && line.contains(" ms") && line.contains("out tokens"), "{line}");
        assert!(!line.contains("first token –"), "the first token was timed: {line}");
    }
    let memory = result["memory"].to_string();
    assert!(memory.contains("verifiedUser") && memory.contains("Ada Lovelace"), "the memory view: {memory}");
    assert_eq!(result["now"]["agent"], "banking", "the agent now serving: {}", result["now"]);
    let path = result["now"]["path"].as_str().unwrap_or_default();
    assert!(path.contains("idv: collect → verify → choose"), "the workflow path idv took: {path}");
    assert!(!result["now"]["tokens"].as_str().unwrap_or_default().starts_with("0 in"), "tokens: {}", result["now"]);
    assert!(result["turns"].as_array().is_some_and(|t| t.len() >= 3), "the turns table: {}", result["turns"]);
    assert_eq!(result["cardOpened"], true, "a tool card opens from the keyboard");
    assert!(result["phoneOverflow"].as_i64().unwrap_or(1) <= 0, "fits a phone's width: {}", result["phoneOverflow"]);
}

fn check_history(result: &serde_json::Value) {
    let item = result["historyItem"].as_str().unwrap_or_default();
    assert!(item.contains("triage → idv → banking"), "History lists the agents of the session: {item}");
    check_transcript(&items(result, "past"), "the past session from History");
    let summary = result["pastSummary"].as_str().unwrap_or_default();
    assert!(summary.contains("turns"), "the past session's summary: {summary}");
    assert_eq!(result["pastClosed"], true, "Escape closes the past session");
}

fn check_consent(dispute: &serde_json::Value) {
    let consent = dispute["consent"].as_str().unwrap_or_default();
    assert!(consent.contains("open_dispute") && consent.contains("Allowed"), "the consent, allowed: {dispute}");
    let card = dispute["disputeCard"].as_str().unwrap_or_default();
    assert!(card.contains("done"), "the dispute was opened after the click: {card}");
    let shown = items(dispute, "log");
    let users: Vec<&str> = shown.iter().filter(|(k, _, _)| k == "user").map(|(_, _, t)| t.as_str()).collect();
    assert_eq!(users.len(), 4, "each user line once: {shown:#?}");
    assert!(
        shown.iter().any(|(k, a, t)| k == "assistant" && a == "disputes" && t.contains("dispute is open")),
        "disputes confirms the dispute: {shown:#?}"
    );
}

fn check_voice(result: &serde_json::Value) {
    assert_eq!(result["voiceDefaults"], serde_json::json!([true, true, true]), "echo cancellation etc. on by default");
    let shown = items(result, "voice");
    let heard = |text: &str| shown.iter().any(|(k, _, t)| k == "user" && t.contains(text));
    assert!(heard("I'd like to check my balance"), "triage heard the request: {shown:#?}");
    assert!(shown.iter().any(|(k, r, _)| k == "handoff" && r == "triage->idv"), "triage handed over: {shown:#?}");
    assert!(heard("My name is Ada Lovelace"), "the heard utterance is shown: {shown:#?}");
    assert!(shown.iter().any(|(k, n, _)| k == "tool" && n == "perform_idv_check"), "the check ran: {shown:#?}");
    assert!(
        shown.iter().any(|(k, a, t)| k == "assistant" && a == "idv" && t.to_lowercase().contains("verified")),
        "the spoken reply's transcript is shown under idv: {shown:#?}"
    );
    let counters = &result["counters"];
    assert!(counters["framesSent"].as_u64().unwrap_or(0) > 50, "the microphone streamed: {counters}");
    let (received, scheduled) = (counters["audioSamples"].as_u64(), counters["scheduledSamples"].as_u64());
    assert!(received.unwrap_or(0) > 24_000 / 2, "at least half a second of reply audio arrived: {counters}");
    assert_eq!(received, scheduled, "every received sample was scheduled for playback: {counters}");
    assert_eq!(counters["playbackState"], "running", "the playback context runs: {counters}");
}

fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(program)).find(|p| p.is_file()))
        .unwrap_or_else(|| panic!("{program} is not on PATH; tests/tools/install.sh installs it"))
}
