//! Benchmark (not a timed test; `#[ignore]`d): 1,000 Agents, each with its own Persona and
//! Workflow, applied to the real control plane with the release operator binary running
//! as its own process. Reports, per run and as medians: the time from the first apply until
//! every Agent has its ConfigMap, Deployment and Service and `Accepted=True`; the time until
//! a change of every Persona reached every ConfigMap; the operator's peak RSS; and the
//! reconciles per Agent for each phase. Run it with:
//!
//! ```sh
//! cargo test --release -p switchboard-tests --test operator_bench -- --ignored --nocapture
//! ```
//!
//! `SWITCHBOARD_BENCH_AGENTS` (default 1000) and `SWITCHBOARD_BENCH_RUNS` (default 3) change
//! the size and the number of runs.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::namespace;
use futures_util::{StreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::{Api, Client};
use switchboard_crds::{Agent, Persona, Workflow};
use switchboard_tests::operator::{metric_value, operator_binary, operator_binary_release, peak_rss_kib};

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

async fn all_done(client: &Client, ns: &str, n: usize) -> anyhow::Result<bool> {
    let lp = ListParams::default().labels("switchboard.dev/agent");
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns).list_metadata(&lp).await?.items.len();
    let ds = Api::<Deployment>::namespaced(client.clone(), ns).list_metadata(&lp).await?.items.len();
    let svcs = Api::<Service>::namespaced(client.clone(), ns).list_metadata(&lp).await?.items.len();
    if cms < n || ds < n || svcs < n {
        return Ok(false);
    }
    let agents = Api::<Agent>::namespaced(client.clone(), ns).list(&ListParams::default()).await?;
    Ok(agents.items.len() == n && agents.items.iter().all(|a| common::accepted(a).is_some_and(|c| c.status == "True")))
}

async fn all_changed(client: &Client, ns: &str, n: usize) -> anyhow::Result<bool> {
    let lp = ListParams::default().labels("switchboard.dev/agent");
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns).list(&lp).await?;
    let changed = cms
        .items
        .iter()
        .filter(|c| c.data.as_ref().is_some_and(|d| d.values().any(|v| v.contains("\"Changed"))))
        .count();
    Ok(changed == n)
}

async fn poll(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> anyhow::Result<bool>) -> Duration {
    let start = Instant::now();
    loop {
        if check().await.unwrap_or(false) {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{what} did not happen within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct RunResult {
    create: Duration,
    change: Duration,
    rss_mib: f64,
    reconciles_create: f64,
    reconciles_change: f64,
}

async fn one_run(n: usize) -> RunResult {
    let ns = namespace("bench").await;
    let client = ns.client();
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    // `cargo test --release` measures the release operator; a debug test run, the debug one.
    let binary = if cfg!(debug_assertions) { operator_binary() } else { operator_binary_release() };
    let mut child: Child = Command::new(binary.expect("operator binary"))
        .args(["run", "--namespace", &ns.name, "--operator-namespace", &ns.name, "--identity", "bench"])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .env("KUBECONFIG", &ns.cluster().kubeconfig)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .expect("operator");
    poll("the operator to lead", Duration::from_secs(30), async || {
        Ok(metric_value(&scrape(port), "switchboard_operator_leader", "") == 1.0)
    })
    .await;

    let start = Instant::now();
    let docs: Vec<_> = (0..n).flat_map(|i| objects(i, "Agent")).collect();
    apply_all(&client, &ns.name, docs).await;
    let applied = start.elapsed();
    poll("every Agent accepted with children", Duration::from_secs(300), async || all_done(&client, &ns.name, n).await)
        .await;
    let create = start.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await; // let trailing triggers (Deployment status) land
    let after_create = metric_value(&scrape(port), "switchboard_operator_reconciles_total", "kind=\"agent\"");
    println!("  applied {} objects in {applied:?}; all accepted with children after {create:?}", 3 * n);

    let start = Instant::now();
    let personas: Vec<_> = (0..n).map(|i| objects(i, "Changed")[0].clone()).collect();
    apply_all(&client, &ns.name, personas).await;
    poll("every ConfigMap to follow its Persona", Duration::from_secs(300), async || {
        all_changed(&client, &ns.name, n).await
    })
    .await;
    let change = start.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let metrics = scrape(port);
    let after_change = metric_value(&metrics, "switchboard_operator_reconciles_total", "kind=\"agent\"");
    let rss_mib = peak_rss_kib(child.id()).expect("rss") as f64 / 1024.0;
    let errors =
        metric_value(&metrics, "switchboard_operator_reconcile_errors_total", "kind=\"agent\",reason=\"conflict\"");
    println!(
        "  persona change reached every ConfigMap in {change:?}; peak RSS {rss_mib:.1} MiB; agent reconciles {after_create} + {}; conflict errors {errors}",
        after_change - after_create
    );
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    let name = ns.name.clone();
    drop(ns);
    wait_gone(&client, &name).await;
    RunResult {
        create,
        change,
        rss_mib,
        reconciles_create: after_create / n as f64,
        reconciles_change: (after_change - after_create) / n as f64,
    }
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
        "median of {runs}: all accepted with children {:.2} s; persona change propagated {:.2} s; \
         peak RSS {:.1} MiB; agent reconciles per Agent: {:.2} (create), {:.2} (persona change)",
        m(|r| r.create.as_secs_f64()),
        m(|r| r.change.as_secs_f64()),
        m(|r| r.rss_mib),
        m(|r| r.reconciles_create),
        m(|r| r.reconciles_change),
    );
}
