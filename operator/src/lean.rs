//! Lean views of the children, for reading them back: the server-side apply responses and
//! the watch events of ConfigMaps, Deployments and Services. Each keeps only what the
//! operator keys on (see [`crate::triggers`]) and metadata without `managedFields` and
//! annotations; the rest of the JSON is skipped while parsing, never allocated. The full
//! objects the server returns are mostly managed fields (a Deployment's are larger than its
//! spec), so this is most of the operator's parsing work and transient memory.
//!
//! The operator still *writes* the full built objects ([`crate::build`]); these types only
//! name the same resources (their resource constants are the full types') for reading.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// Metadata without managed fields and annotations.
fn lean_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Lean {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        generation: Option<i64>,
        labels: Option<BTreeMap<String, String>>,
        owner_references: Option<Vec<OwnerReference>>,
        deletion_timestamp: Option<Time>,
    }
    let Lean { name, namespace, uid, resource_version, generation, labels, owner_references, deletion_timestamp } =
        Lean::deserialize(d)?;
    Ok(ObjectMeta {
        name,
        namespace,
        uid,
        resource_version,
        generation,
        labels,
        owner_references,
        deletion_timestamp,
        ..Default::default()
    })
}

/// Gives a lean type the resource constants (URL, kind, scope) of the full type it views.
macro_rules! views {
    ($lean:ty, $full:ty) => {
        impl k8s_openapi::Resource for $lean {
            const API_VERSION: &'static str = <$full as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$full as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$full as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$full as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str = <$full as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <$full as k8s_openapi::Resource>::Scope;
        }

        impl k8s_openapi::ListableResource for $lean {
            const LIST_KIND: &'static str = <$full as k8s_openapi::ListableResource>::LIST_KIND;
        }

        impl k8s_openapi::Metadata for $lean {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

views!(LeanConfigMap, ConfigMap);
views!(LeanService, Service);
views!(LeanDeployment, Deployment);

/// A ConfigMap child: its data.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct LeanConfigMap {
    /// Metadata (lean).
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// The data.
    pub data: Option<BTreeMap<String, String>>,
}

/// A Service child: its spec.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct LeanService {
    /// Metadata (lean).
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// The spec.
    pub spec: Option<serde_json::Value>,
}

/// A Deployment child: its generation (in the metadata) and replica counts.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct LeanDeployment {
    /// Metadata (lean).
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// The wanted replicas.
    pub spec: Option<LeanDeploymentSpec>,
    /// The available replicas.
    pub status: Option<LeanDeploymentStatus>,
}

/// What the operator reads of a Deployment's spec.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct LeanDeploymentSpec {
    /// Wanted pods.
    pub replicas: Option<i32>,
}

/// What the operator reads of a Deployment's status.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeanDeploymentStatus {
    /// Available pods.
    pub available_replicas: Option<i32>,
}

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;

    #[test]
    fn lean_types_name_the_same_resources_and_skip_managed_fields() {
        assert_eq!(LeanDeployment::url_path(&(), Some("ns")), Deployment::url_path(&(), Some("ns")));
        assert_eq!(LeanConfigMap::url_path(&(), Some("ns")), ConfigMap::url_path(&(), Some("ns")));
        assert_eq!(LeanService::url_path(&(), Some("ns")), Service::url_path(&(), Some("ns")));
        let d: LeanDeployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "a", "namespace": "ns", "generation": 3, "labels": {"x": "y"},
                "annotations": {"big": "dropped"},
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Agent", "name": "a", "uid": "u"}]
            },
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"availableReplicas": 1, "replicas": 2}
        }))
        .unwrap_or_default();
        assert_eq!(d.metadata.generation, Some(3));
        assert_eq!(d.metadata.managed_fields, None);
        assert_eq!(d.metadata.annotations, None);
        assert_eq!(d.metadata.owner_references.map(|o| o.len()), Some(1));
        assert_eq!(d.spec.and_then(|s| s.replicas), Some(2));
        assert_eq!(d.status.and_then(|s| s.available_replicas), Some(1));
    }
}
