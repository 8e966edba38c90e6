//! A real TURN server for the tests: Debian's coturn (`turnserver`, installed by
//! tests/tools/install.sh) on loopback, with the TURN REST scheme (`use-auth-secret`) the
//! WebRTC edge issues credentials for. Ended when dropped.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::browser::tools_bin;
use crate::ports;

/// A running `turnserver`.
pub struct Coturn {
    child: Child,
    /// Where it listens (UDP).
    pub address: SocketAddr,
    dir: PathBuf,
}

impl Coturn {
    /// Starts one on `ip` (listening and relaying) with `secret` as its shared secret, and
    /// waits until it answers STUN. Its
    /// port comes from [`ports`] (free, below the kernel's ephemeral range, reserved for
    /// this test); when some other program took it before coturn bound it (coturn logs the
    /// bind error and keeps retrying), it is stopped and started again on another.
    pub fn start(secret: &str, ip: IpAddr) -> Self {
        for _ in 0..5 {
            let port = ports::free_port(ports::UDP);
            let mut coturn = Self::spawn(secret, ip, port);
            if coturn.wait_until_answering() {
                return coturn;
            }
            eprintln!("turnserver: another program took port {port} before it bound it; picking another");
        }
        panic!("turnserver found its port taken five times")
    }

    fn spawn(secret: &str, ip: IpAddr, port: u16) -> Self {
        let dir = std::env::temp_dir().join(format!("switchboard-coturn-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
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
        Self { child, address, dir }
    }

    /// A STUN binding request (no credentials needed) until coturn answers it (true), or
    /// its log says its port is taken (false).
    fn wait_until_answering(&mut self) -> bool {
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
            if ports::address_in_use(&self.log()) {
                return false;
            }
            let _ = probe.send_to(&request, self.address);
            if let Ok((n, _)) = probe.recv_from(&mut buffer)
                && n >= 20
                && buffer[0..2] == [0x01, 0x01]
            {
                return true;
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
