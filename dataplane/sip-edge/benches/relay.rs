//! `sip_relay`: the SIP edge's CPU and memory per live call, and the latency it adds. N
//! calls at once, each with 20 ms G.711 frames both ways in real time: phones (plain UDP
//! sockets here, sending a real INVITE, ACK, RTP at 50 packets a second and BYE) call the
//! edge; the edge opens one WebSocket session per call at a stand-in gateway that answers
//! `session_start` and sends every caller frame back as reply audio (so the edge relays four
//! streams per call: RTP in, frames to the gateway, frames from it, RTP out).
//!
//! The edge runs alone in a child process ([`edge`]: this binary again, the edge on a
//! single-threaded tokio runtime): its CPU time (from /proc) over a steady window, and its
//! resident memory with N live calls less its resident memory before the first call, per
//! call. The phones and the stand-in are in this process and do not count. Beside the
//! phones, plain WebSocket clients send the same frames straight to the stand-in: every frame
//! is marked ([`timing`]), and the one-way times of both paths, noted on this process's
//! clock, give the edge's own time (RTP in -> frame out, frame in -> RTP out) beyond the
//! WebSocket path's, measured in the same run.
//!
//! `BENCH_CALLS=50,100,200` (default), `BENCH_SECONDS=10` (the measured window),
//! `BENCH_WS_CLIENTS=20` (plain WebSocket clients beside the calls).
//! Run: `cargo bench -p switchboard-sip-edge --bench relay`.

#[path = "relay/edge.rs"]
mod edge;
#[path = "relay/phone.rs"]
mod phone;
#[path = "relay/standin.rs"]
mod standin;
#[path = "relay/timing.rs"]
mod timing;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use crate::edge::EdgeProcess;
use crate::timing::Timings;

fn run(calls: usize, seconds: u64, ws_clients: usize) {
    let timings = Arc::new(Timings::default());
    let gateway_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let listener = gateway_rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let gateway_addr = listener.local_addr().expect("addr");
    gateway_rt.spawn(standin::gateway(listener, Arc::clone(&timings)));

    let edge = EdgeProcess::start(gateway_addr, calls);
    // Its memory settled, before any call.
    std::thread::sleep(Duration::from_millis(500));
    let idle_rss = edge.rss();

    let phones_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let received = Arc::new(AtomicU64::new(0));
    // Calls arrive 5 ms apart: all are up after the ramp, then the warm-up.
    let ramp = Duration::from_millis(5 * calls as u64);
    let warm = ramp + Duration::from_secs(3);
    let stop = Instant::now() + warm + Duration::from_secs(seconds) + Duration::from_secs(1);
    let tasks: Vec<_> = (0..calls)
        .map(|i| phones_rt.spawn(phone::phone(i, edge.addr, Arc::clone(&received), Arc::clone(&timings), stop)))
        .collect();
    let url = format!("ws://{gateway_addr}/v1/session");
    let plain: Vec<_> =
        (0..ws_clients).map(|_| phones_rt.spawn(standin::client(url.clone(), Arc::clone(&timings), stop))).collect();
    std::thread::sleep(warm);
    timings.measure(true);
    let (cpu0, got0, t0) = (edge.cpu(), received.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs(seconds));
    let (cpu1, got1, t1, live_rss) = (edge.cpu(), received.load(Ordering::Relaxed), Instant::now(), edge.rss());
    timings.measure(false);
    let results = phones_rt.block_on(futures_util::future::join_all(tasks));
    let failed: Vec<String> = results.into_iter().filter_map(|r| r.ok().and_then(Result::err)).collect();
    let plain_failed: Vec<String> = phones_rt
        .block_on(futures_util::future::join_all(plain))
        .into_iter()
        .filter_map(|r| r.ok().and_then(Result::err))
        .collect();
    edge.stop();

    let wall = (t1 - t0).as_secs_f64();
    let cpu = (cpu1 - cpu0).as_secs_f64();
    let packets_back = (got1 - got0) as f64 / wall;
    let expected = calls as f64 * 50.0;
    // Per call and 20 ms: one RTP packet in, one frame to the gateway, one frame from it,
    // one RTP packet out.
    let frames = expected * 4.0 * wall;
    let per_call_mb = live_rss.saturating_sub(idle_rss) as f64 / calls as f64 / 1e6;
    println!(
        "sip_relay calls={calls} window={wall:.1}s edge_cpu={:.1}% of a core ({:.3}% per call) \
         us_per_relayed_frame={:.1} rtp_back_per_s={packets_back:.0} (expected {expected:.0}) failed_calls={}\n  \
         edge_rss idle={:.1}MB live={:.1}MB per_call={per_call_mb:.3}MB\n  {}",
        100.0 * cpu / wall,
        100.0 * cpu / wall / calls as f64,
        cpu * 1e6 / frames,
        failed.len(),
        idle_rss as f64 / 1e6,
        live_rss as f64 / 1e6,
        timings.report(),
    );
    if let Some(first) = failed.first().or(plain_failed.first()) {
        println!("  first failure: {first}");
    }
}

fn main() {
    if let Ok(gateway) = std::env::var(edge::CHILD) {
        edge::run_child(&gateway);
        return;
    }
    let calls: Vec<usize> = std::env::var("BENCH_CALLS")
        .unwrap_or_else(|_| "50,100,200".into())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let seconds: u64 = std::env::var("BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let ws_clients: usize = std::env::var("BENCH_WS_CLIENTS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    for n in calls {
        run(n, seconds, ws_clients);
    }
}
