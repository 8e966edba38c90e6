//! The announcements' loading, checks, resampling, pacing and turn boundary.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_sip::media::format::Format;
use switchboard_sip::media::g711::Law;

use super::wav::{self, WavError};
use super::*;

/// A WAV file: the `fmt ` fields given, then `samples` as its data.
fn wav_with(tag: u16, channels: u16, rate: u32, bits: u16, samples: &[i16]) -> Vec<u8> {
    let data: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    let mut out = Vec::new();
    out.extend(b"RIFF");
    out.extend((36 + data.len() as u32).to_le_bytes());
    out.extend(b"WAVE");
    // A chunk the reader skips, of odd size (padded).
    out.extend(b"LIST");
    out.extend(3u32.to_le_bytes());
    out.extend([1, 2, 3, 0]);
    out.extend(b"fmt ");
    out.extend(16u32.to_le_bytes());
    out.extend(tag.to_le_bytes());
    out.extend(channels.to_le_bytes());
    out.extend(rate.to_le_bytes());
    out.extend((rate * u32::from(channels) * u32::from(bits) / 8).to_le_bytes());
    out.extend((channels * bits / 8).to_le_bytes());
    out.extend(bits.to_le_bytes());
    out.extend(b"data");
    out.extend((data.len() as u32).to_le_bytes());
    out.extend(data);
    out
}

fn tone(hz: f64, rate: u32, seconds: f64) -> Vec<i16> {
    let n = (f64::from(rate) * seconds) as usize;
    (0..n).map(|i| (12000.0 * (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin()) as i16).collect()
}

/// The amplitude of `hz` in `samples` (8 kHz), by the Goertzel algorithm.
fn strength(samples: &[i16], hz: f64) -> f64 {
    let w = 2.0 * std::f64::consts::PI * hz / 8000.0;
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for x in samples {
        let s0 = f64::from(*x) + 2.0 * w.cos() * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    2.0 * (s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2).max(0.0).sqrt() / samples.len() as f64
}

#[test]
fn an_8k_mono_pcm_wav_reads_as_it_is() {
    let samples = tone(1000.0, 8000, 0.5);
    assert_eq!(wav::read(&wav_with(1, 1, 8000, 16, &samples)), Ok(samples));
}

#[test]
fn a_16k_wav_is_halved_and_keeps_its_tone_but_not_what_would_fold_back() {
    let heard = wav::read(&wav_with(1, 1, 16000, 16, &tone(1000.0, 16000, 1.0))).expect("reads");
    assert_eq!(heard.len(), 8000, "one second at 8 kHz");
    let kept = strength(&heard[200..7800], 1000.0);
    assert!((kept - 12000.0).abs() < 800.0, "the 1 kHz tone kept its level: {kept}");
    // 6 kHz at 16 kHz would fold to 2 kHz at 8 kHz without the filter.
    let folded = wav::read(&wav_with(1, 1, 16000, 16, &tone(6000.0, 16000, 1.0))).expect("reads");
    let alias = strength(&folded[200..7800], 2000.0);
    assert!(alias < 300.0, "filtered before halving: {alias}");
}

#[test]
fn a_wav_the_edge_cannot_play_is_refused_with_what_is_wrong() {
    let short = tone(1000.0, 8000, 0.5);
    let cases: [(Vec<u8>, WavError); 8] = [
        (b"ID3\x04 an mp3".to_vec(), WavError::NotWav),
        (wav_with(1, 2, 8000, 16, &short), WavError::Channels(2)),
        (wav_with(1, 1, 44100, 16, &short), WavError::Rate(44100)),
        (wav_with(1, 1, 8000, 8, &short), WavError::Encoding("8-bit PCM".into())),
        (wav_with(3, 1, 8000, 32, &short), WavError::Encoding("floating point".into())),
        (wav_with(7, 1, 8000, 8, &short), WavError::Encoding("μ-law".into())),
        (wav_with(1, 1, 8000, 16, &short[..100]), WavError::Empty),
        (wav_with(1, 1, 8000, 16, &vec![0; 8000 * 61]), WavError::TooLong(61.0)),
    ];
    for (bytes, want) in cases {
        assert_eq!(wav::read(&bytes), Err(want));
    }
    let mut no_data = wav_with(1, 1, 8000, 16, &short);
    no_data.truncate(12 + 12 + 24);
    assert_eq!(wav::read(&no_data), Err(WavError::Missing("data")));
    let message = WavError::Rate(44100).to_string();
    assert!(message.contains("44100 Hz, not 8000 or 16000"), "{message}");
}

#[test]
fn a_data_chunk_longer_than_the_file_reads_what_is_there() {
    let mut bytes = wav_with(1, 1, 8000, 16, &tone(500.0, 8000, 0.1));
    let at = bytes.len() - 800 * 2 - 4;
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(wav::read(&bytes).map(|s| s.len()), Ok(800));
}

fn folder(name: &str, files: &[(&str, Vec<u8>)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sb-announce-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a folder");
    for (file, bytes) in files {
        std::fs::write(dir.join(file), bytes).expect("write");
    }
    dir
}

#[test]
fn the_folder_gives_defaults_and_an_agents_own_which_wins() {
    let hold = wav_with(1, 1, 8000, 16, &tone(1000.0, 8000, 0.2));
    let own = wav_with(1, 1, 16000, 16, &tone(1000.0, 16000, 0.4));
    let dir = folder(
        "names",
        &[("hold.wav", hold.clone()), ("bank.triage.hold.wav", own), ("bank.idv.v2.outage.wav", hold.clone())],
    );
    // A ConfigMap's mount: hidden entries are not announcements.
    std::fs::create_dir_all(dir.join("..data")).expect("a hidden folder");
    let loaded = Announcements::load(&dir).expect("loads");
    assert_eq!(loaded.files(), ["hold.wav", "bank.idv.v2.outage.wav", "bank.triage.hold.wav"]);
    let file = |purpose, agent: &str| loaded.for_agent(purpose, agent).map(|r| r.file.clone());
    assert_eq!(file(Purpose::Hold, "bank/triage").as_deref(), Some("bank.triage.hold.wav"));
    assert_eq!(file(Purpose::Hold, "triage").as_deref(), Some("bank.triage.hold.wav"), "a bare name: one namespace");
    assert_eq!(file(Purpose::Hold, "other/triage").as_deref(), Some("hold.wav"), "another namespace's: the default");
    assert_eq!(file(Purpose::Hold, "+442079460000").as_deref(), Some("hold.wav"), "a number names no Agent");
    assert_eq!(file(Purpose::Outage, "bank/idv.v2").as_deref(), Some("bank.idv.v2.outage.wav"));
    assert_eq!(file(Purpose::Outage, "bank/triage"), None, "no outage recording for triage, and no default");
    assert_eq!(loaded.for_agent(Purpose::Hold, "triage").expect("one").duration(), Duration::from_millis(400));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bare_name_two_namespaces_recorded_for_gets_the_default() {
    let hold = || Recording::new("x", vec![0; 160]);
    let loaded = Announcements::of([
        (Some(("a".into(), "triage".into())), Purpose::Hold, hold()),
        (Some(("b".into(), "triage".into())), Purpose::Hold, hold()),
        (None, Purpose::Hold, Recording::new("hold.wav", vec![0; 160])),
    ]);
    assert_eq!(loaded.for_agent(Purpose::Hold, "triage").map(|r| r.file.clone()).as_deref(), Some("hold.wav"));
}

#[test]
fn a_bad_file_stops_the_load_with_its_name() {
    let good = wav_with(1, 1, 8000, 16, &tone(1000.0, 8000, 0.2));
    let stereo = wav_with(1, 2, 8000, 16, &tone(1000.0, 8000, 0.2));
    let dir = folder("bad", &[("hold.wav", good.clone()), ("outage.wav", stereo)]);
    let error = Announcements::load(&dir).expect_err("a stereo file");
    let chain = anyhow_like(&error);
    assert!(chain.contains("outage.wav cannot be played: it has 2 channels, not 1"), "{chain}");
    for name in ["Hold.wav", "hold.mp3", "greeting.wav", "triage.hold.wav", "bank..hold.wav", "BANK.t.hold.wav"] {
        let dir = folder("name", &[(name, good.clone())]);
        let error = Announcements::load(&dir).expect_err(name);
        assert!(matches!(&error, AnnounceError::Name { file } if file.ends_with(name)), "{name}: {error}");
        assert!(error.to_string().contains("hold.wav, outage.wav, <namespace>.<agent>.hold.wav"), "{error}");
    }
    let missing = Announcements::load(&dir.join("nowhere")).expect_err("no folder");
    assert!(missing.to_string().starts_with("cannot read the announcements folder"), "{missing}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The error and its sources, `: `-joined (as the CLI prints them).
fn anyhow_like(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[test]
fn a_player_gives_20_ms_frames_once_or_repeated_with_a_gap() {
    let recording = Arc::new(Recording::new("r", tone(1000.0, 8000, 0.05)));
    let mut once = Player::once(Arc::clone(&recording));
    let frames: Vec<Vec<u8>> = std::iter::from_fn(|| once.next_frame(Format::G711(Law::Ulaw))).collect();
    assert_eq!(frames.len(), 3, "400 samples: two frames and one padded");
    assert!(frames.iter().all(|f| f.len() == 160));
    assert_eq!(frames[2][80..], [Law::Ulaw.encode(0); 80], "padded with silence");
    assert!(once.is_over() && once.next_frame(Format::G711(Law::Ulaw)).is_none());
    let mut repeating = Player::repeating(Arc::clone(&recording), Duration::from_millis(100));
    let frames: Vec<Vec<u8>> = (0..10).filter_map(|_| repeating.next_frame(Format::G711(Law::Alaw))).collect();
    assert_eq!(frames.len(), 10, "a repeated recording never ends");
    let silent = |f: &Vec<u8>| f.iter().all(|c| *c == Law::Alaw.encode(0));
    // 400 samples then 800 of gap: a period of 1200 (7.5 frames, the last cut short).
    assert!(!silent(&frames[0]) && !silent(&frames[2]));
    assert!(frames[3..7].iter().all(silent), "the gap");
    assert_eq!(frames[8], frames[0], "played again from its start");
    assert_eq!(repeating.plays(), 1);
    let decoded: Vec<i16> = frames[0].iter().map(|c| Law::Alaw.decode(*c)).collect();
    assert!(strength(&decoded, 1000.0) > 10000.0, "encoded in the call's law");
}

#[test]
fn an_outage_announcement_waits_for_a_turn_boundary_but_not_forever() {
    let t0 = Instant::now();
    let mut turn = Interjection::new(t0);
    assert!(turn.may_start(t0, 0), "nothing said, nothing queued: at once");
    assert!(!turn.may_start(t0, 160), "the agent's reply still plays");
    turn.agent_audio(t0 + Duration::from_millis(100));
    assert!(!turn.may_start(t0 + Duration::from_millis(300), 0), "between words: played out, not yet quiet");
    assert!(turn.may_start(t0 + Duration::from_millis(100) + player::QUIET, 0), "a pause between turns");
    for at in [1, 3, 7] {
        turn.agent_audio(t0 + Duration::from_secs(at));
    }
    assert!(!turn.may_start(t0 + Duration::from_millis(7500), 8000));
    assert!(turn.may_start(t0 + player::MAX_WAIT, 8000), "an agent that never stops is interrupted");
}
