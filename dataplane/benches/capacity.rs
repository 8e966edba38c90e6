//! What one live voice call and one text session cost on the product path — the session
//! gateway and the runtime behind it, the two processes a call goes through — for a
//! capacity planner (issue 45): CPU per call-minute, memory per call, and the latency seen
//! at each load beside the latency of a single call (the floor), so that "calls per core
//! at the latency floor" is read off one run.
//!
//! Real release binaries as child processes — `switchboard sim`, `switchboard runtime`,
//! `switchboard gateway` (one routing table, the conversation record off, as shipped by
//! default) — each with `BENCH_WORKERS` tokio worker threads; the clients run here.
//!
//! - **Voice**: for each of `BENCH_VOICE_STEPS` (default `1,10,25,50`), that many calls at
//!   once through the gateway to the `idv` voice agent, each `BENCH_CALL_S` (30) seconds of
//!   20 ms PCM16 16 kHz frames in real time with `BENCH_CALL_TURNS` (8) spoken turns spread
//!   over it (a 300 ms phrase, silence until the reply is complete, silence until the turn's
//!   slot ends), as issue 45 measured the peers. Per step: the gateway's and the runtime's
//!   CPU (user + system, /proc) over the round, as core-seconds per call-minute and as a
//!   share of a core per live call; both processes' RSS growth per call at the round's peak;
//!   end of speech → first reply audio (p50, p95, p99) and turns answered.
//! - **Text**: for each of `BENCH_TEXT_STEPS` (default `1,100,500`), that many text sessions
//!   with `triage` through the gateway, each taking a turn every `BENCH_TEXT_PERIOD_S` (5)
//!   seconds for `BENCH_CALL_S`: CPU per session-minute, RSS per session, time to the first
//!   reply token (p50, p95).
//!
//! The first step of each kind is the floor the others are read against: a step is "at the
//! floor" while its p95 is within `BENCH_FLOOR_MARGIN_MS` (50) of the first step's. Calls per
//! core is 60 divided by the core-seconds per call-minute, at the largest step at the floor.
//!
//! - **The CPU floor** (`BENCH_FLOOR=0` skips it): after the voice steps, the same calls
//!   against one process that only reads their frames and streams the same replies, paced as
//!   the simulator paces them (`floor/mod.rs`, this executable with `BENCH_WORKERS`
//!   threads): what any server of these callers pays on this machine, with no gateway,
//!   runtime or model behind it; then the product path's CPU per call-minute as a multiple
//!   of the floor's, step by step.
//!
//! ```sh
//! cargo bench -p switchboard-dataplane --bench capacity
//! BENCH_WORKERS=2 cargo bench -p switchboard-dataplane --bench capacity
//! ```

#[path = "common/mod.rs"]
mod common;
#[path = "floor/mod.rs"]
mod floor;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{
    Stack, Ws, cpu_ticks, env_list, env_or, kind, load_average, percentile, rss_kib, text_script, voice_script,
};
use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, SessionStart};
use tokio_tungstenite::tungstenite::Message;

/// One round's figures.
struct Round {
    /// Sessions in the round.
    sessions: usize,
    /// Latency samples, in ms, sorted.
    latencies: Vec<f64>,
    /// Turns asked for in the round, and answered.
    turns: (usize, usize),
    /// CPU of each measured process over the round (the gateway and the runtime, or the
    /// floor), in core-seconds.
    cpu_s: Vec<f64>,
    /// The round's wall time.
    wall: Duration,
    /// RSS growth at the round's peak of each measured process, KiB.
    rss_kib: Vec<u64>,
    load: String,
}

impl Round {
    /// Core-seconds of the measured processes together (the product path: gateway +
    /// runtime) per session-minute.
    fn core_s_per_minute(&self, session_s: f64) -> f64 {
        self.cpu_s.iter().sum::<f64>() * 60.0 / (self.sessions as f64 * session_s)
    }

    /// RSS growth per session of the measured processes together, KiB.
    fn rss_per_session(&self) -> f64 {
        self.rss_kib.iter().sum::<u64>() as f64 / self.sessions as f64
    }

    fn p(&self, q: f64) -> f64 {
        percentile(&self.latencies, q)
    }

    /// One line; `label` follows the session count (the floor's rows say so).
    fn print(&self, what: &str, label: &str, session_s: f64) {
        let per_minute = self.core_s_per_minute(session_s);
        let total: f64 = self.cpu_s.iter().sum();
        let (share, parts) = match (self.cpu_s.as_slice(), self.rss_kib.as_slice()) {
            ([gateway, _], [g, r]) => (
                format!(" (gateway {:.0} %)", 100.0 * gateway / total.max(1e-9)),
                format!(
                    " (gateway {:.1}, runtime {:.1})",
                    *g as f64 / self.sessions as f64,
                    *r as f64 / self.sessions as f64
                ),
            ),
            _ => (String::new(), String::new()),
        };
        println!(
            "  {:>4} {what}{label}: {per_minute:.4} core-s per {what}-minute{share}, {:.3} % of a core each, \
             {:.0} per core; RSS +{:.1} KiB per {what}{parts}; latency p50 {:.1} ms, \
             p95 {:.1}, p99 {:.1}; {}/{} turns answered; wall {:.1} s; load {}",
            self.sessions,
            per_minute * 100.0 / 60.0,
            60.0 / per_minute.max(1e-9),
            self.rss_per_session(),
            self.p(0.5),
            self.p(0.95),
            self.p(0.99),
            self.turns.1,
            self.turns.0,
            self.wall.as_secs_f64(),
            self.load,
        );
    }
}

/// Runs `sessions` tasks made by `session` at once, measuring the processes `pids` (the
/// gateway and the runtime, or the floor) meanwhile; each task returns its latency samples.
async fn round<F>(sessions: usize, turns_each: usize, pids: &[u32], session: impl Fn(usize) -> F) -> Round
where
    F: std::future::Future<Output = Vec<Duration>> + Send + 'static,
{
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pids = pids.to_vec();
    let before: Vec<u64> = pids.iter().map(|&pid| rss_kib(pid)).collect();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (sampling, pids) = (sampling.clone(), pids.clone());
        tokio::spawn(async move {
            let mut peak = vec![0; pids.len()];
            while sampling.load(Ordering::Relaxed) {
                for (peak, &pid) in peak.iter_mut().zip(&pids) {
                    *peak = (*peak).max(rss_kib(pid));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            peak
        })
    };
    let cpu_before: Vec<u64> = pids.iter().map(|&pid| cpu_ticks(pid)).collect();
    let started = Instant::now();
    let tasks: Vec<_> = (0..sessions).map(|i| tokio::spawn(session(i))).collect();
    let mut latencies = Vec::new();
    let mut failed = 0;
    for task in tasks {
        match task.await {
            Ok(samples) => latencies.extend(samples.iter().map(|d| d.as_secs_f64() * 1000.0)),
            Err(error) => {
                failed += 1;
                eprintln!("a session failed: {error}");
            }
        }
    }
    let wall = started.elapsed();
    let cpu_s = pids
        .iter()
        .zip(&cpu_before)
        .map(|(&pid, before)| cpu_ticks(pid).saturating_sub(*before) as f64 / 100.0)
        .collect();
    sampling.store(false, Ordering::Relaxed);
    let peak = sampler.await.expect("the sampler");
    if failed > 0 {
        eprintln!("{failed} of {sessions} sessions failed");
    }
    latencies.sort_by(f64::total_cmp);
    let answered = latencies.len();
    Round {
        sessions,
        latencies,
        turns: (sessions * turns_each, answered),
        cpu_s,
        wall,
        rss_kib: peak.iter().zip(&before).map(|(peak, before)| peak.saturating_sub(*before)).collect(),
        load: load_average(),
    }
}

/// Silence in real time until `until`, reading (and dropping) what the server sends; a
/// `bidi_error` ends the call.
async fn silence_until(ws: &mut Ws, until: tokio::time::Instant) {
    let mut ticker = tokio::time::interval(common::FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(until) => return,
            _ = ticker.tick() => ws.send(Message::binary(vec![0u8; common::FRAME_BYTES])).await.expect("sends audio"),
            message = ws.next() => match message {
                Some(Ok(Message::Text(text))) if kind(text.as_str()) == "bidi_error" => panic!("the call failed: {text}"),
                Some(Ok(_)) => {}
                other => panic!("connection ended: {other:?}"),
            },
        }
    }
}

/// One voice call of `call` with `turns` spoken turns spread over it.
async fn voice_call(url: String, i: usize, call: Duration, turns: usize, silence_frames: usize) -> Vec<Duration> {
    // Calls arrive over the first second, not in one instant.
    tokio::time::sleep(Duration::from_micros((i as u64 * 7_919) % 1_000_000)).await;
    let begun = tokio::time::Instant::now();
    let mut ws = common::open(&url).await;
    let slot = call / turns.max(1) as u32;
    let mut samples = Vec::with_capacity(turns);
    for turn in 1..=turns {
        let (latency, _) = common::spoken_turn(&mut ws, silence_frames).await;
        samples.push(latency);
        silence_until(&mut ws, begun + slot * turn as u32).await;
    }
    let _ = ws.close(None).await;
    samples
}

/// A text session with `triage`, after its greeting.
async fn open_text(url: &str) -> Ws {
    let mut ws = common::connect(url).await;
    let start = common::session_start(url, SessionStart::default());
    ws.send(Message::text(serde_json::to_string(&start).expect("json"))).await.expect("sends");
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) if text.contains(r#""is_final":true"#) => return ws,
            Some(Ok(Message::Text(text))) if kind(text.as_str()) == "bidi_error" => panic!("session failed: {text}"),
            Some(Ok(_)) => {}
            other => panic!("connection ended: {other:?}"),
        }
    }
}

/// One text turn: the time from sending to the first reply token.
async fn text_turn(ws: &mut Ws) -> Duration {
    let input = ClientMessage::BidiTextInput { text: "Hello".into(), id: None };
    ws.send(Message::text(serde_json::to_string(&input).expect("json"))).await.expect("sends");
    let sent = Instant::now();
    let mut first = None;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => match kind(text.as_str()) {
                "bidi_transcript_stream" if first.is_none() && text.contains(r#""delta":true"#) => {
                    first = Some(sent.elapsed());
                }
                "bidi_response_complete" => return first.expect("a streamed reply"),
                "bidi_error" => panic!("turn failed: {text}"),
                _ => {}
            },
            Some(Ok(_)) => {}
            other => panic!("connection ended: {other:?}"),
        }
    }
}

/// One text session of `session`, a turn every `period`.
async fn text_session(url: String, i: usize, session: Duration, period: Duration) -> Vec<Duration> {
    tokio::time::sleep(Duration::from_micros((i as u64 * 7_919) % period.as_micros().max(1) as u64)).await;
    let begun = tokio::time::Instant::now();
    let mut ws = open_text(&url).await;
    let turns = (session.as_millis() / period.as_millis().max(1)).max(1) as u32;
    let mut samples = Vec::with_capacity(turns as usize);
    for turn in 1..=turns {
        samples.push(text_turn(&mut ws).await);
        tokio::time::sleep_until(begun + period * turn).await;
    }
    let _ = ws.close(None).await;
    samples
}

/// Prints the steps at the floor: the largest step whose p95 is within `margin_ms` of the
/// first's, and its calls per core.
fn summary(what: &str, rounds: &[Round], session_s: f64, margin_ms: f64) {
    let Some(floor) = rounds.first() else { return };
    let at_floor = rounds
        .iter()
        .filter(|r| r.turns.1 == r.turns.0 && r.p(0.95) <= floor.p(0.95) + margin_ms)
        .max_by_key(|r| r.sessions);
    match at_floor {
        Some(r) => println!(
            "  {what}: at the floor (p95 {:.1} ms, within {margin_ms} ms of 1 {what}'s {:.1}) up to {} {what}s measured: \
             {:.4} core-s per {what}-minute, {:.0} {what}s per core, {:.1} KiB per {what}",
            r.p(0.95),
            floor.p(0.95),
            r.sessions,
            r.core_s_per_minute(session_s),
            60.0 / r.core_s_per_minute(session_s).max(1e-9),
            r.rss_per_session(),
        ),
        None => println!("  {what}: no step at the floor"),
    }
}

/// The voice steps again, the same calls against the floor: one process that reads the
/// calls' frames and streams the same replies (as many 20 ms chunks as the simulator's, paced
/// as it paces them), with no gateway, runtime or model behind it; then the product path's
/// CPU per call-minute beside the floor's, step by step.
async fn voice_floor(product: &[Round], call: Duration, call_turns: usize, silence_ms: usize) {
    let server = floor::start(floor::FloorConfig::spoken(
        silence_ms / 20,
        common::VOICE_REPLY,
        common::VOICE_MS_PER_CHAR,
        Duration::ZERO,
    ));
    println!(
        "\nvoice, the floor (pid {}, {} worker thread(s)): the same calls against a server that only reads their frames \
         and streams the same replies",
        server.pid,
        common::workers()
    );
    let mut rounds = Vec::new();
    for r in product {
        let url = server.url.clone();
        let round = round(r.sessions, call_turns, &[server.pid], move |i| {
            voice_call(url.clone(), i, call, call_turns, silence_ms / 20)
        })
        .await;
        round.print("call", " (floor)", call.as_secs_f64());
        rounds.push(round);
    }
    let session_s = call.as_secs_f64();
    for (p, f) in product.iter().zip(&rounds) {
        println!(
            "  {:>4} call: the product path {:.4} core-s per call-minute, {:.2} times the floor's {:.4}",
            p.sessions,
            p.core_s_per_minute(session_s),
            p.core_s_per_minute(session_s) / f.core_s_per_minute(session_s).max(1e-9),
            f.core_s_per_minute(session_s),
        );
    }
}

fn main() {
    if floor::serve_if_asked() {
        return;
    }
    tokio::runtime::Runtime::new().expect("a tokio runtime").block_on(bench());
}

async fn bench() {
    let voice_steps = env_list("BENCH_VOICE_STEPS", "1,10,25,50");
    let text_steps = env_list("BENCH_TEXT_STEPS", "1,100,500");
    let call = Duration::from_secs(env_or("BENCH_CALL_S", 30));
    let call_turns: usize = env_or("BENCH_CALL_TURNS", 8);
    let period = Duration::from_secs(env_or("BENCH_TEXT_PERIOD_S", 5));
    let margin_ms: f64 = env_or("BENCH_FLOOR_MARGIN_MS", 50.0);
    let silence_ms = 200;
    let with_floor = std::env::var("BENCH_FLOOR").map_or(true, |v| v != "0");
    let most = voice_steps.iter().chain(&text_steps).copied().max().unwrap_or(1);
    println!(
        "capacity: the product path (gateway + runtime), {} worker thread(s) per process; calls of {} s",
        common::workers(),
        call.as_secs()
    );

    if !voice_steps.is_empty() {
        let mut stack = Stack::start(&voice_script(silence_ms), "idv", (most * 2 + 10) as u32).await;
        let idv = stack.addr.clone();
        let (url, gateway) = stack.add_gateway(&[("idv", &idv)], most * 4).await;
        let pids = [gateway, stack.runtime_pid];
        // What the processes allocate once is not counted.
        let mut warm = common::open(&url).await;
        common::spoken_turn(&mut warm, silence_ms / 20).await;
        drop(warm);
        println!("\nvoice: calls at once through the gateway, {call_turns} spoken turns per call");
        let mut rounds = Vec::new();
        for &calls in &voice_steps {
            let url = url.clone();
            let round =
                round(calls, call_turns, &pids, move |i| voice_call(url.clone(), i, call, call_turns, silence_ms / 20))
                    .await;
            round.print("call", "", call.as_secs_f64());
            rounds.push(round);
        }
        summary("call", &rounds, call.as_secs_f64(), margin_ms);
        if with_floor {
            voice_floor(&rounds, call, call_turns, silence_ms).await;
        }
    }

    if !text_steps.is_empty() {
        let mut stack = Stack::start(&text_script(), "triage", (most * 2 + 10) as u32).await;
        let triage = stack.addr.clone();
        let (url, gateway) = stack.add_gateway(&[("triage", &triage)], most * 4).await;
        let pids = [gateway, stack.runtime_pid];
        let mut warm = open_text(&url).await;
        text_turn(&mut warm).await;
        drop(warm);
        let turns = (call.as_millis() / period.as_millis().max(1)).max(1) as usize;
        println!("\ntext: sessions at once through the gateway, a turn every {} s", period.as_secs());
        let mut rounds = Vec::new();
        for &sessions in &text_steps {
            let url = url.clone();
            let round = round(sessions, turns, &pids, move |i| text_session(url.clone(), i, call, period)).await;
            round.print("session", "", call.as_secs_f64());
            rounds.push(round);
        }
        summary("session", &rounds, call.as_secs_f64(), margin_ms);
    }
}
