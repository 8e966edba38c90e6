//! A real `redis-server` for the tests of gateway replicas that share a store (resume,
//! traces across a resume on another replica), from `tests/tools/install.sh`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A real `redis-server` on a free port, stopped on drop.
pub struct Redis {
    pub url: String,
    pub port: u16,
    child: Child,
}

impl Redis {
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        Self::start_on(port)
    }

    pub fn start_on(port: u16) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/install.sh");
        let out = Command::new("bash").arg(&script).output().expect("runs tests/tools/install.sh");
        assert!(out.status.success(), "tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim());
        let child = Command::new(bin.join("redis-server"))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts redis-server");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        // Dropped (killed and waited for) on every path, the panic included.
        let redis = Self { url: format!("redis://{addr}"), port, child };
        for _ in 0..100 {
            if std::net::TcpStream::connect(addr).is_ok() {
                return redis;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not listen on {addr}");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
