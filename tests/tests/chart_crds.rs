//! The chart's CRDs upgrade with the chart: a cluster installed from an older chart, whose
//! Agent CRD lacks a field, gets the field from `helm upgrade` (Helm never upgrades a chart's
//! `crds/` folder, so the chart ships them as templates), and `helm uninstall` keeps the
//! CRDs and with them every Agent. On a control plane of its own: the test installs old
//! CRDs, which other tests must not see.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use switchboard_crds::Agent;
use switchboard_tests::cluster::{BareCluster, connect, tools_bin};
use switchboard_tests::manifests::{apply_yaml, crds_for_test_server};
use switchboard_tests::repo_root;
use switchboard_tests::wait::until;

const RELEASE_NS: &str = "switchboard-system";

fn helm(kubeconfig: &str, args: &[&str]) -> String {
    let out = Command::new(tools_bin().expect("tools").join("helm"))
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .output()
        .expect("helm runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "helm {args:?}: {text}");
    text
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The chart as it is, copied to `to`, with its CRD files as the 1.20 test server can store
/// them (no CEL rules) and, for an "older chart", without the Agent field `drop`.
fn chart_copy(to: &Path, drop: Option<&str>) -> PathBuf {
    copy_dir(&repo_root().join("charts/switchboard"), to);
    let dir = to.join(switchboard_crds::manifests::CHART_CRDS_DIR.trim_start_matches("../charts/switchboard/"));
    for (file, crd) in crds_for_test_server().expect("CRDs") {
        let mut value = serde_json::to_value(&crd).expect("json");
        if let (Some(field), "Agent") = (drop, crd.spec.names.kind.as_str()) {
            let spec = &mut value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
            spec["properties"].as_object_mut().expect("properties").remove(field).expect("the field exists today");
        }
        let yaml = serde_yaml::to_string(&value).expect("yaml");
        std::fs::write(dir.join(&file), format!("{}{yaml}", switchboard_crds::manifests::HEADER)).expect("write");
    }
    to.to_path_buf()
}

fn has_replicas(crd: &CustomResourceDefinition) -> bool {
    crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("spec"))
        .and_then(|s| s.properties.as_ref())
        .is_some_and(|p| p.contains_key("replicas"))
}

const AGENT: &str = "---\napiVersion: switchboard.dev/v1alpha1\nkind: Agent\nmetadata: {name: teller}\nspec:\n  mode: text\n  personaRef: {name: p}\n  workflowRef: {name: wf}\n  replicas: 3\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_brings_a_new_crd_field_and_uninstall_keeps_the_crds() {
    let cluster = tokio::task::spawn_blocking(BareCluster::start).await.expect("control plane");
    let kc = cluster.kubeconfig.clone();
    let client = connect(Path::new(&kc)).await.expect("client");
    let work = std::env::temp_dir().join(format!("switchboard-chart-crds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let old = chart_copy(&work.join("old"), Some("replicas"));
    let new = chart_copy(&work.join("new"), None);
    let (old, new) = (old.to_string_lossy().into_owned(), new.to_string_lossy().into_owned());

    // An older chart: its Agent CRD has no spec.replicas.
    helm(&kc, &["install", "sb", &old, "--namespace", RELEASE_NS, "--create-namespace", "--wait=false"]);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let agent_crd = || async { crds.get_opt("agents.switchboard.dev").await };
    let installed = until("the Agent CRD", Duration::from_secs(30), || async { agent_crd().await }).await.expect("CRD");
    assert!(!has_replicas(&installed), "the old chart's CRD lacks the field");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let bank: Namespace = serde_json::from_value(serde_json::json!({ "metadata": { "name": "bank" } })).expect("ns");
    namespaces.create(&PostParams::default(), &bank).await.expect("namespace");
    let agents: Api<Agent> = Api::namespaced(client.clone(), "bank");
    let replicas = || async {
        apply_yaml(&client, "bank", AGENT).await?;
        Ok::<_, anyhow::Error>(agents.get("teller").await?.spec.replicas)
    };
    until("the Agent to be stored", Duration::from_secs(30), || async { replicas().await.map(|_| Some(())) })
        .await
        .expect("Agent stored");
    assert_eq!(replicas().await.expect("apply"), None, "the old schema prunes the unknown field");

    // helm upgrade to the current chart brings the field.
    helm(&kc, &["upgrade", "sb", &new, "--namespace", RELEASE_NS, "--wait=false"]);
    until("the upgraded Agent CRD", Duration::from_secs(30), || async {
        Ok::<_, kube::Error>(agent_crd().await?.filter(has_replicas).map(|_| ()))
    })
    .await
    .expect("helm upgrade updates the CRD");
    until("spec.replicas kept", Duration::from_secs(30), || async {
        Ok::<_, anyhow::Error>((replicas().await? == Some(3)).then_some(()))
    })
    .await
    .expect("the new field is stored");

    // Uninstalling keeps the CRDs, hence the Agents.
    helm(&kc, &["uninstall", "sb", "--namespace", RELEASE_NS]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(agent_crd().await.expect("get").is_some(), "helm uninstall keeps the CRDs");
    assert!(agents.get_opt("teller").await.expect("get").is_some(), "and every Agent");
    let _ = std::fs::remove_dir_all(&work);
    drop(cluster);
}
