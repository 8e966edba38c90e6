//! A real `redis-server` for the tests of gateway replicas that share a store (resume,
//! traces across a resume on another replica), from `tests/tools/install.sh`.
//!
//! Redis cannot listen on port 0 and say which port it got (`--port 0` turns TCP off), so
//! it is given a port from [`ports`]: free, below the kernel's ephemeral range, reserved
//! for this test while it runs (a restart on the same port finds it still ours). It is
//! ready when its own log says it accepts connections, not when something answers there.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::ports;

/// A real `redis-server` on a port of this test's, stopped on drop.
pub struct Redis {
    pub url: String,
    pub port: u16,
    child: Child,
    log: PathBuf,
}

impl Redis {
    /// Starts one on a free port; on another when some other program took that port
    /// before Redis bound it.
    pub fn start() -> Self {
        for _ in 0..5 {
            let port = Self::free_port();
            if let Some(redis) = Self::try_start_on(port) {
                return redis;
            }
            eprintln!("redis-server: another program took port {port} before it bound it; picking another");
        }
        panic!("redis-server found its port taken five times")
    }

    /// A port for [`Redis::start_on`]: free, and reserved for this test.
    pub fn free_port() -> u16 {
        ports::free_port(ports::TCP)
    }

    /// Starts one on `port` (a restart where the gateway expects it).
    pub fn start_on(port: u16) -> Self {
        Self::try_start_on(port).unwrap_or_else(|| {
            panic!(
                "port {port} was taken by another program while this test held it for Redis \
                 (a port collision, not the code under test)"
            )
        })
    }

    /// Starts one on `port`; None when it exits because the port is taken.
    fn try_start_on(port: u16) -> Option<Self> {
        let bin = crate::tools::tools_bin();
        let log = std::env::temp_dir().join(format!("switchboard-redis-{}.log", uuid::Uuid::new_v4()));
        let file = std::fs::File::create(&log).expect("a log file");
        let child = Command::new(bin.join("redis-server"))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(file.try_clone().expect("the log"))
            .stderr(file)
            .spawn()
            .expect("starts redis-server");
        // Dropped (killed and waited for, its log removed) on every path, the panic included.
        let mut redis = Self { url: format!("redis://127.0.0.1:{port}"), port, child, log };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = redis.log_text();
            if text.contains("Ready to accept connections") {
                return Some(redis);
            }
            if let Ok(Some(status)) = redis.child.try_wait() {
                let text = redis.log_text();
                assert!(ports::address_in_use(&text), "redis-server exited ({status}):\n{text}");
                return None;
            }
            assert!(Instant::now() < deadline, "redis-server did not accept connections on {port} in 10 s:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}
