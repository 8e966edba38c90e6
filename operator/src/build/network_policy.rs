//! The NetworkPolicy of a namespace with Agents: runtime pods (label
//! `app.kubernetes.io/name: switchboard-agent`, which every Agent's pods carry) take traffic
//! on their port ([`RUNTIME_PORT`], TCP) only from the session gateway's pods and from the
//! extra peers the platform team names (Prometheus, say). Session context reaches runtime
//! pods signed by the gateway; nothing else needs to reach them at all.
//!
//! One per namespace, named [`NAME`], not one per Agent: NetworkPolicies add up, so one
//! object per namespace says the whole rule. Pure like the rest of `build`; the controller
//! applies it (`controller::network_policy`) before an Agent's pods.
//!
//! **Ownership.** Every Agent of the namespace is an owner (non-controller owner
//! references): the garbage collector deletes the policy when the namespace's last Agent
//! goes, and never while one is left, even with the operator stopped or uninstalled. An
//! object of that name with no owner reference to an Agent is someone else's, and the
//! operator never writes over it ([`made_by_the_operator`]).
//!
//! **The gateway's pods as a peer.** In the gateway's own namespace a pod selector alone
//! admits them (no namespace label needed: Kubernetes before 1.21 sets none); in any other
//! namespace, the gateway's namespace is selected by its `kubernetes.io/metadata.name`
//! label (set from 1.21 on; on older clusters, label the namespace yourself, or the gateway
//! is shut out — closed, not open).
//!
//! Its name is not the Helm chart's former policy's (`<release>-runtime-ingress`), so an
//! upgrade from a chart that rendered one never finds that one in the way.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use switchboard_crds::Agent;
use switchboard_crds::routing::RUNTIME_PORT;

use super::MANAGED_BY;
use crate::settings::NetworkPolicySettings;

/// The policy's name in every namespace with Agents.
pub const NAME: &str = "switchboard-agent-ingress";
/// `app.kubernetes.io/component` of the policy (with `managed-by`, what its watch selects).
pub const COMPONENT: &str = "runtime-ingress";
/// The pod label the policy selects (every Agent's pods carry it: see
/// [`super::selector_labels`]).
pub const RUNTIME_POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "switchboard-agent");
/// The namespace label Kubernetes (1.21+) sets to the namespace's name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The labels of the policy object itself.
pub fn labels() -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name".to_owned(), NAME.to_owned()),
        ("app.kubernetes.io/component".to_owned(), COMPONENT.to_owned()),
        ("app.kubernetes.io/part-of".to_owned(), "switchboard".to_owned()),
        ("app.kubernetes.io/managed-by".to_owned(), MANAGED_BY.to_owned()),
    ]
    .into()
}

/// The label selector of the policies the operator keeps (for its watch).
pub fn watch_selector() -> String {
    format!("app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component={COMPONENT}")
}

/// The policy of `namespace`, owned by `owners` (the namespace's Agents; those without a
/// uid, read from files, give no owner reference). With no gateway namespace in `settings`,
/// the gateway is taken to run in `namespace`.
pub fn build<'a>(
    namespace: &str,
    owners: impl IntoIterator<Item = &'a Agent>,
    settings: &NetworkPolicySettings,
) -> NetworkPolicy {
    let mut owner_references: Vec<OwnerReference> = owners.into_iter().filter_map(|a| a.owner_ref(&())).collect();
    owner_references.sort_by(|a, b| (&a.name, &a.uid).cmp(&(&b.name, &b.uid)));
    owner_references.dedup_by(|a, b| a.uid == b.uid);
    let mut from = vec![gateway_peer(namespace, settings)];
    from.extend(settings.extra_peers.0.iter().cloned());
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(NAME.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels()),
            owner_references: (!owner_references.is_empty()).then_some(owner_references),
            ..Default::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(match_labels([(RUNTIME_POD_LABEL.0.to_owned(), RUNTIME_POD_LABEL.1.to_owned())])),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(from),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(i32::from(RUNTIME_PORT))),
                    protocol: Some("TCP".to_owned()),
                    ..Default::default()
                }]),
            }]),
            ..Default::default()
        }),
    }
}

/// The session gateway's pods, seen from `namespace`.
fn gateway_peer(namespace: &str, settings: &NetworkPolicySettings) -> NetworkPolicyPeer {
    let pods = match_labels(settings.gateway_labels.iter().cloned());
    let gateway_namespace = settings.gateway_namespace.as_deref().unwrap_or(namespace);
    NetworkPolicyPeer {
        pod_selector: Some(pods),
        namespace_selector: (gateway_namespace != namespace)
            .then(|| match_labels([(NAMESPACE_NAME_LABEL.to_owned(), gateway_namespace.to_owned())])),
        ip_block: None,
    }
}

fn match_labels(labels: impl IntoIterator<Item = (String, String)>) -> LabelSelector {
    LabelSelector { match_labels: Some(labels.into_iter().collect()), match_expressions: None }
}

/// Whether an existing object of the policy's name is the operator's: one that an Agent
/// owns (an owner reference to a `switchboard.dev` Agent). Anything else — made by a person,
/// by the Helm chart, by another tool — the operator never writes over.
pub fn made_by_the_operator(meta: &ObjectMeta) -> bool {
    let group = format!("{}/", Agent::group(&()));
    meta.owner_references.iter().flatten().any(|o| o.kind == Agent::kind(&()) && o.api_version.starts_with(&group))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::settings::parse_peers;

    fn agent(name: &str, uid: Option<&str>) -> Agent {
        let uid = uid.map_or(String::new(), |u| format!(", uid: {u}"));
        serde_yaml::from_str(&format!(
            "apiVersion: switchboard.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {name}, namespace: bank{uid}}}\n\
             spec: {{mode: voice, personaRef: {{name: p}}, workflowRef: {{name: w}}}}\n"
        ))
        .expect("an Agent")
    }

    fn settings(gateway_namespace: Option<&str>, extra: &str) -> NetworkPolicySettings {
        NetworkPolicySettings {
            gateway_namespace: gateway_namespace.map(str::to_owned),
            gateway_labels: vec![
                ("app.kubernetes.io/name".into(), "switchboard-gateway".into()),
                ("app.kubernetes.io/instance".into(), "sb".into()),
            ],
            extra_peers: parse_peers(extra).expect("valid peers"),
            ..Default::default()
        }
    }

    fn value(policy: &NetworkPolicy) -> Value {
        serde_json::to_value(policy).expect("serialises")
    }

    const GATEWAY_PODS: &str =
        r#"{"matchLabels": {"app.kubernetes.io/instance": "sb", "app.kubernetes.io/name": "switchboard-gateway"}}"#;

    #[test]
    fn in_the_gateways_namespace_the_gateway_is_admitted_by_its_pod_labels_alone() {
        let (b, a) = (agent("b", Some("uid-b")), agent("a", Some("uid-a")));
        let policy = build("switchboard-system", [&b, &a, &b], &settings(Some("switchboard-system"), ""));
        let gateway: Value = serde_json::from_str(GATEWAY_PODS).expect("json");
        let owner = |name: &str| {
            let uid = format!("uid-{name}");
            json!({"apiVersion": "switchboard.dev/v1alpha1", "kind": "Agent", "name": name, "uid": uid})
        };
        assert_eq!(
            value(&policy),
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {
                    "name": "switchboard-agent-ingress",
                    "namespace": "switchboard-system",
                    "labels": {
                        "app.kubernetes.io/name": "switchboard-agent-ingress",
                        "app.kubernetes.io/component": "runtime-ingress",
                        "app.kubernetes.io/part-of": "switchboard",
                        "app.kubernetes.io/managed-by": "switchboard-operator",
                    },
                    // Every Agent, once, sorted; none is the controller.
                    "ownerReferences": [owner("a"), owner("b")],
                },
                "spec": {
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "switchboard-agent"}},
                    "policyTypes": ["Ingress"],
                    "ingress": [{
                        "from": [{"podSelector": gateway}],
                        "ports": [{"port": 8080, "protocol": "TCP"}],
                    }],
                },
            })
        );
    }

    #[test]
    fn elsewhere_the_gateways_namespace_is_selected_by_name_and_extra_peers_follow() {
        let extra = "[{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}, \
                     podSelector: {matchLabels: {app: prometheus}}}, {ipBlock: {cidr: 10.1.0.0/16}}]";
        let policy = build("bank", [&agent("a", Some("uid-a"))], &settings(Some("switchboard-system"), extra));
        let gateway: Value = serde_json::from_str(GATEWAY_PODS).expect("json");
        assert_eq!(
            value(&policy)["spec"]["ingress"][0]["from"],
            json!([
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "switchboard-system"}},
                 "podSelector": gateway},
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                 "podSelector": {"matchLabels": {"app": "prometheus"}}},
                {"ipBlock": {"cidr": "10.1.0.0/16"}},
            ])
        );
        assert_eq!(policy.metadata.namespace.as_deref(), Some("bank"));
    }

    #[test]
    fn agents_read_from_files_give_no_owner_and_no_gateway_namespace_means_this_one() {
        let policy = build("bank", [&agent("a", None)], &NetworkPolicySettings::default());
        assert_eq!(policy.metadata.owner_references, None);
        assert_eq!(
            value(&policy)["spec"]["ingress"][0]["from"],
            json!([{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "switchboard-gateway"}}}])
        );
    }

    #[test]
    fn it_selects_the_pods_every_agent_runs() {
        let labels = super::super::selector_labels(&agent("a", Some("uid-a")));
        assert_eq!(labels.get(RUNTIME_POD_LABEL.0).map(String::as_str), Some(RUNTIME_POD_LABEL.1));
    }

    #[test]
    fn only_a_policy_an_agent_owns_is_the_operators() {
        let owned_by = |api_version: &str, kind: &str| ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "x".into(),
                uid: "u".into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert!(made_by_the_operator(&owned_by("switchboard.dev/v1alpha1", "Agent")));
        assert!(made_by_the_operator(&build("bank", [&agent("a", Some("u"))], &Default::default()).metadata));
        assert!(!made_by_the_operator(&ObjectMeta::default()), "a person's, or the chart's");
        assert!(!made_by_the_operator(&owned_by("apps/v1", "Deployment")));
        assert!(!made_by_the_operator(&owned_by("example.com/v1", "Agent")), "another API's Agent");
        assert!(!made_by_the_operator(&ObjectMeta { labels: Some(labels()), ..Default::default() }), "labels alone");
    }
}
