//! A real `redis-server` for the tests of gateway replicas that share a store (resume,
//! traces across a resume on another replica), from `tests/tools/install.sh`.
//!
//! It serves on a Unix socket in a folder of its own, not on a TCP port: a port chosen free
//! and released before Redis binds it may be taken by another process meanwhile (Redis
//! cannot bind port 0 and say which port it got), while no other process uses our folder.
//! A restart on the same socket (chaos tests) has no such window either.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A real `redis-server` on a Unix socket of its own, stopped on drop (its folder removed).
pub struct Redis {
    /// `redis+unix:///...`, as the gateway's `--redis-url` takes it.
    pub url: String,
    /// Its socket, for [`Redis::start_at`] (a restart where the gateway expects it).
    pub socket: PathBuf,
    child: Child,
}

impl Redis {
    pub fn start() -> Self {
        Self::start_at(&Self::fresh_socket())
    }

    /// A socket path in a new folder, where nothing listens until [`Redis::start_at`].
    pub fn fresh_socket() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("switchboard-redis-{}", uuid::Uuid::new_v4()));
        dir.join("redis.sock")
    }

    /// The URL of a Redis at `socket`.
    pub fn url_of(socket: &Path) -> String {
        format!("redis+unix://{}", socket.display())
    }

    /// Starts one serving on `socket` (none on TCP: `--port 0`); returns once it answers PING.
    pub fn start_at(socket: &Path) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/install.sh");
        let out = Command::new("bash").arg(&script).output().expect("runs tests/tools/install.sh");
        assert!(out.status.success(), "tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim());
        let dir = socket.parent().expect("a folder");
        std::fs::create_dir_all(dir).expect("the socket's folder");
        let log = std::fs::File::create(dir.join("redis.log")).expect("a log file");
        let child = Command::new(bin.join("redis-server"))
            .args(["--port", "0", "--unixsocket"])
            .arg(socket)
            .args(["--unixsocketperm", "700", "--save", "", "--appendonly", "no"])
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("starts redis-server");
        // Dropped (killed and waited for) on every path, the panic included.
        let mut redis = Self { url: Self::url_of(socket), socket: socket.to_owned(), child };
        for _ in 0..100 {
            if redis.answers_ping() {
                return redis;
            }
            if let Ok(Some(status)) = redis.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
                panic!("redis-server exited ({status}) before serving on {}:\n{log}", socket.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not answer PING on {}", socket.display());
    }

    /// Whether a Redis answers PING with PONG on our socket (a file in our own folder: this
    /// process's).
    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = UnixStream::connect(&self.socket) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut reply = [0; 7];
        stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = self.socket.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
