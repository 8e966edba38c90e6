//! Voice relay overhead: the client-observed time from the end of the user's speech to
//! the first reply audio, minus what the simulator is configured to take, over 100
//! concurrent sessions of several turns each.
//!
//! "End of speech" is the moment the client sends the audio frame that completes the
//! simulator's end-of-utterance silence (`silenceMs`, a whole number of 20 ms frames): the
//! simulator decides the utterance is over when that frame arrives, then waits its
//! configured `responseDelayMs` (default 0 here) before the first reply event. What is
//! left is the relay: client -> runtime (WebSocket, checks) -> Nova Sonic client (event
//! encoding, HTTP/2 over TLS) -> simulator, and the reply back the same way — plus the
//! simulator's own decoding and turn detection, which cannot be separated from outside.
//!
//! Runs the real release binaries: `switchboard sim` and `switchboard runtime` (the `idv`
//! voice agent of examples/banking), as child processes; real WebSocket clients here.
//!
//! ```sh
//! cargo bench -p switchboard-dataplane --bench voice_relay
//! ```
//!
//! Environment: `BENCH_SESSIONS` (default 100), `BENCH_TURNS` per session (default 5),
//! `BENCH_RESPONSE_DELAY_MS` (the simulator's configured delay, default 0),
//! `BENCH_SILENCE_MS` (end-of-utterance silence, a multiple of 20, default 200), `BENCH_FLOOR`
//! (`0` skips the floor rows: the same clients against a server that only answers, see
//! `floor/mod.rs`), `BENCH_TRACING=on` (adds `traced` rows: a second runtime, the same agent
//! and simulator, exporting every span — sessions, turns, Nova Sonic streams — over OTLP/HTTP
//! to a receiver in this process that answers at once: tracing's cost beside the untraced
//! runtime's in the same run), `BENCH_FORMATS` (`0` skips the format rows: the same runtime
//! with clients in 8 kHz μ-law both ways and with binary reply frames beside today's 16 kHz
//! PCM16 in / base64 24 kHz PCM16 out, per-frame CPU and latency, see
//! `voice_relay/formats.rs`), `BENCH_FORMAT_ROUNDS` (rounds of the format variants, default 2).

#[path = "common/mod.rs"]
mod common;
#[path = "floor/mod.rs"]
mod floor;
#[path = "voice_relay/formats.rs"]
mod formats;

use std::time::Duration;

use common::{Stack, env_or, open, overheads_ms, percentile};

fn main() {
    if floor::serve_if_asked() {
        return;
    }
    tokio::runtime::Runtime::new().expect("a tokio runtime").block_on(bench());
}

async fn bench() {
    let sessions: usize = env_or("BENCH_SESSIONS", 100);
    let turns: usize = env_or("BENCH_TURNS", 5);
    let delay_ms: u64 = env_or("BENCH_RESPONSE_DELAY_MS", 0);
    let silence_ms: u64 = env_or("BENCH_SILENCE_MS", 200);
    let silence_frames = (silence_ms / 20) as usize;
    let with_floor = std::env::var("BENCH_FLOOR").map_or(true, |v| v != "0");
    let with_formats = std::env::var("BENCH_FORMATS").map_or(true, |v| v != "0");
    let format_rounds: usize = env_or("BENCH_FORMAT_ROUNDS", 2);
    let script = format!(
        r#"
sonic:
  turnDetection: {{ silenceMs: {{ high: {silence_ms}, medium: {silence_ms}, low: {silence_ms} }} }}
  phrases: {{ 1: "hello" }}
  speech: {{ msPerChar: 10, chunkMs: 20, responseDelayMs: {delay_ms} }}
default: {{ text: "Hello there, how can I help?" }}
"#
    );
    let mut stack = Stack::start(&script, "idv", 2 * sessions as u32 + 10).await;
    println!(
        "switchboard runtime (release) pid {}, simulator pid {}; end-of-utterance silence {silence_ms} ms, configured response delay {delay_ms} ms; {sessions} sessions x {turns} turns",
        stack.runtime_pid, stack.sim_pid
    );
    let floor = with_floor.then(|| floor::start(floor::FloorConfig::one_chunk(silence_frames)));
    let mut targets = vec![("runtime", stack.url.clone())];
    let sink = if std::env::var("BENCH_TRACING").is_ok_and(|v| v == "on") {
        let sink = common::otlp_sink().await;
        let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint.as_str())];
        let (addr, traced_pid) = stack.add_runtime_with("idv", 2 * sessions as u32 + 10, &env).await;
        println!("traced: a second runtime (pid {traced_pid}) exporting its spans to {}", sink.endpoint);
        targets.push(("traced", format!("ws://{addr}/v1/session")));
        Some(sink)
    } else {
        None
    };
    if let Some(floor) = &floor {
        println!(
            "floor: a WebSocket server (pid {}) that answers the frame ending the utterance with one audio chunk at once: the same clients' figure without runtime, Nova Sonic client or simulator",
            floor.pid
        );
        targets.push(("floor", floor.url.clone()));
    }
    // Warm up: TLS, HTTP/2 connections to the simulator, allocator.
    for (_, url) in &targets {
        let mut warm = open(url).await;
        for _ in 0..2 {
            common::spoken_turn(&mut warm, silence_frames).await;
        }
    }
    let runs = [("1 session", 1usize), ("concurrent", sessions)];
    for ((label, count), (target, url)) in runs.iter().flat_map(|run| targets.iter().map(move |target| (*run, target)))
    {
        let mut clients = Vec::with_capacity(count);
        for _ in 0..count {
            clients.push(open(url).await);
        }
        let tasks: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut ws)| {
                tokio::spawn(async move {
                    // Spread the sessions' turns over a frame period and a bit.
                    tokio::time::sleep(Duration::from_micros((i as u64 * 997) % 40_000)).await;
                    let mut samples = Vec::with_capacity(turns);
                    for _ in 0..turns {
                        samples.push(common::spoken_turn(&mut ws, silence_frames).await.0);
                    }
                    let _ = ws.close(None).await;
                    samples
                })
            })
            .collect();
        let overhead = overheads_ms(tasks, delay_ms as f64).await;
        println!(
            "{target:>8} {label:>12}: {count:>4} sessions, {:>4} turns: overhead median {:.3} ms, p99 {:.3} ms, min {:.3} ms, max {:.3} ms",
            overhead.len(),
            percentile(&overhead, 0.5),
            percentile(&overhead, 0.99),
            overhead.first().copied().unwrap_or_default(),
            overhead.last().copied().unwrap_or_default(),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if with_formats {
        formats::codec_costs();
        formats::run(&stack.url, stack.runtime_pid, sessions, turns, silence_frames, format_rounds).await;
    }
    if let Some(sink) = sink {
        sink.report().await;
    }
    drop(floor);
    drop(stack);
}
