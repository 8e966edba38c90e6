//! The edge under measurement, in a child process of its own (this benchmark's binary run
//! again with [`CHILD`] set), so that its CPU time and its memory are the edge's alone: the
//! phones and the stand-in gateway stay in the parent. The child runs
//! `switchboard_sip_edge::Edge` (the code `switchboard sip` runs) on a single-threaded tokio
//! runtime, prints its SIP address, and stops when its stdin closes.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use switchboard_sip_edge::{Edge, EdgeConfig, GatewayConfig, MediaSettings, RateConfig};

/// Set (to the stand-in gateway's address) in the child's environment.
pub const CHILD: &str = "SIP_RELAY_EDGE_GATEWAY";
/// The most calls the child takes.
const MAX_CALLS: &str = "SIP_RELAY_EDGE_CALLS";

/// The edge in its child process.
pub struct EdgeProcess {
    child: Child,
    /// Where it takes SIP.
    pub addr: SocketAddr,
}

impl EdgeProcess {
    /// Starts the child for `calls` calls at the stand-in `gateway`.
    pub fn start(gateway: SocketAddr, calls: usize) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .env(CHILD, gateway.to_string())
            .env(MAX_CALLS, calls.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the edge's process starts");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout")).read_line(&mut line).expect("the edge's address");
        let addr = line.trim().strip_prefix("edge ").and_then(|a| a.parse().ok()).expect("`edge ADDR`");
        Self { child, addr }
    }

    /// The child's CPU time so far (user + system, every thread), from /proc.
    pub fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
            + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
        // USER_HZ is 100 on Linux.
        Duration::from_millis(ticks * 10)
    }

    /// The child's resident memory now, in bytes (`VmRSS`).
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    }

    /// Stops the child (closing its stdin) and waits for it.
    pub fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The child's whole life: the edge at the gateway in [`CHILD`], until stdin closes.
pub fn run_child(gateway: &str) {
    let calls: usize = std::env::var(MAX_CALLS).ok().and_then(|c| c.parse().ok()).unwrap_or(100);
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
                url: format!("ws://{gateway}/v1/session"),
                api_key: None,
                open_timeout: Duration::from_secs(10),
                resume_for: Duration::ZERO,
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
        println!("edge {}", edge.local_addr());
        // The parent closing stdin stops the edge (read on a thread: the runtime has one).
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            let _ = stop_tx.send(());
        });
        edge.run(async move {
            let _ = stop_rx.await;
        })
        .await;
    });
}
