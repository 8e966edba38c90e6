//! Pure build tests from inline YAML: every field of every child, labels, owner references,
//! and a config hash that changes when, and only when, the RuntimeSpec changes; what the
//! platform's settings put in the pod is in `pod`.

use kube::ResourceExt;
use serde_json::{Value, json};
use switchboard_crds::{Agent, Catalog, RuntimeSpec};

use super::*;
use crate::settings::{self, BuildSettings};

mod pod;

const PERSONA: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Persona
metadata: {name: clerk, namespace: bank}
spec:
  displayName: Sam
  systemPrompt: "You are {name}."
"#;

const WORKFLOW: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Workflow
metadata: {name: desk, namespace: bank}
spec:
  entry: hello
  nodes:
    - {id: hello, kind: message, instruction: Greet the customer.}
"#;

const AGENT: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: Agent
metadata: {name: front, namespace: bank, uid: 6f1c1d6e-0000-4000-8000-000000000001}
spec:
  mode: voice
  personaRef: {name: clerk}
  workflowRef: {name: desk}
  replicas: 3
  sessions: {drainTimeoutSeconds: 120}
  credentials:
    secretRef: {name: aws-keys}
    serviceAccountName: bedrock-irsa
"#;

fn resolved(agent_yaml: &str, persona_yaml: &str) -> (Agent, RuntimeSpec) {
    let mut catalog = Catalog::new();
    let text = format!("{persona_yaml}\n---\n{WORKFLOW}\n---\n{agent_yaml}");
    catalog.add_yaml(&text, "inline").expect("inline YAML loads");
    let agent = catalog.agents().next().expect("one agent").clone();
    let spec = catalog.resolve_agent(&agent).expect("agent resolves");
    (agent, spec)
}

fn desired(agent_yaml: &str) -> (Agent, Desired) {
    let (agent, spec) = resolved(agent_yaml, PERSONA);
    let desired = build(&agent, &spec, &BuildSettings::default());
    (agent, desired)
}

fn value<T: serde::Serialize>(obj: &T) -> Value {
    serde_json::to_value(obj).expect("serialises")
}

fn expected_labels() -> Value {
    json!({
        "app.kubernetes.io/name": "switchboard-agent",
        "app.kubernetes.io/instance": "front",
        "app.kubernetes.io/component": "runtime",
        "app.kubernetes.io/part-of": "switchboard",
        "app.kubernetes.io/managed-by": "switchboard-operator",
        "switchboard.dev/agent": "front",
        "switchboard.dev/mode": "voice",
    })
}

fn expected_meta() -> Value {
    json!({
        "name": "front",
        "namespace": "bank",
        "labels": expected_labels(),
        "ownerReferences": [{
            "apiVersion": "switchboard.dev/v1alpha1",
            "kind": "Agent",
            "name": "front",
            "uid": "6f1c1d6e-0000-4000-8000-000000000001",
            "controller": true,
        }],
    })
}

#[test]
fn config_map_holds_the_runtime_spec() {
    let (agent, d) = desired(AGENT);
    let (_, spec) = resolved(AGENT, PERSONA);
    assert_eq!(
        value(&d.config_map),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": expected_meta(),
            "data": {"runtime.json": spec.to_canonical_json()},
        })
    );
    let text = &d.config_map.data.as_ref().expect("data")["runtime.json"];
    let parsed = RuntimeSpec::parse(text).expect("the runtime reads it back");
    assert_eq!(parsed.agent.name, agent.name_any());
    assert_eq!(parsed.persona.spec.display_name, "Sam");
}

#[test]
fn deployment_has_every_field() {
    let (_, d) = desired(AGENT);
    let (_, spec) = resolved(AGENT, PERSONA);
    let selector = json!({
        "app.kubernetes.io/name": "switchboard-agent",
        "app.kubernetes.io/instance": "front",
        "switchboard.dev/agent": "front",
    });
    let probe = |path: &str, period: i32, failures: i32| {
        json!({"httpGet": {"path": path, "port": "http", "scheme": "HTTP"},
               "periodSeconds": period, "timeoutSeconds": 2, "failureThreshold": failures, "successThreshold": 1})
    };
    let expected = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": expected_meta(),
        "spec": {
            "replicas": 3,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {
                "metadata": {
                    "labels": expected_labels(),
                    "annotations": {"switchboard.dev/config-hash": config_hash(&spec)},
                },
                "spec": {
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "serviceAccountName": "bedrock-irsa",
                    "terminationGracePeriodSeconds": 135,
                    "securityContext": {
                        "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [{
                        "name": "runtime",
                        "image": settings::DEFAULT_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["switchboard"],
                        "args": ["runtime"],
                        "env": [
                            {"name": "MODE", "value": "voice"},
                            {"name": "SWITCHBOARD_RUNTIME_SPEC", "value": "/etc/switchboard/runtime.json"},
                            {"name": "SWITCHBOARD_LISTEN", "value": "0.0.0.0:8080"},
                            {"name": "SWITCHBOARD_LOG_FORMAT", "value": "json"},
                            {"name": "SWITCHBOARD_WORKER_THREADS", "value": "1"},
                            {"name": "SWITCHBOARD_POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
                            {"name": "SWITCHBOARD_CREDENTIALS_DIR", "value": "/etc/switchboard/credentials"},
                        ],
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                        "livenessProbe": probe("/healthz", 10, 3),
                        "readinessProbe": probe("/readyz", 5, 1),
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsNonRoot": true,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "volumeMounts": [
                            {"name": "config", "mountPath": "/etc/switchboard", "readOnly": true},
                            {"name": "tmp", "mountPath": "/tmp"},
                            {"name": "credentials", "mountPath": "/etc/switchboard/credentials", "readOnly": true},
                        ],
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                    }],
                    "volumes": [
                        {"name": "config", "configMap": {"name": "front", "items": [{"key": "runtime.json", "path": "runtime.json"}]}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
                        {"name": "credentials", "secret": {"secretName": "aws-keys", "defaultMode": 0o440, "optional": false}},
                    ],
                },
            },
        },
    });
    assert_eq!(value(&d.deployment), expected);
}

#[test]
fn service_exposes_port_8080_named_http() {
    let (agent, d) = desired(AGENT);
    assert_eq!(
        value(&d.service),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": expected_meta(),
            "spec": {
                "type": "ClusterIP",
                "selector": {
                    "app.kubernetes.io/name": "switchboard-agent",
                    "app.kubernetes.io/instance": "front",
                    "switchboard.dev/agent": "front",
                },
                "ports": [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}],
            },
        })
    );
    assert_eq!(service::endpoint(&agent), "front.bank.svc:8080");
    assert!(d.hpa.is_none(), "no autoscaling, no HPA");
}

#[test]
fn autoscaling_adds_an_hpa_and_drops_replicas() {
    let yaml = AGENT.replace(
        "  replicas: 3\n",
        "  autoscaling: {minReplicas: 2, maxReplicas: 9, targetCpuUtilizationPercentage: 60}\n",
    );
    let (agent, spec) = resolved(&yaml, PERSONA);
    for version in [hpa::HPA_V2, hpa::HPA_V2BETA2] {
        let settings = BuildSettings { hpa_api_version: Some(version.into()), ..Default::default() };
        let d = build(&agent, &spec, &settings);
        assert_eq!(d.deployment.spec.as_ref().and_then(|s| s.replicas), None, "the HPA owns replicas");
        let hpa = d.hpa.expect("an HPA");
        assert_eq!(
            value(&hpa),
            json!({
                "apiVersion": version, "kind": "HorizontalPodAutoscaler",
                "metadata": expected_meta(),
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "front"},
                    "minReplicas": 2, "maxReplicas": 9,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
                },
            })
        );
    }
}

#[test]
fn config_hash_changes_when_and_only_when_the_runtime_spec_changes() {
    let hash_of = |agent: &str, persona: &str| {
        let (_, d) = {
            let (agent, spec) = resolved(agent, persona);
            (agent.clone(), build(&agent, &spec, &BuildSettings::default()))
        };
        d.deployment.spec.and_then(|s| s.template.metadata).and_then(|m| m.annotations).expect("annotations")
            [CONFIG_HASH_ANNOTATION]
            .clone()
    };
    let base = hash_of(AGENT, PERSONA);
    assert_eq!(base.len(), 64);
    assert_eq!(base, hash_of(AGENT, PERSONA), "deterministic");
    // Not in the RuntimeSpec: replicas, credentials, labels, operator settings.
    assert_eq!(base, hash_of(&AGENT.replace("replicas: 3", "replicas: 5"), PERSONA));
    assert_eq!(base, hash_of(&AGENT.replace("aws-keys", "other-keys"), PERSONA));
    assert_eq!(
        base,
        hash_of(&AGENT.replace("namespace: bank, uid", "namespace: bank, labels: {team: a}, uid"), PERSONA)
    );
    // In the RuntimeSpec: the Persona, the Agent's sessions and mode.
    assert_ne!(base, hash_of(AGENT, &PERSONA.replace("displayName: Sam", "displayName: Kim")));
    assert_ne!(base, hash_of(&AGENT.replace("drainTimeoutSeconds: 120", "drainTimeoutSeconds: 60"), PERSONA));
    assert_ne!(base, hash_of(&AGENT.replace("mode: voice", "mode: text"), PERSONA));
    // Only the gateway reads them (the routing table carries them): the call analysis, the
    // capacity settings, the app context. The pods' spec leaves them out.
    let gateway_only = AGENT.to_owned()
        + "  record:\n    analysis:\n      fields:\n        - {name: resolved, type: boolean, description: done}\n"
        + "  capacity: {account: bank-prod, priority: 7, whenFull: refuse, holdMessage: Please hold.}\n"
        + "  appContext: {memory: [page]}\n";
    assert_eq!(base, hash_of(&gateway_only, PERSONA), "analysis, capacity and app context roll no pod");
    let (agent, spec) = resolved(&gateway_only, PERSONA);
    assert!(spec.record.analysis.is_some() && spec.capacity.priority == 7 && !spec.app_context.is_default());
    let built = build(&agent, &spec, &BuildSettings::default());
    let pods = RuntimeSpec::parse(&built.config_map.data.as_ref().expect("data")["runtime.json"]).expect("spec");
    assert_eq!(pods, pods_spec(&resolved(AGENT, PERSONA).1), "the pods' spec is the Agent's without them");
}

#[test]
fn variant_weights_change_no_pod_and_a_variants_prompt_does() {
    let with = |weights: (u32, u32), prompt: &str| {
        let agent = AGENT.replace(
            "  replicas: 3\n",
            &format!(
                "  replicas: 3\n  variants:\n    - {{name: control, weight: {}}}\n    - {{name: brief, weight: {}, systemPrompt: \"{prompt}\"}}\n",
                weights.0, weights.1
            ),
        );
        let (agent, spec) = resolved(&agent, PERSONA);
        let desired = build(&agent, &spec, &BuildSettings::default());
        (spec, desired.deployment, desired.config_map)
    };
    let (spec, deployment, config_map) = with((90, 10), "You are {name}. Be brief.");
    assert_eq!(spec.variants.len(), 2);
    let brief = spec.variant("brief").expect("the variant's spec");
    assert_eq!(brief.persona.spec.system_prompt, "You are {name}. Be brief.");
    assert!(brief.variants.is_empty());
    assert_eq!(spec.variant("control").expect("control").persona, spec.persona, "control is the Agent's own");
    // Promoting the variant (weights only) leaves the pods and their spec as they were.
    let (_, promoted, promoted_config) = with((0, 100), "You are {name}. Be brief.");
    assert_eq!(promoted, deployment, "weights are the routing table's, not the pods'");
    assert_eq!(promoted_config, config_map);
    // A variant's prompt is the pods' to hold: it rolls them.
    let (_, changed, _) = with((90, 10), "You are {name}. Be very brief.");
    assert_ne!(changed, deployment);
}

#[test]
fn render_yaml_is_the_built_objects() {
    let (_, d) = desired(AGENT);
    let text = crate::render::to_yaml(&d).expect("renders");
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
        .collect();
    assert_eq!(docs, vec![value(&d.config_map), value(&d.deployment), value(&d.service)]);
}
