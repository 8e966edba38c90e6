//! The candidate children of an Agent whose rollout is held until its AgentTests pass
//! (`AgentTest.spec.gateRollout`): the spec it is about to roll out, as a ConfigMap, a
//! one-pod Deployment and a Service named `<agent>-candidate`, made from the very children
//! [`super::build`] wants for the live pods (so what the tests pass is what gets promoted,
//! byte for byte but for names and labels).
//!
//! Candidate pods carry the Agent's label (metrics, logs and the runtime NetworkPolicy see
//! them as the Agent's) but `app.kubernetes.io/instance: <agent>-candidate` and
//! [`CANDIDATE_LABEL`]: the live Service, which selects `instance: <agent>`, never sends
//! them a session, and the candidate Service selects only them. The routing table lists
//! the candidate Service as a test-only route ([`switchboard_crds::routing::RoutingTable::candidates`]).
//!
//! A candidate is never deleted by the operator (it has no `delete` right on Deployments):
//! once promoted, or once nothing gates the Agent, it is scaled to zero pods, and it goes
//! with its Agent by owner reference.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use switchboard_crds::contract::{CANDIDATE_LABEL, CANDIDATE_SUFFIX};

use super::Desired;

/// The name of Agent `agent`'s candidate children.
pub fn name(agent: &str) -> String {
    format!("{agent}{CANDIDATE_SUFFIX}")
}

/// The DNS name of Agent `agent`'s candidate Service in `namespace`.
pub fn host(agent: &str, namespace: &str) -> String {
    format!("{}.{namespace}.svc", name(agent))
}

/// An Agent's candidate children.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The candidate RuntimeSpec (the live ConfigMap's data).
    pub config_map: ConfigMap,
    /// The candidate pods (`replicas` of them).
    pub deployment: Deployment,
    /// Their Service, reached only through the routing table's test-only route.
    pub service: Service,
}

/// The candidate children of Agent `agent` from its `desired` live children, with
/// `replicas` pods (1 while its rollout is held, 0 once it is not).
pub fn build(agent: &str, desired: &Desired, replicas: i32) -> Candidate {
    let candidate = name(agent);
    let relabel = |labels: &mut Option<BTreeMap<String, String>>| {
        let labels = labels.get_or_insert_with(BTreeMap::new);
        if labels.contains_key("app.kubernetes.io/instance") {
            labels.insert("app.kubernetes.io/instance".into(), candidate.clone());
        }
        labels.insert(CANDIDATE_LABEL.into(), "true".into());
    };
    let rename = |meta: &mut ObjectMeta| {
        meta.name = Some(candidate.clone());
        relabel(&mut meta.labels);
    };
    let mut config_map = desired.config_map.clone();
    rename(&mut config_map.metadata);
    let mut deployment = desired.deployment.clone();
    rename(&mut deployment.metadata);
    if let Some(spec) = deployment.spec.as_mut() {
        spec.replicas = Some(replicas);
        relabel(&mut spec.selector.match_labels);
        if let Some(meta) = spec.template.metadata.as_mut() {
            relabel(&mut meta.labels);
        }
        let volumes = spec.template.spec.as_mut().and_then(|p| p.volumes.as_mut());
        for volume in volumes.into_iter().flatten() {
            if let Some(source) =
                volume.config_map.as_mut().filter(|c| Some(&c.name) == desired.config_map.metadata.name.as_ref())
            {
                source.name = candidate.clone();
            }
        }
    }
    let mut service = desired.service.clone();
    rename(&mut service.metadata);
    if let Some(spec) = service.spec.as_mut() {
        relabel(&mut spec.selector);
    }
    Candidate { config_map, deployment, service }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{AGENT_LABEL, CONFIG_HASH_ANNOTATION, build as build_children};
    use crate::settings::BuildSettings;

    const OBJECTS: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Persona
metadata: {name: clerk, namespace: ns}
spec: {displayName: Sam, systemPrompt: "You are {name}."}
---
apiVersion: switchboard.dev/v1alpha1
kind: Workflow
metadata: {name: desk, namespace: ns}
spec:
  entry: hello
  nodes: [{id: hello, kind: message, instruction: Greet the customer.}]
---
apiVersion: switchboard.dev/v1alpha1
kind: Agent
metadata: {name: bank, namespace: ns, uid: 6f1c1d6e-0000-4000-8000-000000000001}
spec: {mode: text, personaRef: {name: clerk}, workflowRef: {name: desk}, replicas: 3}
"#;

    #[test]
    fn a_candidate_is_the_live_children_renamed_and_out_of_the_live_service() {
        let mut catalog = switchboard_crds::Catalog::new();
        catalog.add_yaml(OBJECTS, "inline").expect("inline YAML loads");
        let agent = catalog.agents().next().expect("one agent").clone();
        let spec = catalog.resolve_agent(&agent).expect("agent resolves");
        let desired = build_children(&agent, &spec, &BuildSettings::default());
        let c = build("bank", &desired, 1);
        assert_eq!(c.config_map.metadata.name.as_deref(), Some("bank-candidate"));
        assert_eq!(c.config_map.data, desired.config_map.data, "the same RuntimeSpec");
        let d = c.deployment.spec.as_ref().expect("spec");
        let live = desired.deployment.spec.as_ref().expect("live spec");
        assert_eq!(d.replicas, Some(1));
        let selector = d.selector.match_labels.clone().unwrap_or_default();
        assert_eq!(selector["app.kubernetes.io/instance"], "bank-candidate");
        assert_eq!((selector[AGENT_LABEL].as_str(), selector[CANDIDATE_LABEL].as_str()), ("bank", "true"));
        // The live Service's selector does not match the candidate pods.
        let live_selector = desired.service.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
        let pod_labels = d.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
        assert!(!live_selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)), "{live_selector:?} {pod_labels:?}");
        let own_selector = c.service.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
        assert!(own_selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)), "{own_selector:?} {pod_labels:?}");
        // The same pod config hash and pod spec, but for the ConfigMap it mounts.
        let hash = |t: &k8s_openapi::api::core::v1::PodTemplateSpec| {
            t.metadata
                .as_ref()
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(CONFIG_HASH_ANNOTATION))
                .cloned()
        };
        assert_eq!(hash(&d.template), hash(&live.template));
        let mounts: Vec<String> = d
            .template
            .spec
            .iter()
            .flat_map(|p| p.volumes.iter().flatten())
            .filter_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
            .collect();
        assert_eq!(mounts, ["bank-candidate"]);
        assert_eq!(build("bank", &desired, 0).deployment.spec.and_then(|s| s.replicas), Some(0));
        assert_eq!(host("bank", "ns"), "bank-candidate.ns.svc");
    }
}
