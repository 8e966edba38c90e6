//! The gateway's watches on the real control plane: the routing table ConfigMap and the
//! Agents' Endpoints (created here as the operator and the endpoints controller would)
//! become the gateway's directory, and every change — a pod turning unready, a rollout held
//! on candidate pods, an Agent leaving the table, a broken table — is followed without
//! polling.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use switchboard_crds::Mode;
use switchboard_crds::contract::{MANAGED_BY, RUNTIME_PORT, SESSION_PATH};
use switchboard_crds::routing::{Route, RoutingTable};
use switchboard_gateway::watch::{self, Sources};
use switchboard_gateway::{Directory, Reach, RouteError};
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::wait::until;
use tokio::sync::watch::Receiver;

/// Generous: the watch reacts in well under a second; the machine may be busy.
const PATIENCE: Duration = Duration::from_secs(15);

fn table(ns: &str, names: &[&str]) -> String {
    let routes = names
        .iter()
        .map(|name| Route {
            name: (*name).into(),
            namespace: ns.into(),
            mode: Mode::Text,
            service: format!("{name}.{ns}.svc"),
            port: RUNTIME_PORT,
            path: SESSION_PATH.into(),
            handoffs: vec![],
            expose: true,
            default: *name == "triage",
            ready: true,
            ready_replicas: 1,
            redact: Vec::new(),
            identity_keys: switchboard_crds::agent::default_identity_keys(),
            capacity: Default::default(),
            numbers: vec![],
            analysis: None,
            answering_machine: None,
            app_context: Default::default(),
        })
        .collect();
    RoutingTable::new(routes).to_json()
}

fn routes_yaml(json: &str) -> String {
    let indented: String = json.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: switchboard-routes\ndata:\n  routes.json: |\n{indented}"
    )
}

fn endpoints_yaml(name: &str, ready: &[&str], not_ready: &[&str]) -> String {
    let list = |ips: &[&str]| ips.iter().map(|ip| format!("{{ip: \"{ip}\"}}")).collect::<Vec<_>>().join(", ");
    format!(
        "apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: {name}\n  labels: {{app.kubernetes.io/managed-by: {MANAGED_BY}}}\n\
         subsets:\n- addresses: [{}]\n  notReadyAddresses: [{}]\n  ports: [{{name: http, port: 8080}}]\n",
        list(ready),
        list(not_ready)
    )
}

async fn until_directory<T>(rx: &Receiver<Directory>, what: &str, check: impl Fn(&Directory) -> Option<T>) -> T {
    until(what, PATIENCE, || async { Ok::<_, anyhow::Error>(check(&rx.borrow())) })
        .await
        .expect("the directory follows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_directory_follows_the_routing_table_and_the_ready_endpoints() {
    let ns = common::namespace("gw-watch").await;
    let client = ns.client();
    let addr = |ip: &str| SocketAddr::new(ip.parse().expect("ip"), 8080);
    apply_yaml(&client, &ns.name, &routes_yaml(&table(&ns.name, &["triage", "banking"]))).await.expect("table");
    apply_yaml(&client, &ns.name, &endpoints_yaml("triage", &["10.1.2.3"], &["10.1.2.4"])).await.expect("endpoints");
    // Another team's Endpoints without the operator's label are not watched.
    let foreign = endpoints_yaml("banking", &["10.9.9.9"], &[]).replace(MANAGED_BY, "someone-else");
    apply_yaml(&client, &ns.name, &foreign).await.expect("endpoints");

    let sources = Sources {
        routes_namespace: ns.name.clone(),
        routes_name: "switchboard-routes".into(),
        namespace: Some(ns.name.clone()),
        default_agent: None,
    };
    let rx = watch::start(client.clone(), sources);
    let target = until_directory(&rx, "triage routed to its ready pod", |d| d.for_client(None, Reach::Live).ok()).await;
    assert_eq!(target.key(), format!("{}/triage", ns.name));
    assert_eq!(target.ready, vec![addr("10.1.2.3")], "not-ready addresses are never used");
    until_directory(&rx, "banking without the operator's Endpoints has no pod", |d| {
        (d.for_client(Some("banking"), Reach::Live) == Err(RouteError::NoReadyPod("banking".into()))).then_some(())
    })
    .await;

    // The pod turns unready, another becomes ready.
    apply_yaml(&client, &ns.name, &endpoints_yaml("triage", &["10.1.2.4"], &["10.1.2.3"])).await.expect("update");
    until_directory(&rx, "the other pod", |d| {
        d.for_client(None, Reach::Live).ok().filter(|t| t.ready == vec![addr("10.1.2.4")])
    })
    .await;
    // No ready pod at all.
    apply_yaml(&client, &ns.name, &endpoints_yaml("triage", &[], &["10.1.2.3"])).await.expect("update");
    until_directory(&rx, "no ready pod", |d| {
        (d.for_client(None, Reach::Live) == Err(RouteError::NoReadyPod("triage".into()))).then_some(())
    })
    .await;

    // triage's rollout is held: the table lists its candidate, whose Service's Endpoints
    // (labelled like every Agent Service's) hold the candidate pod. Test sessions reach it;
    // others still find no ready live pod.
    let mut held = RoutingTable::parse(&table(&ns.name, &["triage", "banking"])).expect("a table");
    held.candidates.insert(format!("{}/triage", ns.name), format!("triage-candidate.{}.svc", ns.name));
    let held = held.to_json();
    apply_yaml(&client, &ns.name, &routes_yaml(&held)).await.expect("table");
    apply_yaml(&client, &ns.name, &endpoints_yaml("triage-candidate", &["10.1.2.9"], &[])).await.expect("endpoints");
    let candidate = until_directory(&rx, "the candidate pod for test sessions", |d| {
        d.for_client(None, Reach::Candidates).ok().filter(|t| t.ready == vec![addr("10.1.2.9")])
    })
    .await;
    assert!(candidate.candidate);
    assert_eq!(rx.borrow().for_client(None, Reach::Live), Err(RouteError::NoReadyPod("triage".into())));

    // The Agent leaves the table.
    apply_yaml(&client, &ns.name, &routes_yaml(&table(&ns.name, &["banking"]))).await.expect("table");
    until_directory(&rx, "triage unknown", |d| {
        (d.for_client(Some("triage"), Reach::Live) == Err(RouteError::Unknown("triage".into()))).then_some(())
    })
    .await;
    // A broken table is ignored: the last good one stays in force.
    apply_yaml(&client, &ns.name, &routes_yaml("{\"not\": \"a table\"}")).await.expect("table");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(rx.borrow().table().routes.len(), 1, "the last good table stays");
    assert!(rx.borrow().is_loaded());
}
