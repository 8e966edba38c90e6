//! Keeps the gateway's [`Directory`] current from the API server: one watch on the routing
//! table's ConfigMap (a field selector on its name) and one on the Endpoints of the
//! operator's Agent Services (a label selector: the Endpoints controller copies the
//! Service's `app.kubernetes.io/managed-by`). Each change publishes a new directory within
//! the watch's latency; nothing is polled and no session makes an API call. At 1,000
//! Agents the Endpoints watch holds 1,000 small objects; each change updates one entry of
//! the watcher's map and publishes a copy of it (a few addresses per Agent), while the
//! routing table is shared, not copied.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, ResourceExt};
use switchboard_crds::contract;
use switchboard_crds::routing::{ROUTES_KEY, RoutingTable};
use tokio::sync::watch;

use crate::directory::Directory;

/// Where the routing table is and which Endpoints to follow.
#[derive(Clone, Debug)]
pub struct Sources {
    /// The routing table ConfigMap's namespace.
    pub routes_namespace: String,
    /// Its name.
    pub routes_name: String,
    /// Follow Agents of this namespace only (default: every namespace).
    pub namespace: Option<String>,
    /// The gateway's default agent, over the table's.
    pub default_agent: Option<String>,
}

type EndpointMap = HashMap<(String, String), Vec<SocketAddr>>;

/// A client for the cluster of the current kubeconfig (or in-cluster), for [`start`] and
/// the key's publication ([`crate::publish`]).
pub async fn connect() -> Result<Client, kube::Error> {
    Client::try_default().await
}

/// Starts the watches; the receiver always holds the latest directory (not loaded until
/// the routing table arrives). The task ends when every receiver is gone.
pub fn start(client: Client, sources: Sources) -> watch::Receiver<Directory> {
    let (tx, rx) = watch::channel(Directory::empty(sources.default_agent.clone()));
    tokio::spawn(run(client, sources, tx));
    rx
}

async fn run(client: Client, sources: Sources, tx: watch::Sender<Directory>) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &sources.routes_namespace);
    let by_name = watcher::Config::default().fields(&format!("metadata.name={}", sources.routes_name));
    let mut tables = watcher(config_maps, by_name).default_backoff().boxed();
    let endpoints: Api<Endpoints> = match &sources.namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let managed = watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={}", contract::MANAGED_BY));
    let mut endpoint_events = watcher(endpoints, managed).default_backoff().boxed();
    let mut map: EndpointMap = HashMap::new();
    let mut init: Option<EndpointMap> = None;
    loop {
        tokio::select! {
            () = tx.closed() => return,
            event = tables.next() => match event {
                Some(Ok(Event::Apply(cm) | Event::InitApply(cm))) => {
                    if let Some(table) = parse_table(&cm) {
                        tx.send_modify(|d| *d = d.with_table(Arc::new(table)));
                    }
                }
                Some(Ok(Event::Delete(_))) => {
                    tracing::warn!(name = %sources.routes_name, "the routing table ConfigMap was deleted; keeping the last table");
                }
                Some(Ok(Event::Init | Event::InitDone)) => {}
                Some(Err(error)) => tracing::warn!("routing table watch: {error}"),
                None => return,
            },
            event = endpoint_events.next() => match event {
                Some(Ok(Event::Init)) => init = Some(HashMap::new()),
                Some(Ok(Event::InitApply(ep))) => {
                    let target = init.as_mut().unwrap_or(&mut map);
                    target.insert(key(&ep), ready_addresses(&ep));
                }
                Some(Ok(Event::InitDone)) => {
                    if let Some(fresh) = init.take() {
                        map = fresh;
                    }
                    publish(&tx, &map);
                }
                Some(Ok(Event::Apply(ep))) => {
                    map.insert(key(&ep), ready_addresses(&ep));
                    publish(&tx, &map);
                }
                Some(Ok(Event::Delete(ep))) => {
                    map.remove(&key(&ep));
                    publish(&tx, &map);
                }
                Some(Err(error)) => tracing::warn!("endpoints watch: {error}"),
                None => return,
            },
        }
    }
}

fn publish(tx: &watch::Sender<Directory>, map: &EndpointMap) {
    let endpoints = Arc::new(map.clone());
    tx.send_modify(|d| *d = d.with_endpoints(endpoints));
}

fn key(ep: &Endpoints) -> (String, String) {
    (ep.namespace().unwrap_or_default(), ep.name_any())
}

/// The table in a routing ConfigMap; a bad one is logged and skipped (the last good table
/// stays in force).
fn parse_table(cm: &ConfigMap) -> Option<RoutingTable> {
    let text = cm.data.as_ref().and_then(|d| d.get(ROUTES_KEY))?;
    match RoutingTable::parse(text) {
        Ok(table) => Some(table),
        Err(error) => {
            tracing::warn!(configmap = %cm.name_any(), "{error}; keeping the last routing table");
            None
        }
    }
}

/// The ready addresses of an Agent Service's Endpoints, on the runtime port (by name, or
/// the only port). Not-ready and terminating pods are in `notReadyAddresses`: never used.
pub fn ready_addresses(ep: &Endpoints) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for subset in ep.subsets.iter().flatten() {
        let ports = subset.ports.as_deref().unwrap_or_default();
        let port = ports
            .iter()
            .find(|p| p.name.as_deref() == Some(contract::PORT_NAME))
            .or_else(|| (ports.len() == 1).then(|| &ports[0]))
            .and_then(|p| u16::try_from(p.port).ok());
        let Some(port) = port else { continue };
        for address in subset.addresses.iter().flatten() {
            if let Ok(ip) = address.ip.parse::<IpAddr>() {
                out.push(SocketAddr::new(ip, port));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ready_addresses_on_the_runtime_port_count() {
        let ep: Endpoints = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "triage", "namespace": "bank"},
            "subsets": [
                {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                 "notReadyAddresses": [{"ip": "10.0.0.3"}],
                 "ports": [{"name": "metrics", "port": 9090}, {"name": "http", "port": 8080}]},
                {"addresses": [{"ip": "not an ip"}], "ports": [{"port": 8081}]}
            ]
        }))
        .expect("endpoints");
        let ready: Vec<String> = ready_addresses(&ep).iter().map(ToString::to_string).collect();
        assert_eq!(ready, ["10.0.0.1:8080", "10.0.0.2:8080"]);
        assert_eq!(key(&ep), ("bank".into(), "triage".into()));
    }
}
