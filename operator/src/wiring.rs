//! How the watches feed the controllers (see [`crate::triggers`] for what passes):
//!
//! - one Agent watch feeds the Agent cache, wakes the routing-table publisher on every
//!   event, queues the Agents that hand off to an Agent that appeared or went, and — filtered
//!   to generation changes — drives the Agent controller;
//! - one Persona and one Workflow watch each fill the cache the Agent reconcile reads, drive
//!   their own `Accepted` status, and (on generation changes and deletions) queue the Agents
//!   that reference them — after the cache has the change;
//! - ConfigMap, Deployment, Service and (metadata-only, cached for pruning) HPA watches,
//!   operator-labelled objects only, wake the owning Agent when a child is edited or deleted,
//!   or a Deployment's replica counts change;
//! - the watch of the gateway's public key ([`crate::gateway_key`]), when followed, wakes
//!   every Agent when the key comes or changes.

use std::sync::Arc;

use futures_util::{Stream, StreamExt, stream};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use prometheus::IntCounter;
use serde::de::DeserializeOwned;
use switchboard_crds::Agent;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::build::hpa::api_resource;
use crate::controller::status::{Replicas, replicas};
use crate::controller::{Context, Error, agent, error_policy, numbers};
use crate::lean::{LeanConfigMap, LeanDeployment, LeanService};
use crate::own_writes::{OwnWrites, Seen};
use crate::settings::RunArgs;
use crate::triggers::{
    Change, FirstSight, changes, config_map_key, deployment_key, generation, handoff_referrers, objects, service_key,
};
use crate::watch::{owned_watch_config, scoped, watch_config};

/// The Agent watch: cached in `writer`, notifying the publisher, queueing handoff
/// referrers, and filtered to the changes the Agent controller acts on.
pub fn agent_stream(
    api: Api<Agent>,
    writer: Writer<Agent>,
    agents: Store<Agent>,
    notify: watch::Sender<()>,
    triggers: mpsc::Sender<ObjectRef<Agent>>,
    overflow: IntCounter,
) -> impl Stream<Item = Result<Agent, watcher::Error>> + Send + 'static {
    let events = watcher(api, watch_config()).default_backoff().modify(slim).reflect(writer).inspect(move |_| {
        notify.send_replace(());
    });
    let filtered = changes(events, generation, FirstSight::Pass).inspect(move |change| {
        if let Ok(Change::New(a) | Change::Deleted(a)) = change {
            for r in handoff_referrers(&agents, a.namespace(), &a.name_any()) {
                if triggers.try_send(r).is_err() {
                    overflow.inc();
                }
            }
        }
        // A number claimed, changed or freed: the Agents it may block or free decide again
        // (an Agent without numbers that appears or goes touches none: no scan).
        let touched = match change {
            Ok(Change::New(a) | Change::Deleted(a)) if !a.spec.telephony.numbers.is_empty() => Some(a),
            Ok(Change::Changed(a)) => Some(a),
            _ => None,
        };
        if let Some(a) = touched {
            for r in numbers::claimants(a, &agents.state()) {
                if triggers.try_send(ObjectRef::from_obj(r.as_ref())).is_err() {
                    overflow.inc();
                }
            }
        }
    });
    objects(filtered)
}

/// What drives the Agent controller: the filtered Agent watch and its store, the Agents
/// other objects' changes queue for reconciling, and the HPA cache's writer.
pub struct AgentInputs<S> {
    /// The Agent watch, filtered (see [`agent_stream`]).
    pub stream: S,
    /// The Agents' store, fed by `stream`.
    pub store: Store<Agent>,
    /// Agents to reconcile again because something they use changed.
    pub triggered: mpsc::Receiver<ObjectRef<Agent>>,
    /// Writes the cache of HorizontalPodAutoscalers the operator owns.
    pub hpa_writer: Writer<PartialObjectMeta<DynamicObject>>,
}

impl<S> std::fmt::Debug for AgentInputs<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentInputs").field("agents", &self.store.state().len()).finish_non_exhaustive()
    }
}

/// The Agent controller, run until `stop`.
pub async fn agent_controller<S>(
    client: &Client,
    args: &RunArgs,
    inputs: AgentInputs<S>,
    ctx: Arc<Context>,
    stop: CancellationToken,
) where
    S: Stream<Item = Result<Agent, watcher::Error>> + Send + 'static,
{
    let AgentInputs { stream: agent_stream, store: agents, mut triggered, hpa_writer } = inputs;
    let ns = args.namespace.as_deref();
    let queued = stream::poll_fn(move |cx| triggered.poll_recv(cx));
    let hpa_resource = api_resource(ctx.settings.hpa_api_version());
    let hpa_api: Api<PartialObjectMeta<DynamicObject>> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &hpa_resource),
        None => Api::all_with(client.clone(), &hpa_resource),
    };
    let hpas = watcher(hpa_api, owned_watch_config()).default_backoff().reflect(hpa_writer);
    Controller::for_stream(agent_stream, agents)
        .owns_stream(owned::<LeanConfigMap>(client, ns, (config_map_key, config_map_key), &ctx.own_writes))
        .owns_stream(owned::<LeanService>(client, ns, (service_key, service_key), &ctx.own_writes))
        .owns_stream(owned::<LeanDeployment>(client, ns, (deployment_key, generation), &ctx.own_writes))
        .owns_stream_with(objects(changes(hpas, generation, FirstSight::Skip)), hpa_resource)
        .reconcile_on(queued)
        .reconcile_all_on(ctx.stores.gateway_key.changes())
        .with_config(Config::default().concurrency(args.concurrency))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(agent::reconcile, error_policy(agent::KIND), ctx)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!("agent controller: {e}");
            }
            std::future::ready(())
        })
        .await;
}

/// Drops what no reconcile reads from cached objects (managed fields, the last-applied
/// annotation), which is most of a small object's size.
fn slim<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
    if let Some(a) = obj.meta_mut().annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Finds the Agents that use an object.
pub type ReferrerFn<K> = Box<dyn Fn(&K) -> Vec<ObjectRef<Agent>> + Send + Sync>;

/// Where a status controller sends the Agents to reconcile when one of its objects changes.
pub struct Referrers<K> {
    /// The Agents that use an object.
    pub of: ReferrerFn<K>,
    /// The Agent controller's trigger queue.
    pub queue: mpsc::Sender<ObjectRef<Agent>>,
    /// Counts triggers dropped on a full queue.
    pub overflow: IntCounter,
}

impl<K> std::fmt::Debug for Referrers<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Referrers").finish_non_exhaustive()
    }
}

/// The trigger key and the content key of one kind of child (see [`crate::triggers`]).
type Keys<K> = (fn(&K) -> u64, fn(&K) -> u64);

/// The watch of one kind of child: every event updates what [`OwnWrites`] has seen;
/// changes of the trigger key `key` by others (and deletions) pass to the controller.
/// `content` is the key whose change means the child must be applied again.
fn owned<K>(
    client: &Client,
    namespace: Option<&str>,
    (key, content): Keys<K>,
    own: &OwnWrites,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + k8s_openapi::Resource
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (own, seer) = (own.clone(), own.clone());
    let kind = <K as k8s_openapi::Resource>::KIND;
    let events =
        watcher(scoped::<K>(client.clone(), namespace), owned_watch_config()).default_backoff().inspect(move |event| {
            if let Ok(event) = event {
                seer.observe(kind, event, |obj| Seen { content: content(obj), replicas: seen_replicas(obj) });
            }
        });
    let foreign = changes(events, key, FirstSight::Skip).filter(move |change| {
        let keep = match change {
            Ok(Change::Changed(obj)) => {
                !own.is_own(kind, &obj.namespace().unwrap_or_default(), &obj.name_any(), key(obj))
            }
            _ => true,
        };
        std::future::ready(keep)
    });
    objects(foreign)
}

/// The replica counts of a Deployment (nothing for other kinds).
fn seen_replicas<K: 'static>(obj: &K) -> Option<Replicas> {
    (obj as &dyn std::any::Any).downcast_ref::<LeanDeployment>().map(replicas)
}

/// A controller that sets the `Accepted` status of Personas or Workflows, run until `stop`.
/// Its watch fills `writer` (the cache Agent reconciles read) and, on every new, changed or
/// deleted object, queues the Agents that use it.
pub async fn status_controller<K, F, Fut>(
    api: Api<K>,
    writer: Writer<K>,
    referrers: Referrers<K>,
    (reconcile, kind): (F, &'static str),
    concurrency: u16,
    ctx: Arc<Context>,
    stop: CancellationToken,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<kube::runtime::controller::Action, Error>> + Send + 'static,
{
    let store = writer.as_reader();
    let events = watcher(api, watch_config()).default_backoff().modify(slim).reflect(writer);
    let changed = changes(events, generation, FirstSight::Pass).inspect(move |change| {
        if let Ok(Change::New(obj) | Change::Changed(obj) | Change::Deleted(obj)) = change {
            for agent in (referrers.of)(obj) {
                if referrers.queue.try_send(agent).is_err() {
                    referrers.overflow.inc();
                }
            }
        }
    });
    Controller::for_stream(objects(changed), store)
        .with_config(Config::default().concurrency(concurrency))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy(kind), ctx)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!("{kind} controller: {e}");
            }
            std::future::ready(())
        })
        .await;
}
