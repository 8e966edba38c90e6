//! An Agent's knowledge from ConfigMaps, on the real control plane (issue 28): a missing
//! ConfigMap or one over the size limit is `Accepted=False` with a reason a person can act
//! on; once it exists its text reaches the pods' RuntimeSpec; and editing it rolls the pods
//! (the pod template's config hash changes), as a Persona edit does.

mod common;

use std::time::Duration;

use common::{accepted, agent, objects, setup, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use switchboard_crds::Agent;
use switchboard_crds::contract::RUNTIME_SPEC_FILE;
use switchboard_operator::build::CONFIG_HASH_ANNOTATION;
use switchboard_tests::cluster::TestNamespace;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::wait::until;

const KNOWLEDGE: &str = "  knowledge:\n    dataContext: {configMapRef: {name: hours}}\n  skills:\n    - name: fees\n      description: Fees and limits.\n      dataContext: {configMapRef: {name: fees, key: fees.md}}\n";

async fn wait_refused(ns: &TestNamespace, name: &str, reason: &str) -> String {
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    until(&format!("Agent {name} Accepted=False ({reason})"), Duration::from_secs(30), || async {
        let a = agents.get(name).await?;
        Ok::<_, kube::Error>(accepted(&a).filter(|c| c.status == "False" && c.reason == reason).map(|c| c.message))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn set_config_map(ns: &TestNamespace, name: &str, key: &str, text: &str) {
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {key: text}
    });
    api.patch(name, &PatchParams::apply("a-person").force(), &Patch::Apply(&cm)).await.expect("ConfigMap applied");
}

/// The config hash of the Deployment's pod template and the RuntimeSpec the pods read.
async fn running(ns: &TestNamespace, name: &str) -> (String, String) {
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), &ns.name);
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let hash = deployments
        .get(name)
        .await
        .expect("Deployment")
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION).cloned())
        .expect("config hash");
    let spec = configmaps.get(name).await.expect("runtime ConfigMap").data.unwrap_or_default();
    (hash, spec.get(RUNTIME_SPEC_FILE).cloned().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_maps_an_agent_reads_are_checked_resolved_and_roll_the_pods() {
    let (ns, _op) = setup("op-knowledge").await;
    apply_yaml(&ns.client(), &ns.name, &(objects("p", "wf") + &agent("bank", "p", "wf", KNOWLEDGE)))
        .await
        .expect("apply");

    // Missing: refused, saying which ConfigMap and how to create it.
    let message = wait_refused(&ns, "bank", "ConfigMapNotFound").await;
    assert!(
        message.contains("ConfigMap \"fees\" does not exist") && message.contains("kubectl create configmap fees"),
        "{message}"
    );
    assert!(message.contains("ConfigMap \"hours\" does not exist"), "every missing one is named: {message}");

    // Created (by a person, unlabelled): the ConfigMap watch wakes the Agent.
    set_config_map(&ns, "hours", "hours.md", "Open 9 to 5.").await;
    set_config_map(&ns, "fees", "fees.md", "International transfer: 15.00 GBP").await;
    wait_accepted(&ns, "bank").await;
    let (first_hash, spec) = running(&ns, "bank").await;
    assert!(spec.contains("International transfer: 15.00 GBP") && spec.contains("Open 9 to 5."), "{spec}");

    // Edited: the pods get the new text, and the pod template's hash changes (a rollout).
    // The operator writes the runtime ConfigMap and the Deployment concurrently, and the two
    // reads are not one snapshot, so wait for both to show the edit rather than asserting
    // on a read that may fall between the two writes (it did once in CI).
    set_config_map(&ns, "fees", "fees.md", "International transfer: 20.00 GBP").await;
    let (hash, spec) = until(
        "the edited fee schedule in the RuntimeSpec and a new pod-template hash (a rollout)",
        Duration::from_secs(30),
        || async {
            let (hash, spec) = running(&ns, "bank").await;
            Ok::<_, anyhow::Error>((spec.contains("20.00 GBP") && hash != first_hash).then_some((hash, spec)))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("a ConfigMap edit rolls the pods: {e}"));
    assert!(!spec.contains("15.00 GBP"), "{spec}");

    // Oversized: refused with the sizes; what runs keeps running.
    set_config_map(&ns, "fees", "fees.md", &"x".repeat(70_000)).await;
    let message = wait_refused(&ns, "bank", "KnowledgeTooLarge").await;
    assert!(
        message.contains("more than spec.knowledge.maxBytes 65536") && message.contains("skill fees 70000"),
        "{message}"
    );
    let (kept, _) = running(&ns, "bank").await;
    assert_eq!(kept, hash, "the pods keep the last accepted configuration");
}
