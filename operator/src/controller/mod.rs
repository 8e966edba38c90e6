//! The controllers: Agents (fetch -> validate -> build -> apply -> prune -> status; their
//! namespace's NetworkPolicy before their children), the `Accepted` status of Personas
//! and Workflows, and AgentTests (their scenarios run as Jobs, `agent_test.rs`). Shared here: the context every reconcile gets, the error type (`error.rs`), and the
//! error policy (invalid specs are not errors — they get `Accepted=False` and wait for a
//! change; API failures back off exponentially per object).

pub mod agent;
pub mod agent_test;
pub mod agent_test_build;
pub mod agent_test_status;
pub mod apply;
pub mod error;
pub mod knowledge;
pub mod network_policy;
pub mod numbers;
pub mod outage;
pub mod policy;
pub mod resources;
pub mod rollout;
pub mod status;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use switchboard_crds::{Agent, Persona, Workflow};

use crate::metrics::Metrics;
use crate::own_writes::OwnWrites;
use crate::settings::BuildSettings;
pub use error::Error;

/// The caches reconciles read instead of the API. Each is filled by the watch whose events
/// also trigger the reconciles that depend on it, so a reconcile never sees a cache older
/// than the event that woke it.
#[derive(Clone)]
pub struct Stores {
    /// Agents (the Agent controller's own cache; handoff targets are looked up here).
    pub agents: Store<Agent>,
    /// Personas.
    pub personas: Store<Persona>,
    /// Workflows.
    pub workflows: Store<Workflow>,
    /// Metadata of the HorizontalPodAutoscalers the operator labelled (for pruning).
    pub hpas: Store<PartialObjectMeta<DynamicObject>>,
    /// Metadata of the operator's NetworkPolicies, one per namespace with Agents (empty when
    /// the policy is off; see `network_policy.rs`).
    pub network_policies: Store<PartialObjectMeta<NetworkPolicy>>,
    /// The gateway's public key for runtime pods (fixed, or followed in a ConfigMap).
    pub gateway_key: crate::gateway_key::GatewayKey,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

impl Stores {
    /// Waits until the Persona and Workflow caches hold their initial lists.
    pub async fn ready(&self) -> Result<(), Error> {
        let closed = || Error::Unexpected("a cache's watch ended (shutting down)".into());
        wait_ready(&self.personas).await.ok_or_else(closed)?;
        wait_ready(&self.workflows).await.ok_or_else(closed)?;
        Ok(())
    }
}

/// Waits until `store` holds its initial list (`None` when its watch is gone).
///
/// `Store::wait_until_ready` wakes only the task that polled it last (a oneshot inside), and
/// the controller that owns a store also waits on it; so this re-polls every 50 ms instead
/// of parking on it once.
pub async fn wait_ready<K>(store: &Store<K>) -> Option<()>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(50), store.wait_until_ready()).await {
            Ok(Ok(())) => return Some(()),
            Ok(Err(_)) => return None,
            Err(_) => {}
        }
    }
}

/// What every reconcile gets.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Settings shared by every Agent's children (HPA version resolved by discovery).
    pub settings: BuildSettings,
    /// The metrics.
    pub metrics: Metrics,
    /// Publishes Kubernetes Events.
    pub recorder: Recorder,
    /// How long a healthy Agent waits before a resync.
    pub resync: Duration,
    /// The caches.
    pub stores: Stores,
    /// Which ServiceAccounts Agents may use (see `policy.rs`).
    pub policy: policy::Policy,
    /// What the operator last wrote to each child (to skip its own watch events).
    pub own_writes: OwnWrites,
    /// What it last wrote to each namespace's NetworkPolicy.
    pub network_policies: network_policy::ledger::NetworkPolicies,
    backoff: Mutex<HashMap<String, u32>>,
    /// The Agent controller's trigger queue (set once the controllers are wired): the
    /// AgentTest reconcile wakes the Agents whose held rollout a finished run decides.
    pub agent_triggers: std::sync::OnceLock<(tokio::sync::mpsc::Sender<ObjectRef<Agent>>, prometheus::IntCounter)>,
    /// The namespaces' outage switches (set once their watch starts, [`outage::namespace`]).
    pub outage_switches: std::sync::OnceLock<Arc<outage::namespace::Switches>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Context {
    /// A context.
    pub fn new(
        client: Client,
        settings: BuildSettings,
        metrics: Metrics,
        recorder: Recorder,
        resync: Duration,
        stores: Stores,
        policy: policy::Policy,
    ) -> Self {
        Self {
            client,
            settings,
            metrics,
            recorder,
            resync,
            stores,
            policy,
            own_writes: OwnWrites::default(),
            network_policies: Default::default(),
            backoff: Mutex::default(),
            agent_triggers: std::sync::OnceLock::new(),
            outage_switches: std::sync::OnceLock::new(),
        }
    }

    /// `namespace`'s outage switch as known (unknown before its watch has listed).
    pub fn namespace_switch(&self, namespace: &str) -> outage::NamespaceSwitch {
        self.outage_switches.get().map_or(outage::NamespaceSwitch::Unknown, |switches| switches.of(namespace))
    }

    /// Wakes the reconcile of Agent `namespace/name` (no-op before the controllers are
    /// wired; a full queue is counted and left to the Agent's resync).
    pub fn trigger_agent(&self, namespace: &str, name: &str) {
        if let Some((queue, overflow)) = self.agent_triggers.get()
            && queue.try_send(ObjectRef::new(name).within(namespace)).is_err()
        {
            overflow.inc();
        }
    }

    /// Publishes an Event about `obj`; a failure to publish is logged, never fatal.
    pub async fn event<K: Resource<DynamicType = ()>>(&self, obj: &K, type_: EventType, reason: &str, note: String) {
        self.metrics.event(match type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        });
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncate(note, 1000)),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            tracing::warn!("cannot publish event {reason} for {}: {e}", obj.name_any());
        }
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn succeeded(&self, key: &str) {
        if let Ok(mut b) = self.backoff.lock() {
            b.remove(key);
        }
    }

    /// The delay before retrying `key` after one more failure: 1 s, doubling, at most 5 min.
    pub fn backoff(&self, key: &str) -> Duration {
        let attempts = self.backoff.lock().map_or(0, |mut b| {
            let n = b.entry(key.to_owned()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        });
        Duration::from_secs(1u64 << attempts.saturating_sub(1).min(8)).min(Duration::from_secs(300))
    }
}

/// The key of an object for backoff bookkeeping.
pub fn key_of<K: Resource>(kind: &str, obj: &K) -> String {
    format!("{kind}/{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Retries a failed reconcile with per-object exponential backoff.
pub fn error_policy<K: Resource>(kind: &'static str) -> impl Fn(Arc<K>, &Error, Arc<Context>) -> Action {
    move |obj, error, ctx| {
        let delay = ctx.backoff(&key_of(kind, obj.as_ref()));
        tracing::warn!(kind, name = %obj.name_any(), retry_in = ?delay, "reconcile failed: {error}");
        Action::requeue(delay)
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}
