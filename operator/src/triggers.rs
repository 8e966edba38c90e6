//! What wakes a reconcile. Watch streams are filtered down to the changes that matter, so
//! the operator's own writes do not wake it again (no self-trigger loop):
//!
//! - Agents, Personas, Workflows: new objects, deleted objects, and `metadata.generation`
//!   changes — a status write never bumps the generation, so it never re-triggers.
//! - Children (ConfigMap, Deployment, Service): deletions and changes of what the operator
//!   cares about (a ConfigMap's data, a Service's spec, a Deployment's generation and
//!   replica counts). Their first sighting is skipped: the operator just created them, or
//!   (at start) reconciles every Agent anyway. The watch event of the operator's own write
//!   is recognised by its key ([`crate::own_writes::OwnWrites`]) and skipped too.
//!
//! Personas and Workflows map to the Agents in the same namespace that reference them (from
//! the Agent cache); an Agent that appears or goes maps to the Agents that hand off to it.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use switchboard_crds::Agent;

use crate::lean::{LeanConfigMap, LeanDeployment, LeanService};

/// What a change filter does with an object seen for the first time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstSight {
    /// Pass it on (new Agents, Personas and Workflows need a reconcile).
    Pass,
    /// Skip it (children the operator just created).
    Skip,
}

/// The change of one object, as the filter saw it.
#[derive(Clone, Debug)]
pub enum Change<K> {
    /// First seen.
    New(K),
    /// The key changed.
    Changed(K),
    /// Deleted.
    Deleted(K),
}

impl<K> Change<K> {
    /// The object.
    pub fn into_object(self) -> K {
        match self {
            Change::New(k) | Change::Changed(k) | Change::Deleted(k) => k,
        }
    }
}

/// Filters watcher events down to [`Change`]s: an object passes when it is deleted, when
/// `key` of it differs from the last value seen, or — per `first` — when first seen.
pub fn changes<K, S, F>(
    events: S,
    key: F,
    first: FirstSight,
) -> impl Stream<Item = Result<Change<K>, watcher::Error>> + Send
where
    K: Resource + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    F: Fn(&K) -> u64 + Send + 'static,
{
    let mut seen: HashMap<(String, String), u64> = HashMap::new();
    events.filter_map(move |event| {
        let out = match event {
            Err(e) => Some(Err(e)),
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                let id = (obj.namespace().unwrap_or_default(), obj.name_any());
                let k = key(&obj);
                match seen.insert(id, k) {
                    None if first == FirstSight::Pass => Some(Ok(Change::New(obj))),
                    None => None,
                    Some(prev) if prev != k => Some(Ok(Change::Changed(obj))),
                    Some(_) => None,
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                seen.remove(&(obj.namespace().unwrap_or_default(), obj.name_any()));
                Some(Ok(Change::Deleted(obj)))
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
        };
        std::future::ready(out)
    })
}

/// Only the objects of a change stream.
pub fn objects<K, S>(changes: S) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    S: Stream<Item = Result<Change<K>, watcher::Error>> + Send,
{
    changes.map(|c| c.map(Change::into_object))
}

/// The key of objects whose spec matters: `metadata.generation`.
pub fn generation<K: Resource>(obj: &K) -> u64 {
    obj.meta().generation.map_or(0, |g| g.unsigned_abs())
}

/// A hash of any serialisable part of an object.
pub fn hash_of<T: serde::Serialize>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(value).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// The trigger key of a ConfigMap child: its data.
pub fn config_map_key(cm: &LeanConfigMap) -> u64 {
    hash_of(&cm.data)
}

/// The trigger key of a Service child: its spec.
pub fn service_key(svc: &LeanService) -> u64 {
    hash_of(&svc.spec)
}

/// The trigger key of a Deployment child: generation, wanted and available replicas.
pub fn deployment_key(d: &LeanDeployment) -> u64 {
    let wanted = d.spec.as_ref().and_then(|s| s.replicas);
    let available = d.status.as_ref().and_then(|s| s.available_replicas);
    hash_of(&(d.metadata.generation, wanted, available))
}

/// Agents in `namespace` whose Persona (or a variant's) is `name`.
pub fn persona_referrers(agents: &Store<Agent>, namespace: Option<String>, name: &str) -> Vec<ObjectRef<Agent>> {
    referrers(agents, namespace, |a| {
        a.spec.persona_ref.name == name
            || a.spec.variants.iter().any(|v| v.persona_ref.as_ref().is_some_and(|p| p.name == name))
    })
}

/// Agents in `namespace` whose Workflow (or a variant's) is `name`.
pub fn workflow_referrers(agents: &Store<Agent>, namespace: Option<String>, name: &str) -> Vec<ObjectRef<Agent>> {
    referrers(agents, namespace, |a| {
        a.spec.workflow_ref.name == name
            || a.spec.variants.iter().any(|v| v.workflow_ref.as_ref().is_some_and(|w| w.name == name))
    })
}

/// Agents in `namespace` that hand off to the Agent `name`.
pub fn handoff_referrers(agents: &Store<Agent>, namespace: Option<String>, name: &str) -> Vec<ObjectRef<Agent>> {
    referrers(agents, namespace, |a| a.spec.handoffs.iter().any(|h| h.agent == name))
}

fn referrers(
    agents: &Store<Agent>,
    namespace: Option<String>,
    matches: impl Fn(&Agent) -> bool,
) -> Vec<ObjectRef<Agent>> {
    agents
        .state()
        .iter()
        .filter(|a| a.namespace() == namespace && matches(a))
        .map(|a: &Arc<Agent>| ObjectRef::from_obj(a.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use futures_util::stream;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn cm(name: &str, generation: i64) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    async fn run(first: FirstSight, events: Vec<watcher::Event<ConfigMap>>) -> Vec<String> {
        let out: Vec<_> = changes(stream::iter(events.into_iter().map(Ok)), generation, first).collect().await;
        out.into_iter()
            .map(|c| match c {
                Ok(Change::New(o)) => format!("new {}", o.name_any()),
                Ok(Change::Changed(o)) => format!("changed {}", o.name_any()),
                Ok(Change::Deleted(o)) => format!("deleted {}", o.name_any()),
                Err(e) => format!("error {e}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn only_new_changed_and_deleted_objects_pass() {
        use watcher::Event::*;
        let events = vec![
            Init,
            InitApply(cm("a", 1)),
            InitDone,
            Apply(cm("a", 1)),
            Apply(cm("a", 2)),
            Apply(cm("b", 1)),
            Delete(cm("a", 2)),
            Apply(cm("a", 2)),
        ];
        assert_eq!(run(FirstSight::Pass, events.clone()).await, ["new a", "changed a", "new b", "deleted a", "new a"]);
        assert_eq!(run(FirstSight::Skip, events).await, ["changed a", "deleted a"]);
    }
}
