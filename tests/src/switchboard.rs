//! The `switchboard` binary as processes on this machine — the gateway, runtimes, the
//! Bedrock simulator — for tests that run them against the control plane: built on demand,
//! each process's output in a log file, killed on drop. Also what such tests need around
//! them: this machine's non-loopback address (the API server refuses loopback addresses in
//! Endpoints, so runtimes listen on it), where a process bound (it listens on port 0 and logs the
//! address: no free port to race for), and a plain HTTP GET.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The built `switchboard` binary (built now if needed): see [`workspace_binary`].
pub fn switchboard_binary() -> anyhow::Result<PathBuf> {
    workspace_binary("switchboard")
}

/// The workspace's binary `name` (dev profile), built now if needed with the features the
/// test suite's own build gave it (`cargo nextest run --workspace` builds every package's
/// tests, whose dev-dependencies add features, e.g. tokio's `test-util`): the suite has
/// built it already and this takes a second. `cargo build -p <package> --bin <name>`
/// instead resolved other features and rebuilt the binary and most of its dependencies
/// (about 100 s on two cores, the bulk of the book tests' time), and left that build
/// where the suite's had been.
pub fn workspace_binary(name: &str) -> anyhow::Result<PathBuf> {
    let root = crate::repo_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args(["build", "--quiet", "--locked", "--workspace", "--tests", "--bin", name])
        .output()
        .context("running cargo build")?;
    if !out.status.success() {
        bail!("building {name} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join("target"));
    Ok(target.join("debug").join(name))
}

/// A running `switchboard` process; killed (and its log removed) on drop.
#[derive(Debug)]
pub struct Process {
    /// What the test calls it (log messages).
    pub name: String,
    /// Its stdout and stderr.
    pub log: PathBuf,
    child: Child,
}

impl Process {
    /// Runs `binary` with `args` and `env` (plus `NO_COLOR`, `NO_PROXY` and an info log),
    /// and waits up to a minute for its output to contain `ready`.
    pub fn start(binary: &Path, name: &str, args: &[&str], env: &[(&str, &str)], ready: &str) -> anyhow::Result<Self> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!("switchboard-{name}-{}-{n}.log", std::process::id()));
        let file = std::fs::File::create(&log).context("creating the log file")?;
        let mut command = Command::new(binary);
        command
            .args(args)
            .env("SWITCHBOARD_LOG", "info")
            .env("NO_COLOR", "1")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().with_context(|| format!("starting {name}"))?;
        let mut process = Self { name: name.to_owned(), log, child };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if process.log_text().contains(ready) {
                return Ok(process);
            }
            if let Some(status) = process.child.try_wait()? {
                bail!("{name} exited ({status}) before it was ready:\n{}", process.log_text());
            }
            if Instant::now() > deadline {
                bail!("{name} was not ready ({ready:?}) within a minute:\n{}", process.log_text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends it SIGTERM (a graceful stop: servers drain), leaving it to exit by itself.
    pub fn terminate(&self) -> anyhow::Result<()> {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill -TERM {} failed", self.child.id());
        Ok(())
    }

    /// Its output so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address named (`addr=`) on its log line containing `marker`, e.g. `gateway
    /// serving` or `runtime serving`: where a process told to listen on port 0 bound.
    pub fn served_addr(&self, marker: &str) -> anyhow::Result<SocketAddr> {
        let log = self.log_text();
        let line = log.lines().find(|l| l.contains(marker));
        let addr = line.and_then(|l| l.split_once("addr=")).and_then(|(_, rest)| rest.split_whitespace().next());
        addr.and_then(|a| a.parse().ok())
            .with_context(|| format!("{}: no `{marker}` line with addr=:\n{log}", self.name))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {} ---\n{}", self.name, self.log_text());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// This machine's address on its default route (`ip -4 route get 1.1.1.1`, its `src`): what
/// Endpoints may name (the API server refuses loopback addresses there) and what processes
/// listening on it are reached at.
pub fn node_ip() -> anyhow::Result<IpAddr> {
    let out = Command::new("ip").args(["-4", "route", "get", "1.1.1.1"]).output().context("running ip route get")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    words.by_ref().find(|w| *w == "src");
    let src = words.next().with_context(|| format!("no `src` in `ip -4 route get 1.1.1.1`: {text}"))?;
    src.parse().with_context(|| format!("`{src}` is not an address"))
}

/// GETs `path` from `addr` over plain HTTP/1.1; returns the status and the body.
pub fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}
