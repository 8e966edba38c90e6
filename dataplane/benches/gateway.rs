//! The session gateway's cost, measured beside the direct path in the same run:
//!
//! 1. **Text turn**: time from sending a text to the first reply delta, through the gateway
//!    and straight to the runtime, alternated, at 1 and `BENCH_SESSIONS` concurrent
//!    sessions; the gateway's added time is the difference of the two (p50, p99).
//! 2. **Handoff gap** at `BENCH_SESSIONS` concurrent sessions handing off from `triage` to
//!    `idv` at once: the client-observed time from the last message of the source agent to
//!    the first of the target (its `bidi_connection_start`: the gateway has opened the
//!    session on the target's pod).
//! 3. **Memory per idle session** in the gateway: its RSS before and after opening
//!    `BENCH_IDLE` sessions (each with its runtime connection).
//! 4. **Voice relay**: `BENCH_VOICE_SESSIONS` voice sessions of `BENCH_TURNS` spoken turns
//!    (20 ms frames both ways, real time) through the gateway, then the same straight to
//!    the runtime: the gateway's CPU per relayed frame, and beside the runtime's CPU for
//!    the same sessions; time from the end of speech to the first reply audio both ways.
//! 5. **Voice handoff gap**, triage (hybrid) -> idv (voice).
//! 6. **The conversation record, on vs off**: two gateways in front of the same runtimes,
//!    one recording into a SQLite file (`--record-database-url`), alternated: text turns
//!    (latency, and each gateway's CPU per turn) and voice sessions (CPU per relayed frame).
//! 7. **Memory per live voice session**: `BENCH_VOICE_SESSIONS` calls of `BENCH_LIVE_TURNS`
//!    spoken turns stay on the line through the gateway, then as many straight to another
//!    runtime process: the gateway's RSS growth per call while they are live and after
//!    they hung up, beside the runtime's behind it and the runtime's alone.
//!
//! Real release binaries as child processes: `switchboard sim`, `switchboard runtime` (one
//! per agent, each trusting the gateway's key) and `switchboard gateway` with a routing
//! table file (`--routes-file`); real WebSocket clients here.
//!
//! ```sh
//! cargo bench -p switchboard-dataplane --bench gateway
//! ```
//!
//! Environment: `BENCH_SESSIONS` (default 100), `BENCH_TURNS` (default 5), `BENCH_IDLE`
//! (default 1000), `BENCH_VOICE_SESSIONS` (default 50), `BENCH_WORKERS` (tokio workers of
//! every process, default 1), `BENCH_LIVE_TURNS` (default 8), `BENCH_ONLY=record` (section 6
//! alone), `BENCH_ONLY=voice` (sections 4 and 7 alone), `BENCH_ONLY=voice-cpu` (section 4 alone).

#[path = "common/mod.rs"]
mod common;
#[path = "gateway/raw_relay.rs"]
mod raw_relay;
#[path = "gateway/relay_floor.rs"]
mod relay_floor;
#[path = "gateway/voice.rs"]
mod voice;

use std::time::{Duration, Instant};

use common::{Stack, Ws, cpu_ticks, env_or, kind, percentile, rss_kib, text_script, voice_script};
use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, SessionStart};
use tokio_tungstenite::tungstenite::Message;

/// The next text frame.
async fn next_text(ws: &mut Ws) -> String {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => return text.as_str().to_owned(),
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

async fn send(ws: &mut Ws, message: &ClientMessage) {
    ws.send(Message::text(serde_json::to_string(message).expect("json"))).await.expect("sends");
}

/// A text session with the default agent (`triage`), after its greeting.
async fn open_text(url: &str) -> Ws {
    let mut ws = common::connect(url).await;
    send(&mut ws, &common::session_start(url, SessionStart::default())).await;
    while !next_text(&mut ws).await.contains(r#""is_final":true"#) {}
    ws
}

/// One text turn: the time from sending to the first reply delta (then the turn is read
/// to its end).
async fn text_turn(ws: &mut Ws) -> Duration {
    send(ws, &ClientMessage::BidiTextInput { text: "Hello".into(), id: None }).await;
    let sent = Instant::now();
    let mut first = None;
    loop {
        let text = next_text(ws).await;
        match kind(&text) {
            "bidi_transcript_stream" if first.is_none() && text.contains(r#""delta":true"#) => {
                first = Some(sent.elapsed());
            }
            "bidi_response_complete" => return first.expect("a streamed reply"),
            "bidi_error" => panic!("turn failed: {text}"),
            _ => {}
        }
    }
}

fn ms(samples: &mut [Duration]) -> Vec<f64> {
    samples.sort();
    samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect()
}

async fn text_round(url: &str, sessions: usize, turns: usize) -> Vec<f64> {
    let mut clients = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        clients.push(open_text(url).await);
    }
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, mut ws)| {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_micros((i as u64 * 997) % 50_000)).await;
                let mut samples = Vec::with_capacity(turns);
                for _ in 0..turns {
                    samples.push(text_turn(&mut ws).await);
                }
                let _ = ws.close(None).await;
                samples
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a session"));
    }
    ms(&mut all)
}

/// A session that hands off from triage to idv: the time from the last message of triage
/// to idv's `bidi_connection_start`.
async fn handoff_gap(url: String) -> Duration {
    let mut ws = open_text(&url).await;
    send(&mut ws, &ClientMessage::BidiTextInput { text: "I'd like to check my balance".into(), id: None }).await;
    let mut last = Instant::now();
    loop {
        let text = next_text(&mut ws).await;
        let now = Instant::now();
        if kind(&text) == "bidi_connection_start" && text.contains(r#""agent":"idv""#) {
            let _ = ws.close(None).await;
            return now - last;
        }
        if kind(&text) == "bidi_error" {
            panic!("the handoff failed: {text}");
        }
        last = now;
    }
}

/// A voice call that hands off from triage (hybrid, speaking) to idv (voice): the client
/// speaks the balance request, then silence in real time. Returns the gaps from the last
/// message of triage to idv's `bidi_connection_start` and to idv's first audio (its new
/// Nova Sonic stream opened and answering).
async fn voice_handoff_gap(url: String, silence_frames: usize) -> (Duration, Duration) {
    let mut ws = common::open(&url).await;
    let mut frames = common::phrase_frames(1, 700);
    frames.extend(std::iter::repeat_n(vec![0u8; common::FRAME_BYTES], silence_frames));
    let mut ticker = tokio::time::interval(common::FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (mut sent, mut last, mut to_start) = (0usize, Instant::now(), None);
    let mut seen: Vec<String> = Vec::new();
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let frame = frames.get(sent).cloned().unwrap_or_else(|| vec![0u8; common::FRAME_BYTES]);
                ws.send(Message::binary(frame)).await.expect("sends audio");
                sent += 1;
            }
            message = ws.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    let now = Instant::now();
                    if kind(text.as_str()) != "bidi_audio_stream" {
                        seen.push(text.chars().take(160).collect());
                    }
                    match (kind(text.as_str()), to_start) {
                        ("bidi_error", _) => panic!("the voice handoff failed: {text}; after {seen:#?}"),
                        ("bidi_connection_start", None) if text.contains(r#""agent":"idv""#) => to_start = Some(now - last),
                        ("bidi_audio_stream", Some(start)) => {
                            let _ = ws.close(None).await;
                            return (start, now - last);
                        }
                        (_, None) => last = now,
                        _ => {}
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("connection ended: {other:?}"),
            },
        }
    }
}

fn row(label: &str, samples: &[f64]) -> (f64, f64) {
    let (p50, p99) = (percentile(samples, 0.5), percentile(samples, 0.99));
    println!("  {label:<28} {:>5} samples: p50 {p50:>8.3} ms, p99 {p99:>8.3} ms", samples.len());
    (p50, p99)
}

fn main() {
    if relay_floor::serve_if_asked() {
        return;
    }
    tokio::runtime::Runtime::new().expect("a tokio runtime").block_on(bench());
}

async fn bench() {
    let sessions: usize = env_or("BENCH_SESSIONS", 100);
    let turns: usize = env_or("BENCH_TURNS", 5);
    let idle: usize = env_or("BENCH_IDLE", 1000);
    let voice_sessions: usize = env_or("BENCH_VOICE_SESSIONS", 50);
    let capacity = (sessions.max(idle) * 2 + 10) as u32;

    // 1-3: the Example Bank's script, with fast turns (the comparison is side by side).
    let script = text_script();
    let silence_ms = 200;
    let voice_script = voice_script(silence_ms);
    let live_turns: usize = env_or("BENCH_LIVE_TURNS", 8);
    match std::env::var("BENCH_ONLY").as_deref() {
        Ok("record") => {
            return record_on_off(&script, &voice_script, sessions, turns, voice_sessions, silence_ms / 20).await;
        }
        Ok("voice-cpu") => return voice::voice_cpu(&voice_script, voice_sessions, turns, silence_ms / 20).await,
        Ok("voice") => {
            voice::voice_cpu(&voice_script, voice_sessions, turns, silence_ms / 20).await;
            return voice::voice_memory(&voice_script, voice_sessions, live_turns, silence_ms / 20).await;
        }
        _ => {}
    }
    let mut stack = Stack::start(&script, "triage", capacity).await;
    let (idv, _) = stack.add_runtime("idv", capacity).await;
    let triage = stack.addr.clone();
    let (gateway, gateway_pid) = stack.add_gateway(&[("triage", &triage), ("idv", &idv)], 4 * capacity as usize).await;
    println!(
        "gateway pid {gateway_pid}, runtimes triage (pid {}) and idv, simulator pid {}; {} worker thread(s) each",
        stack.runtime_pid,
        stack.sim_pid,
        common::workers()
    );
    // Warm up both paths.
    for url in [&stack.url, &gateway] {
        let mut ws = open_text(url).await;
        for _ in 0..3 {
            text_turn(&mut ws).await;
        }
    }

    println!("\n1. text turn, send -> first reply delta (alternated: direct, gateway, direct, gateway)");
    for count in [1, sessions] {
        let mut direct = Vec::new();
        let mut via = Vec::new();
        for _ in 0..2 {
            direct.extend(text_round(&stack.url, count, turns).await);
            via.extend(text_round(&gateway, count, turns).await);
        }
        direct.sort_by(f64::total_cmp);
        via.sort_by(f64::total_cmp);
        println!(" {count} session(s), {turns} turns each, two rounds:");
        let (d50, d99) = row("direct to the runtime", &direct);
        let (g50, g99) = row("through the gateway", &via);
        println!("  gateway adds: p50 {:+.3} ms, p99 {:+.3} ms", g50 - d50, g99 - d99);
    }

    println!("\n2. handoff gap, triage -> idv, {sessions} sessions at once (last triage message -> idv's first)");
    let tasks: Vec<_> = (0..sessions).map(|_| tokio::spawn(handoff_gap(gateway.clone()))).collect();
    let mut gaps = Vec::new();
    for task in tasks {
        gaps.push(task.await.expect("a session"));
    }
    row("handoff gap", &ms(&mut gaps));

    println!("\n3. memory per idle session ({idle} sessions through the gateway)");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (gateway_before, runtime_before) = (rss_kib(gateway_pid), rss_kib(stack.runtime_pid));
    let mut idle_clients = Vec::with_capacity(idle);
    for _ in 0..idle {
        idle_clients.push(open_text(&gateway).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (gateway_after, runtime_after) = (rss_kib(gateway_pid), rss_kib(stack.runtime_pid));
    let per = |before: u64, after: u64| after.saturating_sub(before) as f64 / idle as f64;
    println!(
        "  gateway RSS {gateway_before} -> {gateway_after} KiB: {:.1} KiB per idle session (the runtime behind it: {:.1} KiB)",
        per(gateway_before, gateway_after),
        per(runtime_before, runtime_after)
    );
    drop(idle_clients);
    drop(stack);

    // 4: voice, the idv agent, a script of one phrase and an immediate reply.
    let silence_frames = silence_ms / 20;
    voice::voice_cpu(&voice_script, voice_sessions, turns, silence_frames).await;

    // 5: voice handoffs, triage (hybrid) -> idv (voice), each on its own runtime process.
    let handoffs: usize = env_or("BENCH_VOICE_HANDOFFS", 100);
    let banking =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/sim/banking.yaml")).expect("the banking script");
    let voice_banking = format!(
        r#"{banking}
sonic:
  turnDetection: {{ silenceMs: {{ high: {silence_ms}, medium: {silence_ms}, low: {silence_ms} }} }}
  phrases: {{ 1: "I'd like to check my balance" }}
  speech: {{ msPerChar: 10, chunkMs: 20, responseDelayMs: 0 }}
"#
    );
    let capacity = (handoffs * 2 + 10) as u32;
    let mut stack = Stack::start(&voice_banking, "triage", capacity).await;
    let (idv, _) = stack.add_runtime("idv", capacity).await;
    let triage = stack.addr.clone();
    let (gateway, _) = stack.add_gateway(&[("triage", &triage), ("idv", &idv)], handoffs * 4).await;
    voice_handoff_gap(gateway.clone(), silence_frames).await;
    println!(
        "\n5. voice handoff gap, triage -> idv, {handoffs} calls at once (last triage message -> idv's bidi_connection_start, and -> idv's first audio)"
    );
    let tasks: Vec<_> =
        (0..handoffs).map(|_| tokio::spawn(voice_handoff_gap(gateway.clone(), silence_frames))).collect();
    let (mut starts, mut audio) = (Vec::new(), Vec::new());
    for task in tasks {
        let (start, first_audio) = task.await.expect("a call");
        starts.push(start);
        audio.push(first_audio);
    }
    row("-> idv's connection start", &ms(&mut starts));
    row("-> idv's first audio", &ms(&mut audio));
    drop(stack);

    record_on_off(&script, &voice_script, sessions, turns, voice_sessions, silence_frames).await;
    voice::voice_memory(&voice_script, voice_sessions, live_turns, silence_frames).await;
}

/// 6: the same load through a gateway that records and one that does not, alternated.
async fn record_on_off(
    script: &str,
    voice_script: &str,
    sessions: usize,
    turns: usize,
    voice_sessions: usize,
    silence_frames: usize,
) {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let file = std::env::temp_dir().join(format!("switchboard-bench-record-{stamp}.db"));
    let record_url = format!("sqlite:{}", file.display());
    let recording = ["--record-database-url", record_url.as_str()];
    let capacity = (sessions * 2 + voice_sessions * 2 + 10) as u32;

    let mut stack = Stack::start(script, "triage", capacity).await;
    let triage = stack.addr.clone();
    let (plain, plain_pid) = stack.add_gateway(&[("triage", &triage)], 4 * capacity as usize).await;
    let (kept, kept_pid) = stack.add_gateway_with(&[("triage", &triage)], 4 * capacity as usize, &recording).await;
    for url in [&plain, &kept] {
        let mut ws = open_text(url).await;
        for _ in 0..3 {
            text_turn(&mut ws).await;
        }
    }
    println!("\n6. the conversation record: {sessions} text sessions x {turns} turns, alternated (off, on, off, on)");
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut off_cpu, mut on_cpu) = (0u64, 0u64);
    for _ in 0..2 {
        let before = cpu_ticks(plain_pid);
        off.extend(text_round(&plain, sessions, turns).await);
        off_cpu += cpu_ticks(plain_pid) - before;
        let before = cpu_ticks(kept_pid);
        on.extend(text_round(&kept, sessions, turns).await);
        on_cpu += cpu_ticks(kept_pid) - before;
    }
    off.sort_by(f64::total_cmp);
    on.sort_by(f64::total_cmp);
    let (o50, o99) = row("record off", &off);
    let (r50, r99) = row("record on (SQLite)", &on);
    let per_turn = |ticks: u64, n: usize| ticks as f64 * 10.0 * 1000.0 / n as f64;
    println!(
        "  recording adds: p50 {:+.3} ms, p99 {:+.3} ms; gateway CPU per turn {:.0} us off, {:.0} us on",
        r50 - o50,
        r99 - o99,
        per_turn(off_cpu, off.len()),
        per_turn(on_cpu, on.len())
    );
    drop(stack);

    let mut stack = Stack::start(voice_script, "idv", capacity).await;
    let idv = stack.addr.clone();
    let (plain, plain_pid) = stack.add_gateway(&[("idv", &idv)], voice_sessions * 4).await;
    let (kept, kept_pid) = stack.add_gateway_with(&[("idv", &idv)], voice_sessions * 4, &recording).await;
    for url in [&plain, &kept] {
        let mut warm = common::open(url).await;
        common::spoken_turn(&mut warm, silence_frames).await;
    }
    println!(" {voice_sessions} voice sessions x {turns} spoken turns, off then on:");
    let before = cpu_ticks(plain_pid);
    let (off, off_frames) = voice::voice_round(&plain, voice_sessions, turns, silence_frames).await;
    let off_cpu = (cpu_ticks(plain_pid) - before) as f64 * 10.0;
    let before = cpu_ticks(kept_pid);
    let (on, on_frames) = voice::voice_round(&kept, voice_sessions, turns, silence_frames).await;
    let on_cpu = (cpu_ticks(kept_pid) - before) as f64 * 10.0;
    row("end of speech -> audio, off", &off);
    row("... record on", &on);
    println!(
        "  gateway CPU per relayed frame: {:.1} us off, {:.1} us on ({off_frames} and {on_frames} frames)",
        1000.0 * off_cpu / off_frames as f64,
        1000.0 * on_cpu / on_frames as f64
    );
    drop(stack);
    let _ = std::fs::remove_file(&file);
}
