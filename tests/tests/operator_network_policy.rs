//! Doors closed in every namespace with Agents, on the real control plane: the operator
//! keeps one NetworkPolicy per namespace (runtime pods take traffic only from the gateway's
//! pods and the extra peers), with the right gateway peer in the gateway's namespace and in
//! another; re-applies it when it is deleted by hand; leaves it to the garbage collector,
//! which removes it with the namespace's last Agent; never writes over someone else's
//! NetworkPolicy of that name (the Agent gets `Accepted=False` and no pods); writes it a few
//! times, not once per Agent, when many Agents come at once; and writes none when it is
//! turned off. (The test node's network does not enforce NetworkPolicy: what the
//! policy blocks is not tested here.)
//!
//! The two namespaces have an operator each (each test operator watches one namespace), the
//! second told that the gateway runs in the first, as a chart install with
//! `operator.watchNamespace` is. The tests do not run beside the chart's cluster-wide install
//! (`chart_install.rs`), whose operator would write these namespaces' policies too.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{accepted, agent, namespace, objects, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use switchboard_crds::Agent;
use switchboard_operator::build::network_policy::NAME;
use switchboard_operator::settings::{BuildSettings, NetworkPolicySettings, Peers};
use switchboard_tests::cluster::TestNamespace;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::{self, Operator};
use switchboard_tests::wait::until;

const WAIT: Duration = Duration::from_secs(30);

fn prometheus() -> Value {
    json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
           "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}})
}

fn gateway_pods() -> Value {
    json!({"matchLabels": {"app.kubernetes.io/name": "switchboard-gateway", "app.kubernetes.io/instance": "sb"}})
}

/// Build settings as the chart gives them: the gateway in `gateway_namespace`, with the
/// chart's gateway labels, and Prometheus as an extra peer.
fn settings(gateway_namespace: &str) -> BuildSettings {
    BuildSettings {
        network_policy: NetworkPolicySettings {
            gateway_namespace: Some(gateway_namespace.to_owned()),
            gateway_labels: vec![
                ("app.kubernetes.io/name".into(), "switchboard-gateway".into()),
                ("app.kubernetes.io/instance".into(), "sb".into()),
            ],
            extra_peers: Peers(serde_json::from_value(json!([prometheus()])).expect("a peer")),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn policies(ns: &TestNamespace) -> Api<NetworkPolicy> {
    Api::namespaced(ns.client(), &ns.name)
}

/// The names of the Agents that own `policy` (checking that none is its controller).
fn owners(policy: &NetworkPolicy) -> BTreeSet<String> {
    let refs = policy.metadata.owner_references.clone().unwrap_or_default();
    assert!(refs.iter().all(|r| r.kind == "Agent" && r.controller != Some(true)), "{refs:?}");
    refs.into_iter().map(|r| r.name).collect()
}

/// Waits until `ns` has the policy, owned by exactly the Agents `names`, admitting `from`.
async fn wait_policy(ns: &TestNamespace, names: &[&str], from: &Value) -> NetworkPolicy {
    let want: BTreeSet<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let ports = json!([{"port": 8080, "protocol": "TCP"}]);
    until(&format!("{NAME} in {} owned by {names:?} admitting {from}", ns.name), WAIT, || async {
        let policy = policies(ns).get_opt(NAME).await?;
        Ok::<_, kube::Error>(policy.filter(|p| owners(p) == want && rule(p) == (from.clone(), ports.clone())))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Holds the lock the Helm chart's cluster-wide install takes alone (`chart_install.rs`): its
/// operator would write these namespaces' policies too, with its own gateway's namespace.
fn no_cluster_wide_operator() -> std::fs::File {
    switchboard_tests::helm::cluster_wide_operator_turn(false)
}

/// The `from` peers and the ports of the policy's one ingress rule.
fn rule(policy: &NetworkPolicy) -> (Value, Value) {
    let spec = serde_json::to_value(policy.spec.as_ref().expect("spec")).expect("json");
    assert_eq!(spec["podSelector"], json!({"matchLabels": {"app.kubernetes.io/name": "switchboard-agent"}}));
    assert_eq!(spec["policyTypes"], json!(["Ingress"]));
    assert_eq!(spec["ingress"].as_array().map(Vec::len), Some(1), "{spec}");
    (spec["ingress"][0]["from"].clone(), spec["ingress"][0]["ports"].clone())
}

async fn delete_agent(ns: &TestNamespace, name: &str) {
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    agents.delete(name, &DeleteParams::background()).await.expect("delete Agent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_with_agents_gets_the_policy_until_its_last_agent_goes() {
    let _alone = no_cluster_wide_operator();
    let gateway_ns = namespace("np-gateway").await;
    let team = namespace("np-team").await;
    let _in_gateway_ns = Operator::start_with(&gateway_ns, "np-gateway", settings(&gateway_ns.name)).expect("operator");
    let _in_team = Operator::start_with(&team, "np-team", settings(&gateway_ns.name)).expect("operator");
    let two = objects("p", "wf") + &agent("front", "p", "wf", "") + &agent("back", "p", "wf", "");
    apply_yaml(&gateway_ns.client(), &gateway_ns.name, &two).await.expect("apply");
    apply_yaml(&team.client(), &team.name, &(objects("p", "wf") + &agent("desk", "p", "wf", ""))).await.expect("apply");
    for (ns, name) in [(&gateway_ns, "front"), (&gateway_ns, "back"), (&team, "desk")] {
        wait_accepted(ns, name).await;
    }

    // In the gateway's namespace: its pods by label alone (1.20 sets no namespace name label).
    let from_here = json!([{"podSelector": gateway_pods()}, prometheus()]);
    let here = wait_policy(&gateway_ns, &["back", "front"], &from_here).await;
    let labels = here.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app.kubernetes.io/managed-by").map(String::as_str), Some("switchboard-operator"));
    // In another namespace: the gateway's namespace by name, and its pods there.
    let gateway = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": gateway_ns.name}},
                         "podSelector": gateway_pods()});
    let from_there = json!([gateway, prometheus()]);
    let there = wait_policy(&team, &["desk"], &from_there).await;
    // It selects the pods the Agents really run.
    let deployment = Api::<Deployment>::namespaced(team.client(), &team.name).get("desk").await.expect("Deployment");
    let pod_labels = deployment.spec.and_then(|s| s.template.metadata).and_then(|m| m.labels).unwrap_or_default();
    assert_eq!(pod_labels.get("app.kubernetes.io/name").map(String::as_str), Some("switchboard-agent"));

    // Deleted by hand: applied again at once (its watch wakes an Agent of the namespace).
    policies(&team).delete(NAME, &DeleteParams::default()).await.expect("delete the policy");
    until("the policy applied again", WAIT, || async {
        let policy = policies(&team).get_opt(NAME).await?;
        Ok::<_, kube::Error>(policy.filter(|p| p.metadata.uid != there.metadata.uid && owners(p).contains("desk")))
    })
    .await
    .expect("re-applied");
    // Edited by hand: taken back.
    let open = json!({"spec": {"ingress": [{}]}});
    policies(&team).patch(NAME, &PatchParams::default(), &Patch::Merge(&open)).await.expect("edit");
    until("the edit taken back", WAIT, || async {
        let policy = policies(&team).get(NAME).await?;
        Ok::<_, kube::Error>((rule(&policy).0.as_array().map(Vec::len) == Some(2)).then_some(()))
    })
    .await
    .expect("taken back");

    // One Agent goes: the other still owns it (the garbage collector drops the dangling
    // reference). The last goes: the garbage collector deletes the policy.
    delete_agent(&gateway_ns, "front").await;
    wait_policy(&gateway_ns, &["back"], &from_here).await;
    delete_agent(&gateway_ns, "back").await;
    until("the policy garbage-collected with the last Agent", Duration::from_secs(60), || async {
        Ok::<_, kube::Error>(policies(&gateway_ns).get_opt(NAME).await?.is_none().then_some(()))
    })
    .await
    .expect("garbage collected");
    assert!(policies(&team).get_opt(NAME).await.expect("get").is_some(), "the other namespace keeps its own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_policy_of_that_name_made_by_someone_else_is_never_overwritten() {
    let _alone = no_cluster_wide_operator();
    let ns = namespace("np-foreign").await;
    // Someone's own policy of that name, letting everything in.
    let theirs = format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: {NAME}}}\n\
         spec: {{podSelector: {{}}, ingress: [{{}}]}}\n"
    );
    apply_yaml(&ns.client(), &ns.name, &theirs).await.expect("their policy");
    let _op = Operator::start_with(&ns, "np-foreign", settings(&ns.name)).expect("operator");
    apply_yaml(&ns.client(), &ns.name, &(objects("p", "wf") + &agent("x", "p", "wf", ""))).await.expect("apply");

    // Not accepted, with a reason that says what is in the way and what to do; no pods.
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    let message = until("Agent x Accepted=False (NetworkPolicyNameTaken)", WAIT, || async {
        let a = agents.get("x").await?;
        let refused = accepted(&a).filter(|c| c.status == "False" && c.reason == "NetworkPolicyNameTaken");
        Ok::<_, kube::Error>(refused.map(|c| c.message))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        message.contains(&format!("NetworkPolicy named {}/{NAME}", ns.name)) && message.contains("Delete or rename"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let policy = policies(&ns).get(NAME).await.expect("their policy");
    assert_eq!(policy.metadata.owner_references, None, "nobody took it over");
    let spec = serde_json::to_value(&policy.spec).expect("json");
    assert_eq!((&spec["podSelector"], &spec["ingress"]), (&json!({}), &json!([{}])), "theirs is intact: {spec}");
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), &ns.name);
    assert!(deployments.get_opt("x").await.expect("get").is_none(), "no pods without the operator's policy");

    // Theirs goes: the Agent is accepted on its next reconcile (here woken by a spec change;
    // else the periodic re-check) and the namespace gets the operator's policy.
    policies(&ns).delete(NAME, &DeleteParams::default()).await.expect("delete theirs");
    // (Gone, or already the operator's if the periodic re-check came first.)
    until("their policy gone", WAIT, || async {
        let policy = policies(&ns).get_opt(NAME).await?;
        Ok::<_, kube::Error>(policy.is_none_or(|p| p.metadata.owner_references.is_some()).then_some(()))
    })
    .await
    .expect("gone");
    let bump = json!({"spec": {"replicas": 2}});
    agents.patch("x", &PatchParams::default(), &Patch::Merge(&bump)).await.expect("bump");
    wait_accepted(&ns, "x").await;
    wait_policy(&ns, &["x"], &json!([{"podSelector": gateway_pods()}, prometheus()])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turned_off_the_operator_writes_no_network_policy() {
    let _alone = no_cluster_wide_operator();
    let ns = namespace("np-off").await;
    let mut build = settings(&ns.name);
    build.network_policy.enabled = false;
    let _op = Operator::start_args(&ns, operator::args(&ns.name, "np-off", build)).expect("operator");
    apply_yaml(&ns.client(), &ns.name, &(objects("p", "wf") + &agent("x", "p", "wf", ""))).await.expect("apply");
    wait_accepted(&ns, "x").await;
    assert!(policies(&ns).get_opt(NAME).await.expect("get").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_agents_writes_the_policy_a_few_times_not_once_per_agent() {
    let _alone = no_cluster_wide_operator();
    let ns = namespace("np-burst").await;
    let op = Operator::start_with(&ns, "np-burst", settings(&ns.name)).expect("operator");
    let names: Vec<String> = (0..30).map(|i| format!("agent-{i:02}")).collect();
    let yaml = names.iter().fold(objects("p", "wf"), |yaml, name| yaml + &agent(name, "p", "wf", ""));
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");
    for name in &names {
        wait_accepted(&ns, name).await;
    }
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    wait_policy(&ns, &all, &json!([{"podSelector": gateway_pods()}, prometheus()])).await;
    // The first Agent's reconcile writes it before any pods; the others join its owners in
    // a few batched writes.
    let writes = op.metrics.child_applies("NetworkPolicy", true);
    assert!((1..=8).contains(&writes), "{writes} writes of the policy for {} Agents", names.len());
}
