//! Text turn overhead: the client-observed time to the first streamed delta minus the time
//! the simulator's script sends that delta (time to first token, plus the pacing of the
//! delta's remaining tokens: a delta of several tokens leaves when its last token exists),
//! at 1, 100 and 1,000 concurrent sessions, and the runtime's memory per session.
//!
//! Runs the real release binaries as child processes — `switchboard sim` (the Bedrock
//! simulator) and `switchboard runtime` with the `triage` agent of examples/banking (one
//! runtime pod) — so the runtime's CPU and memory are read on their own from `/proc`;
//! real WebSocket clients run in this process:
//!
//! ```sh
//! cargo bench -p switchboard-dataplane --bench text_turn
//! ```
//!
//! Environment: `BENCH_SESSIONS` (default `1,100,1000`), `BENCH_TURNS` per session
//! (default 5), `BENCH_LOADS` (`lockstep`, `paced` or both, the default),
//! `BENCH_PERIOD_MS` (a paced session's time between turns, default 5000),
//! `BENCH_TTFT_MS` (the simulator's time to first token, default 100),
//! `BENCH_TOKENS_PER_SECOND` (default 2000), `BENCH_TOKENS_PER_DELTA` (default 8),
//! `BENCH_BIN` (another `switchboard` binary to measure, e.g. an older build),
//! `BENCH_WORKERS` (async worker threads of the runtime, the simulator and the floor
//! server; default 1, what the operator gives a pod with the default CPU request), and
//! `BENCH_FLOOR` (`0` skips the floor rows: the same clients against a server that only
//! answers, on the simulator's timer; see `floor/mod.rs`), and `BENCH_TRACING=on` (adds
//! `traced` rows: a second runtime, the same agent and simulator, exporting every span
//! over OTLP/HTTP to a receiver in this process that answers at once — tracing's cost
//! beside the untraced runtime's in the same run).
//!
//! Each row also gives the runtime's and the simulator's CPU time (user + system, from
//! `/proc`) per turn, the load average, and the machine's steal share during the turns
//! (CPU time the hypervisor gave to other VMs: with a few percent, the tail is the host's).

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use tokio_tungstenite::tungstenite::Message;

#[path = "common/mod.rs"]
mod common;
#[path = "floor/mod.rs"]
mod floor;

use common::{
    Stack, Ws, cpu_ticks, env_list, env_or, load_average, overheads_ms, percentile, rss_kib, steal_percent, steal_ticks,
};

/// User + system CPU time of `pid`, in microseconds (clock ticks are 1/100 s).
fn cpu_us(pid: u32) -> f64 {
    cpu_ticks(pid) as f64 * 10_000.0
}

async fn next_message(ws: &mut Ws) -> ServerMessage {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => match serde_json::from_str(text.as_str()) {
                Ok(message) => return message,
                Err(e) => panic!("bad server message {text}: {e}"),
            },
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

async fn open(url: &str) -> Ws {
    let mut ws = common::connect(url).await;
    let start = common::session_start(url, SessionStart { agent: Some("triage".into()), ..SessionStart::default() });
    ws.send(Message::text(serde_json::to_string(&start).expect("json"))).await.expect("sends");
    // The greeting is the last message of a new triage session.
    while !matches!(next_message(&mut ws).await, ServerMessage::BidiTranscriptStream { is_final: true, .. }) {}
    ws
}

/// One turn: the time from sending the text to the first streamed reply delta.
async fn turn(ws: &mut Ws, text: &str) -> Duration {
    let input = ClientMessage::BidiTextInput { text: text.into(), id: None };
    let sent = Instant::now();
    ws.send(Message::text(serde_json::to_string(&input).expect("json"))).await.expect("sends");
    let mut first = None;
    loop {
        match next_message(ws).await {
            ServerMessage::BidiTranscriptStream { role: TranscriptRole::Assistant, delta: true, .. }
                if first.is_none() =>
            {
                first = Some(sent.elapsed());
            }
            ServerMessage::BidiResponseComplete { .. } => return first.expect("a streamed reply"),
            ServerMessage::BidiError { message, .. } => panic!("turn failed: {message}"),
            _ => {}
        }
    }
}

/// How the sessions take their turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// Every session sends its next turn as soon as its previous one completes: all
    /// sessions start together, so turns arrive in bursts of `n`.
    Lockstep,
    /// Every session takes a turn once per period, at its own random phase: `n / period`
    /// turns per second spread evenly, like people who read and type between turns.
    Paced,
}

impl Load {
    fn label(self) -> &'static str {
        match self {
            Self::Lockstep => "lockstep",
            Self::Paced => "paced",
        }
    }
}

/// The figures of one row.
struct Row {
    samples: usize,
    median: f64,
    p99: f64,
    max: f64,
    kib_per_session: f64,
    cpu_us_per_turn: f64,
    sim_cpu_us_per_turn: Option<f64>,
    load_average: String,
    steal_percent: f64,
}

/// One row's workload: `n` sessions, `turns` turns each, timed as `load` says (paced: one
/// turn per `period`), against a server whose first text delta comes `first_delta_ms`
/// after a turn's input.
struct Workload {
    n: usize,
    turns: usize,
    load: Load,
    period: Duration,
    first_delta_ms: f64,
}

/// Opens the workload's sessions on the server at `url` (process `pid`, simulator
/// `sim_pid`), runs its turns, and measures.
async fn run(url: &str, pid: u32, sim_pid: Option<u32>, workload: &Workload) -> Row {
    let Workload { n, turns, load, period, first_delta_ms } = *workload;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let mut clients = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let opened = futures_util::future::join_all(chunk.iter().map(|_| open(url))).await;
        clients.extend(opened);
    }
    let after = rss_kib(pid);
    let cpu_before = cpu_us(pid);
    let sim_before = sim_pid.map(cpu_us);
    let steal_before = steal_ticks();
    let start = tokio::time::Instant::now() + Duration::from_millis(100);
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, mut ws)| {
            let phase = match load {
                Load::Lockstep => Duration::ZERO,
                Load::Paced => period.mul_f64(fastrand::f64()),
            };
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(turns);
                for t in 0..turns {
                    let at = match load {
                        Load::Lockstep => start,
                        Load::Paced => start + phase + period * u32::try_from(t).unwrap_or(u32::MAX),
                    };
                    tokio::time::sleep_until(at).await;
                    samples.push(turn(&mut ws, &format!("session {i} turn {t}")).await);
                }
                let _ = ws.close(None).await;
                samples
            })
        })
        .collect();
    let overhead = overheads_ms(tasks, first_delta_ms).await;
    let cpu = cpu_us(pid) - cpu_before;
    let turns_done = overhead.len().max(1) as f64;
    let sim_cpu = sim_pid.zip(sim_before).map(|(sim, before)| (cpu_us(sim) - before) / turns_done);
    Row {
        samples: overhead.len(),
        median: percentile(&overhead, 0.5),
        p99: percentile(&overhead, 0.99),
        max: overhead.last().copied().unwrap_or_default(),
        kib_per_session: after.saturating_sub(before) as f64 / n as f64,
        cpu_us_per_turn: cpu / turns_done,
        sim_cpu_us_per_turn: sim_cpu,
        load_average: load_average(),
        steal_percent: steal_percent(steal_before, steal_ticks()),
    }
}

fn main() {
    if floor::serve_if_asked() {
        return;
    }
    tokio::runtime::Runtime::new().expect("a tokio runtime").block_on(bench());
}

async fn bench() {
    let sessions = env_list("BENCH_SESSIONS", "1,100,1000");
    let turns: usize = env_or("BENCH_TURNS", 5);
    let period = Duration::from_millis(env_or("BENCH_PERIOD_MS", 5000));
    let loads: Vec<Load> = std::env::var("BENCH_LOADS")
        .unwrap_or_else(|_| "lockstep,paced".into())
        .split(',')
        .filter_map(|s| match s.trim() {
            "lockstep" => Some(Load::Lockstep),
            "paced" => Some(Load::Paced),
            _ => None,
        })
        .collect();
    let with_floor = std::env::var("BENCH_FLOOR").map_or(true, |v| v != "0");
    let ttft_ms: u64 = env_or("BENCH_TTFT_MS", 100);
    let tokens_per_second: f64 = env_or("BENCH_TOKENS_PER_SECOND", 2000.0);
    let tokens_per_delta: u32 = env_or("BENCH_TOKENS_PER_DELTA", 8u32).max(1);
    // When the script sends the first delta: its first token at the TTFT, its last one
    // (tokens_per_delta - 1) token intervals later.
    let token_ms = if tokens_per_second > 0.0 { 1000.0 / tokens_per_second } else { 0.0 };
    let first_delta_ms = ttft_ms as f64 + f64::from(tokens_per_delta - 1) * token_ms;
    let script = format!(
        "timing: {{ timeToFirstTokenMs: {ttft_ms}, tokensPerSecond: {tokens_per_second}, tokensPerDelta: {tokens_per_delta} }}\ndefault: {{ text: \"You said: {{text}}. Here is a reply of a few words.\" }}\n"
    );
    let max = sessions.iter().copied().max().unwrap_or(1000);
    let stack = Stack::start(&script, "triage", (max + 50) as u32).await;
    let (url, pid) = (stack.url.clone(), stack.runtime_pid);
    let floor = with_floor.then(|| {
        floor::start(floor::FloorConfig {
            first_delta: Duration::from_secs_f64(first_delta_ms / 1000.0),
            ..floor::FloorConfig::one_chunk(0)
        })
    });
    println!(
        "switchboard runtime (release, agent triage) pid {pid}, switchboard sim pid {}; simulator time to first token {ttft_ms} ms, first delta at {first_delta_ms} ms; {turns} turns per session; {} worker thread(s) per server process",
        stack.sim_pid,
        common::workers()
    );
    if let Some(floor) = &floor {
        println!(
            "floor: a WebSocket server (pid {}) that only sends the first delta at {first_delta_ms} ms with the simulator's timer: the same clients' figure without runtime, model client or simulator",
            floor.pid
        );
    }
    println!(
        "{:>9} {:>9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>12} {:>13} {:>10} {:>9} {:>8}",
        "target",
        "sessions",
        "load",
        "turns",
        "median ms",
        "p99 ms",
        "max ms",
        "KiB/session",
        "server CPU",
        "sim CPU",
        "loadavg",
        "steal %"
    );
    println!("{:>93} {:>10}", "us/turn", "us/turn");
    let mut stack = stack;
    let mut targets = vec![("runtime", url.clone(), pid, Some(stack.sim_pid))];
    let sink = if std::env::var("BENCH_TRACING").is_ok_and(|v| v == "on") {
        let sink = common::otlp_sink().await;
        let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint.as_str())];
        let (addr, traced_pid) = stack.add_runtime_with("triage", (max + 50) as u32, &env).await;
        println!("traced: a second runtime (pid {traced_pid}) exporting its spans to {}", sink.endpoint);
        targets.push(("traced", format!("ws://{addr}/v1/session"), traced_pid, Some(stack.sim_pid)));
        Some(sink)
    } else {
        None
    };
    if let Some(floor) = &floor {
        targets.push(("floor", floor.url.clone(), floor.pid, None));
    }
    // Warm up: connections, TLS, HTTP/2 to the simulator.
    for (_, url, _, _) in &targets {
        let mut warm = open(url).await;
        for _ in 0..3 {
            turn(&mut warm, "warm up").await;
        }
    }
    for &n in &sessions {
        for &load in &loads {
            for (label, url, pid, sim_pid) in &targets {
                let row = run(url, *pid, *sim_pid, &Workload { n, turns, load, period, first_delta_ms }).await;
                let sim_cpu = row.sim_cpu_us_per_turn.map_or_else(|| "-".to_owned(), |us| format!("{us:.0}"));
                println!(
                    "{label:>9} {n:>9} {:>9} {:>7} {:>10.3} {:>10.3} {:>10.3} {:>12.1} {:>13.0} {:>10} {:>9} {:>8.1}",
                    load.label(),
                    row.samples,
                    row.median,
                    row.p99,
                    row.max,
                    row.kib_per_session,
                    row.cpu_us_per_turn,
                    sim_cpu,
                    row.load_average,
                    row.steal_percent
                );
            }
        }
    }
    if let Some(sink) = sink {
        sink.report().await;
    }
    drop(floor);
    drop(stack);
}
