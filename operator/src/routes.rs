//! The gateway's routing table ([`switchboard_crds::routing`]): built from the Agent cache
//! (pure, [`table`]) and published as a ConfigMap by server-side apply whenever it changes.
//! The Agent watch notifies the publisher on every event (status changes included, which is
//! how `ready` follows the pods); the publisher waits [`DEBOUNCE`] to batch bursts, and
//! during a long burst (1,000 Agents appearing) writes at most once per [`MIN_INTERVAL`]:
//! the table is one object holding every route, so writing it on every small change would
//! be the largest write load of all. Either way the table trails a change by under a second.
//!
//! The table also carries what the web console shows of each Agent (persona without its
//! prompt, tools, handoffs, workflow graph: [`switchboard_crds::routing::summary`]), made
//! from the Persona and Workflow caches; their changes wake the publisher too (`run.rs`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{PartialObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use switchboard_crds::catalog::namespace_of;
use switchboard_crds::common::{CONDITION_ACCEPTED, CONDITION_READY, find_condition};
use switchboard_crds::routing::summary::AgentSummary;
use switchboard_crds::routing::{ROUTES_KEY, RUNTIME_PORT, Route, RouteVariant, RoutingTable, SESSION_PATH};
use switchboard_crds::{Agent, Persona, Workflow, resolve};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::build::{FIELD_MANAGER, MANAGED_BY, candidate, service};
use crate::metrics::Metrics;

/// How long the publisher gathers changes before it writes.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// The least time between two writes of the table.
pub const MIN_INTERVAL: Duration = Duration::from_millis(500);

/// Why the table could not be published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The ConfigMap could not be written.
    #[error("cannot write the routing table ConfigMap {namespace}/{name}: {source}")]
    Kube {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The cause.
        source: kube::Error,
    },
}

impl PublishError {
    /// A short, bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        "routes_write"
    }
}

/// The routing table of the Agents in `agents`: every Agent whose `Accepted` is `True`.
/// An Agent whose rollout is held until its AgentTests pass also gets a test-only route
/// to its candidate pods' Service ([`RoutingTable::candidates`]); one running variants, their
/// weights ([`RoutingTable::variants`]: only here, so a change of weights rolls no pod).
/// The namespaces switched into outage mode as a whole go in as they are (`switched`,
/// [`crate::controller::outage::namespace`]).
pub fn table<'a>(
    agents: impl IntoIterator<Item = &'a Agent>,
    switched: std::collections::BTreeMap<String, switchboard_crds::routing::NamespaceOutage>,
) -> RoutingTable {
    let mut candidates = std::collections::BTreeMap::new();
    let mut variants = std::collections::BTreeMap::new();
    let mut outages = std::collections::BTreeMap::new();
    let routes = agents
        .into_iter()
        .filter_map(|agent| {
            let route = route(agent)?;
            let key = format!("{}/{}", route.namespace, route.name);
            if crate::controller::rollout::is_held(agent.status.as_ref()) {
                candidates.insert(key.clone(), candidate::host(&route.name, &route.namespace));
            }
            if let Some(outage) = switchboard_crds::routing::RouteOutage::of(&agent.spec) {
                outages.insert(key.clone(), outage);
            }
            if !agent.spec.variants.is_empty() {
                let weights =
                    agent.spec.variants.iter().map(|v| RouteVariant { name: v.name.clone(), weight: v.weight });
                variants.insert(key, weights.collect());
            }
            Some(route)
        })
        .collect();
    RoutingTable { candidates, variants, outages, namespace_outages: switched, ..RoutingTable::new(routes) }
}

/// The console's summaries of `agents` (`namespace/name` -> summary), for those whose
/// Persona and Workflow are in the caches; knowledge is not read (it only feeds prompts).
pub fn summaries<'a>(
    agents: impl IntoIterator<Item = &'a Agent>,
    personas: &Store<Persona>,
    workflows: &Store<Workflow>,
) -> Vec<(String, AgentSummary)> {
    agents
        .into_iter()
        .filter_map(|agent| {
            let namespace = namespace_of(agent);
            let persona = personas.get(&ObjectRef::new(&agent.spec.persona_ref.name).within(&namespace))?;
            let workflow = workflows.get(&ObjectRef::new(&agent.spec.workflow_ref.name).within(&namespace))?;
            let spec = resolve(agent, &persona, &workflow, &Default::default());
            Some((format!("{namespace}/{}", agent.name_any()), AgentSummary::of(&spec)))
        })
        .collect()
}

fn route(agent: &Agent) -> Option<Route> {
    let status = agent.status.as_ref()?;
    let is_true = |t: &str| find_condition(&status.conditions, t).is_some_and(|c| c.status == "True");
    if !is_true(CONDITION_ACCEPTED) {
        return None;
    }
    Some(Route {
        name: agent.name_any(),
        namespace: namespace_of(agent),
        mode: agent.spec.mode,
        service: service::host(agent),
        port: RUNTIME_PORT,
        path: SESSION_PATH.to_owned(),
        handoffs: agent.spec.handoffs.iter().map(|h| h.agent.clone()).collect(),
        expose: agent.spec.gateway.expose,
        default: agent.spec.gateway.default,
        ready: is_true(CONDITION_READY),
        ready_replicas: status.ready_replicas.unwrap_or(0),
        redact: agent.spec.record.redact.clone(),
        identity_keys: agent.spec.identity_keys.clone(),
        capacity: switchboard_crds::routing::RouteCapacity::of(
            &agent.spec.capacity,
            &agent.spec.model,
            agent.spec.mode,
        ),
        numbers: agent.spec.telephony.numbers.clone(),
        analysis: agent.spec.record.analysis.clone(),
        app_context: agent.spec.app_context.clone(),
        answering_machine: agent.spec.telephony.answering_machine.clone(),
    })
}

/// The ConfigMap that carries `table`.
pub fn config_map(namespace: &str, name: &str, table: &RoutingTable) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(
                [
                    ("app.kubernetes.io/name".to_owned(), "switchboard-routes".to_owned()),
                    ("app.kubernetes.io/part-of".to_owned(), "switchboard".to_owned()),
                    ("app.kubernetes.io/managed-by".to_owned(), MANAGED_BY.to_owned()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        data: Some([(ROUTES_KEY.to_owned(), table.to_json())].into()),
        ..Default::default()
    }
}

/// The caches the table is made from.
#[derive(Clone)]
pub struct Sources {
    /// Agents (the routes).
    pub agents: Store<Agent>,
    /// Personas (the console's summaries).
    pub personas: Store<Persona>,
    /// Workflows (the console's summaries).
    pub workflows: Store<Workflow>,
    /// The namespaces' outage switches (`switchboard-outage` ConfigMaps).
    pub switches: Store<ConfigMap>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources").field("agents", &self.agents.state().len()).finish_non_exhaustive()
    }
}

/// Publishes the table of `sources` to `namespace/name` on every notification until
/// `shutdown`; a failed write is retried after a second.
pub async fn publish(
    client: Client,
    sources: Sources,
    mut notified: watch::Receiver<()>,
    (namespace, name): (String, String),
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    // The response is read as metadata only: the table can be large.
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client, &namespace);
    let Sources { agents, personas, workflows, switches } = sources;
    let ready = (
        crate::controller::wait_ready(&agents).await,
        crate::controller::wait_ready(&personas).await,
        crate::controller::wait_ready(&workflows).await,
        // Never a table without a namespace's switch that is on.
        crate::controller::wait_ready(&switches).await,
    );
    if ready != (Some(()), Some(()), Some(()), Some(())) {
        return;
    }
    let mut last: Option<RoutingTable> = None;
    let mut written = tokio::time::Instant::now();
    let mut warned = 0;
    loop {
        let state: Vec<Arc<Agent>> = agents.state();
        let routes = table(state.iter().map(Arc::as_ref), crate::controller::outage::namespace::switched(&switches));
        let (current, left_out) =
            routes.with_summaries(summaries(state.iter().map(Arc::as_ref), &personas, &workflows));
        if left_out != warned {
            if left_out > 0 {
                tracing::warn!(
                    "the routing table is near a ConfigMap's size limit: {left_out} Agents are listed in the web \
                     console without persona, tools or workflow"
                );
            }
            warned = left_out;
        }
        if last.as_ref() != Some(&current) {
            let cm = config_map(&namespace, &name, &current);
            match api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&cm)).await {
                Ok(_) => {
                    written = tokio::time::Instant::now();
                    metrics.routes_published.inc();
                    metrics.routes.set(i64::try_from(current.routes.len()).unwrap_or(i64::MAX));
                    last = Some(current);
                }
                Err(source) => {
                    let e = PublishError::Kube { namespace: namespace.clone(), name: name.clone(), source };
                    tracing::warn!("{e}; retrying in 1 s");
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = notified.changed() => if changed.is_err() { return },
        }
        tokio::time::sleep(DEBOUNCE).await;
        tokio::time::sleep_until(written + MIN_INTERVAL).await;
        notified.borrow_and_update();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, accepted: Option<&str>, ready: &str) -> Agent {
        let mut conditions = vec![];
        if let Some(a) = accepted {
            conditions.push(serde_json::json!({"type": "Accepted", "status": a, "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
        }
        conditions.push(serde_json::json!({"type": "Ready", "status": ready, "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
        serde_json::from_value(serde_json::json!({
            "apiVersion": "switchboard.dev/v1alpha1", "kind": "Agent",
            "metadata": {"name": name, "namespace": "bank"},
            "spec": {"mode": "voice", "personaRef": {"name": "p"}, "workflowRef": {"name": "w"},
                     "handoffs": [{"agent": "idv"}], "gateway": {"default": true}},
            "status": {"conditions": conditions, "readyReplicas": 2}
        }))
        .expect("an Agent")
    }

    #[test]
    fn only_accepted_agents_are_routed_with_their_readiness() {
        let agents = [
            agent("b", Some("True"), "True"),
            agent("a", Some("True"), "False"),
            agent("rejected", Some("False"), "True"),
            agent("new", None, "False"),
        ];
        let t = table(agents.iter(), Default::default());
        let names: Vec<_> = t.routes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "b"], "sorted, Accepted only");
        let b = t.route("bank", "b").expect("b");
        assert!(b.ready && b.default && b.expose);
        assert_eq!((b.service.as_str(), b.port, b.ready_replicas), ("b.bank.svc", 8080, 2));
        assert_eq!(b.handoffs, ["idv"]);
        assert!(!t.route("bank", "a").expect("a").ready);
        assert!(t.candidates.is_empty());
        let mut held = agent("held", Some("True"), "True");
        let condition = serde_json::json!({"type": "RolloutHeld", "status": "True", "reason": "TestsPending",
            "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        held.status.as_mut().expect("status").conditions.push(serde_json::from_value(condition).expect("condition"));
        let with = table([&agents[0], &held], Default::default());
        assert_eq!(with.candidate("bank", "held"), Some("held-candidate.bank.svc"));
        assert_eq!((with.candidate("bank", "b"), with.routes.len()), (None, 2), "a candidate is no route of its own");
        let cm = config_map("ops", "routes", &t);
        let data = cm.data.expect("data");
        assert_eq!(RoutingTable::parse(&data[ROUTES_KEY]).expect("parses"), t);
    }

    #[test]
    fn an_agents_variant_weights_are_in_the_table() {
        let mut varied = agent("b", Some("True"), "True");
        varied.spec.variants = serde_json::from_value(serde_json::json!([
            {"name": "control", "weight": 95}, {"name": "brief", "weight": 5, "systemPrompt": "Be brief."}
        ]))
        .expect("variants");
        let t = table([&varied, &agent("a", Some("True"), "True")], Default::default());
        let weights: Vec<_> = t.variants["bank/b"].iter().map(|v| (v.name.as_str(), v.weight)).collect();
        assert_eq!(weights, [("control", 95), ("brief", 5)]);
        assert!(!t.variants.contains_key("bank/a"), "an Agent without variants has no entry");
        assert!(t.pick_variant("bank", "b", "caller").is_some() && t.pick_variant("bank", "a", "caller").is_none());
        assert_eq!(RoutingTable::parse(&t.to_json()).expect("parses"), t);
    }
}
