//! A real TURN server for the tests: Debian's coturn (`turnserver`, installed by
//! tests/tools/install.sh) on loopback, with the TURN REST scheme (`use-auth-secret`) the
//! WebRTC edge issues credentials for. Ended when dropped.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::browser::tools_bin;

/// A UDP port on `ip` that is free now and that the kernel never hands out on its own:
/// below Linux's ephemeral range (32768 and up by default) and below the NodePort range, so
/// no socket bound to port 0 elsewhere in the run can take it between this check and
/// coturn's bind. A port picked by binding port 0 and released was in that range, and once
/// was some other test's by the time coturn came to bind it.
fn free_port_below_ephemeral(ip: IpAddr) -> u16 {
    let (low, high) = ephemeral_range();
    // Below 30000 too: 30000-32767 is where Kubernetes opens NodePorts when a node runs here.
    let ceiling = low.min(30_000);
    assert!(ceiling > 10_000, "the ephemeral range starts at {low}: no room below it ({low}-{high})");
    for _ in 0..1000 {
        let port = fastrand::u16(10_000..ceiling);
        if UdpSocket::bind((ip, port)).is_ok() {
            return port;
        }
    }
    panic!("no free UDP port in 10000-{ceiling} after 1000 tries");
}

/// The kernel's ephemeral port range (`net.ipv4.ip_local_port_range`).
fn ephemeral_range() -> (u16, u16) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut ports = text.split_whitespace().filter_map(|p| p.parse().ok());
    match (ports.next(), ports.next()) {
        (Some(low), Some(high)) => (low, high),
        _ => (32768, 60999),
    }
}

/// A running `turnserver`.
pub struct Coturn {
    child: Child,
    /// Where it listens (UDP).
    pub address: SocketAddr,
    dir: PathBuf,
}

impl Coturn {
    /// Starts one on `ip` (listening and relaying) with `secret` as its shared secret, and
    /// waits until it answers STUN.
    pub fn start(secret: &str, ip: IpAddr) -> Self {
        let dir = std::env::temp_dir().join(format!("switchboard-coturn-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let port = free_port_below_ephemeral(ip);
        let address = SocketAddr::new(ip, port);
        let log = std::fs::File::create(dir.join("turn.log")).expect("the log");
        let child = Command::new(tools_bin().join("turnserver"))
            .args(["-n", &format!("--listening-ip={ip}"), &format!("--relay-ip={ip}"), "--realm=switchboard.test"])
            .arg(format!("--listening-port={port}"))
            .args(["--use-auth-secret", &format!("--static-auth-secret={secret}")])
            // On a machine with no interface but loopback the edge is there too; coturn
            // refuses to relay there unless told.
            // UDP only: the tests hand out `?transport=udp`, and a TCP listener on the same
            // port number is one more socket that some other process may already hold
            // (coturn then retries its bind without ever answering on UDP).
            .args(["--allow-loopback-peers", "--no-tcp", "--no-tls", "--no-dtls", "--no-cli", "--no-tcp-relay"])
            .args(["--log-file=stdout", "--simple-log", "--verbose"])
            .arg(format!("--pidfile={}", dir.join("pid").display()))
            .arg(format!("--userdb={}", dir.join("turndb").display()))
            .stdout(Stdio::from(log.try_clone().expect("the log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("runs turnserver");
        let mut coturn = Self { child, address, dir };
        coturn.wait_until_answering();
        coturn
    }

    /// A STUN binding request (no credentials needed) until coturn answers it.
    fn wait_until_answering(&mut self) {
        let probe = UdpSocket::bind(SocketAddr::new(self.address.ip(), 0)).expect("a probe socket");
        probe.set_read_timeout(Some(Duration::from_millis(200))).expect("a timeout");
        let mut request = vec![0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
        request.extend_from_slice(&[7; 12]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buffer = [0u8; 512];
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("turnserver exited ({status}):\n{}", self.log());
            }
            let _ = probe.send_to(&request, self.address);
            if let Ok((n, _)) = probe.recv_from(&mut buffer)
                && n >= 20
                && buffer[0..2] == [0x01, 0x01]
            {
                return;
            }
        }
        panic!("turnserver did not answer STUN on {} in 10 s:\n{}", self.address, self.log());
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("turn.log")).unwrap_or_default()
    }
}

impl Drop for Coturn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
