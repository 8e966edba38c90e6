//! The real control plane for tests: `tests/cluster/up.sh` starts (or reuses) etcd,
//! kube-apiserver and kube-controller-manager on loopback; every test gets a client and a
//! namespace of its own that is deleted when the test ends.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::repo_root;

/// A running control plane.
#[derive(Clone)]
pub struct Cluster {
    /// A client with cluster-admin rights.
    pub client: Client,
    /// The kubeconfig file, for tools such as kubectl.
    pub kubeconfig: PathBuf,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("kubeconfig", &self.kubeconfig).finish_non_exhaustive()
    }
}

/// Starts the control plane unless it is up (up.sh is idempotent and locked, so parallel
/// test processes share one), and connects to it.
pub async fn cluster() -> anyhow::Result<Cluster> {
    let kubeconfig = tokio::task::spawn_blocking(up).await??;
    let client = connect(&kubeconfig).await?;
    Ok(Cluster { client, kubeconfig })
}

/// A client for the cluster described by `kubeconfig`.
pub async fn connect(kubeconfig: &Path) -> anyhow::Result<Client> {
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig).context("reading the test kubeconfig")?,
        &KubeConfigOptions::default(),
    )
    .await
    .context("loading the test kubeconfig")?;
    Client::try_from(config).context("building a client")
}

fn up() -> anyhow::Result<PathBuf> {
    let script = repo_root().join("tests/cluster/up.sh");
    let out = Command::new("bash").arg(&script).output().with_context(|| format!("running {}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("{} failed ({}):\n{}\n{}", script.display(), out.status, stdout, String::from_utf8_lossy(&out.stderr));
    }
    let path = stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("export KUBECONFIG="))
        .with_context(|| format!("up.sh printed no export line: {stdout}"))?;
    Ok(PathBuf::from(path))
}

/// A namespace that lives as long as the value; dropping it deletes the namespace.
#[derive(Debug)]
pub struct TestNamespace {
    /// The namespace's name.
    pub name: String,
    cluster: Cluster,
}

impl TestNamespace {
    /// Creates a fresh namespace named after `prefix` and this process.
    pub async fn new(cluster: &Cluster, prefix: &str) -> anyhow::Result<Self> {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "switchboard.dev/test": "true" } }
        }))?;
        Api::<Namespace>::all(cluster.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(Self { name, cluster: cluster.clone() })
    }

    /// The cluster the namespace is in.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// A client for the cluster.
    pub fn client(&self) -> Client {
        self.cluster.client.clone()
    }

    /// Runs kubectl against the cluster in this namespace; returns (success, stdout+stderr).
    pub fn kubectl(&self, args: &[&str]) -> anyhow::Result<(bool, String)> {
        kubectl(&self.cluster.kubeconfig, Some(&self.name), args)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let kubeconfig = self.cluster.kubeconfig.clone();
        let name = self.name.clone();
        // Drop may run on the test's own (now blocked) runtime, which also drives the
        // existing client's connection: delete from a thread with its own runtime and client.
        let deleted = std::thread::spawn(move || -> anyhow::Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(async {
                let client = connect(&kubeconfig).await?;
                Api::<Namespace>::all(client).delete(&name, &DeleteParams::background()).await?;
                Ok(())
            })
        })
        .join();
        if !matches!(deleted, Ok(Ok(()))) {
            eprintln!("warning: could not delete test namespace {}: {deleted:?}", self.name);
        }
    }
}

/// Runs the pinned kubectl (installed by `tests/tools/install.sh`) with `kubeconfig`.
pub fn kubectl(kubeconfig: &Path, namespace: Option<&str>, args: &[&str]) -> anyhow::Result<(bool, String)> {
    let bin = tools_bin()?.join("kubectl");
    let mut cmd = Command::new(bin);
    cmd.env("KUBECONFIG", kubeconfig);
    if let Some(ns) = namespace {
        cmd.args(["--namespace", ns]);
    }
    let out = cmd.args(args).output().context("running kubectl")?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

/// The folder with the pinned helm and kubectl, installing them on first use.
pub fn tools_bin() -> anyhow::Result<PathBuf> {
    let script = repo_root().join("tests/tools/install.sh");
    let out = Command::new("bash").arg(&script).output().context("running tests/tools/install.sh")?;
    if !out.status.success() {
        bail!("tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(PathBuf::from(stdout.lines().last().unwrap_or_default().trim()))
}

/// A control plane of its own (same binaries, other ports and state) that has never seen
/// the Switchboard CRDs (for tests that install cluster-scoped objects other tests share,
/// or must not find them); stopped and removed on drop.
#[derive(Debug)]
pub struct BareCluster {
    dir: std::path::PathBuf,
    env: Vec<(&'static str, String)>,
    /// Its kubeconfig file.
    pub kubeconfig: String,
}

impl BareCluster {
    /// Starts it (about 10 s); panics when it cannot. Its ports (the API server's, etcd's
    /// client and peer ports) are free and reserved for this test ([`crate::ports`]); when
    /// some other program took one before its server bound it (up.sh fails with the bind
    /// error), what started is stopped and it starts again on others.
    pub fn start() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let mut failed = String::new();
        for _ in 0..5 {
            let apiserver = crate::ports::free_port(crate::ports::TCP);
            // etcd's client port and its peer port, the next.
            let etcd = crate::ports::free_ports(2, crate::ports::TCP);
            let dir = std::env::temp_dir().join(format!(
                "switchboard-bare-cluster-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let env = vec![
                ("SWITCHBOARD_CLUSTER_DIR", dir.display().to_string()),
                ("SWITCHBOARD_CLUSTER_PORT", apiserver.to_string()),
                ("SWITCHBOARD_ETCD_PORT", etcd.to_string()),
            ];
            let out = Command::new("bash")
                .arg(repo_root().join("tests/cluster/up.sh"))
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .output()
                .expect("runs up.sh");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let kubeconfig =
                stdout.lines().last().unwrap_or_default().trim_start_matches("export KUBECONFIG=").to_owned();
            // Stopped and removed on drop, a failed start too.
            let cluster = Self { dir, env, kubeconfig };
            if out.status.success() {
                return cluster;
            }
            failed = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(crate::ports::address_in_use(&failed), "up.sh failed: {failed}");
            eprintln!("a port of the bare control plane was taken before its server bound it; picking others");
        }
        panic!("up.sh found a port taken five times; the last time: {failed}")
    }
}

impl Drop for BareCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("tests/cluster/down.sh"))
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
