//! An Agent's outage mode (`spec.outage`) against the real control plane and the operator:
//! a fallback naming a person the Agent does not list is refused with a reason a person can
//! act on; once fixed, the routing table carries the outage mode (the person resolved to
//! their address); flipping `active` on puts it in the table, sets `OutageMode=True` and
//! records a Warning Event, flipping it off a Normal one — and neither rolls a pod. The
//! gateway's own Events for its breaker's trips go out through the same API server
//! (`switchboard_gateway::outage::publish_events`) and land on the Agent.
//!
//! The namespace's switch (the `switchboard-outage` ConfigMap): on, the routing table
//! carries it and every Agent of the namespace — one without `spec.outage` too — is in
//! outage mode as the gateway applies it; each flip is an Event on the ConfigMap, a value
//! the operator cannot read a Warning saying what to fix (and counts as off); no pod rolls.
//! The Agent's `OutageMode` condition follows it (`True`, reason `NamespaceSwitchedOn`, then
//! `False`), with its own Events.

mod common;

use std::time::{Duration, Instant};

use common::{accepted, agent, setup, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use switchboard_crds::Agent;
use switchboard_crds::agent::Breaker;
use switchboard_crds::common::find_condition;
use switchboard_crds::routing::{Route, RouteOutage};
use switchboard_gateway::outage::{Outages, Turn, publish_events};
use switchboard_operator::build::CONFIG_HASH_ANNOTATION;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::routing_table;
use switchboard_tests::wait::until;

const PEOPLE: &str = "  telephony:\n    people:\n      - {name: advisor, address: \"+442079460001\"}\n";

fn front(active: bool, person: &str) -> String {
    let outage = format!(
        "  outage:\n    active: {active}\n    fallback: {{person: {person}, message: \"Putting you through to an advisor.\"}}\n"
    );
    agent("front", "clerk", "desk", &(PEOPLE.to_owned() + &outage)).replace("mode: text", "mode: voice")
}

/// Waits until the routing table gives `front` outage mode with the switch at `active`.
async fn wait_table(ns: &switchboard_tests::cluster::TestNamespace, active: bool) -> RouteOutage {
    let key = format!("{}/front", ns.name);
    until(&format!("the routing table's outage mode, active {active}"), Duration::from_secs(20), || async {
        let table = routing_table(ns).await?;
        let found = table.and_then(|t| t.outages.get(&key).cloned());
        Ok::<_, anyhow::Error>(found.filter(|o| o.active == active))
    })
    .await
    .expect("routing table")
}

async fn wait_event(events: &Api<Event>, reason: &str, kind: &str) -> Event {
    until(&format!("a {kind} Event {reason} on front"), Duration::from_secs(20), || async {
        let list = events.list(&ListParams::default()).await?;
        Ok::<_, kube::Error>(list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("front")
                && e.reason.as_deref() == Some(reason)
                && e.type_.as_deref() == Some(kind)
        }))
    })
    .await
    .expect("event")
}

fn config_hash(d: &Deployment) -> String {
    d.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION).cloned())
        .expect("the pod template's config hash")
}

async fn outage_condition(
    agents: &Api<Agent>,
    status: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    until(&format!("OutageMode={status}"), Duration::from_secs(20), || async {
        let a = agents.get("front").await?;
        let c = a.status.and_then(|s| find_condition(&s.conditions, "OutageMode").cloned());
        Ok::<_, anyhow::Error>(c.filter(|c| c.status == status))
    })
    .await
    .expect("condition")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_switch_moves_an_agent_to_its_fallback_and_back_with_events_and_no_rollout() {
    let (ns, op) = setup("op-outage").await;
    let client = ns.client();
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns.name);
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    apply_yaml(&client, &ns.name, &common::objects("clerk", "desk")).await.expect("persona and workflow");

    // A person the Agent does not list: refused, saying whom it lists.
    apply_yaml(&client, &ns.name, &front(false, "manager")).await.expect("apply");
    let refused = until("Accepted=False for the unknown person", Duration::from_secs(20), || async {
        let a = agents.get("front").await?;
        Ok::<_, anyhow::Error>(accepted(&a).filter(|c| c.status == "False" && c.reason == "InvalidField"))
    })
    .await
    .expect("refused");
    assert!(
        refused.message.contains("spec.outage.fallback.person") && refused.message.contains("advisor"),
        "{}",
        refused.message
    );

    // Fixed: accepted; the table carries outage mode, switched off, the person resolved.
    apply_yaml(&client, &ns.name, &front(false, "advisor")).await.expect("apply");
    wait_accepted(&ns, "front").await;
    let outage = wait_table(&ns, false).await;
    assert_eq!(outage.person.as_ref().map(|p| p.address.as_str()), Some("+442079460001"));
    assert_eq!(outage.breaker, Breaker::default());
    outage_condition(&agents, "False").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let before = config_hash(&deployments.get("front").await.expect("deployment"));

    // On: the table, the condition, a Warning Event.
    let flipped = Instant::now();
    apply_yaml(&client, &ns.name, &front(true, "advisor")).await.expect("apply");
    wait_table(&ns, true).await;
    println!("the switch reached the routing table {} ms after the apply", flipped.elapsed().as_millis());
    let on = outage_condition(&agents, "True").await;
    assert!(on.message.contains("advisor"), "{}", on.message);
    let event = wait_event(&events, "OutageSwitchedOn", "Warning").await;
    assert!(event.message.as_deref().is_some_and(|m| m.contains("fallback")), "{event:?}");

    // Off again: a Normal Event; no pod rolled either way.
    apply_yaml(&client, &ns.name, &front(false, "advisor")).await.expect("apply");
    wait_table(&ns, false).await;
    outage_condition(&agents, "False").await;
    wait_event(&events, "OutageSwitchedOff", "Normal").await;
    let after = config_hash(&deployments.get("front").await.expect("deployment"));
    assert_eq!(after, before, "flipping the switch rolls no pod");

    // The gateway's breaker trips and recovers: its Events land on the Agent.
    let table = routing_table(&ns).await.expect("table").expect("a table");
    let route: Route = table.route(&ns.name, "front").cloned().expect("route");
    let mut outage = table.outage(&ns.name, "front").cloned().expect("outage mode");
    outage.breaker =
        Breaker { min_turns: 2, open_seconds: 1, ramp_percent: vec![99], probe_turns: 1, ..Breaker::default() };
    let outages = Outages::new().expect("metrics");
    let publisher = tokio::spawn(publish_events(client.clone(), "gateway-test".into(), outages.events()));
    let now = Instant::now();
    outages.record(&route, &outage, Turn::Error, now);
    outages.record(&route, &outage, Turn::Error, now);
    assert!(outages.admit(&route, &outage, now).is_err(), "tripped");
    let tripped = wait_event(&events, "OutageTripped", "Warning").await;
    assert!(tripped.message.as_deref().is_some_and(|m| m.contains("2 of the last 2 turns")), "{tripped:?}");
    // Past the open time, a session served (99 %... or the next) and one good turn: recovered.
    let later = now + Duration::from_secs(2);
    while outages.admit(&route, &outage, later).is_err() {}
    outages.record(&route, &outage, Turn::Good, later);
    wait_event(&events, "OutageRamping", "Normal").await;
    wait_event(&events, "OutageRecovered", "Normal").await;
    publisher.abort();
    assert!(!op.is_finished(), "the same operator throughout");
}

/// Writes the namespace's switch ConfigMap with `data`.
async fn switch(api: &Api<k8s_openapi::api::core::v1::ConfigMap>, data: serde_json::Value) {
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": switchboard_crds::routing::OUTAGE_SWITCH_CONFIG_MAP},
        "data": data,
    });
    let params = kube::api::PatchParams::apply("switchboard-test").force();
    api.patch(switchboard_crds::routing::OUTAGE_SWITCH_CONFIG_MAP, &params, &kube::api::Patch::Apply(&cm))
        .await
        .expect("the switch ConfigMap");
}

/// Waits until the routing table's switch of the test namespace is `on` (its message).
async fn wait_namespace_switch(
    ns: &switchboard_tests::cluster::TestNamespace,
    on: Option<Option<&str>>,
) -> switchboard_crds::routing::RoutingTable {
    until(&format!("the routing table's namespace switch {on:?}"), Duration::from_secs(20), || async {
        let table = routing_table(ns).await?.filter(|t| t.route(&ns.name, "front").is_some());
        Ok::<_, anyhow::Error>(table.filter(|t| t.namespace_outages.get(&ns.name).map(|o| o.message.as_deref()) == on))
    })
    .await
    .expect("routing table")
}

async fn wait_switch_event(events: &Api<Event>, reason: &str, kind: &str) -> Event {
    until(&format!("a {kind} Event {reason} on the switch ConfigMap"), Duration::from_secs(20), || async {
        let list = events.list(&ListParams::default()).await?;
        Ok::<_, kube::Error>(list.items.into_iter().find(|e| {
            e.involved_object.kind.as_deref() == Some("ConfigMap")
                && e.involved_object.name.as_deref() == Some(switchboard_crds::routing::OUTAGE_SWITCH_CONFIG_MAP)
                && e.reason.as_deref() == Some(reason)
                && e.type_.as_deref() == Some(kind)
        }))
    })
    .await
    .expect("event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namespace_switch_puts_every_agent_of_it_into_outage_mode_with_events_and_no_rollout() {
    let (ns, op) = setup("op-outage-ns").await;
    let client = ns.client();
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    apply_yaml(&client, &ns.name, &common::objects("clerk", "desk")).await.expect("persona and workflow");
    // An Agent without outage mode of its own.
    apply_yaml(&client, &ns.name, &agent("front", "clerk", "desk", "")).await.expect("apply");
    wait_accepted(&ns, "front").await;
    let table = wait_namespace_switch(&ns, None).await;
    assert_eq!(table.outage_in_effect(&ns.name, "front"), None, "no outage mode while the switch is off");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let before = config_hash(&deployments.get("front").await.expect("deployment"));

    // On, with a message: the table carries it; the Agent is switched on with it.
    let flipped = Instant::now();
    switch(&config_maps, serde_json::json!({"active": "true", "message": "We are closed today."})).await;
    let table = wait_namespace_switch(&ns, Some(Some("We are closed today."))).await;
    println!("the namespace switch reached the routing table {} ms after the apply", flipped.elapsed().as_millis());
    let front = table.outage_in_effect(&ns.name, "front").expect("front is in outage mode");
    assert!(front.active && !front.breaker.enabled, "{front:?}");
    assert_eq!(front.message.as_deref(), Some("We are closed today."));
    let on = wait_switch_event(&events, "OutageSwitchedOn", "Warning").await;
    assert!(on.message.as_deref().is_some_and(|m| m.contains("every Agent of this namespace")), "{on:?}");
    // The Agent says so too: its condition, and an Event on it.
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns.name);
    let condition = outage_condition(&agents, "True").await;
    assert_eq!(condition.reason, "NamespaceSwitchedOn", "{condition:?}");
    assert!(condition.message.contains("We are closed today."), "{condition:?}");
    let agent_on = wait_event(&events, "OutageSwitchedOn", "Warning").await;
    assert_eq!(agent_on.involved_object.kind.as_deref(), Some("Agent"));

    // A value the operator cannot read: a Warning saying what to fix; it counts as off.
    switch(&config_maps, serde_json::json!({"active": "yes"})).await;
    wait_namespace_switch(&ns, None).await;
    let invalid = wait_switch_event(&events, "OutageSwitchInvalid", "Warning").await;
    assert!(invalid.message.as_deref().is_some_and(|m| m.contains("\"yes\"")), "{invalid:?}");
    assert_eq!(outage_condition(&agents, "False").await.reason, "SwitchedOff");

    // On again, then the ConfigMap deleted: off, a Normal Event.
    switch(&config_maps, serde_json::json!({"active": "true"})).await;
    wait_namespace_switch(&ns, Some(None)).await;
    assert_eq!(outage_condition(&agents, "True").await.reason, "NamespaceSwitchedOn");
    config_maps
        .delete(switchboard_crds::routing::OUTAGE_SWITCH_CONFIG_MAP, &Default::default())
        .await
        .expect("delete the switch");
    wait_namespace_switch(&ns, None).await;
    wait_switch_event(&events, "OutageSwitchedOff", "Normal").await;
    assert_eq!(outage_condition(&agents, "False").await.reason, "SwitchedOff");
    let agent_off = wait_event(&events, "OutageSwitchedOff", "Normal").await;
    assert_eq!(agent_off.involved_object.kind.as_deref(), Some("Agent"));
    let after = config_hash(&deployments.get("front").await.expect("deployment"));
    assert_eq!(after, before, "flipping the namespace's switch rolls no pod");
    assert!(!op.is_finished(), "the same operator throughout");
}
