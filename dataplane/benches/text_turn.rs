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
//! (default 5), `BENCH_TTFT_MS` (the simulator's time to first token, default 100).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_dataplane::protocol::{ClientMessage, ServerMessage, SessionStart, TranscriptRole};
use tokio_tungstenite::tungstenite::Message;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
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

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let sessions: Vec<usize> = std::env::var("BENCH_SESSIONS")
        .unwrap_or_else(|_| "1,100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let turns: usize = env_or("BENCH_TURNS", 5);
    let ttft_ms: u64 = env_or("BENCH_TTFT_MS", 100);
    let (tokens_per_second, tokens_per_delta) = (2000.0_f64, 8u32);
    // When the script sends the first delta: its first token at the TTFT, its last one
    // (tokens_per_delta - 1) token intervals later.
    let first_delta_ms = ttft_ms as f64 + f64::from(tokens_per_delta - 1) * 1000.0 / tokens_per_second;
    let script = std::env::temp_dir().join(format!("switchboard-bench-{}.yaml", std::process::id()));
    let yaml = format!(
        "timing: {{ timeToFirstTokenMs: {ttft_ms}, tokensPerSecond: {tokens_per_second}, tokensPerDelta: {tokens_per_delta} }}\ndefault: {{ text: \"You said: {{text}}. Here is a reply of a few words.\" }}\n"
    );
    std::fs::write(&script, yaml).expect("writes the script");
    let examples = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/banking");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["local", &examples.display().to_string(), "--port", &port.to_string(), "--max-sessions", "5000"])
        .arg("--sim-script")
        .arg(&script)
        .env("SWITCHBOARD_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts switchboard local");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines.next().expect("local mode prints its agents").expect("reads");
        if line.starts_with("Chat with: switchboard chat ") {
            break line.trim_start_matches("Chat with: switchboard chat ").to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let pid = child.id();
    println!(
        "switchboard local (release) pid {pid}; simulator time to first token {ttft_ms} ms, first delta at {first_delta_ms} ms; {turns} turns per session"
    );
    println!(
        "{:>9} {:>8} {:>12} {:>12} {:>12} {:>14}",
        "sessions", "turns", "median ms", "p99 ms", "max ms", "KiB/session"
    );
    // Warm up: connections, TLS, HTTP/2 to the simulator.
    let mut warm = open(&url).await;
    for _ in 0..3 {
        turn(&mut warm, "warm up").await;
    }
    drop(warm);
    for &n in &sessions {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_kib(pid);
        let mut clients = Vec::with_capacity(n);
        for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
            let opened = futures_util::future::join_all(chunk.iter().map(|_| open(&url))).await;
            clients.extend(opened);
        }
        let after = rss_kib(pid);
        let per_session = after.saturating_sub(before) as f64 / n as f64;
        let tasks: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut ws)| {
                tokio::spawn(async move {
                    let mut samples = Vec::with_capacity(turns);
                    for t in 0..turns {
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
        overhead.sort_by(f64::total_cmp);
        println!(
            "{n:>9} {:>8} {:>12.3} {:>12.3} {:>12.3} {:>14.1}",
            overhead.len(),
            percentile(&overhead, 0.5),
            percentile(&overhead, 0.99),
            overhead.last().copied().unwrap_or_default(),
            per_session
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(script);
}
