//! Apply of the namespace's NetworkPolicy ([`crate::build::network_policy`]): before an
//! Agent's children are applied, its namespace must have the operator's policy, current;
//! runtime pods never run a moment without it (the policy selects them by label, whichever
//! Agent they belong to).
//!
//! - **Writes are rare.** The policy is applied (server-side apply, the operator's field
//!   manager, owners = every Agent of the namespace in the cache) before the Agent's
//!   children when it is missing, when the settings changed, or when someone else changed
//!   it (a generation later than the operator's write left), and once per namespace after a
//!   restart. Reconciles of one namespace take turns (a lock per namespace).
//! - **Owners are added in batches.** An Agent that finds the current policy without itself
//!   among the owners goes on at once (the policy already covers its pods) and leaves its
//!   namespace to the owner flush, which writes the whole owner list at most every
//!   [`FLUSH_INTERVAL`]: a burst of 1,000 new Agents writes the policy a few times, not
//!   1,000 times with ever longer lists.
//! - **Never over someone else's.** Before any write, the object of that name is read: one
//!   no Agent owns (a person's, the Helm chart's) stays as it is, and the Agent gets
//!   `Accepted=False`, reason [`REASON_NETWORK_POLICY_TAKEN`], checked again periodically
//!   like the other refusals of `policy.rs` — no pods without the policy.
//! - **Repaired at once.** A watch of the operator's policies (metadata only, by label and
//!   name) keeps the cache read here, and wakes one Agent of the namespace when a policy is
//!   deleted or edited by anyone else; that Agent's reconcile applies it again (unless its
//!   last Agent went, which is the garbage collector's deletion).

pub mod ledger;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{PartialObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use prometheus::IntCounter;
use switchboard_crds::Agent;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::status::Verdict;
use super::{Context, Error};
use crate::build::FIELD_MANAGER;
use crate::build::network_policy::{NAME, build, made_by_the_operator, watch_selector};
use crate::triggers::hash_of;
use ledger::{Need, Written};

/// The kind, for metrics and messages.
pub const KIND: &str = "NetworkPolicy";
/// `Accepted` reason: a NetworkPolicy of the operator's policy's name is someone else's.
pub const REASON_NETWORK_POLICY_TAKEN: &str = "NetworkPolicyNameTaken";
/// How long the owner flush gathers new owners before it writes (and so the least time
/// between two of its writes).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(500);

/// Makes sure `namespace` has the operator's policy (a no-op when the policy is off), and
/// that `agent` is or will soon be among its owners. `Some(verdict)` when someone else's
/// object holds its name.
pub async fn ensure(ctx: &Context, namespace: &str, agent: &Agent) -> Result<Option<Verdict>, Error> {
    let settings = &ctx.settings.network_policy;
    if !settings.enabled {
        return Ok(None);
    }
    let uid = agent.uid().ok_or_else(|| Error::Unexpected("an Agent without a uid".into()))?;
    let desired = hash_of(&build(namespace, [], settings));
    let turn = ctx.network_policies.turn(namespace);
    let _turn = turn.lock().await;
    let cached = ctx.stores.network_policies.get(&ObjectRef::new(NAME).within(namespace));
    match ctx.network_policies.need(namespace, desired, &uid, cached.as_deref()) {
        Need::Nothing => {
            ctx.metrics.child_apply(KIND, false);
            Ok(None)
        }
        Need::Owner => {
            ctx.network_policies.owners_due(namespace);
            ctx.metrics.child_apply(KIND, false);
            Ok(None)
        }
        Need::Write => match write(ctx, namespace, Some(agent)).await? {
            Wrote::Applied => Ok(None),
            Wrote::NotOurs => Ok(Some(taken(namespace))),
        },
    }
}

/// What [`fn@write`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wrote {
    /// Applied the policy.
    Applied,
    /// Nothing: the object of the policy's name is someone else's.
    NotOurs,
}

/// Applies `namespace`'s policy, owned by every Agent of the namespace in the cache (and
/// `agent`), unless someone else's object holds its name. The caller holds the namespace's
/// turn.
async fn write(ctx: &Context, namespace: &str, agent: Option<&Agent>) -> Result<Wrote, Error> {
    let api: Api<PartialObjectMeta<NetworkPolicy>> = Api::namespaced(ctx.client.clone(), namespace);
    let existing =
        api.get_metadata_opt(NAME).await.map_err(|e| Error::kube(format!("reading {KIND} {namespace}/{NAME}"), e))?;
    if existing.is_some_and(|e| !made_by_the_operator(&e.metadata)) {
        return Ok(Wrote::NotOurs);
    }
    let settings = &ctx.settings.network_policy;
    let agents = ctx.stores.agents.state();
    let in_namespace = agents
        .iter()
        .map(Arc::as_ref)
        .filter(|a| a.namespace().as_deref() == Some(namespace) && a.metadata.deletion_timestamp.is_none());
    let policy = build(namespace, in_namespace.chain(agent), settings);
    let stored = api
        .patch(NAME, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&policy))
        .await
        .map_err(|e| Error::kube(format!("applying {KIND} {namespace}/{NAME}"), e))?;
    let owners = policy.metadata.owner_references.iter().flatten().map(|o| o.uid.clone()).collect();
    let desired = hash_of(&build(namespace, [], settings));
    ctx.network_policies.record(namespace, Written { desired, generation: stored.metadata.generation, owners });
    ctx.metrics.child_apply(KIND, true);
    Ok(Wrote::Applied)
}

/// The verdict for an Agent whose namespace has someone else's object of the policy's name.
pub fn taken(namespace: &str) -> Verdict {
    Verdict {
        ok: false,
        reason: REASON_NETWORK_POLICY_TAKEN.into(),
        message: format!(
            "a {KIND} named {namespace}/{NAME} already exists and no Agent owns it: the operator keeps a policy \
             of that name in every namespace with Agents (runtime pods take traffic only from the session \
             gateway) and will not overwrite someone else's, so it runs no pods for this Agent. Delete or \
             rename that {KIND}, or ask the platform team to turn the operator's policy off \
             (--network-policy=false; chart value networkPolicy.enabled)"
        ),
    }
}

/// The watch of the operator's policies and the owner flush, until `stop` (nothing to run
/// when the policy is off). The watch fills the cache [`ensure`] reads and queues one Agent
/// of a namespace whose policy someone else deleted or changed.
pub fn run(
    client: &Client,
    namespace: Option<&str>,
    writer: Writer<PartialObjectMeta<NetworkPolicy>>,
    ctx: Arc<Context>,
    (triggers, overflow): (mpsc::Sender<ObjectRef<Agent>>, IntCounter),
    stop: CancellationToken,
) -> BoxFuture<'static, ()> {
    if !ctx.settings.network_policy.enabled {
        return Box::pin(std::future::ready(()));
    }
    let api: Api<PartialObjectMeta<NetworkPolicy>> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let config = crate::watch::watch_config().labels(&watch_selector()).fields(&format!("metadata.name={NAME}"));
    let events = watcher(api, config).default_backoff().reflect(writer);
    let flush = flush_owners(ctx.clone(), stop.clone());
    let watch = async move {
        let mut events = std::pin::pin!(events.take_until(stop.cancelled_owned()));
        while let Some(event) = events.next().await {
            let wake = match event {
                Ok(watcher::Event::Apply(p)) => {
                    let ns = p.namespace().unwrap_or_default();
                    ctx.network_policies.changed_by_others(&ns, p.metadata.generation).then_some(ns)
                }
                Ok(watcher::Event::Delete(p)) => {
                    let ns = p.namespace().unwrap_or_default();
                    ctx.network_policies.forget(&ns);
                    Some(ns)
                }
                Ok(watcher::Event::InitDone) => {
                    let cache = &ctx.stores.network_policies;
                    ctx.network_policies.retain(|ns| cache.get(&ObjectRef::new(NAME).within(ns)).is_some());
                    None
                }
                Ok(_) => None,
                Err(e) => {
                    tracing::debug!("{KIND} watch: {e}");
                    None
                }
            };
            // One Agent of the namespace is enough: its reconcile applies the policy for all.
            let agents = ctx.stores.agents.state();
            let namespace = wake.as_deref();
            let first = agents.iter().filter(|a| namespace.is_some() && a.namespace().as_deref() == namespace);
            if let Some(agent) = first.min_by_key(|a| a.name_any()) {
                tracing::info!(namespace = ?namespace, "the {KIND} {NAME} was changed or deleted; applying it again");
                if triggers.try_send(ObjectRef::from_obj(agent.as_ref())).is_err() {
                    overflow.inc();
                }
            }
        }
    };
    Box::pin(async move {
        tokio::join!(watch, flush);
    })
}

/// Writes the owner lists of the namespaces [`ensure`] left to it, at most every
/// [`FLUSH_INTERVAL`], until `stop`. A failed write is retried at the next round; a policy
/// that is gone or someone else's is left to the next reconcile.
async fn flush_owners(ctx: Arc<Context>, stop: CancellationToken) {
    let state = &ctx.network_policies;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            () = state.flush_due() => {}
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(FLUSH_INTERVAL) => {}
        }
        let due = state.take_due();
        for namespace in due {
            let turn = state.turn(&namespace);
            let _turn = turn.lock().await;
            if !state.is_written(&namespace) {
                continue;
            }
            match write(&ctx, &namespace, None).await {
                Ok(Wrote::Applied) => {}
                Ok(Wrote::NotOurs) => tracing::warn!(%namespace, "the {KIND} {NAME} is not the operator's any more"),
                Err(e) => {
                    tracing::warn!(%namespace, "cannot add owners to the {KIND}: {e}; retrying");
                    state.owners_due(&namespace);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_object_and_what_to_do() {
        let verdict = taken("bank");
        assert!(!verdict.ok);
        assert_eq!(verdict.reason, "NetworkPolicyNameTaken");
        assert!(verdict.message.contains("NetworkPolicy named bank/switchboard-agent-ingress"), "{}", verdict.message);
        assert!(verdict.message.contains("networkPolicy.enabled"), "{}", verdict.message);
    }
}
