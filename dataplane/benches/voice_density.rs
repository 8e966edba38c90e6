//! Voice density: real-time sessions — 20 ms audio frames in both directions — added in
//! steps until the p99 jitter of the reply audio exceeds 20 ms or the machine's CPU is
//! saturated; the runtime's RSS per session at each step.
//!
//! Each session talks like a caller: a short utterance, then silence (still 20 ms frames)
//! while the simulated Nova Sonic answers with several seconds of real-time paced audio
//! in 20 ms chunks, then another utterance; so at any moment most sessions stream audio
//! both ways. Jitter is the deviation of the gap between consecutive reply audio chunks
//! of one reply, as the client receives them, from the 20 ms the simulator paces them at.
//!
//! The simulator, the runtime and these clients share the machine: the CPU of each is
//! reported so a limit can be attributed. Runs the real release binaries
//! (`switchboard sim`, `switchboard runtime` with the `idv` voice agent of
//! examples/banking) as child processes:
//!
//! ```sh
//! cargo bench -p switchboard-dataplane --bench voice_density
//! ```
//!
//! Environment: `BENCH_STEPS` (session counts, default `50,100,200,300,400,600,800,1000`),
//! `BENCH_WINDOW_S` (measurement per step, default 10), `BENCH_BIN` (another `switchboard`
//! build to run: `benchmarks/ab.sh` alternates a baseline build with this one),
//! `BENCH_FLOOR` (`0` skips the floor).
//!
//! The floors: after the runtime's steps, the same clients run the same steps against a
//! server that only reads their frames and streams the same replies, paced as the
//! simulator paces them (`floor/mod.rs`, its own process with `BENCH_WORKERS` threads), then
//! through a frame-level relay in front of that server (`gateway/raw_relay.rs`: two sockets
//! per call like the runtime, every frame passed from one to the other, no session, no
//! encoding; the relay measured); a last table sets the runtime's CPU per frame beside
//! each: what the runtime's model leg (the Bedrock events, HTTP/2 over TLS, the session's
//! work) costs on top of the client's leg any server pays, and on top of a bare relay's.
//!
//! Besides the table: the runtime's RSS before any session (its base memory), and per step
//! the runtime's CPU per call-minute (`rt cs/call-min`: core-seconds per minute of one live
//! call), the figure `benchmarks/ab.sh` compares.

#[path = "common/mod.rs"]
mod common;
#[path = "floor/mod.rs"]
mod floor;
#[path = "gateway/raw_relay.rs"]
mod raw_relay;
#[path = "gateway/relay_floor.rs"]
mod relay_floor;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{FRAME, FRAME_BYTES, Stack, env_list, env_or, kind, open, percentile, phrase_frames};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

/// Audio frames the clients sent and reply chunks they received, for the runtime's CPU
/// per frame.
static FRAMES: AtomicU64 = AtomicU64::new(0);

/// Samples shared by the sessions: reply-audio jitter and client send lateness, in ms.
#[derive(Default)]
struct Samples {
    jitter: Vec<f64>,
    late: Vec<f64>,
    errors: u64,
}

async fn session(url: String, seed: u64, samples: Arc<Mutex<Samples>>, stop: tokio_util::sync::CancellationToken) {
    let mut ws = open(&url).await;
    let mut rng = fastrand::Rng::with_seed(seed);
    let speech = phrase_frames(1, 300);
    let silence = vec![0u8; FRAME_BYTES];
    // Start at a random point of the frame period and of the conversation.
    tokio::time::sleep(Duration::from_millis(rng.u64(0..1000))).await;
    let mut ticker = tokio::time::interval(FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut speaking = 0usize; // frames of speech still to send
    let mut next_utterance = Instant::now();
    let mut waiting_reply = false;
    let mut last_chunk: Option<Instant> = None;
    let (mut jitter, mut late) = (Vec::with_capacity(128), Vec::with_capacity(128));
    let mut expected_tick = Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            tick = ticker.tick() => {
                let now = Instant::now();
                let tick = tick.into_std();
                if tick > expected_tick { expected_tick = tick; }
                late.push(now.saturating_duration_since(tick).as_secs_f64() * 1000.0);
                if speaking == 0 && !waiting_reply && now >= next_utterance {
                    speaking = speech.len();
                    waiting_reply = true;
                }
                let frame = if speaking > 0 {
                    speaking -= 1;
                    speech[speech.len() - 1 - speaking].clone()
                } else {
                    silence.clone()
                };
                if ws.send(Message::binary(frame)).await.is_err() {
                    break;
                }
                FRAMES.fetch_add(1, Ordering::Relaxed);
            }
            message = ws.next() => match message {
                Some(Ok(Message::Text(text))) => match kind(text.as_str()) {
                    "bidi_audio_stream" => {
                        FRAMES.fetch_add(1, Ordering::Relaxed);
                        let now = Instant::now();
                        if let Some(previous) = last_chunk {
                            let gap = now.duration_since(previous).as_secs_f64() * 1000.0;
                            jitter.push((gap - 20.0).abs());
                        }
                        last_chunk = Some(now);
                    }
                    "bidi_response_complete" => {
                        last_chunk = None;
                        waiting_reply = false;
                        next_utterance = Instant::now() + Duration::from_millis(rng.u64(200..1200));
                    }
                    "bidi_error" => {
                        if let Ok(mut s) = samples.lock() { s.errors += 1; }
                    }
                    _ => {}
                },
                Some(Ok(_)) => {}
                _ => {
                    if let Ok(mut s) = samples.lock() { s.errors += 1; }
                    break;
                }
            },
        }
        if jitter.len() + late.len() >= 200
            && let Ok(mut s) = samples.lock()
        {
            s.jitter.append(&mut jitter);
            s.late.append(&mut late);
        }
    }
    let _ = ws.close(None).await;
}

fn main() {
    if floor::serve_if_asked() || relay_floor::serve_if_asked() {
        return;
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime").block_on(bench());
}

/// What one step measured of a server.
struct Step {
    sessions: usize,
    us_per_frame: f64,
    stopped: bool,
}

async fn bench() {
    let steps = env_list("BENCH_STEPS", "50,100,200,300,400,600,800,1000");
    let window = Duration::from_secs(env_or("BENCH_WINDOW_S", 10));
    let with_floor = std::env::var("BENCH_FLOOR").map_or(true, |v| v != "0");
    let max = steps.iter().copied().max().unwrap_or(1000);
    // About 5 s of reply audio per utterance, in 20 ms chunks.
    let reply = "Your account is in good standing. Your last three payments went through, and nothing is waiting for your attention. Is there anything else?";
    let (ms_per_char, response_delay_ms, silence_ms): (u64, u64, u64) = (40, 100, 300);
    let script = format!(
        r#"
sonic:
  turnDetection: {{ silenceMs: {{ high: {silence_ms}, medium: {silence_ms}, low: {silence_ms} }} }}
  phrases: {{ 1: "tell me about my account" }}
  speech: {{ msPerChar: {ms_per_char}, chunkMs: 20, responseDelayMs: {response_delay_ms} }}
default: {{ text: "{reply}" }}
"#
    );
    let stack = Stack::start(&script, "idv", (max + 50) as u32).await;
    println!(
        "switchboard runtime (release) pid {}, simulator pid {}, bench pid {}; {} s per step; {} cores shared by all three",
        stack.runtime_pid,
        stack.sim_pid,
        std::process::id(),
        window.as_secs(),
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let baseline = common::rss_kib(stack.runtime_pid);
    println!("runtime RSS before any session: {baseline} KiB");
    let runtime = steps_against(&stack.url, stack.runtime_pid, ("sim", stack.sim_pid), &steps, window).await;
    if !with_floor {
        return;
    }
    // The same clients against a server that reads their frames and streams each reply's
    // chunks, paced as the simulator paces them, with no model behind it.
    let floor = floor::start(floor::FloorConfig::spoken(
        (silence_ms / 20) as usize,
        reply,
        ms_per_char,
        Duration::from_millis(response_delay_ms),
    ));
    println!(
        "\nfloor (pid {}): the same clients against a server that only reads their frames and streams the same replies, {} worker thread(s)",
        floor.pid,
        common::workers()
    );
    let measured: Vec<usize> = runtime.iter().map(|step| step.sessions).collect();
    let floor_steps = steps_against(&floor.url, floor.pid, ("sim", stack.sim_pid), &measured, window).await;
    // A relay's floor: the same clients through a frame-level WebSocket relay with no
    // library, no session and no encoding (the gateway bench's `raw`) in front of that
    // server; only the relay is measured. Like the runtime it holds two sockets per call
    // and passes every frame from one to the other.
    let relay = relay_floor::start(relay_floor::Kind::Raw, &floor.addr());
    println!(
        "\nrelay floor (pid {}): the same clients through a frame-level relay (no library, no session) in front of that server, {} worker thread(s); the relay measured",
        relay.pid,
        common::workers()
    );
    let relay_steps = steps_against(&relay.url, relay.pid, ("upstream", floor.pid), &measured, window).await;
    println!(
        "\n{:>8} {:>12} {:>15} {:>8} {:>15} {:>8}",
        "sessions", "rt us/frame", "floor us/frame", "ratio", "relay us/frame", "ratio"
    );
    for ((rt, fl), re) in runtime.iter().zip(&floor_steps).zip(&relay_steps) {
        println!(
            "{:>8} {:>12.1} {:>15.1} {:>8.2} {:>15.1} {:>8.2}{}",
            rt.sessions,
            rt.us_per_frame,
            fl.us_per_frame,
            rt.us_per_frame / fl.us_per_frame.max(0.001),
            re.us_per_frame,
            rt.us_per_frame / re.us_per_frame.max(0.001),
            if rt.stopped || fl.stopped || re.stopped { "  (a limit was reached at this step)" } else { "" }
        );
    }
}

/// Runs `steps` of live sessions against the server at `url` (process `pid`; `beside` names
/// the process behind it and its pid, whose CPU is reported too: the simulator, or the
/// relay floor's upstream), printing a row per step; stops at the first step past the
/// limits.
async fn steps_against(url: &str, pid: u32, beside: (&str, u32), steps: &[usize], window: Duration) -> Vec<Step> {
    let (beside_name, sim) = beside;
    let ticks_per_second = 100.0;
    println!(
        "{:>8} {:>10} {:>10} {:>10} {:>9} {:>11} {:>14} {:>12} {:>9} {:>9} {:>8} {:>12} {:>7}",
        "sessions",
        "jit p50",
        "jit p99",
        "late p99",
        "rt CPU%",
        "rt %/sess",
        "rt cs/call-min",
        "rt us/frame",
        format!("{beside_name} CPU%"),
        "bench%",
        "busy%",
        "rt KiB/sess",
        "errors"
    );
    let baseline = common::rss_kib(pid);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = Vec::new();
    let mut measured = Vec::new();
    for &n in steps {
        while tasks.len() < n {
            let (url, samples, stop) = (url.to_owned(), samples.clone(), stop.clone());
            let seed = tasks.len() as u64;
            tasks.push(tokio::spawn(session(url, seed, samples, stop)));
            if tasks.len() % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // Settle, then measure a window.
        tokio::time::sleep(Duration::from_secs(3)).await;
        if let Ok(mut s) = samples.lock() {
            *s = Samples::default();
        }
        let frames0 = FRAMES.load(Ordering::Relaxed);
        let (rt0, sim0, me0, m0) = (
            common::cpu_ticks(pid),
            common::cpu_ticks(sim),
            common::cpu_ticks(std::process::id()),
            common::machine_ticks(),
        );
        tokio::time::sleep(window).await;
        let (rt1, sim1, me1, m1) = (
            common::cpu_ticks(pid),
            common::cpu_ticks(sim),
            common::cpu_ticks(std::process::id()),
            common::machine_ticks(),
        );
        let frames = FRAMES.load(Ordering::Relaxed).saturating_sub(frames0).max(1);
        let secs = window.as_secs_f64();
        let percent = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / ticks_per_second / secs * 100.0;
        let busy = (m1.0 - m0.0) as f64 / (m1.1 - m0.1).max(1) as f64 * 100.0;
        let rss = common::rss_kib(pid);
        let (mut jitter, mut late, errors) = match samples.lock() {
            Ok(mut s) => (std::mem::take(&mut s.jitter), std::mem::take(&mut s.late), s.errors),
            Err(_) => (Vec::new(), Vec::new(), 0),
        };
        jitter.sort_by(f64::total_cmp);
        late.sort_by(f64::total_cmp);
        let p99 = percentile(&jitter, 0.99);
        let us_per_frame = rt1.saturating_sub(rt0) as f64 / ticks_per_second * 1e6 / frames as f64;
        println!(
            "{n:>8} {:>10.2} {:>10.2} {:>10.2} {:>9.0} {:>11.3} {:>14.4} {:>12.1} {:>9.0} {:>9.0} {:>8.0} {:>12.0} {:>7}",
            percentile(&jitter, 0.5),
            p99,
            percentile(&late, 0.99),
            percent(rt0, rt1),
            percent(rt0, rt1) / n as f64,
            // % of a core per session, as core-seconds per minute of one call.
            percent(rt0, rt1) / n as f64 * 0.6,
            us_per_frame,
            percent(sim0, sim1),
            percent(me0, me1),
            busy,
            rss.saturating_sub(baseline) as f64 / n as f64,
            errors
        );
        let stopped = p99 > 20.0 || busy > 97.0;
        measured.push(Step { sessions: n, us_per_frame, stopped });
        if stopped {
            println!("stopping: p99 jitter {p99:.1} ms, machine busy {busy:.0}%");
            break;
        }
    }
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
    measured
}
