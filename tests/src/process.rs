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
        let log = std::env::temp_dir().join(format!("switchboard-operator-{ns}-{identity}.log"));
        let file = std::fs::File::create(&log).context("creating the log file")?;
        let child = Command::new(operator_binary()?)
            .args(["run", "--namespace", ns, "--operator-namespace", ns, "--identity", identity])
            .args(["--lease-seconds", &lease_seconds.to_string(), "--log-format", "text"])
            // Port 0: it binds a free port itself and logs it (no port to race for).
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .context("starting switchboard-operator")?;
        let mut process = Self { identity: identity.to_owned(), metrics_port: 0, log, child };
        process.metrics_port = process.served_port()?;
        Ok(process)
    }

    /// The port its `serving /metrics` log line names (the one it bound), within 30 s.
    fn served_port(&mut self) -> anyhow::Result<u16> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(port) = log.lines().find_map(served_port) {
                return Ok(port);
            }
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("switchboard-operator exited ({status}) before serving /metrics:\n{log}");
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "no `serving /metrics` line in 30 s:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
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

/// The port in the operator's `serving /metrics, /healthz and /readyz addr=127.0.0.1:PORT`.
fn served_port(line: &str) -> Option<u16> {
    if !line.contains("serving /metrics") {
        return None;
    }
    let addr = line.split_once("addr=")?.1.split_whitespace().next()?;
    addr.parse::<std::net::SocketAddr>().ok().map(|a| a.port())
}

/// The log filter that keeps `level` for everything and `info` for the operator's line
/// saying where it serves /metrics ([`spawn_serving`] reads it).
pub fn log_filter(level: &str) -> String {
    format!("{level},switchboard_operator::run=info")
}

/// Spawns `command` (`switchboard-operator run ... --metrics-addr 127.0.0.1:0`, its log as
/// text with [`log_filter`]) with its stderr piped; returns the process, the port its
/// `serving /metrics` line names (the one it bound: no port to race for), and its log as
/// it is written.
pub fn spawn_serving(command: &mut Command) -> anyhow::Result<(Child, u16, std::sync::Arc<std::sync::Mutex<String>>)> {
    use std::io::BufRead as _;
    let mut child = command.stderr(Stdio::piped()).spawn().context("starting switchboard-operator")?;
    let stderr = child.stderr.take().context("its stderr")?;
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let written = log.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(port) = served_port(&line) {
                let _ = tx.send(port);
            }
            let mut log = written.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            log.push_str(&line);
            log.push('\n');
        }
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(port) => Ok((child, port, log)),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            let log = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            anyhow::bail!("switchboard-operator did not serve /metrics within 30 s (or exited):\n{log}")
        }
    }
}
