//! The gateway's public key on the real kube-apiserver: the operator, in-process, follows the
//! ConfigMap the gateway publishes its key in (written here by the gateway's own publishing
//! code). Before a key is there an Agent gets no pods and waits with `Accepted=False`
//! (`GatewayKeyMissing`) and a Warning Event; once it is, the runtime pods get it; a new key
//! rolls them; a malformed value or a deleted ConfigMap keeps the key. A key published
//! before the operator starts is used at once, with no refusal on the way. An operator that
//! starts without the key keeps running Agents as they are (and routed), and holds new ones.

mod common;

use std::time::Duration;

use common::{accepted, agent, namespace, objects, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use switchboard_crds::Agent;
use switchboard_crds::contract::env::GATEWAY_PUBLIC_KEY;
use switchboard_crds::gateway_key::{CONFIG_MAP_KEY, PublicKey};
use switchboard_gateway::publish::publish;
use switchboard_operator::gateway_key::REASON_KEY_MISSING;
use switchboard_operator::settings::BuildSettings;
use switchboard_tests::cluster::TestNamespace;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::{Operator, args, metric_value, routing_table};
use switchboard_tests::wait::until;

const CONFIG_MAP: &str = "gateway-public-key";
/// Two real Ed25519 public keys (`openssl genpkey -algorithm ed25519`).
const KEY_1: &str = "9b36701a113be708c12f911d788b12b7ad7805405a5adf9796e34fb893e92092";
const KEY_2: &str = "e60f2802b0b07ae94418c11df1f4fc54a3af0fad41f53e66074926985a496493";
const PATIENCE: Duration = Duration::from_secs(20);

/// An operator for `ns` that follows the key in ConfigMap [`CONFIG_MAP`] there.
fn operator(ns: &TestNamespace) -> Operator {
    let mut run = args(&ns.name, "key-operator", BuildSettings::default());
    run.gateway_key_config_map = Some(CONFIG_MAP.to_owned());
    Operator::start_args(ns, run).expect("operator starts")
}

/// Publishes `key` as the gateway does when it starts.
async fn publish_key(ns: &TestNamespace, key: &str) {
    let key: PublicKey = key.parse().expect("a key");
    publish(ns.client(), &ns.name, CONFIG_MAP, &key).await.expect("the gateway's publication");
}

/// The gateway public key in the runtime container's environment.
fn key_env(d: &Deployment) -> Option<String> {
    let pod = d.spec.as_ref()?.template.spec.as_ref()?;
    let env = pod.containers.first()?.env.as_ref()?;
    env.iter().find(|e| e.name == GATEWAY_PUBLIC_KEY).and_then(|e| e.value.clone())
}

/// Waits until Deployment `name` gives its pods `key`.
async fn wait_key(ns: &TestNamespace, name: &str, key: &str) -> Deployment {
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), &ns.name);
    until(&format!("Deployment {name} with gateway key {key}"), PATIENCE, || async {
        let d = deployments.get_opt(name).await?;
        Ok::<_, kube::Error>(d.filter(|d| key_env(d).as_deref() == Some(key)))
    })
    .await
    .expect("the runtime pods get the key")
}

/// The Warning Events about Agent `name` with reason `reason`.
async fn warnings(ns: &TestNamespace, name: &str, reason: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    let list = events.list(&ListParams::default()).await.expect("events");
    list.items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.type_.as_deref() == Some("Warning")
                && e.involved_object.name.as_deref() == Some(name)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_pods_get_the_key_the_gateway_publishes_and_follow_a_new_one() {
    let ns = namespace("op-gwkey").await;
    let op = operator(&ns);
    let client = ns.client();
    apply_yaml(&client, &ns.name, &(objects("p", "wf") + &agent("a1", "p", "wf", ""))).await.expect("apply");

    // No key yet: no pods, and the Agent says where the key is awaited.
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns.name);
    let waiting = until("Accepted=False (GatewayKeyMissing)", PATIENCE, || async {
        let a = agents.get("a1").await?;
        Ok::<_, kube::Error>(accepted(&a).filter(|c| c.status == "False" && c.reason == REASON_KEY_MISSING))
    })
    .await
    .expect("the Agent waits for the key");
    let location = format!("{}/{CONFIG_MAP}", ns.name);
    assert!(waiting.message.contains(&location) && waiting.message.contains("does not exist"), "{}", waiting.message);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(deployments.get_opt("a1").await.expect("get").is_none(), "no pods that would refuse every context");
    until("a GatewayKeyMissing Warning Event", PATIENCE, || async {
        Ok::<_, kube::Error>(warnings(&ns, "a1", REASON_KEY_MISSING).await.pop())
    })
    .await
    .expect("an Event");
    assert_eq!(metric_value(&op.metrics.render(), "switchboard_operator_gateway_key", ""), 0.0);

    // The gateway starts and publishes its key: the Agent is accepted and its pods get it.
    publish_key(&ns, KEY_1).await;
    wait_accepted(&ns, "a1").await;
    let first = wait_key(&ns, "a1", KEY_1).await;
    assert_eq!(metric_value(&op.metrics.render(), "switchboard_operator_gateway_key", ""), 1.0);

    // A gateway with a new key starts: the pods roll to it.
    publish_key(&ns, KEY_2).await;
    let second = wait_key(&ns, "a1", KEY_2).await;
    assert!(second.metadata.generation > first.metadata.generation, "a new pod template, so a rollout");

    // A malformed value, then no ConfigMap at all: the known key stays, for new Agents too.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let broken = serde_json::json!({"data": {CONFIG_MAP_KEY: "not a key"}});
    cms.patch(CONFIG_MAP, &PatchParams::default(), &Patch::Merge(&broken)).await.expect("patch");
    cms.delete(CONFIG_MAP, &DeleteParams::default()).await.expect("delete");
    tokio::time::sleep(Duration::from_secs(1)).await;
    apply_yaml(&client, &ns.name, &agent("a2", "p", "wf", "")).await.expect("apply");
    wait_accepted(&ns, "a2").await;
    wait_key(&ns, "a2", KEY_2).await;
    let a1 = deployments.get("a1").await.expect("a1");
    assert_eq!((key_env(&a1).as_deref(), a1.metadata.generation), (Some(KEY_2), second.metadata.generation));
    assert!(accepted(&agents.get("a1").await.expect("a1")).is_some_and(|c| c.status == "True"));
    assert!(!op.is_finished());
    op.stop().await.expect("the operator stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_published_before_the_operator_starts_is_used_at_once() {
    let ns = namespace("op-gwkey-first").await;
    publish_key(&ns, KEY_1).await;
    apply_yaml(&ns.client(), &ns.name, &(objects("p", "wf") + &agent("a1", "p", "wf", ""))).await.expect("apply");
    let op = operator(&ns);
    wait_accepted(&ns, "a1").await;
    wait_key(&ns, "a1", KEY_1).await;
    assert!(
        warnings(&ns, "a1", REASON_KEY_MISSING).await.is_empty(),
        "the operator reads the ConfigMap before it builds, so the Agent is never refused on the way"
    );
    op.stop().await.expect("the operator stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_key_after_a_restart_running_agents_stay_as_they_are_and_new_ones_wait() {
    let ns = namespace("op-gwkey-restart").await;
    publish_key(&ns, KEY_1).await;
    apply_yaml(&ns.client(), &ns.name, &(objects("p", "wf") + &agent("a1", "p", "wf", ""))).await.expect("apply");
    let op = operator(&ns);
    wait_accepted(&ns, "a1").await;
    let before = wait_key(&ns, "a1", KEY_1).await;
    op.stop().await.expect("the operator stops cleanly");

    // The ConfigMap goes (say, an upgrade from a chart without it, before the new gateway
    // starts), and an operator starts.
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    cms.delete(CONFIG_MAP, &DeleteParams::default()).await.expect("delete");
    let op = operator(&ns);
    apply_yaml(&ns.client(), &ns.name, &agent("a3", "p", "wf", "")).await.expect("apply");
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    until("a3 Accepted=False (GatewayKeyMissing)", PATIENCE, || async {
        let a = agents.get("a3").await?;
        Ok::<_, kube::Error>(accepted(&a).filter(|c| c.status == "False" && c.reason == REASON_KEY_MISSING))
    })
    .await
    .expect("a new Agent waits for the key");
    let held = until("a GatewayKeyMissing Warning Event for the running a1", PATIENCE, || async {
        Ok::<_, kube::Error>(warnings(&ns, "a1", REASON_KEY_MISSING).await.pop())
    })
    .await
    .expect("an Event");
    assert!(held.message.unwrap_or_default().contains("keep running as they are"));
    assert!(accepted(&agents.get("a1").await.expect("a1")).is_some_and(|c| c.status == "True"));
    until("a1 routed, a3 not", PATIENCE, || async {
        let table = routing_table(&ns).await?;
        Ok::<_, anyhow::Error>(table.filter(|t| t.route(&ns.name, "a1").is_some() && t.route(&ns.name, "a3").is_none()))
    })
    .await
    .expect("the running Agent keeps its route");

    // The gateway starts and publishes the same key: the held Agent is not rolled.
    publish_key(&ns, KEY_1).await;
    wait_accepted(&ns, "a3").await;
    wait_key(&ns, "a3", KEY_1).await;
    let after = wait_key(&ns, "a1", KEY_1).await;
    assert_eq!(after.metadata.generation, before.metadata.generation, "the same pods go on");
    op.stop().await.expect("the operator stops cleanly");
}
