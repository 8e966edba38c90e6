//! The built `switchboard-operator` binary as a separate process (so a test can freeze it
//! with SIGSTOP or watch it exit): started with `run` for one namespace, its log in a file,
//! its `/metrics` read over plain HTTP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::operator::operator_binary;

/// A running operator process; killed (and its log removed) on drop.
#[derive(Debug)]
pub struct OperatorProcess {
    /// Its Lease identity.
    pub identity: String,
    /// Its `/metrics` port on 127.0.0.1.
    pub metrics_port: u16,
    /// Its log (stderr).
    pub log: PathBuf,
    child: Child,
}

impl OperatorProcess {
    /// Starts `switchboard-operator run` for namespace `ns` (Lease and routing table there
    /// too) with `kubeconfig`, a Lease of `lease_seconds`, and `extra` arguments.
    pub fn start(
        kubeconfig: &Path,
        ns: &str,
        identity: &str,
        lease_seconds: u32,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::env::temp_dir().join(format!("switchboard-operator-{ns}-{identity}.log"));
        let file = std::fs::File::create(&log).context("creating the log file")?;
        let child = Command::new(operator_binary()?)
            .args(["run", "--namespace", ns, "--operator-namespace", ns, "--identity", identity])
            .args(["--lease-seconds", &lease_seconds.to_string(), "--log-format", "text"])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .context("starting switchboard-operator")?;
        Ok(Self { identity: identity.to_owned(), metrics_port: port, log, child })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (e.g. `STOP`, `CONT`, `TERM`).
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = Command::new("kill").args([&format!("-{signal}"), &self.pid().to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill -{signal} {} failed", self.pid());
        Ok(())
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// The value of the unlabelled gauge or counter `name` on its `/metrics`, if it answers.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let prefix = format!("{name} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.signal("CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Failing assertions print the log themselves (`log_text`).
        let _ = std::fs::remove_file(&self.log);
    }
}
