//! `Ready` and the gateway routing table on the real control plane. The test plays the
//! kubelet (there is none): it marks the Agent's pods Running and Ready, the ReplicaSet and
//! Deployment controllers count them available, and the operator reports `Ready` and
//! publishes the route as ready. The table follows Agents appearing, changing, becoming
//! ready and going, each within a second of the change it reflects.

mod common;

use std::time::{Duration, Instant};

use common::{agent, objects, setup, wait_accepted};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use switchboard_crds::common::{CONDITION_READY, find_condition};
use switchboard_crds::routing::{Route, RoutingTable};
use switchboard_crds::{Agent, Mode};
use switchboard_tests::kubelet::{agent_pods, mark_pods_ready};
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::routing_table;
use switchboard_tests::wait::until;

async fn route_where(
    ns: &switchboard_tests::cluster::TestNamespace,
    what: &str,
    timeout: Duration,
    check: impl Fn(&RoutingTable) -> bool,
) -> RoutingTable {
    until(what, timeout, || async { Ok::<_, anyhow::Error>(routing_table(ns).await?.filter(|t| check(t))) })
        .await
        .expect("routing table")
}

fn route<'a>(table: &'a RoutingTable, ns: &str, name: &str) -> Option<&'a Route> {
    table.route(ns, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_follows_the_pods_and_the_routing_table_follows_the_agents() {
    let (ns, op) = setup("op-routes").await;
    let client = ns.client();
    let n = ns.name.clone();

    // Appearing: routed (not ready) once Accepted.
    let yaml = objects("p", "wf") + &agent("helper", "p", "wf", "  replicas: 2\n  handoffs: [{agent: other}]\n");
    apply_yaml(&client, &n, &(yaml.clone() + &agent("other", "p", "wf", ""))).await.expect("apply");
    wait_accepted(&ns, "helper").await;
    let start = Instant::now();
    let table = route_where(&ns, "helper routed", Duration::from_secs(1), |t| route(t, &n, "helper").is_some()).await;
    println!("route appeared {:?} after Accepted was seen", start.elapsed());
    let r = route(&table, &n, "helper").expect("route");
    assert_eq!((r.mode, r.ready, r.ready_replicas, r.port), (Mode::Text, false, 0, 8080));
    assert_eq!(r.handoffs, ["other"]);
    assert_eq!(r.url(), format!("ws://helper.{n}.svc:8080/v1/session"));

    // Becoming ready: the test is the kubelet.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &n);
    until("2 pods created by the ReplicaSet", Duration::from_secs(20), || async {
        let list = pods.list(&ListParams::default().labels(&agent_pods("helper"))).await?;
        Ok::<_, anyhow::Error>((list.items.len() == 2).then_some(()))
    })
    .await
    .expect("pods");
    let agents: Api<Agent> = Api::namespaced(client.clone(), &n);
    let ready = |a: &Agent| a.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_READY).cloned());
    assert_eq!(ready(&agents.get("helper").await.expect("agent")).map(|c| c.status), Some("False".into()));
    assert_eq!(mark_pods_ready(&client, &n, &agent_pods("helper")).await.expect("kubelet"), 2);
    // Ready is True from the first available replica on; the Deployment controller may
    // count the two pods in two steps, so wait for the message with both.
    let condition = until("Ready=True with 2/2 available", Duration::from_secs(20), || async {
        Ok::<_, anyhow::Error>(ready(&agents.get("helper").await?).filter(|c| c.message == "2/2 replicas available"))
    })
    .await
    .expect("ready");
    let seen = Instant::now();
    assert_eq!(condition.status, "True");
    assert_eq!(agents.get("helper").await.expect("agent").status.and_then(|s| s.ready_replicas), Some(2));
    route_where(&ns, "route ready", Duration::from_secs(1), |t| {
        route(t, &n, "helper").is_some_and(|r| r.ready && r.ready_replicas == 2)
    })
    .await;
    println!("route ready {:?} after Ready=True was seen", seen.elapsed());

    // Changing: the mode in the table follows the spec.
    let changed = Instant::now();
    apply_yaml(&client, &n, &yaml.replace("mode: text", "mode: hybrid")).await.expect("change mode");
    route_where(&ns, "mode hybrid", Duration::from_secs(1), |t| {
        route(t, &n, "helper").is_some_and(|r| r.mode == Mode::Hybrid)
    })
    .await;
    println!("mode change routed in {:?}", changed.elapsed());

    // Going: gone from the table.
    let deleted = Instant::now();
    agents.delete("helper", &DeleteParams::default()).await.expect("delete");
    let table = route_where(&ns, "helper gone", Duration::from_secs(1), |t| route(t, &n, "helper").is_none()).await;
    println!("deletion routed in {:?}", deleted.elapsed());
    assert!(route(&table, &n, "other").is_some(), "other agents stay routed");
    assert!(op.metrics.routes_published.get() >= 4, "one write per change");
    let names: Vec<_> = table.routes.iter().map(|r| r.name.clone()).collect();
    assert_eq!(names, ["other"]);
    let _ = agents.get_opt("other").await.expect("get").map(|a| a.name_any());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_target_appearing_makes_the_caller_accepted() {
    let (ns, _op) = setup("op-handoff").await;
    let client = ns.client();
    let caller = objects("p", "wf") + &agent("caller", "p", "wf", "  handoffs: [{agent: later}]\n");
    apply_yaml(&client, &ns.name, &caller).await.expect("apply");
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns.name);
    let reason = until("HandoffTargetNotFound", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(common::accepted(&agents.get("caller").await?).filter(|c| c.status == "False"))
    })
    .await
    .expect("rejected")
    .reason;
    assert_eq!(reason, "HandoffTargetNotFound");
    apply_yaml(&client, &ns.name, &agent("later", "p", "wf", "")).await.expect("target");
    wait_accepted(&ns, "caller").await;
    agents.delete("later", &DeleteParams::default()).await.expect("delete target");
    until("the caller rejected again", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(
            common::accepted(&agents.get("caller").await?).filter(|c| c.reason == "HandoffTargetNotFound"),
        )
    })
    .await
    .expect("rejected again");
}

/// The table carries what the gateway's web console shows of each Agent (it sees no
/// Persona or Workflow): role, persona and voice without the prompt, tools, handoffs and
/// the workflow graph; a Persona's own change reaches it without any change to the Agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_carries_what_the_console_shows_of_each_agent() {
    let (ns, _op) = setup("op-console").await;
    let client = ns.client();
    let n = ns.name.clone();
    let extra = "  role: Helper\n  description: Answers questions about orders.\n  handoffs: [{agent: other}]\n  tools:\n    - name: lookup\n      description: Finds an order.\n      consent: required\n      http:\n        url: http://orders:8080/lookup\n";
    let yaml = objects("p", "wf") + &agent("helper", "p", "wf", extra) + &agent("other", "p", "wf", "");
    apply_yaml(&client, &n, &yaml).await.expect("apply");
    wait_accepted(&ns, "helper").await;
    let table =
        route_where(&ns, "helper's summary", Duration::from_secs(5), |t| t.summary(&n, "helper").is_some()).await;
    let summary = table.summary(&n, "helper").expect("summary");
    assert_eq!(summary.profile.role.as_deref(), Some("Helper"));
    assert_eq!(summary.profile.description.as_deref(), Some("Answers questions about orders."));
    assert_eq!((summary.persona.name.as_str(), summary.persona.display_name.as_str()), ("p", "Sam"));
    assert!(!summary.persona.voice.is_empty(), "the persona's (default) voice: {summary:?}");
    let tools: Vec<_> = summary.tools.iter().map(|t| (t.name.as_str(), t.runs.as_str(), t.consent)).collect();
    assert_eq!(tools, [("lookup", "http", true)]);
    assert_eq!(summary.handoffs.iter().map(|h| h.agent.as_str()).collect::<Vec<_>>(), ["other"]);
    assert_eq!((summary.workflow.name.as_str(), summary.workflow.entry.as_str()), ("wf", "hello"));
    assert_eq!(summary.workflow.nodes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), ["hello"]);
    let text = table.to_json();
    assert!(!text.contains("You are"), "no system prompt in the table: {text}");
    assert!(!text.contains("orders:8080"), "no tool URL in the table: {text}");

    // The Persona alone changes: the summary follows (the Agent's route does not change).
    let changed = Instant::now();
    apply_yaml(&client, &n, &common::persona("p", "Alex")).await.expect("persona change");
    route_where(&ns, "the new display name", Duration::from_secs(10), |t| {
        t.summary(&n, "helper").is_some_and(|s| s.persona.display_name == "Alex")
    })
    .await;
    println!("persona change in the table after {:?}", changed.elapsed());

    // The gateway's own watch of the table reads the summaries (what its console's
    // /v1/agents serves: dataplane/console/src/gateway.rs, tests/web/gateway.rs).
    let sources = switchboard_gateway::watch::Sources {
        routes_namespace: n.clone(),
        routes_name: switchboard_crds::routing::DEFAULT_ROUTES_NAME.into(),
        namespace: Some(n.clone()),
        default_agent: None,
    };
    let directory = switchboard_gateway::watch::start(client.clone(), sources);
    until("the gateway's directory with the summary", Duration::from_secs(15), || async {
        let table = directory.borrow().table().clone();
        Ok::<_, anyhow::Error>(table.summary(&n, "helper").filter(|s| s.persona.display_name == "Alex").cloned())
    })
    .await
    .expect("the gateway reads the summaries");
}
