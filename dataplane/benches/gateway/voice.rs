//! The gateway's voice parts: its CPU per relayed frame beside the runtime's (part 4), and
//! its memory per live voice session beside the runtime's, through it and direct (part 7).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use crate::common::{self, Stack, cpu_ticks, kind, rss_kib};
use switchboard_gateway::budget::SESSION_OVERHEAD;

use crate::relay_floor::{self, Kind};
use crate::{ms, row};

/// Voice sessions against `url`: (latencies in ms, frames relayed).
pub async fn voice_round(url: &str, sessions: usize, turns: usize, silence_frames: usize) -> (Vec<f64>, u64) {
    let mut clients = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        clients.push(common::open(url).await);
    }
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, mut ws)| {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_micros((i as u64 * 997) % 40_000)).await;
                let (mut samples, mut relayed) = (Vec::with_capacity(turns), 0);
                for _ in 0..turns {
                    let (latency, frames) = common::spoken_turn(&mut ws, silence_frames).await;
                    samples.push(latency);
                    relayed += frames;
                }
                let _ = ws.close(None).await;
                (samples, relayed)
            })
        })
        .collect();
    let (mut all, mut relayed) = (Vec::new(), 0);
    for task in tasks {
        let (samples, frames) = task.await.expect("a session");
        all.extend(samples);
        relayed += frames;
    }
    (ms(&mut all), relayed)
}

/// Part 4: `sessions` voice sessions of `turns` spoken turns through the gateway, then the
/// same straight to the runtime; both processes' CPU during the gateway round.
pub async fn voice_cpu(voice_script: &str, sessions: usize, turns: usize, silence_frames: usize) {
    let mut stack = Stack::start(voice_script, "idv", (sessions * 2 + 10) as u32).await;
    let idv = stack.addr.clone();
    let (gateway, gateway_pid) = stack.add_gateway(&[("idv", &idv)], sessions * 4).await;
    let mut warm = common::open(&gateway).await;
    common::spoken_turn(&mut warm, silence_frames).await;
    drop(warm);
    println!("\n4. voice: {sessions} sessions x {turns} spoken turns, 20 ms frames both ways in real time");
    let (runtime_cpu, gateway_cpu) = (cpu_ticks(stack.runtime_pid), cpu_ticks(gateway_pid));
    let (via, relayed) = voice_round(&gateway, sessions, turns, silence_frames).await;
    let runtime_used = (cpu_ticks(stack.runtime_pid) - runtime_cpu) as f64 * 10.0;
    let gateway_used = (cpu_ticks(gateway_pid) - gateway_cpu) as f64 * 10.0;
    let (direct, _) = voice_round(&stack.url, sessions, turns, silence_frames).await;
    row("end of speech -> audio, direct", &direct);
    row("... through the gateway", &via);
    println!(
        "  CPU through the gateway: gateway {gateway_used:.0} ms, runtime {runtime_used:.0} ms ({:.1} %); {relayed} frames relayed: gateway {:.1} us per frame, runtime {:.1} us",
        100.0 * gateway_used / runtime_used.max(1.0),
        1000.0 * gateway_used / relayed as f64,
        1000.0 * runtime_used / relayed as f64,
    );
    // The floors: the same sessions through a byte relay, a bare WebSocket relay with the
    // gateway's WebSocket stack, and a frame-level relay without a library.
    for (kind, what) in [
        (Kind::Bytes, "a byte relay (no WebSocket)"),
        (Kind::Frames, "a bare WebSocket relay (no session)"),
        (Kind::Raw, "a frame-level relay (no library)"),
    ] {
        let floor = relay_floor::start(kind, &stack.addr);
        common::relays_to(&floor.url, &stack.url);
        let (runtime_cpu, floor_cpu) = (cpu_ticks(stack.runtime_pid), cpu_ticks(floor.pid));
        let (latencies, frames) = voice_round(&floor.url, sessions, turns, silence_frames).await;
        let runtime_used = (cpu_ticks(stack.runtime_pid) - runtime_cpu) as f64 * 10.0;
        let used = (cpu_ticks(floor.pid) - floor_cpu) as f64 * 10.0;
        row(&format!("... through {what}"), &latencies);
        println!(
            "  CPU through {what}: relay {used:.0} ms, runtime {runtime_used:.0} ms ({:.1} %); {frames} frames: relay {:.1} us per frame, runtime {:.1} us",
            100.0 * used / runtime_used.max(1.0),
            1000.0 * used / frames as f64,
            1000.0 * runtime_used / frames as f64,
        );
    }
}

/// A voice call that speaks `turns` turns, says so on `ready`, then stays on the line
/// mid-conversation — silence in real time, the gateway's pings answered — until `stop`.
async fn live_call(
    url: String,
    turns: usize,
    silence_frames: usize,
    ready: mpsc::Sender<()>,
    mut stop: watch::Receiver<bool>,
) {
    let mut ws = common::open(&url).await;
    for _ in 0..turns {
        common::spoken_turn(&mut ws, silence_frames).await;
    }
    ready.send(()).await.expect("the bench waits");
    let mut ticker = tokio::time::interval(common::FRAME);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                ws.send(Message::binary(vec![0u8; common::FRAME_BYTES])).await.expect("sends audio");
            }
            message = ws.next() => match message {
                Some(Ok(Message::Text(text))) if kind(text.as_str()) == "bidi_error" => panic!("the call failed: {text}"),
                Some(Ok(_)) => {}
                other => panic!("connection ended: {other:?}"),
            },
            _ = stop.changed() => break,
        }
    }
    let _ = ws.close(None).await;
}

/// What a gateway's `/metrics` says the sessions hold toward its memory budget
/// (`switchboard_gateway_memory_held_bytes`: replay buffers and kept state, plus a fixed
/// overhead per session), or 0 from a runtime.
async fn held_bytes(url: &str) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("ws://").split('/').next().unwrap_or_default();
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else { return 0 };
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let mut response = String::new();
    if stream.write_all(request.as_bytes()).await.is_err() || stream.read_to_string(&mut response).await.is_err() {
        return 0;
    }
    let line = response.lines().find(|l| l.starts_with("switchboard_gateway_memory_held_bytes "));
    line.and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok()).map_or(0, |v| v as u64)
}

/// RSS of `pids` (KiB) before `calls` live calls to `url`, while they are live (after
/// their turns), and after they hung up; and what the sessions hold by the gateway's own
/// count while they are live (bytes; 0 for a runtime).
async fn live_round(
    url: &str,
    calls: usize,
    turns: usize,
    silence_frames: usize,
    pids: &[u32],
) -> ([Vec<u64>; 3], u64) {
    let read = || pids.iter().map(|pid| rss_kib(*pid)).collect::<Vec<_>>();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = read();
    let (ready_tx, mut ready) = mpsc::channel(calls);
    let (stop_tx, stop) = watch::channel(false);
    let tasks: Vec<_> = (0..calls)
        .map(|_| tokio::spawn(live_call(url.to_owned(), turns, silence_frames, ready_tx.clone(), stop.clone())))
        .collect();
    for _ in 0..calls {
        ready.recv().await.expect("a call");
    }
    // Every call is between turns, streaming silence: what the processes hold for them,
    // once the gateway has counted every session again (at its 5 s ping interval).
    tokio::time::sleep(Duration::from_secs(6)).await;
    let live = read();
    let held = held_bytes(url).await;
    stop_tx.send(true).expect("the calls listen");
    for task in tasks {
        task.await.expect("a call");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    ([before, live, read()], held)
}

/// Part 7: the gateway's memory per live voice session, beside the runtime's. `calls` calls
/// of `turns` spoken turns stay on the line through the gateway (its runtime behind it),
/// then as many straight to a second runtime process of the same agent (a fresh process,
/// so neither round reuses memory the other freed); RSS before, live and after.
pub async fn voice_memory(voice_script: &str, calls: usize, turns: usize, silence_frames: usize) {
    let capacity = (calls * 2 + 10) as u32;
    let mut stack = Stack::start(voice_script, "idv", capacity).await;
    let behind = stack.addr.clone();
    let (direct_addr, direct_pid) = stack.add_runtime("idv", capacity).await;
    let direct = format!("ws://{direct_addr}/v1/session");
    let (gateway, gateway_pid) = stack.add_gateway(&[("idv", &behind)], calls * 4).await;
    // One call each way first: what every process allocates once is not counted.
    for url in [&gateway, &direct] {
        let mut warm = common::open(url).await;
        common::spoken_turn(&mut warm, silence_frames).await;
        let _ = warm.close(None).await;
    }
    println!(
        "\n7. memory per live voice session: {calls} calls x {turns} spoken turns, then on the line (silence in real time); through the gateway, then direct to another runtime process"
    );
    let pids = [gateway_pid, stack.runtime_pid];
    let ([before, live, after], held) = live_round(&gateway, calls, turns, silence_frames, &pids).await;
    let ([direct_before, direct_live, direct_after], _) =
        live_round(&direct, calls, turns, silence_frames, &[direct_pid]).await;
    let per = |from: u64, to: u64| to as f64 - from as f64;
    let mb = |kib: f64| kib / 1024.0 / calls as f64;
    let (gateway_live, gateway_after) = (per(before[0], live[0]), per(before[0], after[0]));
    let (behind_live, behind_after) = (per(before[1], live[1]), per(before[1], after[1]));
    let (direct_grew, direct_kept) = (per(direct_before[0], direct_live[0]), per(direct_before[0], direct_after[0]));
    println!(
        "  gateway RSS {} -> {} -> {} KiB: {:.3} MB per live voice session ({:.3} MB per session still held after they hung up)",
        before[0],
        live[0],
        after[0],
        mb(gateway_live),
        mb(gateway_after)
    );
    let counted = held.saturating_sub((calls * SESSION_OVERHEAD) as u64) as f64 / calls as f64 / 1024.0;
    println!("  held per live session by the gateway's own count (replay buffer and kept state): {counted:.1} KiB");
    println!(
        "  runtime behind it {} -> {} -> {} KiB: {:.3} MB per live session ({:.3} after)",
        before[1],
        live[1],
        after[1],
        mb(behind_live),
        mb(behind_after)
    );
    println!(
        "  runtime alone (direct) {} -> {} -> {} KiB: {:.3} MB per live session ({:.3} after)",
        direct_before[0],
        direct_live[0],
        direct_after[0],
        mb(direct_grew),
        mb(direct_kept)
    );
}
