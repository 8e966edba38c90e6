//! A real Prometheus server (Debian's `prometheus`, which tests/tools/install.sh installs)
//! scraping one target every second, in a temporary folder; killed and removed on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::ports;

/// Upper bound for Prometheus to start or to scrape: a guard against hangs.
const PATIENCE: Duration = Duration::from_secs(60);

pub struct Prometheus {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn bin() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/install.sh");
    let out = Command::new("bash").arg(&script).output().expect("runs tests/tools/install.sh");
    assert!(out.status.success(), "tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    let dir = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_owned();
    PathBuf::from(dir).join("prometheus")
}

impl Prometheus {
    /// Starts Prometheus scraping `target`'s `/metrics` every second, with the `namespace`
    /// label a PodMonitor scrape would add; returns once it answers, as itself.
    ///
    /// Prometheus cannot bind port 0 and say which port it got: it is given a port from
    /// [`ports`] (free, below the kernel's ephemeral range, reserved for this test), and
    /// when another program took that port meanwhile (its log says the address is in use
    /// and it exits) it is started again on another. Ready means its
    /// `/api/v1/status/flags` names our storage folder: this Prometheus answers, not
    /// another test's.
    pub async fn start(target: SocketAddr) -> Self {
        let dir = std::env::temp_dir().join(format!("switchboard-prometheus-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: switchboard\n    \
             static_configs:\n      - targets: ['{target}']\n        labels: {{ namespace: bank }}\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("config");
        let storage = dir.join("data").display().to_string();
        for _ in 0..5 {
            let port = ports::free_port(ports::TCP);
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let log = std::fs::File::create(dir.join("prometheus.log")).expect("log file");
            let child = Command::new(bin())
                .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
                .arg(format!("--storage.tsdb.path={storage}"))
                .arg(format!("--web.listen-address={addr}"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("prometheus starts");
            // Killed and removed on every path from here, the panic included.
            let mut prometheus = Self { child, dir: dir.clone(), addr };
            let deadline = Instant::now() + PATIENCE;
            loop {
                if let Ok(Some(status)) = prometheus.child.try_wait() {
                    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
                    if ports::address_in_use(&log) {
                        break;
                    }
                    panic!("prometheus exited ({status}):\n{log}");
                }
                if prometheus.flag("storage.tsdb.path").await.as_deref() == Some(storage.as_str()) {
                    return prometheus;
                }
                assert!(Instant::now() < deadline, "prometheus did not answer on {addr} in {PATIENCE:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Its port was taken: it has exited; its folder stays for the next try.
            let _ = prometheus.child.wait();
            std::mem::forget(prometheus);
        }
        panic!("prometheus found its port taken five times");
    }

    /// The value of command-line flag `name` as this Prometheus reports it, once it answers.
    async fn flag(&self, name: &str) -> Option<String> {
        let (status, body) = fetch(self.addr, "/api/v1/status/flags").await?;
        if status != "200" {
            return None;
        }
        let answer: serde_json::Value = serde_json::from_str(&body).ok()?;
        answer["data"][name].as_str().map(str::to_owned)
    }

    /// Waits until Prometheus has scraped the target once more after now.
    pub async fn wait_for_scrape(&self) {
        let since = std::time::SystemTime::now();
        let deadline = Instant::now() + PATIENCE;
        loop {
            let result = self.query("timestamp(up{job=\"switchboard\"} == 1)").await;
            let scraped = result.first().and_then(|r| r["value"][0].as_f64());
            let since = since.duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
            if scraped.is_some_and(|at| at > since) {
                return;
            }
            let log = std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "no scrape in time; prometheus.log:\n{log}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The result vector of an instant query (empty while Prometheus is not up yet).
    /// Panics when Prometheus refuses the query.
    pub async fn query(&self, expr: &str) -> Vec<serde_json::Value> {
        let path = format!("/api/v1/query?query={}", encode(expr));
        let Some(body) = get(self.addr, &path).await else { return Vec::new() };
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(answer["status"], "success", "{expr}: {answer}");
        answer["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

/// GETs `path` over HTTP/1.0 (no chunked answer): the body of a 200; None while
/// Prometheus is not listening or not ready (503). Panics on any other answer (a query it
/// refuses: 400, with the reason).
async fn get(addr: SocketAddr, path: &str) -> Option<String> {
    let (status, body) = fetch(addr, path).await?;
    match status.as_str() {
        "200" => Some(body),
        "503" => None,
        _ => panic!("GET {path}: {status}\n{body}"),
    }
}

/// GETs `path` over HTTP/1.0: the status code and the body; None while nothing answers.
async fn fetch(addr: SocketAddr, path: &str) -> Option<(String, String)> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.split_whitespace().nth(1)?.to_owned(), body.to_owned()))
}

/// Percent-encodes a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
