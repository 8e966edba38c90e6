//! `sip_relay`: the SIP edge's CPU per live call. N calls at once, each with 20 ms G.711
//! frames both ways in real time: phones (plain UDP sockets here, sending a real INVITE,
//! ACK, RTP at 50 packets a second and BYE) call the edge; the edge opens one WebSocket
//! session per call at a stand-in gateway that answers `session_start` and sends every
//! caller frame back as reply audio (so the edge relays four streams per call: RTP in,
//! frames to the gateway, frames from it, RTP out). The edge runs alone on a
//! single-threaded tokio runtime in its own thread; the figure is that thread's CPU time
//! (from /proc) over a steady window, so the phones and the stand-in do not count.
//!
//! `BENCH_CALLS=50,100,200` (default) and `BENCH_SECONDS=10` (the measured window).
//! Run: `cargo bench -p switchboard-sip-edge --bench relay`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard_sip_edge::{Edge, EdgeConfig, GatewayConfig, MediaSettings, RateConfig};
use tokio::net::{TcpListener, UdpSocket};
use tokio_tungstenite::tungstenite::Message;

/// The CPU time (user + system) of the calling thread so far, from /proc.
fn thread_cpu(tid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

/// A gateway stand-in: answers `session_start` with `bidi_connection_start` (voice) and
/// sends every binary frame back.
async fn gateway(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { return };
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else { return };
            let _ = ws.next().await;
            let start = r#"{"type":"bidi_connection_start","session_id":"bench","agent":"triage","mode":"voice","model":"sim"}"#;
            if ws.send(Message::text(start)).await.is_err() {
                return;
            }
            while let Some(Ok(message)) = ws.next().await {
                match message {
                    Message::Binary(audio) => {
                        let Ok(()) = ws.send(Message::Binary(audio)).await else { return };
                    }
                    Message::Close(_) => return,
                    _ => {}
                }
            }
        });
    }
}

/// One phone: calls the edge, then sends a frame every 20 ms until `stop`, then BYE.
async fn phone(i: usize, edge: SocketAddr, received: Arc<AtomicU64>, stop: Instant) -> Result<(), String> {
    let sip = UdpSocket::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let rtp = UdpSocket::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let (sip_port, rtp_port) =
        (sip.local_addr().map_err(|e| e.to_string())?.port(), rtp.local_addr().map_err(|e| e.to_string())?.port());
    let sdp = format!(
        "v=0\r\no=- {i} 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio {rtp_port} RTP/AVP 0 101\r\n\
         a=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\na=ptime:20\r\na=sendrecv\r\n"
    );
    let head = |method: &str, cseq: u32, to_tag: &str, branch: &str| {
        format!(
            "{method} sip:triage@{edge} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:{sip_port};branch=z9hG4bK{branch}\r\n\
             Contact: <sip:caller@127.0.0.1:{sip_port}>\r\nMax-Forwards: 70\r\nTo: <sip:triage@{edge}>{to_tag}\r\n\
             From: <sip:caller{i}@127.0.0.1>;tag=f{i}\r\nCall-ID: bench-{i}\r\nCSeq: {cseq} {method}\r\n"
        )
    };
    let invite = format!(
        "{}Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
        head("INVITE", 1, "", &format!("i{i}")),
        sdp.len()
    );
    // Calls arrive spread over time (5 ms apart), as they do.
    tokio::time::sleep(Duration::from_millis(5 * i as u64)).await;
    sip.send_to(invite.as_bytes(), edge).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    let given_up = Instant::now() + Duration::from_secs(20);
    let mut resend = Duration::from_millis(500);
    let (tag, media) = loop {
        // RFC 3261 Timer A: the INVITE again, at doubling intervals, until an answer.
        let Ok(read) = tokio::time::timeout(resend, sip.recv_from(&mut buf)).await else {
            if Instant::now() > given_up {
                return Err(format!("call {i}: no answer"));
            }
            sip.send_to(invite.as_bytes(), edge).await.map_err(|e| e.to_string())?;
            resend = (resend * 2).min(Duration::from_secs(4));
            continue;
        };
        let (n, _) = read.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        if !text.starts_with("SIP/2.0 ") {
            // Another call's RTCP (sent to its RTP port + 1, which may be this socket).
            continue;
        }
        if text.starts_with("SIP/2.0 200") {
            let tag = text
                .lines()
                .find(|l| l.starts_with("To:"))
                .and_then(|l| l.split(";tag=").nth(1))
                .unwrap_or("")
                .trim()
                .to_owned();
            let port: u16 = text
                .lines()
                .find_map(|l| l.strip_prefix("m=audio "))
                .and_then(|r| r.split(' ').next()?.parse().ok())
                .ok_or("no m= line")?;
            break (tag, SocketAddr::from(([127, 0, 0, 1], port)));
        }
        if !text.starts_with("SIP/2.0 1") {
            return Err(format!("call {i}: {}", text.lines().next().unwrap_or_default()));
        }
    };
    let to_tag = format!(";tag={tag}");
    let ack = format!("{}Content-Length: 0\r\n\r\n", head("ACK", 1, &to_tag, &format!("a{i}")));
    sip.send_to(ack.as_bytes(), edge).await.map_err(|e| e.to_string())?;
    let mut sender = switchboard_sip::media::rtp::RtpSender::new(i as u32, 0, 0);
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut rtp_buf = vec![0u8; 2048];
    while Instant::now() < stop {
        tokio::select! {
            _ = tick.tick() => {
                // A quiet 400 Hz-ish pattern: not silence, so nothing is special-cased.
                let frame: Vec<u8> = (0..160).map(|n| if n % 20 < 10 { 0x70 } else { 0xF0 }).collect();
                let _ = rtp.send_to(&sender.media(0, false, &frame, 160), media).await;
            }
            got = rtp.recv_from(&mut rtp_buf) => {
                if got.is_ok() {
                    received.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    let bye = format!("{}Content-Length: 0\r\n\r\n", head("BYE", 2, &to_tag, &format!("b{i}")));
    let _ = sip.send_to(bye.as_bytes(), edge).await;
    Ok(())
}

fn run(calls: usize, seconds: u64) {
    let gateway_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let listener = gateway_rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let gateway_addr = listener.local_addr().expect("addr");
    gateway_rt.spawn(gateway(listener));

    // The edge alone on one thread.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let edge_thread = std::thread::spawn(move || {
        let tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let probe = std::net::UdpSocket::bind("127.0.0.1:0").expect("port");
            let base = probe.local_addr().expect("addr").port().min(60_000) & !1;
            drop(probe);
            let config = EdgeConfig {
                listen: "127.0.0.1:0".parse().expect("addr"),
                tcp: false,
                tls: None,
                advertise: "127.0.0.1".parse().expect("ip"),
                rtp_ports: base.saturating_sub(2000)..=base.saturating_sub(2000) + 2 * calls as u16 + 200,
                gateway: GatewayConfig {
                    url: format!("ws://{gateway_addr}/v1/session"),
                    api_key: None,
                    open_timeout: Duration::from_secs(10),
                },
                max_calls: calls + 10,
                // Every phone is on 127.0.0.1: one source, like a trunk.
                rate: RateConfig { per_second: 1e6, burst: 1e6, ..RateConfig::default() },
                media: MediaSettings::default(),
                trunks: Default::default(),
                outbound: None,
                transfer: switchboard_sip_edge::TransferMethod::default(),
                srtp: switchboard_sip_edge::SrtpPolicy::default(),
            };
            let edge = Edge::bind(config).await.expect("edge");
            ready_tx.send((edge.local_addr(), tid)).expect("ready");
            edge.run(async move {
                let _ = stop_rx.await;
            })
            .await;
        });
    });
    let (edge_addr, tid) = ready_rx.recv().expect("the edge starts");

    let phones_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let received = Arc::new(AtomicU64::new(0));
    let warm = Duration::from_secs(3);
    let stop = Instant::now() + warm + Duration::from_secs(seconds) + Duration::from_secs(1);
    let tasks: Vec<_> = (0..calls).map(|i| phones_rt.spawn(phone(i, edge_addr, Arc::clone(&received), stop))).collect();
    std::thread::sleep(warm);
    let (cpu0, got0, t0) = (thread_cpu(&tid), received.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs(seconds));
    let (cpu1, got1, t1) = (thread_cpu(&tid), received.load(Ordering::Relaxed), Instant::now());
    let results = phones_rt.block_on(futures_util::future::join_all(tasks));
    let failed: Vec<String> = results.into_iter().filter_map(|r| r.ok().and_then(Result::err)).collect();
    let _ = stop_tx.send(());
    let _ = edge_thread.join();

    let wall = (t1 - t0).as_secs_f64();
    let cpu = (cpu1 - cpu0).as_secs_f64();
    let packets_back = (got1 - got0) as f64 / wall;
    let expected = calls as f64 * 50.0;
    // Per call and 20 ms: one RTP packet in, one frame to the gateway, one frame from it,
    // one RTP packet out.
    let frames = expected * 4.0 * wall;
    println!(
        "sip_relay calls={calls} window={wall:.1}s edge_cpu={:.1}% of a core ({:.3}% per call) \
         us_per_relayed_frame={:.1} rtp_back_per_s={packets_back:.0} (expected {expected:.0}) failed_calls={}",
        100.0 * cpu / wall,
        100.0 * cpu / wall / calls as f64,
        cpu * 1e6 / frames,
        failed.len()
    );
    if let Some(first) = failed.first() {
        println!("  first failure: {first}");
    }
}

fn main() {
    let calls: Vec<usize> = std::env::var("BENCH_CALLS")
        .unwrap_or_else(|_| "50,100,200".into())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let seconds: u64 = std::env::var("BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    for n in calls {
        run(n, seconds);
    }
}
