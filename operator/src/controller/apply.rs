//! Apply: server-side apply of an Agent's desired children under the operator's one field
//! manager (forcing, so fields edited by hand are taken back), pruning of children it no
//! longer wants (found by label in the operator's cache of its labelled HPAs), and server-side apply of status subresources.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{DeleteParams, DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Error;
use crate::build::hpa::api_resource;
use crate::build::{AGENT_LABEL, Desired, FIELD_MANAGER};
use crate::triggers::{OwnWrites, config_map_key, deployment_key, service_key};

/// Applies every desired child of the Agent `name` in `namespace`, then deletes children
/// labelled as its own that are no longer wanted. Returns the Deployment as the server
/// stored it (with its status, for `Ready`).
pub async fn apply_children(
    client: &Client,
    namespace: &str,
    name: &str,
    desired: &Desired,
    hpa_api_version: &str,
    hpa_cache: &Store<PartialObjectMeta<DynamicObject>>,
    own: &OwnWrites,
) -> Result<Deployment, Error> {
    // Destructured without `..`: a new kind of child cannot be forgotten here.
    let Desired { config_map, deployment, service, hpa } = desired;
    let cm = apply(&Api::<ConfigMap>::namespaced(client.clone(), namespace), config_map).await?;
    own.record("ConfigMap", namespace, name, config_map_key(&cm));
    let deployment = apply(&Api::<Deployment>::namespaced(client.clone(), namespace), deployment).await?;
    own.record("Deployment", namespace, name, deployment_key(&deployment));
    let svc = apply(&Api::<Service>::namespaced(client.clone(), namespace), service).await?;
    own.record("Service", namespace, name, service_key(&svc));
    let hpas: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &api_resource(hpa_api_version));
    if let Some(hpa) = hpa {
        hpas.patch(&hpa.name_any(), &params(), &Patch::Apply(hpa))
            .await
            .map_err(|e| Error::kube(format!("applying HorizontalPodAutoscaler {namespace}/{name}"), e))?;
    }
    // ConfigMap, Deployment and Service always exist under the Agent's name; only the HPA
    // comes and goes, so it is the one kind that can be left over.
    let labelled = labelled_hpas(hpa_cache, namespace, name);
    prune(&hpas, name, &labelled, hpa.as_ref().map(|h| h.name_any())).await?;
    Ok(deployment)
}

async fn apply<K>(api: &Api<K>, obj: &K) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = obj.name_any();
    api.patch(&name, &params(), &Patch::Apply(obj)).await.map_err(|e| {
        Error::kube(format!("applying {} {}/{name}", K::kind(&()), obj.namespace().unwrap_or_default()), e)
    })
}

/// Names of the HPAs in `namespace` labelled as children of Agent `agent`, from the cache.
fn labelled_hpas(cache: &Store<PartialObjectMeta<DynamicObject>>, namespace: &str, agent: &str) -> Vec<String> {
    cache
        .state()
        .iter()
        .filter(|m| m.namespace().as_deref() == Some(namespace))
        .filter(|m| m.labels().get(AGENT_LABEL).map(String::as_str) == Some(agent))
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
