//! Text turn overhead: the client-observed time to the first streamed delta minus the time
//! the simulator's script sends that delta (time to first token, plus the pacing of the
//! delta's remaining tokens: a delta of several tokens leaves when its last token exists),
//! at 1, 100 and 1,000 concurrent sessions, and the runtime's memory per session.
//!
//! Runs the real `switchboard local examples/banking` binary (release build) as a child
//! process with the simulator in-process, and real WebSocket clients in this process:
//!
//! ```sh
//! cargo bench -p switchboard-dataplane --bench text_turn
//! ```
//!
//! Environment: `BENCH_SESSIONS` (default `1,100,1000`), `BENCH_TURNS` per session
//! (default 5), `BENCH_LOADS` (`lockstep`, `paced` or both, the default),
//! `BENCH_PERIOD_MS` (a paced session's time between turns, default 5000),
//! `BENCH_TTFT_MS` (the simulator's time to first token, default 100),
//! `BENCH_TOKENS_PER_SECOND` (default 2000), `BENCH_TOKENS_PER_DELTA` (default 8), and
//! `BENCH_BIN` (another `switchboard` binary to measure, e.g. an older build).
//!
//! Each row also gives the `switchboard local` process's CPU time (user + system, from
//! `/proc`) per turn — runtime and in-process simulator together — and the load average.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_dataplane::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use tokio_tungstenite::tungstenite::Message;

#[path = "measure/mod.rs"]
mod measure;

use measure::{cpu_ticks, env_or, load_average, percentile, rss_kib};

/// User + system CPU time of `pid`, in microseconds (clock ticks are 1/100 s).
fn cpu_us(pid: u32) -> f64 {
    cpu_ticks(pid) as f64 * 10_000.0
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

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
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true).await.expect("connects");
    let start = ClientMessage::SessionStart(SessionStart { agent: Some("triage".into()), ..SessionStart::default() });
    ws.send(Message::text(serde_json::to_string(&start).expect("json"))).await.expect("sends");
    // The greeting is the last message of a new triage session.
    while !matches!(next_message(&mut ws).await, ServerMessage::BidiTranscriptStream { is_final: true, .. }) {}
    ws
}

/// One turn: the time from sending the text to the first streamed reply delta.
async fn turn(ws: &mut Ws, text: &str) -> Duration {
    let input = ClientMessage::BidiTextInput { text: text.into() };
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
    load_average: String,
}

/// Opens `n` sessions, runs `turns` turns on each as `load` says, and measures.
async fn run(url: &str, pid: u32, n: usize, turns: usize, load: Load, period: Duration, first_delta_ms: f64) -> Row {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let mut clients = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let opened = futures_util::future::join_all(chunk.iter().map(|_| open(url))).await;
        clients.extend(opened);
    }
    let after = rss_kib(pid);
    let cpu_before = cpu_us(pid);
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
    let mut overhead: Vec<f64> = Vec::new();
    for task in tasks {
        for sample in task.await.expect("session task") {
            overhead.push(sample.as_secs_f64() * 1000.0 - first_delta_ms);
        }
    }
    let cpu = cpu_us(pid) - cpu_before;
    overhead.sort_by(f64::total_cmp);
    Row {
        samples: overhead.len(),
        median: percentile(&overhead, 0.5),
        p99: percentile(&overhead, 0.99),
        max: overhead.last().copied().unwrap_or_default(),
        kib_per_session: after.saturating_sub(before) as f64 / n as f64,
        cpu_us_per_turn: cpu / overhead.len().max(1) as f64,
        load_average: load_average(),
    }
}

/// The child process, killed when the benchmark ends, panics included.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::main]
async fn main() {
    let sessions: Vec<usize> = std::env::var("BENCH_SESSIONS")
        .unwrap_or_else(|_| "1,100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
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
    let ttft_ms: u64 = env_or("BENCH_TTFT_MS", 100);
    let tokens_per_second: f64 = env_or("BENCH_TOKENS_PER_SECOND", 2000.0);
    let tokens_per_delta: u32 = env_or("BENCH_TOKENS_PER_DELTA", 8u32).max(1);
    // When the script sends the first delta: its first token at the TTFT, its last one
    // (tokens_per_delta - 1) token intervals later.
    let token_ms = if tokens_per_second > 0.0 { 1000.0 / tokens_per_second } else { 0.0 };
    let first_delta_ms = ttft_ms as f64 + f64::from(tokens_per_delta - 1) * token_ms;
    let script = std::env::temp_dir().join(format!("switchboard-bench-{}.yaml", std::process::id()));
    let yaml = format!(
        "timing: {{ timeToFirstTokenMs: {ttft_ms}, tokensPerSecond: {tokens_per_second}, tokensPerDelta: {tokens_per_delta} }}\ndefault: {{ text: \"You said: {{text}}. Here is a reply of a few words.\" }}\n"
    );
    std::fs::write(&script, yaml).expect("writes the script");
    let examples = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let mut child = KillOnDrop(
        Command::new(std::env::var("BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_switchboard").to_owned()))
            .args(["local", &examples.display().to_string(), "--port", &port.to_string(), "--max-sessions", "5000"])
            .arg("--sim-script")
            .arg(&script)
            .env("SWITCHBOARD_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("starts switchboard local"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines.next().expect("local mode prints its agents").expect("reads");
        if line.starts_with("Chat with: switchboard chat ") {
            break line.trim_start_matches("Chat with: switchboard chat ").to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let pid = child.0.id();
    println!(
        "switchboard local (release) pid {pid}; simulator time to first token {ttft_ms} ms, first delta at {first_delta_ms} ms; {turns} turns per session"
    );
    println!(
        "{:>9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>12} {:>13} {:>9}",
        "sessions", "load", "turns", "median ms", "p99 ms", "max ms", "KiB/session", "runtime CPU", "loadavg"
    );
    println!("{:>83}", "us/turn");
    // Warm up: connections, TLS, HTTP/2 to the simulator.
    let mut warm = open(&url).await;
    for _ in 0..3 {
        turn(&mut warm, "warm up").await;
    }
    drop(warm);
    for &n in &sessions {
        for &load in &loads {
            let row = run(&url, pid, n, turns, load, period, first_delta_ms).await;
            println!(
                "{n:>9} {:>9} {:>7} {:>10.3} {:>10.3} {:>10.3} {:>12.1} {:>13.0} {:>9}",
                load.label(),
                row.samples,
                row.median,
                row.p99,
                row.max,
                row.kib_per_session,
                row.cpu_us_per_turn,
                row.load_average
            );
        }
    }
    drop(child);
    let _ = std::fs::remove_file(script);
}
