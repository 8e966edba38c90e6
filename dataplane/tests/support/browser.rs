//! What the browser suites (`web`: the console; `webrtc`: the WebRTC edge) share: the test
//! tools' bin directory, the simulator's script of the two spoken phrases, the WAV file a
//! browser takes as its microphone, and a conversation record in a fresh SQLite file.
//! Included by each suite with `#[path]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[path = "tools.rs"]
mod tools;
use switchboard_record::{RecordConfig, RecordMetrics, Recorder, Redactor, Store};
use switchboard_sim::BANKING_SCRIPT_YAML;
use switchboard_sim::sonic::audio::silence;
use switchboard_sim::sonic::phrase_tone;
pub use tools::tools_bin;

/// Phrase 1: the request that makes triage hand over to identity verification.
pub const BALANCE_REQUEST: u32 = 1;
/// Phrase 2: the identity details, as the banking rules expect them.
pub const IDV_DETAILS: u32 = 2;

/// A 16 kHz mono PCM16 WAV file of `pcm`.
pub fn wav(pcm: &[u8]) -> Vec<u8> {
    let len = u32::try_from(pcm.len()).expect("small");
    let mut out = Vec::with_capacity(44 + pcm.len());
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

/// The simulator's banking script with the two phrases a caller speaks, quick replies and
/// a short end of turn.
pub fn script() -> String {
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

/// A recorder writing to a fresh SQLite file in `dir` (nothing left by other runs), with the
/// gateway's own redaction `rules` (`--record-redact`).
pub fn recorder(dir: &Path, rules: &[String]) -> Arc<Recorder> {
    let store = Store::file(&dir.join("record.db")).expect("the record's SQLite file");
    let config = RecordConfig { flush_interval: Duration::from_millis(50), ..RecordConfig::default() };
    let redactor = Redactor::new(rules).expect("valid rules");
    let metrics = RecordMetrics::new().expect("metrics");
    let (recorder, writer) = Recorder::new(store, config, redactor, Default::default(), metrics);
    tokio::spawn(writer.run(tokio_util::sync::CancellationToken::new()));
    recorder
}

/// A suite's fresh folder `switchboard-<suite>-<uuid>` under the temp dir, with the
/// simulator's [`script`] (`script.yaml`) and the browser's microphone (`microphone.wav`):
/// silence for `lead` ms, the balance request, silence for `gap` ms, the identity details,
/// then silence for `tail` ms (each phrase `request_ms` / `details_ms` long). Returns the
/// folder, the script's path and the WAV's path.
pub fn call_files(
    suite: &str,
    lead: u64,
    request_ms: u64,
    gap: u64,
    details_ms: u64,
    tail: u64,
) -> (PathBuf, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("switchboard-{suite}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script_path = dir.join("script.yaml");
    std::fs::write(&script_path, script()).expect("writes the script");
    let mut pcm = silence(lead);
    pcm.extend(phrase_tone(BALANCE_REQUEST, request_ms, 8000));
    pcm.extend(silence(gap));
    pcm.extend(phrase_tone(IDV_DETAILS, details_ms, 8000));
    pcm.extend(silence(tail));
    let wav_path = dir.join("microphone.wav");
    std::fs::write(&wav_path, wav(&pcm)).expect("writes the WAV");
    (dir, script_path, wav_path)
}
