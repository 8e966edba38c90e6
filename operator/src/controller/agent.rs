//! The Agent reconcile: fetch (Persona, Workflow, handoff targets, the ConfigMaps its
//! knowledge reads) -> validate (the API
//! crate's pure validator) -> build (pure) -> the namespace's NetworkPolicy -> apply +
//! prune -> status. An invalid spec gets `Accepted=False` and a Warning Event and waits
//! for a change; its existing children keep running the last accepted configuration. So
//! does an Agent refused by policy (or whose namespace holds someone else's NetworkPolicy of
//! the operator's policy's name). Without the gateway's public key (see
//! [`crate::gateway_key`]) a new Agent is not accepted and an accepted one is held as it runs.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use switchboard_crds::common::{CONDITION_ACCEPTED, CONDITION_ROLLOUT_HELD, find_condition};
use switchboard_crds::resolve::resolve_variants;
use switchboard_crds::validate::{References, VariantRefs, check_variants, validate_agent};
use switchboard_crds::{Agent, AgentStatus, resolve};

use super::apply::{apply_candidate, apply_children, apply_status};
use super::rollout::{self, Decision, Gated};
use super::status::{Verdict, accepted, agent_status, replicas};
use super::{Context, Error, key_of, knowledge, network_policy, numbers, outage, policy};
use crate::build::{Desired, build, candidate, service};
use crate::gateway_key::{KeyMissing, REASON_KEY_MISSING};
use crate::lean::LeanDeployment;

/// The metrics label of Agent reconciles.
pub const KIND: &str = "agent";

/// How soon an Agent refused by policy (`policy.rs`) is checked again: what would change
/// the verdict (a ServiceAccount's annotation, a conflicting object going) does not wake it.
pub const POLICY_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// Reconciles one Agent; failures are counted, logged as Events and retried.
pub async fn reconcile(agent: Arc<Agent>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(KIND);
    match reconcile_inner(&agent, &ctx).await {
        Ok(action) => {
            ctx.succeeded(&key_of(KIND, agent.as_ref()));
            Ok(action)
        }
        Err(e) => {
            ctx.metrics.failure(KIND, e.metric_label());
            ctx.event(agent.as_ref(), EventType::Warning, "ReconcileFailed", e.to_string()).await;
            Err(e)
        }
    }
}

async fn reconcile_inner(agent: &Agent, ctx: &Context) -> Result<Action, Error> {
    let namespace = agent.namespace().ok_or_else(|| Error::Unexpected("an Agent without a namespace".into()))?;
    let name = agent.name_any();
    let client = &ctx.client;

    // Fetch from the caches (see `Stores`): a Persona, Workflow or handoff target that
    // appears later re-triggers this Agent through the same watch that fills its cache.
    ctx.stores.ready().await?;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &namespace);
    let persona = ctx.stores.personas.get(&ObjectRef::new(&agent.spec.persona_ref.name).within(&namespace));
    let workflow = ctx.stores.workflows.get(&ObjectRef::new(&agent.spec.workflow_ref.name).within(&namespace));
    let known = &ctx.stores.agents;
    let config_maps = knowledge::read(client, &namespace, &agent.spec).await?;

    // Validate.
    let agent_exists = |n: &str| known.get(&ObjectRef::new(n).within(&namespace)).is_some();
    let refs = References {
        persona: persona.as_ref().map(|p| &p.spec),
        workflow: workflow.as_ref().map(|w| &w.spec),
        agent_exists: &agent_exists,
        config_maps: &config_maps,
    };
    let mut problems = validate_agent(&name, &namespace, &agent.spec, refs);
    let variant_refs = VariantRefs::gather(
        &agent.spec,
        |n| ctx.stores.personas.get(&ObjectRef::new(n).within(&namespace)).map(|p| p.spec.clone()),
        |n| ctx.stores.workflows.get(&ObjectRef::new(n).within(&namespace)).map(|w| w.spec.clone()),
    );
    problems.extend(check_variants(&namespace, &agent.spec, &variant_refs));
    let verdict = accepted(&problems);

    let (Some(persona), Some(workflow), true) = (persona, workflow, verdict.ok) else {
        // Not accepted: keep what runs, report, wait for a change (of the Agent, its
        // Persona or Workflow, a ConfigMap it reads, or a handoff target appearing).
        return reject(agent, ctx, &verdict, Action::await_change()).await;
    };

    // What the validator cannot see: is one of its phone numbers another Agent's?
    if let Some(refused) = numbers::taken(agent, &known.state()) {
        return reject(agent, ctx, &refused, Action::await_change()).await;
    }

    // What the validator cannot see: may this Agent have what it asks the operator for?
    let account = agent.spec.credentials.as_ref().and_then(|c| c.service_account_name.as_deref());
    if let Some(account) = account
        && let Some(refused) = policy::service_account(&ctx.client, &ctx.policy, &namespace, account).await?
    {
        return reject(agent, ctx, &refused, Action::requeue(POLICY_RECHECK)).await;
    }

    if let Some(refused) = policy::secrets(&ctx.policy, &namespace, &agent.spec) {
        return reject(agent, ctx, &refused, Action::await_change()).await;
    }

    // What the pods need from the platform: the gateway's public key (its watch wakes
    // every Agent when it comes or changes).
    let key = match ctx.stores.gateway_key.current().await? {
        Ok(key) => key,
        Err(missing) => return wait_for_key(agent, ctx, &missing).await,
    };

    // Build and apply.
    let mut spec = resolve(agent, persona.as_ref(), workflow.as_ref(), &config_maps);
    spec.variants = resolve_variants(&agent.spec, &variant_refs);
    let desired = build(agent, &spec, &ctx.settings.with_gateway_key(key));
    // The namespace's NetworkPolicy first: no runtime pod runs without it.
    if let Some(refused) = network_policy::ensure(ctx, &namespace, agent).await? {
        return reject(agent, ctx, &refused, Action::requeue(POLICY_RECHECK)).await;
    }
    // May the wanted spec go live, or is it held until its AgentTests pass (`rollout.rs`)?
    let gated = rollout::gate(ctx, agent, &desired).await?;
    if let Decision::Held(_) = &gated.decision {
        return hold(agent, ctx, &verdict, &desired, &gated).await;
    }
    let deployment = match apply_children(ctx, &namespace, &name, &desired).await {
        Ok(deployment) => deployment,
        Err(Error::NotOwned { kind, namespace, name }) => {
            let refused = policy::name_taken(&kind, &namespace, &name);
            return reject(agent, ctx, &refused, Action::requeue(POLICY_RECHECK)).await;
        }
        Err(e) => return Err(e),
    };
    if rollout::is_held(agent.status.as_ref()) {
        // Promoted, or released: the candidate keeps no pod (it goes with the Agent).
        match apply_candidate(ctx, &namespace, &candidate::build(&name, &desired, 0)).await {
            Ok(()) | Err(Error::NotOwned { .. }) => {}
            Err(e) => return Err(e),
        }
        if gated.decision == (Decision::Open { promoted: true }) {
            let note = "every gating AgentTest passed the candidate: its spec rolls out to the live pods";
            ctx.event(agent, EventType::Normal, "RolloutPromoted", note.into()).await;
        }
    }

    // Status.
    let now = Timestamp::now();
    let previous = agent.status.as_ref();
    let mut status =
        agent_status(agent.metadata.generation, previous, &verdict, deployment, Some(service::endpoint(agent)), now);
    status.conditions.extend(rollout::held_condition(&gated.decision, previous, agent.metadata.generation, now));
    let switched = outage_condition(agent, ctx, &mut status, now);
    // An Event when a rejected spec becomes valid (not on every first acceptance: that
    // would be one more write per new Agent, and `kubectl get agents` shows it anyway).
    if write_status(agent, &agents, &status, ctx).await? && was_rejected(agent.status.as_ref()) {
        ctx.event(agent, EventType::Normal, "Accepted", "accepted now; runtime children applied".into()).await;
    }
    if let Some((kind, reason, note)) = switched {
        ctx.event(agent, kind, reason, note).await;
    }
    Ok(Action::requeue(ctx.resync))
}

/// Adds the `OutageMode` condition to `status`; the Event to publish once it is written,
/// when the switch flipped.
fn outage_condition(
    agent: &Agent,
    ctx: &Context,
    status: &mut AgentStatus,
    now: Timestamp,
) -> Option<(EventType, &'static str, String)> {
    let namespace = ctx.namespace_switch(&agent.namespace().unwrap_or_default());
    let condition = outage::condition(&agent.spec, &namespace, agent.status.as_ref(), agent.metadata.generation, now);
    let switched = outage::flip(agent.status.as_ref(), condition.as_ref());
    status.conditions.extend(condition);
    switched
}

/// Held (`gated`): the live children stay as they are; the status says why (written
/// first, so that a candidate never exists without a status that says so), then the
/// candidate children run the wanted spec on one pod.
async fn hold(
    agent: &Agent,
    ctx: &Context,
    verdict: &Verdict,
    desired: &Desired,
    gated: &Gated,
) -> Result<Action, Error> {
    let (namespace, name) = (agent.namespace().unwrap_or_default(), agent.name_any());
    let agents: Api<Agent> = Api::namespaced(ctx.client.clone(), &namespace);
    let (now, previous, generation) = (Timestamp::now(), agent.status.as_ref(), agent.metadata.generation);
    let mut status = agent_status(generation, previous, verdict, gated.live, Some(service::endpoint(agent)), now);
    let held = rollout::held_condition(&gated.decision, previous, generation, now);
    let before =
        previous.and_then(|s| find_condition(&s.conditions, CONDITION_ROLLOUT_HELD)).map(|c| c.message.clone());
    let note = held.as_ref().map(|c| c.message.clone()).filter(|m| before.as_ref() != Some(m));
    status.conditions.extend(held);
    let switched = outage_condition(agent, ctx, &mut status, now);
    write_status(agent, &agents, &status, ctx).await?;
    if let Some(note) = note {
        ctx.event(agent, EventType::Normal, "RolloutHeld", note).await;
    }
    if let Some((kind, reason, note)) = switched {
        ctx.event(agent, kind, reason, note).await;
    }
    match apply_candidate(ctx, &namespace, &candidate::build(&name, desired, 1)).await {
        Ok(()) => Ok(Action::requeue(ctx.resync)),
        Err(Error::NotOwned { kind, namespace, name }) => {
            let refused = policy::name_taken(&kind, &namespace, &name);
            reject(agent, ctx, &refused, Action::requeue(POLICY_RECHECK)).await
        }
        Err(e) => Err(e),
    }
}

/// Not accepted (`verdict`): keeps what runs, writes the status (and a Warning Event when
/// the verdict is new), and comes back per `then`.
async fn reject(agent: &Agent, ctx: &Context, verdict: &Verdict, then: Action) -> Result<Action, Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = agent.name_any();
    let agents: Api<Agent> = Api::namespaced(ctx.client.clone(), &namespace);
    let deployments: Api<LeanDeployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let deployment = deployments
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading Deployment {namespace}/{name}"), e))?;
    // Only a Deployment this Agent owns is its own (another one may hold its name).
    let uid = agent.metadata.uid.as_deref();
    let deployment = deployment.filter(|d| policy::may_write(Some(&d.metadata), uid));
    let endpoint = deployment.as_ref().map(|_| service::endpoint(agent));
    let status = agent_status(
        agent.metadata.generation,
        agent.status.as_ref(),
        verdict,
        deployment.as_ref().map(replicas),
        endpoint,
        Timestamp::now(),
    );
    if write_status(agent, &agents, &status, ctx).await? && accepted_changed(agent.status.as_ref(), verdict) {
        ctx.event(agent, EventType::Warning, &verdict.reason, verdict.message.clone()).await;
    }
    Ok(then)
}

/// No gateway public key yet (see [`crate::gateway_key`]): an Agent already accepted keeps
/// its pods, its status and so its route, and its changes wait (a Warning Event says so);
/// any other is not accepted. The key's watch wakes every Agent when the key comes.
async fn wait_for_key(agent: &Agent, ctx: &Context, missing: &KeyMissing) -> Result<Action, Error> {
    let accepted = agent.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED));
    let running = accepted.is_some_and(|c| c.status == "True");
    if !running {
        return reject(agent, ctx, &missing.verdict(), Action::await_change()).await;
    }
    let note = missing.held();
    tracing::warn!(agent = %agent.name_any(), namespace = ?agent.namespace(), "{note}");
    ctx.event(agent, EventType::Warning, REASON_KEY_MISSING, note).await;
    Ok(Action::await_change())
}

/// Writes `status` unless the Agent already has it; true when written.
async fn write_status(agent: &Agent, api: &Api<Agent>, status: &AgentStatus, ctx: &Context) -> Result<bool, Error> {
    if agent.status.as_ref() == Some(status) {
        return Ok(false);
    }
    apply_status(api, agent, status).await?;
    ctx.metrics.status_write(KIND);
    Ok(true)
}

fn was_rejected(previous: Option<&AgentStatus>) -> bool {
    previous.and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED)).is_some_and(|c| c.status == "False")
}

fn accepted_changed(previous: Option<&AgentStatus>, verdict: &Verdict) -> bool {
    let prev = previous.and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED));
    prev.is_none_or(|c| (c.status == "True") != verdict.ok || c.message != verdict.message)
}
