//! What the audio formats cost (issue 26), in one run against the same runtime, agent and
//! simulator: clients that speak and hear today's formats (16 kHz PCM16 binary frames in,
//! 24 kHz PCM16 as base64 in `bidi_audio_stream` out) beside clients that ask for
//! reply audio as binary frames, for 8 kHz G.711 μ-law both ways (a telephone bridge), and
//! for both. Each variant runs the same sessions and turns in turn, round after round (so
//! drift in the machine's load falls on every variant alike), and reports
//! - the end-of-speech → first reply audio latency (as the main rows), and
//! - the runtime's CPU per relayed frame: user + system CPU of its process during the
//!   variant's turns (/proc, 10 ms ticks), over the caller's frames sent plus the reply
//!   chunks received.
//!
//! And, in this process, the conversion itself per 20 ms frame — the runtime's own
//! `Decoder` / `Encoder` and base64 — with no sockets around it.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_core::audio::{Decoder, Encoder, Encoding, Format, from_samples, to_samples};
use switchboard_core::protocol::{AudioSettings, SessionStart};
use tokio_tungstenite::tungstenite::Message;

use super::common::{self, FRAME, FRAME_BYTES, Ws, kind, percentile};

/// 8 kHz G.711 μ-law.
const MULAW: Format = Format { encoding: Encoding::Mulaw, rate: 8000 };

/// How a client sends and hears audio.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    pub name: &'static str,
    /// The caller's audio format (`None`: the default, 16 kHz PCM16).
    input: Option<Format>,
    /// The reply audio's format (`None`: the default, 24 kHz PCM16).
    output: Option<Format>,
    /// Reply audio as binary frames instead of base64 JSON.
    binary: bool,
}

/// Today's path first, the base the others are read against.
pub const VARIANTS: [Variant; 4] = [
    Variant { name: "pcm16 json", input: None, output: None, binary: false },
    Variant { name: "pcm16 binary", input: None, output: None, binary: true },
    Variant { name: "mulaw json", input: Some(MULAW), output: Some(MULAW), binary: false },
    Variant { name: "mulaw binary", input: Some(MULAW), output: Some(MULAW), binary: true },
];

impl Variant {
    fn settings(self) -> Option<AudioSettings> {
        let wire = |f: Format| f.to_wire();
        let custom = self.input.is_some() || self.output.is_some() || self.binary;
        custom.then(|| AudioSettings {
            input: self.input.map(wire),
            output: self.output.map(wire),
            binary_output: self.binary,
        })
    }

    /// One 20 ms frame of the caller's audio in this variant's input format, from 16 kHz
    /// PCM16 (`FRAME_BYTES`).
    fn frame(self, pcm16: &[u8]) -> Vec<u8> {
        match self.input {
            None => pcm16.to_vec(),
            Some(format) => {
                let mut samples = Vec::new();
                to_samples(pcm16, Encoding::Pcm16, &mut samples);
                // The phrase tones are far below 4 kHz: every other sample is 8 kHz.
                let halved: Vec<i16> = samples.iter().step_by(2).copied().collect();
                from_samples(&halved, format.encoding)
            }
        }
    }
}

/// Opens a session of `variant`; returns once `bidi_connection_start` arrived.
async fn open(url: &str, variant: Variant) -> Ws {
    let mut ws = common::connect(url).await;
    let start = SessionStart { modalities: vec!["audio".into()], audio: variant.settings(), ..SessionStart::default() };
    let start = common::session_start(url, start);
    ws.send(Message::text(serde_json::to_string(&start).expect("json"))).await.expect("sends");
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) if text.contains("\"bidi_connection_start\"") => return ws,
            Some(Ok(Message::Text(text))) if text.contains("\"bidi_error\"") => panic!("session failed: {text}"),
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

/// One spoken turn as [`common::spoken_turn`] speaks it, in `variant`'s formats: the time
/// from the frame that completes the end-of-utterance silence to the first reply audio, and
/// the frames relayed (the caller's sent, reply audio chunks received).
async fn turn(ws: &mut Ws, variant: Variant, silence_frames: usize) -> (Duration, u64) {
    let silence = variant.frame(&[0u8; FRAME_BYTES]);
    let mut frames: Vec<Vec<u8>> = common::phrase_frames(1, 300).iter().map(|f| variant.frame(f)).collect();
    let speech = frames.len();
    frames.extend(std::iter::repeat_n(silence.clone(), silence_frames));
    let mut ticker = tokio::time::interval(FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (mut sent, mut relayed) = (0usize, 0u64);
    let mut end_of_speech: Option<Instant> = None;
    let mut first_audio = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let frame = frames.get(sent).cloned().unwrap_or_else(|| silence.clone());
                ws.send(Message::binary(frame)).await.expect("sends audio");
                sent += 1;
                relayed += 1;
                if sent == speech + silence_frames {
                    end_of_speech = Some(Instant::now());
                }
            }
            message = ws.next() => {
                let audio = match message {
                    Some(Ok(Message::Binary(_))) => true,
                    Some(Ok(Message::Text(text))) => match kind(text.as_str()) {
                        "bidi_audio_stream" => true,
                        "bidi_response_complete" => return (first_audio.expect("a spoken reply"), relayed),
                        "bidi_error" => panic!("turn failed: {text}"),
                        _ => false,
                    },
                    Some(Ok(_)) => false,
                    other => panic!("connection ended: {other:?}"),
                };
                if audio {
                    relayed += 1;
                    if first_audio.is_none() {
                        first_audio = Some(end_of_speech.expect("reply after the end of speech").elapsed());
                    }
                }
            }
        }
    }
}

/// What one variant's turns gave.
#[derive(Default)]
struct Tally {
    latency_ms: Vec<f64>,
    frames: u64,
    ticks: u64,
}

/// `rounds` rounds of every variant: `sessions` sessions of `turns` turns each, at once.
pub async fn run(url: &str, runtime_pid: u32, sessions: usize, turns: usize, silence_frames: usize, rounds: usize) {
    let mut tallies: Vec<Tally> = VARIANTS.iter().map(|_| Tally::default()).collect();
    for round in 0..rounds {
        for (variant, tally) in VARIANTS.iter().zip(&mut tallies) {
            let mut clients = Vec::with_capacity(sessions);
            for _ in 0..sessions {
                clients.push(open(url, *variant).await);
            }
            let before = common::cpu_ticks(runtime_pid);
            let tasks: Vec<_> = clients
                .into_iter()
                .enumerate()
                .map(|(i, mut ws)| {
                    let variant = *variant;
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_micros((i as u64 * 997) % 40_000)).await;
                        let mut samples = Vec::with_capacity(turns);
                        for _ in 0..turns {
                            samples.push(turn(&mut ws, variant, silence_frames).await);
                        }
                        let _ = ws.close(None).await;
                        samples
                    })
                })
                .collect();
            for task in tasks {
                for (latency, frames) in task.await.expect("session task") {
                    tally.latency_ms.push(latency.as_secs_f64() * 1000.0);
                    tally.frames += frames;
                }
            }
            tally.ticks += common::cpu_ticks(runtime_pid) - before;
            println!("  formats round {} {:>13}: done (load {})", round + 1, variant.name, common::load_average());
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    println!("formats: {sessions} sessions x {turns} turns per variant per round, {rounds} rounds");
    let base_us = tallies[0].ticks as f64 * 10_000.0 / tallies[0].frames.max(1) as f64;
    for (variant, tally) in VARIANTS.iter().zip(&mut tallies) {
        tally.latency_ms.sort_by(f64::total_cmp);
        let us = tally.ticks as f64 * 10_000.0 / tally.frames.max(1) as f64;
        println!(
            "{:>13}: {:>5} turns, first audio median {:.3} ms, p99 {:.3} ms; runtime CPU {:.1} us/frame ({:+.1} vs pcm16 json) over {} frames",
            variant.name,
            tally.latency_ms.len(),
            percentile(&tally.latency_ms, 0.5),
            percentile(&tally.latency_ms, 0.99),
            us,
            us - base_us,
            tally.frames,
        );
    }
}

/// The conversions alone, per 20 ms frame, in this process (median of 7 batches).
pub fn codec_costs() {
    let tone = switchboard_sim::sonic::phrase_tone(1, 20, 8000);
    let mulaw_in = VARIANTS[2].frame(&tone[..FRAME_BYTES]);
    // 20 ms of the model's reply audio: 24 kHz PCM16.
    let reply = switchboard_sim::sonic::phrase_tone(2, 30, 8000)[..960].to_vec();
    let per_frame_ns = |mut work: Box<dyn FnMut() -> usize>| {
        let mut batches = Vec::new();
        for _ in 0..7 {
            let start = Instant::now();
            let mut sink = 0usize;
            for _ in 0..20_000 {
                sink = sink.wrapping_add(work());
            }
            std::hint::black_box(sink);
            batches.push(start.elapsed().as_secs_f64() * 1e9 / 20_000.0);
        }
        batches.sort_by(f64::total_cmp);
        batches[3]
    };
    let mut decoder = Decoder::new(MULAW);
    let decode = per_frame_ns(Box::new(move || decoder.decode(std::hint::black_box(&mulaw_in)).len()));
    let mut encoder = Encoder::new(MULAW);
    let reply_for_encoder = reply.clone();
    let encode = per_frame_ns(Box::new(move || encoder.encode(std::hint::black_box(&reply_for_encoder)).len()));
    let reply_mulaw = Encoder::new(MULAW).encode(&reply);
    let base64_pcm =
        per_frame_ns(Box::new(move || aws_smithy_types::base64::encode(std::hint::black_box(&reply)).len()));
    let base64_mulaw =
        per_frame_ns(Box::new(move || aws_smithy_types::base64::encode(std::hint::black_box(&reply_mulaw)).len()));
    println!(
        "codec per 20 ms frame (this process): mu-law 8 kHz -> PCM16 16 kHz decode {decode:.0} ns; PCM16 24 kHz -> mu-law 8 kHz encode {encode:.0} ns; base64 of the reply chunk: PCM16 24 kHz (960 B) {base64_pcm:.0} ns, mu-law 8 kHz (160 B) {base64_mulaw:.0} ns"
    );
}
