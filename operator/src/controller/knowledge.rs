//! The ConfigMaps an Agent's knowledge and skills read (`spec.knowledge`, a skill's
//! `dataContext`): fetched for each reconcile, their text resolved into the RuntimeSpec —
//! so the pod template's config hash changes with it and an edit rolls the pods, as a
//! Persona edit does — and watched, metadata only (any ConfigMap: people do not label
//! theirs), so that creating, editing or deleting one wakes the Agents that read it. A
//! missing ConfigMap or key, or knowledge over its size limit, is the validator's
//! `Accepted=False` (`ConfigMapNotFound`, `KnowledgeTooLarge`).

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use prometheus::IntCounter;
use switchboard_crds::Agent;
use switchboard_crds::agent::{AgentSpec, ConfigMaps, referenced_config_maps};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Error;

/// The ConfigMaps of `namespace` that `spec` reads and that exist, with their `data`.
pub async fn read(client: &Client, namespace: &str, spec: &AgentSpec) -> Result<ConfigMaps, Error> {
    let names = referenced_config_maps(spec);
    if names.is_empty() {
        return Ok(ConfigMaps::new());
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let mut found = ConfigMaps::new();
    for name in names {
        let config_map =
            api.get_opt(&name).await.map_err(|e| Error::kube(format!("reading ConfigMap {namespace}/{name}"), e))?;
        if let Some(config_map) = config_map {
            found.insert(name, config_map.data.unwrap_or_default());
        }
    }
    Ok(found)
}

/// The Agents in `namespace` that read the ConfigMap `name`.
pub fn referrers(agents: &Store<Agent>, namespace: Option<String>, name: &str) -> Vec<ObjectRef<Agent>> {
    agents
        .state()
        .iter()
        .filter(|a| a.namespace() == namespace && referenced_config_maps(&a.spec).iter().any(|n| n == name))
        .map(|a| ObjectRef::from_obj(a.as_ref()))
        .collect()
}

/// Watches ConfigMaps (metadata only) until `stop`, queueing the Agents that read one
/// that was created, changed or deleted. The initial list wakes nobody: every Agent is
/// reconciled at start anyway.
pub fn run(
    client: &Client,
    namespace: Option<&str>,
    agents: Store<Agent>,
    (triggers, overflow): (mpsc::Sender<ObjectRef<Agent>>, IntCounter),
    stop: CancellationToken,
) -> BoxFuture<'static, ()> {
    let api: Api<PartialObjectMeta<ConfigMap>> = crate::watch::scoped(client.clone(), namespace);
    let events = watcher(api, crate::watch::watch_config()).default_backoff();
    Box::pin(async move {
        let mut events = std::pin::pin!(events.take_until(stop.cancelled_owned()));
        while let Some(event) = events.next().await {
            let changed = match event {
                Ok(watcher::Event::Apply(cm) | watcher::Event::Delete(cm)) => cm,
                Ok(_) => continue,
                Err(e) => {
                    tracing::debug!("ConfigMap watch: {e}");
                    continue;
                }
            };
            for agent in referrers(&agents, changed.namespace(), &changed.name_any()) {
                if triggers.try_send(agent).is_err() {
                    overflow.inc();
                }
            }
        }
    })
}
