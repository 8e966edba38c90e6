//! Build: the desired children of one Agent, from its resolved [`RuntimeSpec`] and the
//! operator's settings. Pure — no client, no clock — so `render` and the controller make
//! the very same objects, and tests check them from inline YAML.
//!
//! Children (all named after the Agent, in its namespace, owned by it):
//! a ConfigMap with `runtime.json`, a Deployment running `switchboard runtime`, a Service
//! on port 8080 (`http`), and — only with `spec.autoscaling` — a HorizontalPodAutoscaler.
//! Beside them, one per namespace and owned by all its Agents, the NetworkPolicy that closes
//! runtime pods to all but the gateway ([`network_policy`]).

pub mod candidate;
pub mod config_map;
pub mod deployment;
pub mod hpa;
pub mod network_policy;
pub mod service;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use switchboard_crds::catalog::namespace_of;
use switchboard_crds::{Agent, RuntimeSpec};

use crate::settings::BuildSettings;

/// The field manager of everything the operator writes.
pub const FIELD_MANAGER: &str = "switchboard-operator";
/// `app.kubernetes.io/managed-by` of every child, and the label naming the Agent a child
/// belongs to (also a selector of its pods).
pub use switchboard_crds::contract::{AGENT_LABEL, MANAGED_BY};
/// Label with the Agent's mode on its pods.
pub const MODE_LABEL: &str = "switchboard.dev/mode";
/// Pod-template annotation with the SHA-256 of the RuntimeSpec: a change rolls the pods.
pub const CONFIG_HASH_ANNOTATION: &str = "switchboard.dev/config-hash";

/// Everything the operator wants to exist for one Agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The RuntimeSpec as `runtime.json`.
    pub config_map: ConfigMap,
    /// The runtime pods.
    pub deployment: Deployment,
    /// The pods' stable address.
    pub service: Service,
    /// The autoscaler, with `spec.autoscaling` only (apiVersion per the settings).
    pub hpa: Option<DynamicObject>,
}

/// The SHA-256 (hex) of the RuntimeSpec's canonical JSON.
pub fn config_hash(spec: &RuntimeSpec) -> String {
    format!("{:x}", Sha256::digest(spec.to_canonical_json().as_bytes()))
}

/// The SHA-256 (hex) of everything the pods read from their ConfigMap: the RuntimeSpec
/// and, when the operator has one, the Bedrock CA bundle (so a new bundle rolls them).
fn pod_config_hash(spec: &RuntimeSpec, settings: &BuildSettings) -> String {
    match &settings.runtime_bedrock_ca {
        None => config_hash(spec),
        Some(ca) => {
            let mut digest = Sha256::new();
            digest.update(spec.to_canonical_json().as_bytes());
            digest.update(b"\0");
            digest.update(ca.0.as_bytes());
            format!("{:x}", digest.finalize())
        }
    }
}

/// What the runtime pods are given of `spec`: all of it but what only the gateway reads,
/// which the routing table carries to it — the call analysis (`record.analysis`), the
/// capacity settings and the app context. So changing those rewrites the table and rolls
/// no pod (as the variants' weights do not), and the pods' spec holds nothing they ignore.
pub fn pods_spec(spec: &RuntimeSpec) -> RuntimeSpec {
    let mut pods = spec.clone();
    pods.record.analysis = None;
    pods.capacity = Default::default();
    pods.app_context = Default::default();
    pods
}

/// Builds the children of `agent`, whose Persona and Workflow resolved to `spec`.
pub fn build(agent: &Agent, spec: &RuntimeSpec, settings: &BuildSettings) -> Desired {
    let spec = &pods_spec(spec);
    let hash = pod_config_hash(spec, settings);
    Desired {
        config_map: config_map::build(agent, spec, settings),
        deployment: deployment::build(agent, &hash, settings),
        service: service::build(agent),
        hpa: agent.spec.autoscaling.as_ref().map(|a| hpa::build(agent, a, settings.hpa_api_version())),
    }
}

/// The labels every child carries; [`selector_labels`] is the subset that selects pods.
pub fn labels(agent: &Agent) -> BTreeMap<String, String> {
    let mut labels = selector_labels(agent);
    labels.insert("app.kubernetes.io/component".into(), "runtime".into());
    labels.insert("app.kubernetes.io/part-of".into(), "switchboard".into());
    labels.insert("app.kubernetes.io/managed-by".into(), MANAGED_BY.into());
    labels.insert(MODE_LABEL.into(), agent.spec.mode.as_str().into());
    labels
}

/// The labels that select an Agent's pods (stable for the Deployment's lifetime).
pub fn selector_labels(agent: &Agent) -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name".to_owned(), "switchboard-agent".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), agent.name_any()),
        (AGENT_LABEL.to_owned(), agent.name_any()),
    ]
    .into()
}

/// Metadata of a child: the Agent's name and namespace, labels, and a controller owner
/// reference when the Agent has a uid (so the garbage collector removes the child with its
/// Agent). Agents read from files by `render` have no uid, so their children have none.
pub fn child_meta(agent: &Agent) -> ObjectMeta {
    ObjectMeta {
        name: Some(agent.name_any()),
        namespace: Some(namespace_of(agent)),
        labels: Some(labels(agent)),
        owner_references: agent.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
