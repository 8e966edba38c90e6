//! The Helm chart: it lints, renders manifests valid for a current Kubernetes, installs on
//! the real control plane, and its RBAC is enough for the real controller — run here as
//! the chart's ServiceAccount (impersonated) — to reconcile the banking examples.

use std::process::Command;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use switchboard_crds::Agent;
use switchboard_crds::common::{CONDITION_ACCEPTED, find_condition};
use switchboard_tests::cluster::{TestNamespace, cluster, tools_bin};
use switchboard_tests::manifests::{apply_path, install_crds};
use switchboard_tests::operator::{self, routing_table};
use switchboard_tests::{repo_root, wait};

fn chart() -> String {
    repo_root().join("charts/switchboard").to_string_lossy().into_owned()
}

fn helm(kubeconfig: Option<&std::path::Path>, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(tools_bin().expect("tools").join("helm"));
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let out = cmd.args(args).output().expect("helm runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn the_chart_lints_and_renders_valid_manifests() {
    let chart = chart();
    let (ok, out) = helm(None, &["lint", "--strict", &chart]);
    assert!(ok, "{out}");
    for extra in [&[][..], &["--set", "operator.watchNamespace=bank", "--set", "runtime.hpaApiVersion=autoscaling/v2"]]
    {
        let mut args = vec!["template", "sb", &chart, "--namespace", "switchboard-system"];
        args.extend_from_slice(extra);
        let (ok, rendered) = helm(None, &args);
        assert!(ok, "{rendered}");
        if extra.is_empty() {
            assert!(
                rendered.contains("kind: ClusterRoleBinding")
                    && !rendered.contains("kind: RoleBinding\nmetadata:\n  name: sb-switchboard\n")
            );
        } else {
            assert!(
                rendered.contains("namespace: bank") && rendered.contains("value: \"autoscaling/v2\""),
                "{rendered}"
            );
        }
        let file = std::env::temp_dir().join(format!("switchboard-chart-{}-{}.yaml", std::process::id(), extra.len()));
        std::fs::write(&file, &rendered).expect("write");
        let out = Command::new(tools_bin().expect("tools").join("kubernetes-validate"))
            .args(["--strict", "-k", "1.33.0", &file.to_string_lossy()])
            .output()
            .expect("kubernetes-validate runs");
        let _ = std::fs::remove_file(&file);
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !text.contains("ERROR"), "{text}");
        assert!(text.contains("passed for resource deployment/sb-switchboard"), "{text}");
    }
}

#[tokio::test]
async fn the_chart_installs_and_its_rbac_suffices_for_the_controller() {
    let cluster = cluster().await.expect("control plane");
    install_crds(&cluster.client).await.expect("CRDs");
    let ns = TestNamespace::new(&cluster, "chart").await.expect("namespace");
    let release = ns.name.clone();
    // --skip-crds: the test server already has the CRDs (without the CEL rules it cannot
    // store, see install_crds); other tests share them.
    let (ok, out) = helm(
        Some(&cluster.kubeconfig),
        &["install", &release, &chart(), "--namespace", &ns.name, "--skip-crds", "--wait=false"],
    );
    assert!(ok, "{out}");

    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(ns.client(), &ns.name);
    let deployment = deployments.get(&format!("{release}-switchboard")).await.expect("operator Deployment");
    let pod = deployment.spec.and_then(|s| s.template.spec).expect("pod spec");
    assert_eq!(pod.containers[0].command.as_deref(), Some(&["switchboard-operator".to_owned(), "run".to_owned()][..]));

    // The controller, with the chart ServiceAccount's rights only.
    let account = format!("system:serviceaccount:{}:{release}-switchboard", ns.name);
    let mut config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&cluster.kubeconfig).expect("kubeconfig"),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    config.auth_info.impersonate = Some(account);
    let as_chart = Client::try_from(config).expect("client");
    let args = operator::args(&ns.name, "chart-operator", Default::default());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let metrics = switchboard_operator::metrics::Metrics::new().expect("metrics");
    let task = tokio::spawn(switchboard_operator::run::run(args, as_chart, metrics, shutdown.clone()));

    apply_path(&ns.client(), &ns.name, &repo_root().join("examples/banking")).await.expect("examples apply");
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    wait::until("every Agent Accepted=True", Duration::from_secs(60), || {
        let agents = agents.clone();
        async move {
            let list = agents.list(&Default::default()).await?;
            let accepted = list.items.iter().all(|a| {
                a.status
                    .as_ref()
                    .and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED))
                    .is_some_and(|c| c.status == "True")
            });
            Ok::<_, kube::Error>((list.items.len() == 4 && accepted).then_some(()))
        }
    })
    .await
    .expect("the controller reconciles with the chart's RBAC");
    // The table is published shortly (debounced) after the statuses.
    wait::until("a routing table with 4 routes", Duration::from_secs(10), || async {
        let table = routing_table(&ns).await?;
        Ok::<_, anyhow::Error>(table.filter(|t| t.routes.len() == 4))
    })
    .await
    .expect("the controller publishes the routing table with the chart's RBAC");
    assert!(!task.is_finished(), "the operator stopped: missing permissions?");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("operator stops within 30 s")
        .expect("operator task")
        .expect("operator ends without error");

    let (ok, out) = helm(Some(&cluster.kubeconfig), &["uninstall", &release, "--namespace", &ns.name]);
    assert!(ok, "{out}");
}
