//! Barge-in over WebRTC, heard in Chromium: headless Chromium calls local mode (the Bedrock
//! simulator speaking in real time, the conversation record in a fresh SQLite file) with a
//! WAV as its microphone, mixed in the page with a tone the page switches on (the caller's
//! voice at a moment of the page's choosing). The WAV asks for a story, a reply of several
//! seconds; while it plays on the call's remote track the page speaks over it (the phrase
//! tone of a question). What the page hears is measured every 20 ms (a Web Audio analyser
//! on the remote track) and every 100 ms (WebRTC's own receive statistics): the story stops
//! soon after the caller began to speak and soon after the `bidi_interruption` on the data
//! channel, far short of its length; nothing is received while the caller goes on speaking
//! (the edge dropped the queued reply at once); the story's turn completes `interrupted`,
//! the record holds the interruption, and the answer to the question is then heard on the
//! same call. The browser's part is barge_in.cjs.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use switchboard_local::{self as local, LocalOptions};
use switchboard_sim::BANKING_SCRIPT_YAML;
use switchboard_sim::sonic::audio::silence;
use switchboard_sim::sonic::{phrase_frequency, phrase_tone};

use super::browser::{recorder, tools_bin, wav};

/// The phrase that asks for the story (in the WAV).
const STORY: u32 = 4;
/// The question the caller speaks over the story (the page's tone).
const HOURS: u32 = 6;
/// Milliseconds of reply audio per character: the story (181 characters) lasts 5.4 s.
const MS_PER_CHAR: u64 = 30;
const STORY_TEXT: &str = "Once upon a time there was a bank that never closed, and every customer who called was \
                          greeted by a patient voice that always had time for one more question about their account.";

/// The banking script with the story and the question first, and real-time speech slow
/// enough for the story to be spoken over.
fn script() -> String {
    let rules = format!(
        r#"
  - name: voice-story
    when: {{ userText: "(?i)story" }}
    reply: {{ text: "{STORY_TEXT}" }}
  - name: voice-hours
    when: {{ userText: "(?i)opening hours" }}
    reply: {{ text: "We are open from nine to five." }}
"#
    );
    let rules = BANKING_SCRIPT_YAML.replacen("\n  - name: greeting\n", &format!("{rules}\n  - name: greeting\n"), 1);
    format!(
        r#"{rules}
sonic:
  turnDetection: {{ silenceMs: {{ high: 400, medium: 400, low: 400 }} }}
  phrases:
    {STORY}: "Tell me a story"
    {HOURS}: "What are your opening hours?"
  speech: {{ msPerChar: {MS_PER_CHAR}, chunkMs: 40, responseDelayMs: 50 }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_barges_in_over_webrtc_and_the_reply_stops_at_once() {
    let bin = tools_bin();
    let dir = std::env::temp_dir().join(format!("switchboard-webrtc-barge-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script_path = dir.join("script.yaml");
    std::fs::write(&script_path, script()).expect("writes the script");
    // The microphone, opened by the page once the greeting was heard: the request, then silence.
    let mut pcm = silence(300);
    pcm.extend(phrase_tone(STORY, 1000, 8000));
    pcm.extend(silence(3000));
    let wav_path = dir.join("microphone.wav");
    std::fs::write(&wav_path, wav(&pcm)).expect("writes the WAV");

    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let options = LocalOptions { sim_script: Some(script_path), ..LocalOptions::default() };
    let local = local::start_recording(&examples, options, Some(recorder(&dir, &[]))).await.expect("local mode starts");
    let url = format!("http://{}/", local.server.local_addr().expect("addr"));
    let sim = local.sim.expect("the simulator");
    let server = local.server;
    tokio::spawn(async move { server.run(std::future::pending()).await });

    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webrtc/barge_in.cjs");
    let playwright = bin.join("../node_modules/playwright-core");
    let mut command = Command::new("node");
    command.arg(driver).arg(playwright).arg(&url).arg(&wav_path).arg(super::which("chromium"));
    command.arg(phrase_frequency(HOURS).to_string());
    let (result, _) = tokio::task::spawn_blocking(move || super::drive(command, None)).await.expect("driven");
    let _ = std::fs::remove_dir_all(&dir);
    let call = &result["call"];
    let mut figures = call["measured"].clone();
    figures.as_object_mut().map(|f| f.remove("around"));
    eprintln!("barge-in: {figures}");

    let messages = call["messages"].as_array().expect("messages");
    let types: Vec<&str> = messages.iter().filter_map(|m| m["type"].as_str()).collect();
    assert!(!types.contains(&"bidi_error"), "no errors: {messages:?}");
    let said = |role: &str, pattern: &str| {
        messages.iter().position(|m| {
            m["type"] == "bidi_transcript_stream"
                && m["role"].as_str().unwrap_or_default().eq_ignore_ascii_case(role)
                && m["text"].as_str().unwrap_or_default().contains(pattern)
        })
    };
    let asked = said("user", "story").expect("the WAV's request reached the agent");
    let interrupted = types.iter().position(|t| *t == "bidi_interruption").expect("a bidi_interruption");
    let question = said("user", "opening hours").expect("the question spoken over the story was heard");
    let answer = said("assistant", "nine to five").expect("the question was answered");
    assert!(asked < interrupted && interrupted < question && question < answer, "in order: {types:?}");
    assert_eq!(types.iter().filter(|t| **t == "bidi_interruption").count(), 1, "one barge-in: {types:?}");
    let cut =
        messages.iter().skip(asked).any(|m| m["type"] == "bidi_response_complete" && m["stop_reason"] == "interrupted");
    assert!(cut, "the story's turn completed as interrupted: {messages:?}");
    assert!(
        said("assistant", "Once upon").is_none_or(|at| at < interrupted),
        "the story was not finished: {messages:?}"
    );
    assert_eq!(sim.sonic_stats().interruptions, 1, "the simulator was spoken over once");

    heard_stop(&call["measured"]);
    let record = &result["record"];
    assert_eq!(record["outcome"], "ended", "{record}");
    let events = record["events"].as_array().expect("events");
    assert!(events.iter().any(|e| e["kind"] == "interruption"), "the record holds the interruption: {events:?}");
    assert_eq!(call["deleted"], 200, "DELETE ends the call");
    assert_eq!(result["errors"], serde_json::json!([]), "no page errors");
}

/// What the page heard: the story audible before the caller spoke, cut soon after, silence
/// (no audio received) while the caller spoke on, then the answer.
fn heard_stop(measured: &Value) {
    let number = |name: &str| measured[name].as_f64().unwrap_or_else(|| panic!("{name}: {measured}"));
    let story_ms = STORY_TEXT.chars().count() as f64 * MS_PER_CHAR as f64;
    // The page spoke once it had heard a second of the story.
    assert!(number("storyHeardMs") >= 900.0, "the story was heard before the barge-in: {measured}");
    // From the caller's first sound to the story's last: the simulator hears speech after
    // some voiced audio, the edge drops what it queued, the browser plays out its jitter
    // buffer. Seconds of margin on a busy machine; the story had seconds left.
    let after_speech = number("cutAfterSpeechMs");
    let after_interruption = number("cutAfterInterruptionMs");
    assert!(after_speech < 2500.0, "the reply stopped {after_speech} ms after the caller began: {measured}");
    assert!(after_interruption < 1000.0, "{after_interruption} ms after the bidi_interruption: {measured}");
    let heard = number("storyHeardMs") + after_speech;
    assert!(heard < story_ms - 1500.0, "{heard} ms of the {story_ms} ms story played: {measured}");
    // While the caller spoke on, nothing came: no audio energy, and (DTX, the queue dropped)
    // few packets, against the story's rate.
    let quiet_ms = number("quietMs");
    assert!(quiet_ms >= 500.0, "a gap between the story and the answer: {measured}");
    let story_rate = number("storyEnergyPerSecond");
    let quiet_rate = number("quietEnergyPerSecond");
    assert!(story_rate > 0.0, "the story's energy, by WebRTC's statistics: {measured}");
    assert!(quiet_rate < story_rate * 0.05, "no energy received after the cut: {measured}");
    let story_packets = number("storyPacketsPerSecond");
    let quiet_packets = number("quietPacketsPerSecond");
    assert!(quiet_packets < story_packets * 0.25, "the reply's packets stopped: {measured}");
    // The answer to the question is heard on the same call.
    assert!(number("answerHeardMs") >= 200.0, "the next reply was heard: {measured}");
}
