//! What the operator benchmark reads about the machine while it runs: CPU seconds of the
//! control plane's processes, the operator, the benchmark and the whole machine (from
//! `/proc`), and the API server's request counters (from its `/metrics`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// CPU seconds (user + system) of a process, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0.0)).collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

/// Busy CPU seconds of the whole machine, from `/proc/stat`.
pub fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<f64> =
        stat.lines().next().unwrap_or_default().split_whitespace().skip(1).map(|v| v.parse().unwrap_or(0.0)).collect();
    let idle = f.get(3).copied().unwrap_or(0.0) + f.get(4).copied().unwrap_or(0.0);
    (f.iter().take(8).sum::<f64>() - idle) / 100.0
}

/// The control plane's processes (pid files written by `tests/cluster/up.sh`).
pub struct ControlPlane {
    pub dir: PathBuf,
}

impl ControlPlane {
    pub fn pid(&self, name: &str) -> u32 {
        std::fs::read_to_string(self.dir.join(format!("{name}.pid")))
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// The API server's request counters (`apiserver_request_total`), by verb, resource,
/// subresource and client (JSON: the operator and the benchmark; protobuf: the
/// controller-manager), read from its `/metrics`.
pub fn apiserver_requests(cp: &ControlPlane) -> std::collections::HashMap<String, f64> {
    let token = std::fs::read_to_string(cp.dir.join("token")).unwrap_or_default();
    let kubeconfig = std::fs::read_to_string(cp.dir.join("kubeconfig")).unwrap_or_default();
    let server = kubeconfig.lines().find_map(|l| l.trim().strip_prefix("server: ")).unwrap_or_default().to_owned();
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "10", "-H", &format!("Authorization: Bearer {}", token.trim())])
        .arg(format!("{server}/metrics"))
        .output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let label = |line: &str, name: &str| {
        let start = line.find(&format!("{name}=\"")).map(|i| i + name.len() + 2)?;
        line[start..].split('"').next().map(str::to_owned)
    };
    let mut counts = std::collections::HashMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let (Some(verb), Some(resource), Some(value)) = (
            label(line, "verb"),
            label(line, "resource"),
            line.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()),
        ) else {
            continue;
        };
        if matches!(verb.as_str(), "WATCH" | "CONNECT") {
            continue;
        }
        let sub = label(line, "subresource").filter(|s| !s.is_empty()).map_or(String::new(), |s| format!("/{s}"));
        let client = if label(line, "contentType").is_some_and(|c| c.contains("protobuf")) { "kcm" } else { "json" };
        *counts.entry(format!("{verb} {resource}{sub} ({client})")).or_insert(0.0) += value;
    }
    counts
}

/// The requests the API server served between two [`apiserver_requests`] snapshots, most first.
pub fn requests_between(
    before: &std::collections::HashMap<String, f64>,
    after: &std::collections::HashMap<String, f64>,
) -> String {
    let mut diff: Vec<(String, f64)> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v >= 1.0)
        .collect();
    diff.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = diff.iter().map(|(_, v)| v).sum();
    let top: Vec<String> = diff.iter().take(12).map(|(k, v)| format!("{v:.0} {k}")).collect();
    format!("{total:.0} API requests: {}", top.join(", "))
}

/// CPU seconds used by each part during a phase.
#[derive(Clone, Copy, Default)]
pub struct Cpu {
    pub apiserver: f64,
    pub etcd: f64,
    pub kcm: f64,
    pub operator: f64,
    pub bench: f64,
    pub machine: f64,
}

impl Cpu {
    pub fn now(cp: &ControlPlane, operator: Option<u32>) -> Self {
        Self {
            apiserver: cpu_seconds(cp.pid("kube-apiserver")),
            etcd: cpu_seconds(cp.pid("etcd")),
            kcm: cpu_seconds(cp.pid("kube-controller-manager")),
            operator: operator.map_or(0.0, cpu_seconds),
            bench: cpu_seconds(std::process::id()),
            machine: machine_busy_seconds(),
        }
    }

    pub fn since(self, start: Cpu) -> Self {
        Self {
            apiserver: self.apiserver - start.apiserver,
            etcd: self.etcd - start.etcd,
            kcm: self.kcm - start.kcm,
            operator: self.operator - start.operator,
            bench: self.bench - start.bench,
            machine: self.machine - start.machine,
        }
    }

    pub fn report(&self, wall: Duration) -> String {
        let ours = self.apiserver + self.etcd + self.kcm + self.operator + self.bench;
        format!(
            "CPU s: apiserver {:.1}, etcd {:.1}, controller-manager {:.1}, operator {:.1}, bench {:.1}, \
             rest of machine {:.1} (of {:.1} core-s available)",
            self.apiserver,
            self.etcd,
            self.kcm,
            self.operator,
            self.bench,
            (self.machine - ours).max(0.0),
            2.0 * wall.as_secs_f64()
        )
    }
}
