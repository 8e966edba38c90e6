//! Apply: server-side apply of an Agent's desired children under the operator's one field
//! manager (forcing, so fields edited by hand are taken back — but only on objects the Agent
//! owns or that do not exist yet: see `policy.rs`), skipping a child the
//! operator applied identically last that nobody changed since, pruning of children it no
//! longer wants (found by label in the operator's cache of its labelled HPAs), and server-side apply of status subresources.

use kube::api::{DeleteParams, DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::status::{Replicas, replicas};
use super::{Context, Error, policy};
use crate::build::candidate::Candidate;
use crate::build::hpa::api_resource;
use crate::build::{AGENT_LABEL, Desired, FIELD_MANAGER};
use crate::lean::{LeanConfigMap, LeanDeployment, LeanService};
use crate::own_writes::Written;
use crate::triggers::{config_map_key, deployment_key, generation, hash_of, service_key};

/// Applies every desired child of the Agent `name` in `namespace` (the ConfigMap,
/// Deployment and Service at once, each skipped when [`crate::own_writes::OwnWrites::unchanged`]), then deletes
/// children labelled as its own that are no longer wanted. Returns the Deployment's replica
/// counts as the server stored them or as its watch last saw them (for `Ready`).
pub async fn apply_children(
    ctx: &Context,
    namespace: &str,
    name: &str,
    desired: &Desired,
) -> Result<Option<Replicas>, Error> {
    let (client, own) = (&ctx.client, &ctx.own_writes);
    // Destructured without `..`: a new kind of child cannot be forgotten here.
    let Desired { config_map, deployment, service, hpa } = desired;
    let hpa_resource = api_resource(ctx.settings.hpa_api_version());
    let hpas: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &hpa_resource);
    // First make sure no child would overwrite an object the Agent does not own; then write.
    let (config_maps, deployments, services) = (
        Api::<LeanConfigMap>::namespaced(client.clone(), namespace),
        Api::<LeanDeployment>::namespaced(client.clone(), namespace),
        Api::<LeanService>::namespaced(client.clone(), namespace),
    );
    futures_util::try_join!(
        ensure_owned(&config_maps, "ConfigMap", config_map, unchanged(ctx, config_map)),
        ensure_owned(&deployments, "Deployment", deployment, unchanged(ctx, deployment)),
        ensure_owned(&services, "Service", service, unchanged(ctx, service)),
        async {
            match hpa {
                Some(hpa) => ensure_owned(&hpas, "HorizontalPodAutoscaler", hpa, false).await,
                None => Ok(()),
            }
        },
    )?;
    let (_, applied, _) = futures_util::try_join!(
        apply::<LeanConfigMap, _>(ctx, config_map, config_map_key, config_map_key),
        apply::<LeanDeployment, _>(ctx, deployment, deployment_key, generation),
        apply::<LeanService, _>(ctx, service, service_key, service_key),
    )?;
    let replicas = match applied {
        Some(d) => Some(replicas(&d)),
        None => own.replicas("Deployment", namespace, name),
    };
    if let Some(hpa) = hpa {
        hpas.patch(&hpa.name_any(), &params(), &Patch::Apply(hpa))
            .await
            .map_err(|e| Error::kube(format!("applying HorizontalPodAutoscaler {namespace}/{name}"), e))?;
        ctx.metrics.child_apply("HorizontalPodAutoscaler", true);
    }
    // ConfigMap, Deployment and Service always exist under the Agent's name; only the HPA
    // comes and goes, so it is the one kind that can be left over.
    let owner = config_map.owner_references().first().map(|o| o.uid.as_str());
    let labelled = labelled_hpas(&ctx.stores.hpas, namespace, name, owner);
    prune(&hpas, name, &labelled, hpa.as_ref().map(|h| h.name_any())).await?;
    Ok(replicas)
}

/// Applies an Agent's candidate children (see [`crate::build::candidate`]), each only over
/// an object the Agent owns or none.
pub async fn apply_candidate(ctx: &Context, namespace: &str, candidate: &Candidate) -> Result<(), Error> {
    let client = &ctx.client;
    let Candidate { config_map, deployment, service } = candidate;
    let (config_maps, deployments, services) = (
        Api::<LeanConfigMap>::namespaced(client.clone(), namespace),
        Api::<LeanDeployment>::namespaced(client.clone(), namespace),
        Api::<LeanService>::namespaced(client.clone(), namespace),
    );
    futures_util::try_join!(
        ensure_owned(&config_maps, "ConfigMap", config_map, false),
        ensure_owned(&deployments, "Deployment", deployment, false),
        ensure_owned(&services, "Service", service, false),
    )?;
    futures_util::try_join!(
        apply::<LeanConfigMap, _>(ctx, config_map, config_map_key, config_map_key),
        apply::<LeanDeployment, _>(ctx, deployment, deployment_key, generation),
        apply::<LeanService, _>(ctx, service, service_key, service_key),
    )?;
    Ok(())
}

/// Server-side applies `obj` unless it is unchanged; returns the object the server stored
/// (read as its lean view `L`), or `None` when skipped. `key` and `content` are the
/// child's trigger and content keys.
async fn apply<L, K>(ctx: &Context, obj: &K, key: fn(&L) -> u64, content: fn(&L) -> u64) -> Result<Option<L>, Error>
where
    L: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K: k8s_openapi::Resource + ResourceExt + Serialize + std::fmt::Debug,
{
    let kind = K::KIND;
    let (namespace, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    let desired = hash_of(obj);
    if ctx.own_writes.unchanged(kind, &namespace, &name, desired) {
        ctx.metrics.child_apply(kind, false);
        return Ok(None);
    }
    let api = Api::<L>::namespaced(ctx.client.clone(), &namespace);
    let stored = api
        .patch(&name, &params(), &Patch::Apply(obj))
        .await
        .map_err(|e| Error::kube(format!("applying {kind} {namespace}/{name}"), e))?;
    ctx.own_writes.record(kind, &namespace, &name, Written { desired, key: key(&stored), content: content(&stored) });
    ctx.metrics.child_apply(kind, true);
    Ok(Some(stored))
}

/// Fails with [`Error::NotOwned`] when `obj` (a `kind`) would be written over an existing
/// object that its Agent (the owner reference `obj` carries) does not own. A child the
/// operator would not write (`unchanged`) is not looked up.
async fn ensure_owned<L, K>(api: &Api<L>, kind: &str, obj: &K, unchanged: bool) -> Result<(), Error>
where
    L: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K: ResourceExt,
{
    if unchanged {
        return Ok(());
    }
    let (namespace, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    let existing =
        api.get_metadata_opt(&name).await.map_err(|e| Error::kube(format!("reading {kind} {namespace}/{name}"), e))?;
    let owner = obj.owner_references().first().map(|o| o.uid.as_str());
    if policy::may_write(existing.as_ref().map(|m| &m.metadata), owner) {
        Ok(())
    } else {
        Err(Error::NotOwned { kind: kind.to_owned(), namespace, name })
    }
}

/// Whether the operator would skip writing `obj` (see [`crate::own_writes::OwnWrites::unchanged`]).
pub(super) fn unchanged<K>(ctx: &Context, obj: &K) -> bool
where
    K: k8s_openapi::Resource + ResourceExt + Serialize,
{
    ctx.own_writes.unchanged(K::KIND, &obj.namespace().unwrap_or_default(), &obj.name_any(), hash_of(obj))
}

/// Names of the HPAs in `namespace` labelled as children of Agent `agent` and owned by it
/// (uid `owner`), from the cache.
fn labelled_hpas(
    cache: &Store<PartialObjectMeta<DynamicObject>>,
    namespace: &str,
    agent: &str,
    owner: Option<&str>,
) -> Vec<String> {
    cache
        .state()
        .iter()
        .filter(|m| m.namespace().as_deref() == Some(namespace))
        .filter(|m| m.labels().get(AGENT_LABEL).map(String::as_str) == Some(agent))
        .filter(|m| owner.is_some_and(|uid| m.owner_references().iter().any(|r| r.uid == uid)))
        .map(|m| m.name_any())
        .collect()
}

async fn prune(api: &Api<DynamicObject>, agent: &str, found: &[String], keep: Option<String>) -> Result<(), Error> {
    for name in found {
        if keep.as_deref() == Some(name.as_str()) {
            continue;
        }
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => tracing::info!(agent, "pruned HorizontalPodAutoscaler {name}"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(Error::kube(format!("deleting HorizontalPodAutoscaler {name}"), e)),
        }
    }
    Ok(())
}

/// Server-side applies `status` to the status subresource of `obj`.
pub async fn apply_status<K, S>(api: &Api<K>, obj: &K, status: &S) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": { "name": obj.name_any() },
        "status": status,
    });
    api.patch_status(&obj.name_any(), &params(), &Patch::Apply(&body)).await.map_err(|e| {
        Error::kube(
            format!(
                "writing the status of {} {}/{}",
                K::kind(&()),
                obj.namespace().unwrap_or_default(),
                obj.name_any()
            ),
            e,
        )
    })?;
    Ok(())
}

fn params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}
