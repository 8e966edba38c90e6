//! `switchboard-operator run`: start-up checks (CRDs installed, HPA API version), the
//! health/metrics server, leader election, and — while leading — the controllers, the
//! routing-table publisher and the gateway key's follower, until shutdown (graceful:
//! running reconciles finish, the Lease is released) or until leadership is lost (an
//! error, so the process restarts clean).

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{ListParams, PartialObjectMeta};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector;
use kube::runtime::reflector::{ObjectRef, store::Writer};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use switchboard_crds::{Agent, Persona, Workflow};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::build::hpa::api_resource;
use crate::build::hpa::{HPA_V2, HPA_V2BETA2};
use crate::controller::policy::{Policy, PolicyError};
use crate::controller::{Context, Stores, agent_test, knowledge, network_policy, resources};
use crate::gateway_key::GatewayKey;
use crate::guard::{Fence, guarded};
use crate::http::{Health, ServeError, bind};
use crate::leader::LeaderElector;
use crate::metrics::Metrics;
use crate::settings::RunArgs;
use crate::watch::scoped;
use crate::wiring::Referrers;
use crate::{routes, triggers, wiring};

/// Capacity of the queue of Agents to re-reconcile because something they use changed
/// (a full queue drops triggers and counts them; the periodic resync repairs them).
pub const TRIGGER_QUEUE: usize = 16_384;

/// Why the operator stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The CRDs are not installed.
    #[error(
        "the {0} CustomResourceDefinition is not installed; install the CRDs first: \
         `kubectl apply --server-side -f crds/` (or `helm install` the operator chart)"
    )]
    CrdsMissing(String),
    /// An API request at start-up failed.
    #[error("{action}: {source}")]
    Kube {
        /// What the operator was doing.
        action: String,
        /// The cause.
        source: kube::Error,
    },
    /// The health/metrics server could not start.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// `--agent-service-accounts` has an entry that is not `namespace/name`.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// Another replica took the Lease, or it could not be renewed.
    #[error("lost the leader Lease; exiting so a restart starts clean")]
    LostLeadership,
}

impl RunError {
    /// A short, bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            RunError::CrdsMissing(_) => "crds_missing",
            RunError::Kube { .. } => "api",
            RunError::Serve(e) => e.metric_label(),
            RunError::Policy(_) => "settings",
            RunError::LostLeadership => "lost_leadership",
        }
    }
}

/// Runs the operator until `shutdown` is cancelled.
pub async fn run(args: RunArgs, client: Client, metrics: Metrics, shutdown: CancellationToken) -> Result<(), RunError> {
    let health = Arc::new(Health::default());
    let (addr, serve) = bind(args.metrics_addr, metrics.clone(), health.clone(), shutdown.clone()).await?;
    let server = tokio::spawn(serve);
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    let result = lead(args, client, metrics, &health, shutdown.clone()).await;
    shutdown.cancel();
    if let Err(e) = server.await {
        tracing::warn!("metrics server task: {e}");
    }
    result
}

async fn lead(
    mut args: RunArgs,
    client: Client,
    metrics: Metrics,
    health: &Health,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let policy = Policy::parse(&args.agent_service_accounts)?.with_secrets(&args.agent_secrets)?;
    check_crds(&client, args.namespace.as_deref()).await?;
    if args.build.hpa_api_version.is_none() {
        args.build.hpa_api_version = Some(discover_hpa_version(&client).await?);
    }
    // The gateway reads the routing table: unless told otherwise, it runs beside it.
    if args.build.network_policy.gateway_namespace.is_none() {
        args.build.network_policy.gateway_namespace = Some(args.routes_location().0);
    }
    health.set_ready(true);
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let timeout = Duration::from_secs(args.api_timeout_seconds.max(1));
    let fence = Fence::new();
    // Everything the controllers send: with deadlines, and no write once the fence closes.
    let fenced = guarded(client.clone(), timeout, Some(fence.clone()));
    let elector = LeaderElector::new(
        (guarded(client, timeout, None), fenced.clone()),
        &args.operator_namespace,
        &args.lease_name,
        &identity,
        Duration::from_secs(u64::from(args.lease_seconds.max(3))),
        fence.clone(),
    );
    let client = fenced;
    tracing::info!(identity, lease = %args.lease_name, "waiting for the leader Lease");
    if !elector.acquire(&shutdown).await {
        return Ok(());
    }
    tracing::info!(identity, "leading");
    metrics.leader.set(1);
    let lost = CancellationToken::new();
    let stop = shutdown.child_token();
    let keeper = tokio::spawn({
        let (elector, shutdown, lost, stop) = (elector.clone(), shutdown.clone(), lost.clone(), stop.clone());
        let leader = metrics.leader.clone();
        async move {
            elector.keep(shutdown, lost).await;
            leader.set(0);
            stop.cancel();
        }
    });
    let recorder = Recorder::new(
        client.clone(),
        Reporter { controller: crate::build::FIELD_MANAGER.to_owned(), instance: Some(identity) },
    );
    controllers(&args, client, recorder, policy, metrics.clone(), stop.clone()).await;
    stop.cancel();
    if let Err(e) = keeper.await {
        tracing::warn!("lease keeper task: {e}");
    }
    metrics.leader.set(0);
    if lost.is_cancelled() {
        return Err(RunError::LostLeadership);
    }
    if let Err(e) = elector.release().await {
        tracing::warn!("releasing the Lease: {e}");
    }
    tracing::info!("stopped");
    Ok(())
}

async fn check_crds(client: &Client, namespace: Option<&str>) -> Result<(), RunError> {
    async fn check<K>(client: &Client, namespace: Option<&str>) -> Result<(), RunError>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        match scoped::<K>(client.clone(), namespace).list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Err(RunError::CrdsMissing(K::kind(&()).into_owned())),
            Err(source) => Err(RunError::Kube { action: format!("listing {}s", K::kind(&())), source }),
        }
    }
    check::<Agent>(client, namespace).await?;
    check::<Workflow>(client, namespace).await?;
    check::<Persona>(client, namespace).await
}

/// `autoscaling/v2` when the server serves it, else `autoscaling/v2beta2` (Kubernetes < 1.23).
pub async fn discover_hpa_version(client: &Client) -> Result<String, RunError> {
    for version in [HPA_V2, HPA_V2BETA2] {
        match client.list_api_group_resources(version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == "horizontalpodautoscalers") => {
                tracing::info!("writing HorizontalPodAutoscalers as {version}");
                return Ok(version.to_owned());
            }
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(source) => return Err(RunError::Kube { action: format!("discovering {version}"), source }),
        }
    }
    tracing::warn!("the server serves neither {HPA_V2} nor {HPA_V2BETA2}; Agents with autoscaling will fail to apply");
    Ok(HPA_V2.to_owned())
}

fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_owned()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "switchboard-operator".to_owned());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{host}-{}-{nanos:x}", std::process::id())
}

/// Runs the Agent, Persona, Workflow and AgentTest controllers, the routing-table publisher
/// and the NetworkPolicy watch and owner flush until `stop`.
async fn controllers(
    args: &RunArgs,
    client: Client,
    recorder: Recorder,
    policy: Policy,
    metrics: Metrics,
    stop: CancellationToken,
) {
    let ns = args.namespace.as_deref();
    let (agents, agent_writer) = reflector::store::<Agent>();
    let (personas, persona_writer) = reflector::store::<Persona>();
    let (workflows, workflow_writer) = reflector::store::<Workflow>();
    let hpa_resource = api_resource(args.build.hpa_api_version());
    let hpa_writer = Writer::new(hpa_resource);
    let (gateway_key, key_watch) = gateway_key(args, &client, &metrics, stop.clone());
    let (network_policies, network_policy_writer) = reflector::store::<PartialObjectMeta<NetworkPolicy>>();
    let (persona_store, workflow_store) = (personas.clone(), workflows.clone());
    let stores = Stores {
        agents: agents.clone(),
        personas,
        workflows,
        hpas: hpa_writer.as_reader(),
        network_policies,
        gateway_key,
    };
    let ctx = Arc::new(Context::new(
        client.clone(),
        args.build.clone(),
        metrics.clone(),
        recorder,
        Duration::from_secs(args.resync_seconds.max(1)),
        stores,
        policy,
    ));
    let (notify, notified) = watch::channel(());
    // A namespace's outage switch reaches the table (and flips are Events on its ConfigMap).
    let (switches, switch_watch) =
        crate::controller::outage::namespace::run(&client, ns, notify.clone(), ctx.clone(), stop.clone());
    let sources =
        routes::Sources { agents: agents.clone(), personas: persona_store, workflows: workflow_store, switches };
    // A Persona's or Workflow's change reaches the table's console summaries.
    let (persona_notify, workflow_notify) = (notify.clone(), notify.clone());
    let (triggers, triggered) = mpsc::channel::<ObjectRef<Agent>>(TRIGGER_QUEUE);
    let overflow = metrics.trigger_overflow.clone();
    // Finished runs of gating AgentTests wake the Agents they decide (`rollout.rs`).
    let _ = ctx.agent_triggers.set((triggers.clone(), overflow.clone()));
    let agent_stream = wiring::agent_stream(
        scoped(client.clone(), ns),
        agent_writer,
        agents.clone(),
        notify,
        triggers.clone(),
        overflow.clone(),
    );
    let inputs = wiring::AgentInputs { stream: agent_stream, store: agents.clone(), triggered, hpa_writer };
    let agent_controller = wiring::agent_controller(&client, args, inputs, ctx.clone(), stop.clone());
    let queue = (triggers.clone(), overflow.clone());
    let policy_watch = network_policy::run(&client, ns, network_policy_writer, ctx.clone(), queue, stop.clone());
    let knowledge_watch =
        knowledge::run(&client, ns, agents.clone(), (triggers.clone(), overflow.clone()), stop.clone());
    let for_personas = agents.clone();
    let persona_referrers = Referrers {
        of: Box::new(move |p: &Persona| {
            persona_notify.send_replace(());
            triggers::persona_referrers(&for_personas, p.namespace(), &p.name_any())
        }),
        queue: triggers.clone(),
        overflow: overflow.clone(),
    };
    let persona_controller = wiring::status_controller(
        scoped(client.clone(), ns),
        persona_writer,
        persona_referrers,
        (resources::reconcile_persona, resources::PERSONA),
        args.concurrency,
        ctx.clone(),
        stop.clone(),
    );
    let for_workflows = agents.clone();
    let workflow_referrers = Referrers {
        of: Box::new(move |w: &Workflow| {
            workflow_notify.send_replace(());
            triggers::workflow_referrers(&for_workflows, w.namespace(), &w.name_any())
        }),
        queue: triggers,
        overflow,
    };
    let agent_tests = agent_test::run(&client, args, ctx.clone(), stop.clone());
    let workflow_controller = wiring::status_controller(
        scoped(client.clone(), ns),
        workflow_writer,
        workflow_referrers,
        (resources::reconcile_workflow, resources::WORKFLOW),
        args.concurrency,
        ctx,
        stop.clone(),
    );
    let publisher = routes::publish(client.clone(), sources, notified, args.routes_location(), metrics, stop);
    tokio::join!(
        agent_controller,
        persona_controller,
        workflow_controller,
        publisher,
        key_watch,
        policy_watch,
        knowledge_watch,
        agent_tests,
        switch_watch
    );
}

/// The gateway public key of runtime pods, and the watch that follows it until `stop`
/// (nothing to run for a key given at start, or none).
fn gateway_key(
    args: &RunArgs,
    client: &Client,
    metrics: &Metrics,
    stop: CancellationToken,
) -> (GatewayKey, BoxFuture<'static, ()>) {
    if let Some((namespace, name)) = args.gateway_key_location() {
        let api = Api::namespaced(client.clone(), &namespace);
        let (key, watch) = GatewayKey::published(api, &namespace, &name, metrics.gateway_key.clone(), stop);
        tracing::info!(configmap = %format!("{namespace}/{name}"), "following the gateway's public key");
        return (key, watch.boxed());
    }
    let key = args.build.gateway_public_key.clone();
    metrics.gateway_key.set(i64::from(key.is_some()));
    match &key {
        Some(key) => tracing::info!(public_key = %key, "runtime pods get the gateway public key(s) given"),
        None => tracing::warn!(
            "no gateway public key (--gateway-public-key or --gateway-key-config-map): runtime pods accept no \
             session context, so a gateway cannot hand sessions over between them"
        ),
    }
    (GatewayKey::Fixed(key), std::future::ready(()).boxed())
}
