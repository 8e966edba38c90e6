//! Benchmark (not a timed test; `#[ignore]`d): 1,000 Agents, each with its own Persona and
//! Workflow, on the real control plane with the shipped operator binary (Cargo profile
//! `release-operator`, built by the benchmark) running as its own process. Each run has five
//! phases, so the operator's own time is seen apart from the time the API server needs to
//! take the inputs:
//!
//! 1. *inputs alone*: the 3,000 objects applied with no operator running;
//! 2. *operator alone*: the operator started on those pre-applied inputs, timed from its
//!    start until every Agent has its ConfigMap, Deployment and Service and `Accepted=True`;
//! 3. *persona change*: all Personas re-applied, until every ConfigMap follows;
//! 4. *restart*: the operator restarted with everything in place, until it has reconciled
//!    every Agent again (it should write next to nothing);
//! 5. *concurrent*: in a fresh namespace, the operator running while the inputs are
//!    applied, from the first apply until done (the figure the issue's goal names).
//!
//! For each timed phase it prints the CPU seconds the API server, etcd, the
//! controller-manager, the operator and the benchmark itself used, and what the rest of the
//! machine used (other engineers' builds), plus the operator's writes and peak RSS.
//! Completion is followed with watches (in-memory caches), not by polling lists, so the
//! measurement adds no load to the API server. Run it with:
//!
//! ```sh
//! cargo test --release -p switchboard-tests --test operator_bench -- --ignored --nocapture
//! ```
//!
//! `SWITCHBOARD_BENCH_AGENTS` (default 1000) and `SWITCHBOARD_BENCH_RUNS` (default 3) change
//! the size and the number of runs; `SWITCHBOARD_BENCH_OPERATOR` names an operator binary to
//! measure instead of the one built from this tree (to compare two builds).

mod common;
#[path = "operator_bench/measure.rs"]
mod measure;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::namespace;
use futures_util::{StreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use kube::api::{DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use measure::{ControlPlane, Cpu, apiserver_requests, requests_between};
use serde::de::DeserializeOwned;
use switchboard_crds::{Agent, Persona, Workflow};
use switchboard_tests::cluster::TestNamespace;
use switchboard_tests::operator::{metric_value, operator_binary, operator_binary_release, peak_rss_kib};
use switchboard_tests::process::{log_filter, spawn_serving};
use tokio::task::JoinHandle;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn scrape(port: u16) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(s, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text
}

fn objects(i: usize, display: &str) -> [(ApiResource, serde_json::Value); 3] {
    let persona = serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Persona", "metadata": {"name": format!("p{i}")},
        "spec": {"displayName": format!("{display}{i}"), "systemPrompt": "You are {name}."}
    });
    let workflow = serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Workflow", "metadata": {"name": format!("w{i}")},
        "spec": {"entry": "hello", "nodes": [{"id": "hello", "kind": "message", "instruction": "Greet the caller."}]}
    });
    let agent = serde_json::json!({
        "apiVersion": "switchboard.dev/v1alpha1", "kind": "Agent", "metadata": {"name": format!("a{i}")},
        "spec": {"mode": "text", "personaRef": {"name": format!("p{i}")}, "workflowRef": {"name": format!("w{i}")}}
    });
    [
        (ApiResource::erase::<Persona>(&()), persona),
        (ApiResource::erase::<Workflow>(&()), workflow),
        (ApiResource::erase::<Agent>(&()), agent),
    ]
}

async fn apply_all(client: &Client, ns: &str, docs: Vec<(ApiResource, serde_json::Value)>) {
    let pp = PatchParams::apply("switchboard-bench").force();
    stream::iter(docs)
        .for_each_concurrent(32, |(ar, body)| {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            let pp = pp.clone();
            async move {
                let name = body["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                api.patch(&name, &pp, &Patch::Apply(&body)).await.expect("apply");
            }
        })
        .await;
}

/// What the benchmark watches in one namespace (caches filled by watches, so checking
/// progress costs the API server nothing).
struct Progress {
    agents: Store<Agent>,
    config_maps: Store<ConfigMap>,
    deployments: Store<PartialObjectMeta<Deployment>>,
    services: Store<PartialObjectMeta<Service>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Progress {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn follow<K>(
    stream: impl futures_util::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
) -> (Store<K>, JoinHandle<()>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, writer) = reflector::store();
    let task = tokio::spawn(stream.default_backoff().reflect(writer).for_each(|_| std::future::ready(())));
    (store, task)
}

impl Progress {
    fn start(client: &Client, ns: &str) -> Self {
        let children = watcher::Config::default().labels("switchboard.dev/agent");
        let (agents, a) = follow(watcher(Api::<Agent>::namespaced(client.clone(), ns), watcher::Config::default()));
        let (config_maps, c) = follow(watcher(Api::<ConfigMap>::namespaced(client.clone(), ns), children.clone()));
        let (deployments, d) =
            follow(watcher(Api::<PartialObjectMeta<Deployment>>::namespaced(client.clone(), ns), children.clone()));
        let (services, s) =
            follow(watcher(Api::<PartialObjectMeta<Service>>::namespaced(client.clone(), ns), children));
        Self { agents, config_maps, deployments, services, tasks: vec![a, c, d, s] }
    }

    fn all_done(&self, n: usize) -> bool {
        let agents = self.agents.state();
        self.config_maps.state().len() >= n
            && self.deployments.state().len() >= n
            && self.services.state().len() >= n
            && agents.len() == n
            && agents.iter().all(|a| common::accepted(a.as_ref()).is_some_and(|c| c.status == "True"))
    }

    fn all_changed(&self, n: usize) -> bool {
        let changed = self
            .config_maps
            .state()
            .iter()
            .filter(|c| c.data.as_ref().is_some_and(|d| d.values().any(|v| v.contains("\"Changed"))))
            .count();
        changed == n
    }
}

async fn poll(what: &str, limit: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if check() {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{what} did not happen within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The operator binary: `SWITCHBOARD_BENCH_OPERATOR` (to compare builds), else the one
/// the benchmark builds: the shipped operator (`--profile release-operator`) under
/// `cargo test --release`; under a debug test run, the debug one.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SWITCHBOARD_BENCH_OPERATOR") {
        return PathBuf::from(path);
    }
    let built = if cfg!(debug_assertions) { operator_binary() } else { operator_binary_release() };
    built.expect("operator binary")
}

/// The operator binary running as its own process, watching one namespace.
struct OperatorProcess {
    child: Child,
    port: u16,
    /// Peak anonymous and file-backed resident memory (KiB), sampled every 20 ms.
    peaks: Arc<[AtomicU64; 2]>,
}

/// `RssAnon` and `RssFile` of process `pid` in KiB, if it runs.
fn rss_split(pid: u32) -> Option<[u64; 2]> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
    };
    Some([field("RssAnon:")?, field("RssFile:")?])
}

impl OperatorProcess {
    async fn start(ns: &TestNamespace, kubeconfig: &Path) -> Self {
        let (child, port, _log) = spawn_serving(
            Command::new(binary())
                .args(["run", "--namespace", &ns.name, "--operator-namespace", &ns.name, "--identity", "bench"])
                .args(["--lease-seconds", "3", "--metrics-addr", "127.0.0.1:0"])
                .env("KUBECONFIG", kubeconfig)
                .env("RUST_LOG", log_filter("warn")),
        )
        .expect("operator");
        let peaks: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let (pid, sampled) = (child.id(), peaks.clone());
        std::thread::spawn(move || {
            while let Some(now) = rss_split(pid) {
                for (peak, v) in sampled.iter().zip(now) {
                    peak.fetch_max(v, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self { child, port, peaks }
    }

    async fn wait_leading(&self) {
        poll("the operator to lead", Duration::from_secs(30), || self.metric("switchboard_operator_leader", "") == 1.0)
            .await;
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn metric(&self, name: &str, labels: &str) -> f64 {
        metric_value(&scrape(self.port), name, labels)
    }

    fn reconciles(&self) -> f64 {
        self.metric("switchboard_operator_reconciles_total", "kind=\"agent\"")
    }

    /// The writes the operator counts: child applies it sent, status writes and Events.
    fn writes(&self) -> f64 {
        let text = scrape(self.port);
        text.lines()
            .filter(|l| {
                (l.starts_with("switchboard_operator_child_applies_total{") && l.contains("result=\"applied\""))
                    || l.starts_with("switchboard_operator_status_writes_total{")
                    || l.starts_with("switchboard_operator_events_total{")
            })
            .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
            .sum()
    }

    fn rss_mib(&self) -> f64 {
        peak_rss_kib(self.child.id()).expect("rss") as f64 / 1024.0
    }

    /// The peak RSS with the sampled peaks of its anonymous and file-backed parts.
    fn rss_report(&self) -> String {
        let [anon, file] = [0, 1].map(|i| self.peaks[i].load(Ordering::Relaxed) as f64 / 1024.0);
        format!("{:.1} MiB (sampled peaks: anonymous {anon:.1} MiB, file-backed {file:.1} MiB)", self.rss_mib())
    }

    fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

#[derive(Default)]
struct RunResult {
    inputs: f64,
    alone: f64,
    change: f64,
    restart: f64,
    concurrent_applied: f64,
    concurrent: f64,
    rss_mib: f64,
    reconciles_create: f64,
    reconciles_change: f64,
    writes_create: f64,
    writes_restart: f64,
}

async fn one_run(n: usize) -> RunResult {
    let mut r = RunResult::default();
    let ns = namespace("bench").await;
    let client = ns.client();
    let kubeconfig = ns.cluster().kubeconfig.clone();
    let cp = ControlPlane { dir: kubeconfig.parent().map(Path::to_path_buf).unwrap_or_default() };
    let progress = Progress::start(&client, &ns.name);

    // 1. The inputs alone, no operator running.
    let (start, cpu0) = (Instant::now(), Cpu::now(&cp, None));
    apply_all(&client, &ns.name, (0..n).flat_map(|i| objects(i, "Agent")).collect()).await;
    let wall = start.elapsed();
    r.inputs = wall.as_secs_f64();
    println!(
        "  inputs alone: {} objects applied in {wall:.2?}; {}",
        3 * n,
        Cpu::now(&cp, None).since(cpu0).report(wall)
    );

    // 2. The operator alone, on the pre-applied inputs (timed from its start).
    let requests0 = apiserver_requests(&cp);
    let op = OperatorProcess::start(&ns, &kubeconfig).await;
    let cpu0 = Cpu::now(&cp, Some(op.pid()));
    let wall = poll("every Agent accepted with children", Duration::from_secs(300), || progress.all_done(n)).await;
    let cpu = Cpu::now(&cp, Some(op.pid())).since(cpu0);
    println!("  operator alone: {}", requests_between(&requests0, &apiserver_requests(&cp)));
    r.alone = wall.as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await; // let trailing triggers (Deployment status) land
    let after_create = op.reconciles();
    r.reconciles_create = after_create / n as f64;
    r.writes_create = op.writes() / n as f64;
    println!(
        "  operator alone (started on pre-applied inputs): all accepted with children {wall:.2?} after its start; \
         {:.2} reconciles and {:.2} writes per Agent; {}",
        r.reconciles_create,
        r.writes_create,
        cpu.report(wall)
    );

    // 3. A change of every Persona.
    let (start, cpu0) = (Instant::now(), Cpu::now(&cp, Some(op.pid())));
    let writes0 = op.writes();
    apply_all(&client, &ns.name, (0..n).map(|i| objects(i, "Changed")[0].clone()).collect()).await;
    poll("every ConfigMap to follow its Persona", Duration::from_secs(300), || progress.all_changed(n)).await;
    let wall = start.elapsed();
    let cpu = Cpu::now(&cp, Some(op.pid())).since(cpu0);
    r.change = wall.as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await;
    r.reconciles_change = (op.reconciles() - after_create) / n as f64;
    println!(
        "  persona change reached every ConfigMap in {wall:.2?}; {:.2} reconciles and {:.2} writes per Agent; {}",
        r.reconciles_change,
        (op.writes() - writes0) / n as f64,
        cpu.report(wall)
    );
    r.rss_mib = op.rss_mib();
    println!("  peak RSS of this operator process (start on pre-applied inputs, persona change): {}", op.rss_report());
    op.stop();

    // 4. A restart with everything in place.
    let start = Instant::now();
    let op = OperatorProcess::start(&ns, &kubeconfig).await;
    op.wait_leading().await;
    let wall =
        poll("every Agent reconciled after the restart", Duration::from_secs(300), || op.reconciles() >= n as f64)
            .await;
    r.restart = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    r.writes_restart = op.writes() / n as f64;
    println!(
        "  restart: every Agent reconciled {:.2} s after the start ({wall:.2?} after leading); {:.2} writes per Agent",
        r.restart, r.writes_restart
    );
    println!("  peak RSS of the restarted operator: {}", op.rss_report());
    r.rss_mib = r.rss_mib.max(op.rss_mib());
    op.stop();
    drop(progress);
    let name = ns.name.clone();
    drop(ns);
    wait_gone(&client, &name).await;

    // 5. Concurrent: the operator running while the inputs are applied.
    let ns = namespace("bench").await;
    let progress = Progress::start(&client, &ns.name);
    let op = OperatorProcess::start(&ns, &kubeconfig).await;
    op.wait_leading().await;
    let requests0 = apiserver_requests(&cp);
    let (start, cpu0) = (Instant::now(), Cpu::now(&cp, Some(op.pid())));
    apply_all(&client, &ns.name, (0..n).flat_map(|i| objects(i, "Agent")).collect()).await;
    r.concurrent_applied = start.elapsed().as_secs_f64();
    poll("every Agent accepted with children", Duration::from_secs(300), || progress.all_done(n)).await;
    let wall = start.elapsed();
    let cpu = Cpu::now(&cp, Some(op.pid())).since(cpu0);
    println!("  concurrent: {}", requests_between(&requests0, &apiserver_requests(&cp)));
    r.concurrent = wall.as_secs_f64();
    println!("  peak RSS of the operator running while the inputs were applied: {}", op.rss_report());
    r.rss_mib = r.rss_mib.max(op.rss_mib());
    println!(
        "  concurrent: applied {} objects in {:.2} s; all accepted with children after {wall:.2?}; {}",
        3 * n,
        r.concurrent_applied,
        cpu.report(wall)
    );
    println!("  operator peak RSS (max of its three processes): {:.1} MiB", r.rss_mib);
    op.stop();
    drop(progress);
    let name = ns.name.clone();
    drop(ns);
    wait_gone(&client, &name).await;
    r
}

async fn wait_gone(client: &Client, name: &str) {
    let nss: Api<Namespace> = Api::all(client.clone());
    for _ in 0..600 {
        if nss.get_opt(name).await.map(|n| n.is_none()).unwrap_or(false) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("warning: namespace {name} still terminating");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run explicitly with --ignored --nocapture"]
async fn thousand_agents() {
    let n = env_or("SWITCHBOARD_BENCH_AGENTS", 1000);
    let runs = env_or("SWITCHBOARD_BENCH_RUNS", 3);
    let mut results = Vec::new();
    for run in 1..=runs {
        println!("run {run}/{runs}: {n} Agents with their Personas and Workflows");
        results.push(one_run(n).await);
    }
    let m = |f: fn(&RunResult) -> f64| median(results.iter().map(f).collect());
    println!(
        "median of {runs}: inputs alone {:.2} s; operator alone {:.2} s; concurrent {:.2} s (inputs applied after \
         {:.2} s); persona change {:.2} s; restart {:.2} s; peak RSS {:.1} MiB; reconciles per Agent {:.2} (create), \
         {:.2} (persona change); writes per Agent {:.2} (create), {:.2} (restart)",
        m(|r| r.inputs),
        m(|r| r.alone),
        m(|r| r.concurrent),
        m(|r| r.concurrent_applied),
        m(|r| r.change),
        m(|r| r.restart),
        m(|r| r.rss_mib),
        m(|r| r.reconciles_create),
        m(|r| r.reconciles_change),
        m(|r| r.writes_create),
        m(|r| r.writes_restart),
    );
}
