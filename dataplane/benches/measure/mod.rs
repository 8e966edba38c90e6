//! Shared by every benchmark: options from the environment, and what /proc says about a
//! process (RSS, CPU time) and the machine (busy time, load average); percentiles.

#![allow(dead_code)]

/// The environment variable `name` parsed, or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Async worker threads of every server process a benchmark starts (runtime, simulator,
/// floor server): `BENCH_WORKERS`, default 1 — what the operator gives a runtime pod with
/// the default CPU request of 100m (`SWITCHBOARD_WORKER_THREADS`, sized from the request).
pub fn workers() -> u16 {
    env_or("BENCH_WORKERS", 1u16).max(1)
}

/// The environment variable `name` as a comma-separated list of numbers, or `default`'s.
pub fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name).unwrap_or_else(|_| default.into()).split(',').filter_map(|s| s.trim().parse().ok()).collect()
}

/// RSS of `pid`, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) of `pid` so far, in clock ticks (1/100 s on Linux).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may contain spaces) start after the last ')'.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the ')'.
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

/// The whole machine's jiffies by kind (user, nice, system, idle, iowait, irq, softirq,
/// steal, ...): the `cpu` line of /proc/stat.
fn machine_jiffies() -> Vec<u64> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or("");
    line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect()
}

/// (busy, total) jiffies of the whole machine.
pub fn machine_ticks() -> (u64, u64) {
    let values = machine_jiffies();
    let total: u64 = values.iter().sum();
    let idle = values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// (steal, total) jiffies of the whole machine. Steal is time the hypervisor gave this
/// VM's CPUs to someone else while they had work: a share of a few percent during a run
/// means its latency tail is the host's, not the code's.
pub fn steal_ticks() -> (u64, u64) {
    let values = machine_jiffies();
    (values.get(7).copied().unwrap_or(0), values.iter().sum())
}

/// The steal share between two [`steal_ticks`] readings, in percent.
pub fn steal_percent(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1).max(1) as f64;
    after.0.saturating_sub(before.0) as f64 * 100.0 / total
}

/// The value at quantile `p` of `sorted` (ascending), nearest rank: the load generator's.
pub use switchboard_load::report::percentile;

/// The sessions' samples minus `minus_ms`, in milliseconds, sorted: the overhead of each
/// turn over what the simulator was told to take.
pub async fn overheads_ms(tasks: Vec<tokio::task::JoinHandle<Vec<std::time::Duration>>>, minus_ms: f64) -> Vec<f64> {
    let mut overhead = Vec::new();
    for task in tasks {
        for sample in task.await.expect("session task") {
            overhead.push(sample.as_secs_f64() * 1000.0 - minus_ms);
        }
    }
    overhead.sort_by(f64::total_cmp);
    overhead
}

/// The 1-minute load average.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default()
}
