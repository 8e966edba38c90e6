//! An Agent's variants (`spec.variants`) against the real control plane and the operator:
//! weights that do not add up and a variant whose Persona does not exist are refused with
//! a reason a person can act on; once fixed, the runtime pods' spec holds every variant and
//! the routing table their weights; changing only the weights rewrites the table and rolls
//! no pod.

mod common;

use std::time::Duration;

use common::{accepted, agent, setup, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use switchboard_crds::{Agent, RuntimeSpec};
use switchboard_operator::build::CONFIG_HASH_ANNOTATION;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::routing_table;
use switchboard_tests::wait::until;

fn variants(control: u32, brief: u32, brief_persona: &str) -> String {
    format!(
        "  variants:\n    - {{name: control, weight: {control}}}\n    - {{name: brief, weight: {brief}, personaRef: {{name: {brief_persona}}}, systemPrompt: \"You are {{name}}. Be brief.\"}}\n"
    )
}

async fn refused(agents: &Api<Agent>, name: &str, reason: &str) -> String {
    let condition = until(&format!("Accepted=False ({reason})"), Duration::from_secs(20), || async {
        let a = agents.get(name).await?;
        let current = a.status.as_ref().and_then(|s| s.observed_generation) == a.metadata.generation;
        Ok::<_, anyhow::Error>(accepted(&a).filter(|c| current && c.status == "False" && c.reason == reason))
    })
    .await
    .expect("refused");
    condition.message
}

/// Waits until the routing table gives Agent `front` these weights.
async fn wait_weights(ns: &switchboard_tests::cluster::TestNamespace, control: u32, brief: u32) {
    let key = format!("{}/front", ns.name);
    let want = [("control", control), ("brief", brief)];
    until(&format!("the routing table's weights {want:?}"), Duration::from_secs(20), || async {
        let table = routing_table(ns).await?;
        let found = table.as_ref().and_then(|t| t.variants.get(&key));
        let ok = found.is_some_and(|v| v.iter().map(|v| (v.name.as_str(), v.weight)).eq(want));
        Ok::<_, anyhow::Error>(ok.then_some(()))
    })
    .await
    .expect("routing table");
}

fn config_hash(d: &Deployment) -> String {
    d.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION).cloned())
        .expect("the pod template's config hash")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variants_are_checked_resolved_for_the_pods_and_weighed_in_the_routing_table() {
    let (ns, op) = setup("op-variants").await;
    let client = ns.client();
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns.name);
    apply_yaml(&client, &ns.name, &common::objects("clerk", "desk")).await.expect("persona and workflow");

    // Weights that add up to 90 (the 1.20 test server has no CEL: the operator says it).
    let yaml = agent("front", "clerk", "desk", &variants(60, 30, "clerk"));
    apply_yaml(&client, &ns.name, &yaml).await.expect("apply");
    let message = refused(&agents, "front", "InvalidField").await;
    assert!(message.contains("add up to 90") && message.contains("must add up to 100"), "{message}");

    // A variant's Persona that does not exist.
    let yaml = agent("front", "clerk", "desk", &variants(90, 10, "terse"));
    apply_yaml(&client, &ns.name, &yaml).await.expect("apply");
    let message = refused(&agents, "front", "PersonaNotFound").await;
    assert!(message.contains("persona \"terse\" of variant \"brief\" does not exist"), "{message}");

    // It appears: accepted without a restart; the pods' spec holds both variants.
    apply_yaml(&client, &ns.name, &common::persona("terse", "Tess")).await.expect("persona");
    wait_accepted(&ns, "front").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let spec = until("the RuntimeSpec with variants", Duration::from_secs(20), || async {
        let Some(cm) = cms.get_opt("front").await? else { return Ok::<_, anyhow::Error>(None) };
        let text = cm.data.and_then(|d| d.get("runtime.json").cloned()).unwrap_or_default();
        Ok(RuntimeSpec::parse(&text).ok().filter(|s| s.variants.len() == 2))
    })
    .await
    .expect("runtime spec");
    let brief = spec.variant("brief").expect("brief");
    assert_eq!(brief.persona.spec.display_name, "Tess");
    assert_eq!(brief.persona.spec.system_prompt, "You are {name}. Be brief.");
    wait_weights(&ns, 90, 10).await;
    let before = config_hash(&deployments.get("front").await.expect("deployment"));

    // Promote: weights only. The table follows; the pods' spec and template do not change.
    let yaml = agent("front", "clerk", "desk", &variants(0, 100, "terse"));
    apply_yaml(&client, &ns.name, &yaml).await.expect("apply");
    wait_weights(&ns, 0, 100).await;
    wait_accepted(&ns, "front").await;
    let after = deployments.get("front").await.expect("deployment");
    assert_eq!(config_hash(&after), before, "no pod rolls for new weights");
    let cm = cms.get("front").await.expect("configmap");
    let text = cm.data.and_then(|d| d.get("runtime.json").cloned()).expect("runtime.json");
    assert_eq!(RuntimeSpec::parse(&text).expect("spec"), spec, "the pods' spec is unchanged");
    assert!(!op.is_finished(), "the same operator throughout");
}
