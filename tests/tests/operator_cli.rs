//! The `switchboard-operator` binary: `render` prints manifests that pass
//! `kubernetes-validate --strict` for Kubernetes 1.33 and apply with `--dry-run=server` on
//! the test server (its HPA version is autoscaling/v2beta2, so that render asks for it);
//! invalid files print the validator's problems and exit 1; `run` serves health and
//! metrics, reconciles, and on SIGTERM stops cleanly and releases its Lease.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use std::process::Command;
use std::time::Duration;

use common::{namespace, wait_accepted};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use switchboard_tests::cluster::{BareCluster, tools_bin};
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::operator_binary;
use switchboard_tests::process::{log_filter, spawn_serving};
use switchboard_tests::repo_root;
use switchboard_tests::wait::until;

const BANKING: [&str; 4] = ["banking", "disputes", "idv", "triage"];

fn render(args: &[&str]) -> (bool, String, String) {
    let bin = operator_binary().expect("operator binary");
    let out = Command::new(bin).arg("render").args(args).output().expect("render runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// The Example Bank's agents, with the fee schedule (a ConfigMap) the banking agent's fees
/// skill reads.
fn banking_files() -> Vec<String> {
    BANKING
        .iter()
        .chain(&["fees"])
        .map(|n| repo_root().join(format!("examples/banking/{n}.yaml")).display().to_string())
        .collect()
}

fn file_args(files: &[String]) -> Vec<&str> {
    files.iter().flat_map(|f| ["-f", f.as_str()]).collect()
}

fn kinds(yaml: &str) -> Vec<String> {
    yaml.lines().filter_map(|l| l.strip_prefix("kind: ")).map(str::to_owned).collect()
}

#[test]
fn render_output_passes_kubernetes_validate_strict_for_1_33() {
    let files = banking_files();
    let (ok, out, err) = render(&file_args(&files));
    assert!(ok, "{err}");
    assert_eq!(kinds(&out).iter().filter(|k| *k == "Deployment").count(), 4, "{out}");
    assert_eq!(kinds(&out).iter().filter(|k| *k == "HorizontalPodAutoscaler").count(), 1, "{out}");
    assert!(out.contains("apiVersion: autoscaling/v2\n"), "render writes the current HPA version by default");
    // The banking agent's skill, its data context read from the ConfigMap, is in what the pods get.
    assert!(out.contains("International transfer: 15.00 GBP per transfer"), "{out}");
    let dir = tempdir("render");
    let path = dir.join("rendered.yaml");
    std::fs::write(&path, &out).expect("write");
    let validate = tools_bin().expect("tools").join("kubernetes-validate");
    let res = Command::new(validate)
        .args(["--strict", "-k", "1.33.0", "--quiet"])
        .arg(&path)
        .output()
        .expect("kubernetes-validate runs");
    let text = format!("{}{}", String::from_utf8_lossy(&res.stdout), String::from_utf8_lossy(&res.stderr));
    assert!(res.status.success(), "kubernetes-validate --strict failed:\n{text}");
    // The validator does fail on a bad manifest (so the pass above means something).
    std::fs::write(&path, out.replacen("containerPort: 8080", "containerPort: eighty", 1)).expect("write");
    let res = Command::new(tools_bin().expect("tools").join("kubernetes-validate"))
        .args(["--strict", "-k", "1.33.0", "--quiet"])
        .arg(&path)
        .output()
        .expect("runs");
    assert!(!res.status.success(), "a broken manifest must fail validation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_output_applies_with_server_dry_run() {
    let ns = namespace("op-dryrun").await;
    let files = banking_files();
    let mut args = file_args(&files);
    args.extend(["--hpa-api-version", "autoscaling/v2beta2"]);
    let (ok, out, err) = render(&args);
    assert!(ok, "{err}");
    // Rendered objects carry the namespace of their Agent (here none given: default).
    let out = out.replace("namespace: default\n", &format!("namespace: {}\n", ns.name));
    let dir = tempdir("dryrun");
    let path = dir.join("rendered.yaml");
    std::fs::write(&path, &out).expect("write");
    let (ok, text) =
        ns.kubectl(&["apply", "--server-side", "--dry-run=server", "-f", &path.to_string_lossy()]).expect("kubectl");
    assert!(ok, "{text}");
    assert_eq!(text.matches("serverside-applied (server dry run)").count(), 13, "{text}");
}

#[test]
fn render_prints_every_problem_and_exits_1() {
    let dir = tempdir("invalid");
    let yaml = common::workflow("wf") + &common::agent("lost", "nobody", "wf", "  handoffs: [{agent: ghost}]\n");
    std::fs::write(dir.join("agent.yaml"), yaml).expect("write");
    let (ok, out, err) = render(&["-f", &dir.to_string_lossy()]);
    assert!(!ok);
    assert!(out.is_empty(), "nothing rendered for an invalid Agent: {out}");
    assert!(err.contains("PersonaNotFound"), "{err}");
    assert!(err.contains("HandoffTargetNotFound"), "{err}");
}

fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_health_and_metrics_and_stops_on_sigterm() {
    let ns = namespace("op-binary").await;
    let (mut child, port, log) = spawn_serving(
        Command::new(operator_binary().expect("binary"))
            .args(["run", "--namespace", &ns.name, "--operator-namespace", &ns.name])
            .args(["--metrics-addr", "127.0.0.1:0", "--identity", "binary"])
            .env("KUBECONFIG", &ns.cluster().kubeconfig)
            .env("RUST_LOG", log_filter("warn")),
    )
    .expect("operator starts");
    until("/readyz 200", Duration::from_secs(20), || async {
        Ok::<_, ()>(get(port, "/readyz").filter(|(c, _)| *c == 200))
    })
    .await
    .expect("ready");
    assert_eq!(get(port, "/healthz").map(|(c, _)| c), Some(200));
    assert_eq!(get(port, "/nope").map(|(c, _)| c), Some(404));

    let yaml = common::objects("p", "wf") + &common::agent("bin", "p", "wf", "");
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");
    wait_accepted(&ns, "bin").await;
    let (_, metrics) = get(port, "/metrics").expect("metrics");
    for needle in [
        "switchboard_operator_reconciles_total{kind=\"agent\"}",
        "switchboard_operator_reconcile_duration_seconds_bucket{kind=\"agent\"",
        "switchboard_operator_leader 1",
    ] {
        assert!(metrics.contains(needle), "/metrics lacks {needle}:\n{metrics}");
    }

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let mut exit = None;
    for _ in 0..200 {
        exit = child.try_wait().expect("wait");
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let exit = exit.expect("the operator exits within 20 s of SIGTERM");
    let stderr = log.lock().expect("the log").clone();
    assert!(exit.success(), "exit {exit:?}: {stderr}");
    let leases: Api<Lease> = Api::namespaced(ns.client(), &ns.name);
    let lease = leases.get("switchboard-operator").await.expect("lease");
    assert_eq!(lease.spec.and_then(|s| s.holder_identity), None, "the Lease is released on SIGTERM");
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("switchboard-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn run_without_the_crds_exits_with_an_install_hint() {
    let cluster = BareCluster::start();
    let out = Command::new(operator_binary().expect("binary"))
        .args(["run", "--metrics-addr", "127.0.0.1:0", "--identity", "no-crds"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the operator runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the operator must not start without its CRDs: {stderr}");
    assert!(
        stderr.contains("CustomResourceDefinition is not installed")
            && stderr.contains("kubectl apply --server-side -f crds/"),
        "the error says what is missing and how to install it: {stderr}"
    );
}

#[test]
fn run_takes_a_well_formed_gateway_key_or_the_configmap_it_is_published_in_not_both() {
    let run = |args: &[&str]| {
        let out = Command::new(operator_binary().expect("binary")).arg("run").args(args).output().expect("runs");
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let key = "9b36701a113be708c12f911d788b12b7ad7805405a5adf9796e34fb893e92092";
    let (ok, stderr) = run(&["--gateway-public-key", key, "--gateway-key-config-map", "gateway-public-key"]);
    assert!(!ok && stderr.contains("cannot be used with"), "{stderr}");
    let (ok, stderr) = run(&["--gateway-public-key", "abcd"]);
    assert!(!ok && stderr.contains("2 bytes; an Ed25519 public key has 32"), "a malformed key says why: {stderr}");
}
