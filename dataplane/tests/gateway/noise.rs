//! Noise suppression on a call (issue 42; the Persona's `turnTaking.noiseSuppression`),
//! through the real gateway, one real runtime process per agent and the simulator: a caller
//! in a noisy place — a recording made here, deterministically, as a WAV file: three times
//! the caller asks for a story (a phrase tone, in a quiet moment), and while the agent tells
//! it, a room full of talk, then traffic, then a radio plays for two seconds — is played to
//! two agents alike but for suppression. Without it the noise is taken for the caller
//! interrupting; with it, fewer times, and the caller's requests are still heard. Counted
//! through the runtime's interruption metrics and the interruptions the client saw.

use std::time::Duration;

use switchboard_core::audio::noise::NoiseSuppressor;
use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_crds::RuntimeSpec;
use switchboard_crds::persona::TurnTaking;
use switchboard_crds::persona::turn_taking::NoiseSuppression;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store as ResumeStore;
use switchboard_sim::Script;
use switchboard_sim::sonic::noise::{self, Kind};
use switchboard_sim::sonic::phrase_tone;

use crate::fleet::Fleet;
use crate::voice_common::{self as common, Call, Encoding, finals, metric_sum, metrics};

/// One part of the recording: the request, then the noise over the reply.
const PART_MS: u64 = 7000;
/// The request: "Tell me a story" for 700 ms, at the start of each part.
const REQUEST_MS: u64 = 700;
/// The noise: two seconds from 1.4 s into each part (the reply starts about a second in).
const NOISE_AT_MS: u64 = 1400;
const NOISE_MS: u64 = 2000;
/// The noise's loudness (RMS, PCM16 units): well above the 500 that counts as voiced.
const NOISE_RMS: f64 = 1500.0;

fn samples(ms: u64) -> usize {
    usize::try_from(ms * 16).expect("small")
}

/// The recording, as a WAV file.
fn recording() -> Vec<u8> {
    let mut pcm = Vec::new();
    for (seed, kind) in (1..).zip(Kind::ALL) {
        let mut part = vec![0u8; samples(PART_MS) * 2];
        let request = phrase_tone(common::STORY, REQUEST_MS, 8000);
        part[..request.len()].copy_from_slice(&request);
        noise::mix(&mut part, &noise::noise(kind, NOISE_MS, NOISE_RMS, seed), samples(NOISE_AT_MS));
        pcm.extend(part);
    }
    noise::wav(&pcm)
}

/// The share of 20 ms frames of `pcm` loud enough to count as speech (RMS >= 500).
fn voiced_share(pcm: &[u8]) -> f64 {
    let frames: Vec<&[u8]> = pcm.chunks(640).collect();
    let loud = frames
        .iter()
        .filter(|frame| {
            let sum: f64 = frame.chunks_exact(2).map(|p| f64::from(i16::from_le_bytes([p[0], p[1]])).powi(2)).sum();
            (sum / (frame.len() / 2) as f64).sqrt() >= 500.0
        })
        .count();
    loud as f64 / frames.len() as f64
}

#[test]
fn the_recording_is_loud_with_noise_and_suppression_quiets_the_noise() {
    let wav = recording();
    let pcm = noise::read_wav(&wav).expect("a 16 kHz PCM16 WAV");
    let mut cleaned = pcm.to_vec();
    let mut suppressor = NoiseSuppressor::new();
    for frame in cleaned.chunks_mut(640) {
        suppressor.process(frame);
    }
    for (n, kind) in Kind::ALL.into_iter().enumerate() {
        let at = (samples(PART_MS) * n + samples(NOISE_AT_MS)) * 2;
        let span = at..at + samples(NOISE_MS) * 2;
        let (before, after) = (voiced_share(&pcm[span.clone()]), voiced_share(&cleaned[span]));
        eprintln!("{}: voiced frames {:.0} % -> {:.0} %", kind.name(), before * 100.0, after * 100.0);
        let request = samples(PART_MS) * n * 2..(samples(PART_MS) * n + samples(REQUEST_MS)) * 2;
        let (asked, heard) = (voiced_share(&pcm[request.clone()]), voiced_share(&cleaned[request]));
        eprintln!("{}: request voiced {:.0} % -> {:.0} %", kind.name(), asked * 100.0, heard * 100.0);
    }
}

/// A fleet whose triage Persona has default turn-taking (silence off), listens first, and
/// has `suppression`.
async fn fleet(suppression: NoiseSuppression) -> Fleet {
    let yaml = common::script("", "").replace("msPerChar: 4,", "msPerChar: 15,");
    let script = Script::parse(&yaml).expect("the voice script");
    let triage = move |spec: &mut RuntimeSpec| {
        if spec.agent.name == "triage" {
            let persona = &mut spec.persona.spec;
            persona.turn_taking = TurnTaking::default();
            persona.turn_taking.silence.after_seconds = 0;
            persona.turn_taking.noise_suppression = suppression;
            // The recording asks for its first story at once: the example's triage speaks
            // first, and its greeting would be what the first noise cuts, not a story.
            persona.speak_first = false;
        }
    };
    let (auth, config, store) = (Auth::default(), GatewayConfig::default(), ResumeStore::default());
    Fleet::edited(&[], auth, config, store, script, None, triage).await
}

/// What one call of the recording came to.
#[derive(Debug)]
struct Outcome {
    /// Interruptions the runtime took and ignored (its metrics).
    taken: f64,
    ignored: f64,
    /// Interruptions the client was told of.
    seen: usize,
    /// Story requests the simulator heard.
    requests: usize,
    /// Stories the agent told to their end.
    stories: usize,
    /// What the simulator heard, in order.
    heard: Vec<Option<String>>,
}

/// Plays the recording to triage on `fleet` and counts.
async fn call(fleet: &Fleet, pcm: &[u8]) -> Outcome {
    let mut call = Call::start(&fleet.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    call.play(pcm);
    let length = Duration::from_millis(PART_MS * Kind::ALL.len() as u64);
    call.read_until(tokio::time::Instant::now() + length + Duration::from_secs(2)).await;
    let pod = fleet.pods.iter().find(|p| p.agent == "triage").expect("triage's pod");
    let text = metrics(pod.addr).await;
    let count = |outcome| {
        metric_sum(&text, "switchboard_voice_interruptions_total", &[("agent", "triage"), ("outcome", outcome)])
    };
    let replies = fleet.sim.sonic_stats().replies;
    Outcome {
        taken: count("taken"),
        ignored: count("ignored"),
        seen: call.seen.iter().filter(|m| matches!(m, ServerMessage::BidiInterruption {})).count(),
        requests: replies.iter().filter(|r| r.heard.as_deref() == Some("Tell me a story")).count(),
        heard: replies.iter().map(|r| r.heard.clone()).collect(),
        stories: finals(&call.seen, TranscriptRole::Assistant)
            .iter()
            .filter(|t| t.ends_with("about their account."))
            .count(),
    }
}

// With RNNoise on, the caller's first request — at the very start of the call — used to
// come back from the simulator as "(inaudible)": RNNoise, cold, passed the line's hiss,
// which its delay put into the request's first and last frames (see
// `switchboard_core::audio::noise`, "Quiet is silence"). Every request must be heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noisy_caller_is_taken_for_an_interruption_less_often_with_noise_suppression() {
    let wav = recording();
    let path = std::env::temp_dir().join(format!("switchboard-noisy-caller-{}.wav", uuid::Uuid::new_v4()));
    std::fs::write(&path, &wav).expect("writes the recording");
    let file = std::fs::read(&path).expect("reads it back");
    let pcm = noise::read_wav(&file).expect("a 16 kHz PCM16 WAV").to_vec();
    let _ = std::fs::remove_file(&path);

    let (off, on) = tokio::join!(fleet(NoiseSuppression::Off), fleet(NoiseSuppression::Rnnoise));
    let (off, on) = tokio::join!(call(&off, &pcm), call(&on, &pcm));
    for (name, o) in [("without suppression", &off), ("with RNNoise", &on)] {
        eprintln!(
            "{name}: interruptions taken {} (the client saw {}), ignored {}; requests heard {}, stories told whole {}; heard {:?}",
            o.taken, o.seen, o.ignored, o.requests, o.stories, o.heard
        );
    }
    assert_eq!((off.requests, on.requests), (3, 3), "every request was heard, with and without suppression");
    assert!(off.taken >= 2.0, "the recording is noisy enough to cut replies without suppression: {off:?}");
    assert!(on.taken < off.taken, "fewer false interruptions with suppression: {on:?} against {off:?}");
    assert_eq!(on.seen as f64, on.taken, "the client saw each interruption taken");
    assert_eq!(off.seen as f64, off.taken, "the client saw each interruption taken");
    assert!(on.stories > off.stories, "more stories told to their end: {on:?} against {off:?}");
}
