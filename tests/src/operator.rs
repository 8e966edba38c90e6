//! The Switchboard operator for tests: the real controller running in-process (the same
//! `switchboard_operator::run::run` the binary calls), scoped to one test namespace, with
//! its own Lease, routing table and metrics; and the built binary for CLI tests.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use switchboard_crds::routing::{DEFAULT_ROUTES_NAME, ROUTES_KEY, RoutingTable};
use switchboard_operator::metrics::Metrics;
use switchboard_operator::run::{RunError, run};
use switchboard_operator::settings::{BuildSettings, RunArgs};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::TestNamespace;

/// A controller running in this process.
#[derive(Debug)]
pub struct Operator {
    /// Its identity in the Lease.
    pub identity: String,
    /// Its metrics (read them to count reconciles).
    pub metrics: Metrics,
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), RunError>>>,
}

impl Operator {
    /// Starts an operator that watches only `ns`, keeps its Lease and routing table there,
    /// and serves metrics on an ephemeral port.
    pub fn start(ns: &TestNamespace, identity: &str) -> anyhow::Result<Self> {
        Self::start_with(ns, identity, BuildSettings::default())
    }

    /// [`Operator::start`] with other build settings.
    pub fn start_with(ns: &TestNamespace, identity: &str, build: BuildSettings) -> anyhow::Result<Self> {
        Self::start_args(ns, args(&ns.name, identity, build))
    }

    /// [`Operator::start`] with `args` (see [`args`] for the test defaults).
    pub fn start_args(ns: &TestNamespace, args: RunArgs) -> anyhow::Result<Self> {
        let identity = args.identity.clone().unwrap_or_default();
        let metrics = Metrics::new()?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(args, ns.client(), metrics.clone(), shutdown.clone()));
        Ok(Self { identity, metrics, shutdown, task: Some(task) })
    }

    /// Whether the operator task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Shuts the operator down gracefully and returns how `run` ended.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let task = self.task.take().context("already stopped")?;
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .context("operator did not stop within 30 s")??
            .map_err(anyhow::Error::from)
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The `run` settings of a test operator for namespace `ns`.
pub fn args(ns: &str, identity: &str, build: BuildSettings) -> RunArgs {
    RunArgs {
        log_format: Default::default(),
        gateway_key_config_map: None,
        build,
        namespace: Some(ns.to_owned()),
        operator_namespace: ns.to_owned(),
        routes_name: DEFAULT_ROUTES_NAME.to_owned(),
        routes_namespace: None,
        lease_name: "switchboard-operator".to_owned(),
        lease_seconds: 6,
        api_timeout_seconds: 10,
        agent_service_accounts: Vec::new(),
        agent_secrets: Vec::new(),
        identity: Some(identity.to_owned()),
        metrics_addr: ([127, 0, 0, 1], 0).into(),
        resync_seconds: 600,
        concurrency: 16,
    }
}

/// The routing table the operator published in `ns`, if any.
pub async fn routing_table(ns: &TestNamespace) -> anyhow::Result<Option<RoutingTable>> {
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let Some(cm) = cms.get_opt(DEFAULT_ROUTES_NAME).await? else { return Ok(None) };
    let text = cm.data.unwrap_or_default().remove(ROUTES_KEY).context("routing ConfigMap without routes.json")?;
    Ok(Some(RoutingTable::parse(&text)?))
}

/// The built `switchboard-operator` binary (built now if needed, as the suite built it:
/// [`crate::switchboard::workspace_binary`]).
pub fn operator_binary() -> anyhow::Result<PathBuf> {
    crate::switchboard::workspace_binary("switchboard-operator")
}

/// The Cargo profile the operator ships with (workspace `Cargo.toml`: built for size, since
/// about half of the operator's memory is its mapped code).
pub const OPERATOR_PROFILE: &str = "release-operator";

/// The `switchboard-operator` binary as shipped: built with `--profile release-operator`
/// (built now if needed), for measurements.
pub fn operator_binary_release() -> anyhow::Result<PathBuf> {
    let root = crate::repo_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "--profile",
            OPERATOR_PROFILE,
            "-p",
            "switchboard-operator",
            "--bin",
            "switchboard-operator",
        ])
        .output()
        .with_context(|| format!("running cargo build --profile {OPERATOR_PROFILE}"))?;
    if !out.status.success() {
        bail!("building switchboard-operator failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join("target"));
    Ok(target.join(OPERATOR_PROFILE).join("switchboard-operator"))
}

/// Peak resident set size (`VmHWM`) of process `pid`, in KiB (Linux).
pub fn peak_rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("reading /proc/<pid>/status")?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).context("no VmHWM line")?;
    line.split_whitespace().nth(1).context("no VmHWM value")?.parse().context("VmHWM is not a number")
}

/// Sums the samples of metric `name` with exactly `labels` (e.g. `kind="agent"`) in a
/// Prometheus text exposition.
pub fn metric_value(text: &str, name: &str, labels: &str) -> f64 {
    let prefix = if labels.is_empty() { format!("{name} ") } else { format!("{name}{{{labels}}} ") };
    text.lines().filter_map(|l| l.strip_prefix(&prefix)).filter_map(|v| v.trim().parse::<f64>().ok()).sum()
}
