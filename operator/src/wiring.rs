//! How the watches feed the controllers (see [`crate::triggers`] for what passes):
//!
//! - one Agent watch feeds the Agent cache, wakes the routing-table publisher on every
//!   event, queues the Agents that hand off to an Agent that appeared or went, and — filtered
//!   to generation changes — drives the Agent controller;
//! - Persona and Workflow watches (generation changes and deletions) wake the Agents that
//!   reference them, and separate watches drive their own `Accepted` status;
//! - ConfigMap, Deployment and Service watches (operator-labelled only) wake the owning Agent
//!   when a child is edited or deleted, or a Deployment's replica counts change.

use std::sync::Arc;

use futures_util::{Stream, StreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use prometheus::IntCounter;
use serde::de::DeserializeOwned;
use switchboard_crds::{Agent, Persona, Workflow};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::controller::{Context, Error, agent, error_policy};
use crate::run::{owned_watch_config, scoped};
use crate::settings::RunArgs;
use crate::triggers::{
    Change, FirstSight, changes, generation, handoff_referrers, hash_of, objects, persona_referrers, workflow_referrers,
};

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
    let events = watcher(api, watcher::Config::default()).default_backoff().reflect(writer).inspect(move |_| {
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
    });
    objects(filtered)
}

/// The Agent controller, run until `stop`.
pub async fn agent_controller(
    client: &Client,
    args: &RunArgs,
    agent_stream: impl Stream<Item = Result<Agent, watcher::Error>> + Send + 'static,
    agents: Store<Agent>,
    mut triggered: mpsc::Receiver<ObjectRef<Agent>>,
    ctx: Arc<Context>,
    stop: CancellationToken,
) {
    let ns = args.namespace.as_deref();
    let personas = changes(
        watcher(scoped::<Persona>(client.clone(), ns), watcher::Config::default()).default_backoff(),
        generation,
        FirstSight::Pass,
    );
    let workflows = changes(
        watcher(scoped::<Workflow>(client.clone(), ns), watcher::Config::default()).default_backoff(),
        generation,
        FirstSight::Pass,
    );
    let (for_personas, for_workflows) = (agents.clone(), agents.clone());
    let queued = stream::poll_fn(move |cx| triggered.poll_recv(cx));
    Controller::for_stream(agent_stream, agents)
        .owns_stream(owned::<ConfigMap>(client, ns, |cm| hash_of(&cm.data)))
        .owns_stream(owned::<Service>(client, ns, |svc| hash_of(&svc.spec)))
        .owns_stream(owned::<Deployment>(client, ns, |d| {
            let spec_replicas = d.spec.as_ref().and_then(|s| s.replicas);
            let available = d.status.as_ref().and_then(|s| s.available_replicas);
            hash_of(&(d.metadata.generation, spec_replicas, available))
        }))
        .watches_stream(objects(personas), move |p: Persona| {
            persona_referrers(&for_personas, p.namespace(), &p.name_any())
        })
        .watches_stream(objects(workflows), move |w: Workflow| {
            workflow_referrers(&for_workflows, w.namespace(), &w.name_any())
        })
        .reconcile_on(queued)
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

fn owned<K>(
    client: &Client,
    namespace: Option<&str>,
    key: impl Fn(&K) -> u64 + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let events = watcher(scoped::<K>(client.clone(), namespace), owned_watch_config()).default_backoff();
    objects(changes(events, key, FirstSight::Skip))
}

/// A controller that sets the `Accepted` status of Personas or Workflows, run until `stop`.
pub async fn status_controller<K, F, Fut>(
    api: Api<K>,
    reconcile: F,
    kind: &'static str,
    ctx: Arc<Context>,
    stop: CancellationToken,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<kube::runtime::controller::Action, Error>> + Send + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let events = watcher(api, watcher::Config::default()).default_backoff().reflect(writer);
    Controller::for_stream(objects(changes(events, generation, FirstSight::Pass)), store)
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
