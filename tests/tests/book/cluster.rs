//! The book's cluster commands (```` ```sh,cluster ````: the install page's `helm install`,
//! `kubectl apply -f examples/banking`, the copy of the gateway's public key, the demo tool
//! server and `kubectl get agents`) run as written on the real control plane the tests share
//! (`tests/cluster/up.sh`: a real kube-apiserver), with the pinned `helm` and `kubectl`.
//!
//! What changes, so that the test runs beside others on one control plane (each change is a
//! plain text substitution, below):
//!
//! - the release is `switchboard-<the test's namespace>` in a namespace of the test's own
//!   instead of `switchboard` in `switchboard-system` (the chart's ClusterRoles are named
//!   after the release), and the chart's ConfigMap of the gateway's key is named after it;
//! - `--set crds.install=false`: the 1.20 test server cannot store the CRDs' CEL rules (see
//!   `tests/cluster/install.sh`); the test installs them without (`install_crds`);
//! - `kubectl`'s namespace (its kubeconfig context's) is a second namespace of the test's;
//! - no pod runs on the control plane alone: after the block that installs the chart, the
//!   test publishes a gateway public key into the chart's ConfigMap as the gateway does when
//!   it starts (`switchboard_gateway::publish`), and checks that the page's commands copied
//!   exactly that key. The real-node stage (`tests/cluster/e2e-smoke.sh`) runs the same steps
//!   with the chart's pods running.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use switchboard_crds::gateway_key::PublicKey;
use switchboard_gateway::publish::publish;
use switchboard_tests::cluster::{TestNamespace, cluster, tools_bin};
use switchboard_tests::helm::{KEY, helm};
use switchboard_tests::manifests::install_crds;
use switchboard_tests::repo_root;

use super::{blocks, markdown_pages, missing_lines, page, tempdir};

/// How long one cluster block may run.
const LIMIT: Duration = Duration::from_secs(180);

/// What a page's cluster command becomes here.
fn rewrite(text: &str, release: &str, release_ns: &str) -> String {
    text.replace(
        "helm install switchboard charts/switchboard",
        &format!("helm install {release} charts/switchboard --set crds.install=false"),
    )
    .replace("--namespace switchboard-system", &format!("--namespace {release_ns}"))
    .replace("-n switchboard-system", &format!("-n {release_ns}"))
    .replace("get configmap switchboard-gateway-public-key", &format!("get configmap {release}-gateway-public-key"))
}

/// Uninstalls the release when the test ends, however it ends: its ClusterRoles outlive
/// the namespaces.
struct Release<'a> {
    name: String,
    namespace: String,
    kubeconfig: &'a Path,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        let _ = helm(Some(self.kubeconfig), &["uninstall", &self.name, "--namespace", &self.namespace]);
    }
}

/// Runs `script` with bash from the repository root (its output into `log`); panics unless
/// it exits 0 in time and prints every line of `expected`.
fn run(what: &str, script: &str, env: &[(&str, &Path)], expected: &str, log: &Path) {
    let bin = tools_bin().expect("tests/tools/install.sh");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let file = std::fs::File::create(log).expect("log file");
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(repo_root())
        .env("PATH", path)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} ran past {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(log).unwrap_or_default();
    assert!(status.success(), "{what} failed ({status}):\n{output}");
    let missing = missing_lines(&output, expected);
    assert!(missing.is_empty(), "{what} did not print {missing:?}; it printed:\n{output}");
}

#[tokio::test]
async fn the_books_cluster_commands_run_on_the_control_plane() {
    let mut ran = Vec::new();
    for name in markdown_pages() {
        let all = blocks(&page(&name));
        if !all.iter().any(|b| b.info == "sh,cluster") {
            continue;
        }
        let cluster = cluster().await.expect("control plane");
        install_crds(&cluster.client).await.expect("CRDs");
        let release_ns = TestNamespace::new(&cluster, "book-chart").await.expect("namespace");
        let agents_ns = TestNamespace::new(&cluster, "book-agents").await.expect("namespace");
        let release = format!("switchboard-{}", release_ns.name);
        let _release =
            Release { name: release.clone(), namespace: release_ns.name.clone(), kubeconfig: &cluster.kubeconfig };
        let home = tempdir(&format!("cluster-{}", name.replace('/', "-")));
        // kubectl's own namespace: the context's, as a reader's kubeconfig sets it.
        let kubeconfig = home.join("kubeconfig");
        std::fs::copy(&cluster.kubeconfig, &kubeconfig).expect("copy the kubeconfig");
        let env = [("KUBECONFIG", kubeconfig.as_path()), ("HOME", home.as_path())];
        let set_ns = format!("kubectl config set-context --current --namespace={}", agents_ns.name);
        run("setting kubectl's namespace", &set_ns, &env, "", &home.join("context.log"));
        let mut published = false;
        for (i, block) in all.iter().enumerate() {
            if block.info != "sh,cluster" {
                continue;
            }
            let expected: String = all[i + 1..]
                .iter()
                .take_while(|b| b.info.starts_with("text,"))
                .filter(|b| b.info == "text,output")
                .map(|b| b.text.as_str())
                .collect();
            let what = format!("{name}:{} `{}`", block.line, block.text.trim());
            let log = home.join(format!("block-{}.log", block.line));
            run(&what, &rewrite(&block.text, &release, &release_ns.name), &env, &expected, &log);
            if block.text.contains("helm install") {
                // What the chart's gateway does when it starts: publish its public key.
                let key: PublicKey = KEY.parse().expect("a key");
                let config_map = format!("{release}-gateway-public-key");
                publish(cluster.client.clone(), &release_ns.name, &config_map, &key).await.expect("publish");
                published = true;
            }
        }
        assert!(published, "{name}: no `sh,cluster` block installs the chart");
        // The page's commands copied the gateway's key to where the demo tool server reads it.
        let copied = Api::<ConfigMap>::namespaced(cluster.client.clone(), &agents_ns.name)
            .get("switchboard-gateway-public-key")
            .await
            .expect("the copied ConfigMap");
        let value = copied.data.and_then(|d| d.get("public-key").cloned());
        assert_eq!(value.as_deref(), Some(KEY), "{name}: the copy of the gateway's key");
        let _ = std::fs::remove_dir_all(&home);
        ran.push(name);
    }
    assert_eq!(ran, ["operating/install.md"], "the pages with cluster commands");
}

#[test]
fn cluster_commands_are_rewritten_for_a_shared_control_plane() {
    let text = "helm install switchboard charts/switchboard --namespace switchboard-system --create-namespace\n\
                kubectl -n switchboard-system \\\n  get configmap switchboard-gateway-public-key -o x";
    assert_eq!(
        rewrite(text, "switchboard-t", "t"),
        "helm install switchboard-t charts/switchboard --set crds.install=false --namespace t --create-namespace\n\
         kubectl -n t \\\n  get configmap switchboard-t-gateway-public-key -o x"
    );
}
