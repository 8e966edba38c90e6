//! Local mode's web page in a real browser: headless Chromium (Debian) driven by
//! playwright-core (both installed by tests/tools/install.sh), a WAV file as the page's
//! microphone. The page offers only the agents a session may start with (triage; the
//! agents reached by handoff are shown but cannot be picked), chats by text (a typed request
//! leads to the handoff to identity verification), and talks by voice as a caller would:
//! to triage (hybrid), whose simulator hears the request and hands over to idv (voice),
//! which hears the identity details from the same microphone, runs the check, and whose
//! spoken reply arrives and is scheduled for playback.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use switchboard_dataplane::local::{self, LocalOptions};
use switchboard_dataplane::runtime::ServerConfig;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_chats_by_text_and_by_voice_in_a_real_browser() {
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
    let local = local::start(&examples, options).await.expect("local mode starts");
    assert_eq!(local.by_handoff, ["banking", "disputes", "idv"], "the agents a client cannot start with");
    let url = format!("http://{}/", local.server.local_addr().expect("addr"));
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web/drive.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let chromium = which("chromium");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(driver)
            .arg(playwright)
            .arg(&url)
            .arg(&wav_path)
            .arg(chromium)
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
    let text = result["text"].to_string();
    assert!(text.contains("msg user: I'd like to check my balance"), "the typed line is shown: {text}");
    assert!(text.contains("msg assistant"), "a reply is shown: {text}");
    assert!(text.contains("handoff triage → idv"), "the handoff is shown: {text}");

    let voice = result["voice"].to_string();
    assert!(voice.contains("msg user: I'd like to check my balance"), "triage heard the request: {voice}");
    assert!(voice.contains("handoff triage → idv"), "triage handed the call to idv: {voice}");
    assert!(voice.contains("msg user: My name is Ada Lovelace"), "the heard utterance is shown: {voice}");
    assert!(voice.contains("tool perform_idv_check"), "the identity check ran: {voice}");
    assert!(voice.to_lowercase().contains("verified"), "the spoken reply's transcript is shown: {voice}");
    let counters = &result["counters"];
    assert!(counters["framesSent"].as_u64().unwrap_or(0) > 50, "the microphone streamed: {counters}");
    let (received, scheduled) = (counters["audioSamples"].as_u64(), counters["scheduledSamples"].as_u64());
    assert!(received.unwrap_or(0) > 24_000 / 2, "at least half a second of reply audio arrived: {counters}");
    assert_eq!(received, scheduled, "every received sample was scheduled for playback: {counters}");
    assert_eq!(counters["playbackState"], "running", "the playback context runs: {counters}");
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
}

fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(program)).find(|p| p.is_file()))
        .unwrap_or_else(|| panic!("{program} is not on PATH; tests/tools/install.sh installs it"))
}
