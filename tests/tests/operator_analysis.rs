//! An Agent's call analysis (`spec.record.analysis`) against the real control plane and the
//! operator: the routing table carries it to the gateways, and changing it — switching it
//! on, changing its fields, switching it off — rewrites the table and rolls no pod (the
//! runtime never reads it, so the pods' spec and their template's config hash stay as
//! they were). The capacity settings (`spec.capacity`), which only the gateway reads too,
//! roll none either.

mod common;

use std::time::Duration;

use common::{agent, setup, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use switchboard_crds::RuntimeSpec;
use switchboard_crds::routing::Route;
use switchboard_operator::build::CONFIG_HASH_ANNOTATION;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::routing_table;
use switchboard_tests::wait::until;

fn analysis(fields: &[&str]) -> String {
    let mut yaml = "  record:\n    analysis:\n      fields:\n".to_owned();
    for field in fields {
        yaml += &format!("        - {{name: {field}, type: boolean, description: \"true when {field}\"}}\n");
    }
    yaml
}

/// Waits until the routing table's route of `front` passes `check`.
async fn wait_route(ns: &switchboard_tests::cluster::TestNamespace, what: &str, check: impl Fn(&Route) -> bool) {
    until(what, Duration::from_secs(20), || async {
        let table = routing_table(ns).await?;
        let route = table.and_then(|t| t.routes.into_iter().find(|r| r.name == "front"));
        Ok::<_, anyhow::Error>(route.filter(|r| check(r)).map(|_| ()))
    })
    .await
    .expect("routing table");
}

fn fields(route: &Route) -> Vec<String> {
    route.analysis.iter().flat_map(|a| a.fields.iter().map(|f| f.name.clone())).collect()
}

/// A change of the Agent's spec (the lines added to it), what it is, and what the routing
/// table then says.
type Step = (String, &'static str, fn(&Route) -> bool);

fn config_hash(d: &Deployment) -> String {
    d.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION).cloned())
        .expect("the pod template's config hash")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analysis_and_capacity_settings_reach_the_routing_table_and_roll_no_pod() {
    let (ns, op) = setup("op-analysis").await;
    let client = ns.client();
    apply_yaml(&client, &ns.name, &common::objects("clerk", "desk")).await.expect("persona and workflow");
    apply_yaml(&client, &ns.name, &agent("front", "clerk", "desk", "")).await.expect("apply");
    wait_accepted(&ns, "front").await;
    wait_route(&ns, "front routed without analysis", |r| r.analysis.is_none()).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let hash = until("the Deployment", Duration::from_secs(20), || async {
        Ok::<_, anyhow::Error>(deployments.get_opt("front").await?.map(|d| config_hash(&d)))
    })
    .await
    .expect("deployment");
    let pods_spec = || async {
        let cm = cms.get("front").await.expect("configmap");
        let text = cm.data.and_then(|d| d.get("runtime.json").cloned()).expect("runtime.json");
        RuntimeSpec::parse(&text).expect("spec")
    };
    let spec = pods_spec().await;

    // Analysis on, its fields changed, capacity settings changed, analysis off: each reaches
    // the table; the pods' spec and template never change.
    let steps: [Step; 4] = [
        (analysis(&["resolved"]), "analysis with resolved", |r| fields(r) == ["resolved"]),
        (analysis(&["resolved", "follow_up"]), "analysis with follow_up", |r| fields(r) == ["resolved", "follow_up"]),
        (
            analysis(&["resolved", "follow_up"])
                + "  capacity: {priority: 7, whenFull: refuse, holdMessage: Please hold.}\n",
            "capacity priority 7",
            |r| r.capacity.priority == 7 && r.capacity.hold_message.as_deref() == Some("Please hold."),
        ),
        (String::new(), "analysis off", |r| r.analysis.is_none() && r.capacity.priority == 0),
    ];
    for (extra, what, check) in steps {
        apply_yaml(&client, &ns.name, &agent("front", "clerk", "desk", &extra)).await.expect("apply");
        wait_route(&ns, what, check).await;
        wait_accepted(&ns, "front").await;
        let now = deployments.get("front").await.expect("deployment");
        assert_eq!(config_hash(&now), hash, "{what}: no pod rolls");
        assert_eq!(pods_spec().await, spec, "{what}: the pods' spec is unchanged");
    }
    assert!(!op.is_finished(), "the same operator throughout");
}
