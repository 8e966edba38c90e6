//! What the platform's settings (`BuildSettings`: the runtime image, the gateway's key, the
//! redaction rules, the Bedrock endpoint and CA) and the Agent's own resources, credentials
//! and tool secrets put in the pod.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::{AGENT, PERSONA, desired, resolved, value};
use crate::build::{CONFIG_HASH_ANNOTATION, Desired, build};
use crate::settings::{self, BuildSettings};

#[test]
fn operator_settings_and_agent_resources_reach_the_pod() {
    let yaml = AGENT.replace("  replicas: 3\n", "  resources: {requests: {cpu: '2'}, limits: {memory: 1Gi}}\n");
    let (agent, spec) = resolved(&yaml, PERSONA);
    let gateway_key = "94dfa2f4c6a2e74d78f5793a91be7ad919965a8cffa99cd95ea7f77943765950";
    let settings = BuildSettings {
        runtime_image: "registry.local/sb:dev".into(),
        drain_margin_seconds: 5,
        gateway_public_key: Some(gateway_key.parse().expect("a public key")),
        ..Default::default()
    };
    let d: Deployment = build(&agent, &spec, &settings).deployment;
    let v = value(&d);
    let container = &v["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.local/sb:dev");
    assert_eq!(container["resources"], json!({"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}}));
    let threads =
        container["env"].as_array().and_then(|e| e.iter().find(|v| v["name"] == "SWITCHBOARD_WORKER_THREADS"));
    assert_eq!(threads.map(|v| &v["value"]), Some(&json!("2")), "workers follow the CPU request");
    let key =
        container["env"].as_array().and_then(|e| e.iter().find(|v| v["name"] == "SWITCHBOARD_GATEWAY_PUBLIC_KEY"));
    assert_eq!(key.map(|v| &v["value"]), Some(&json!(gateway_key)), "runtimes verify the gateway's context");
    assert_eq!(v["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 125);
    assert_eq!(v["spec"]["replicas"], 1, "replicas default to 1");

    // The key the gateway publishes later replaces it: a new pod template, so a rollout.
    let new_key = switchboard_crds::gateway_key::PublicKey::from_bytes([7; 32]);
    let rotated = settings.with_gateway_key(Some(new_key.into()));
    assert!(matches!(rotated, std::borrow::Cow::Owned(_)));
    let template = |s: &BuildSettings| value(&build(&agent, &spec, s).deployment)["spec"]["template"].clone();
    assert_ne!(template(&rotated), template(&settings));
    assert!(matches!(settings.with_gateway_key(settings.gateway_public_key.clone()), std::borrow::Cow::Borrowed(_)));

    // During a rotation pods trust the old and the new key: both, written as hex.
    let both = settings.with_gateway_key(Some(format!("{gateway_key}\n{new_key}").parse().expect("two keys")));
    let env =
        value(&build(&agent, &spec, &both).deployment)["spec"]["template"]["spec"]["containers"][0]["env"].clone();
    let key = env.as_array().and_then(|e| e.iter().find(|v| v["name"] == "SWITCHBOARD_GATEWAY_PUBLIC_KEY")).cloned();
    assert_eq!(key.map(|v| v["value"].clone()), Some(json!(format!("{gateway_key},{new_key}"))));
}

#[test]
fn the_platforms_redaction_rules_reach_the_pods_only_when_given() {
    let (agent, spec) = resolved(AGENT, PERSONA);
    let redact = |settings: &BuildSettings| {
        let env = value(&build(&agent, &spec, settings).deployment)["spec"]["template"]["spec"]["containers"][0]["env"]
            .clone();
        env.as_array().and_then(|e| e.iter().find(|v| v["name"] == "SWITCHBOARD_RECORD_REDACT")).cloned()
    };
    assert_eq!(redact(&BuildSettings::default()), None);
    let rule =
        |name: &str, pattern: &str| switchboard_crds::agent::RedactRule { name: name.into(), pattern: pattern.into() };
    let settings = BuildSettings {
        runtime_record_redact: vec![rule("account", r"\b\d{8}\b"), rule("sort-code", r"\b\d{2}-\d{2}-\d{2}\b")],
        ..Default::default()
    };
    assert_eq!(
        redact(&settings).map(|v| v["value"].clone()),
        Some(json!("account=\\b\\d{8}\\b\nsort-code=\\b\\d{2}-\\d{2}-\\d{2}\\b")),
        "one name=regex per line, as the runtime's --record-redact reads them"
    );
}

#[test]
fn without_credentials_pods_use_the_default_chain_and_without_uid_no_owner() {
    let yaml = AGENT
        .replace("  credentials:\n    secretRef: {name: aws-keys}\n    serviceAccountName: bedrock-irsa\n", "")
        .replace(", uid: 6f1c1d6e-0000-4000-8000-000000000001", "");
    let (_, d) = desired(&yaml);
    let v = value(&d.deployment);
    let pod = &v["spec"]["template"]["spec"];
    assert!(pod.get("serviceAccountName").is_none(), "{pod}");
    assert!(pod["containers"][0].get("envFrom").is_none());
    for meta in [&d.config_map.metadata, &d.deployment.metadata, &d.service.metadata] {
        assert!(meta.owner_references.is_none(), "render output (no uid) has no owner reference");
    }
}

#[test]
fn worker_threads_follow_the_cpu_limit_else_the_request() {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use crate::build::deployment::worker_threads;
    let resources = |requests: Option<&str>, limits: Option<&str>| ResourceRequirements {
        requests: requests.map(|q| [("cpu".to_owned(), Quantity(q.to_owned()))].into()),
        limits: limits.map(|q| [("cpu".to_owned(), Quantity(q.to_owned()))].into()),
        ..Default::default()
    };
    let cases = [
        (Some("100m"), None, Some(1)),
        (Some("1"), None, Some(1)),
        (Some("1001m"), None, Some(2)),
        (Some("2.5"), None, Some(3)),
        (Some(".5"), None, Some(1)),
        (Some("100m"), Some("4"), Some(4)),
        (Some("2"), Some("1.5"), Some(1)),
        (None, Some("500m"), Some(1)),
        (Some("3"), Some("not-a-quantity"), Some(3)),
        (None, None, None),
        (Some("1e3"), None, None),
        (Some("1.2345"), None, None),
    ];
    for (request, limit, expected) in cases {
        assert_eq!(worker_threads(&resources(request, limit)), expected, "request {request:?}, limit {limit:?}");
    }
}

#[test]
fn the_platforms_bedrock_endpoint_and_ca_reach_the_pods_and_a_new_ca_rolls_them() {
    let (agent, spec) = resolved(AGENT, PERSONA);
    let ca = |n: u8| settings::CaBundle(format!("-----BEGIN CERTIFICATE-----\nMII{n}\n-----END CERTIFICATE-----\n"));
    let with = |bundle: settings::CaBundle| BuildSettings {
        runtime_bedrock_endpoint: Some("https://bedrock.vpce.example:443".to_owned()),
        runtime_bedrock_ca: Some(bundle),
        ..BuildSettings::default()
    };
    let first = build(&agent, &spec, &with(ca(1)));
    let data = first.config_map.data.as_ref().expect("data");
    assert_eq!(data["bedrock-ca.pem"], ca(1).0);
    let pod = value(&first.deployment)["spec"]["template"]["spec"].clone();
    let env = &pod["containers"][0]["env"];
    assert!(
        env.as_array()
            .expect("env")
            .contains(&json!({"name": "SWITCHBOARD_BEDROCK_ENDPOINT", "value": "https://bedrock.vpce.example:443"})),
        "{env}"
    );
    assert!(
        env.as_array()
            .expect("env")
            .contains(&json!({"name": "SWITCHBOARD_BEDROCK_CA_FILE", "value": "/etc/switchboard/bedrock-ca.pem"})),
        "{env}"
    );
    assert_eq!(
        pod["volumes"][0]["configMap"]["items"],
        json!([{"key": "runtime.json", "path": "runtime.json"}, {"key": "bedrock-ca.pem", "path": "bedrock-ca.pem"}])
    );
    let hash = |d: &Desired| {
        value(&d.deployment)["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION].clone()
    };
    let plain = build(&agent, &spec, &BuildSettings::default());
    assert_ne!(hash(&first), hash(&plain), "adding a CA rolls the pods");
    assert_ne!(hash(&first), hash(&build(&agent, &spec, &with(ca(2)))), "a new CA rolls the pods");
    assert_eq!(hash(&first), hash(&build(&agent, &spec, &with(ca(1)))));
    assert_eq!(plain.config_map.data.as_ref().expect("data").len(), 1);

    // An Agent with its own endpoint keeps it.
    let own = AGENT.replace("  replicas: 3\n", "  replicas: 3\n  model: {endpoint: \"https://mine.example\"}\n");
    let (agent, spec) = resolved(&own, PERSONA);
    let built = build(&agent, &spec, &with(ca(1)));
    let env = value(&built.deployment)["spec"]["template"]["spec"]["containers"][0]["env"].clone();
    assert!(!env.to_string().contains("SWITCHBOARD_BEDROCK_ENDPOINT"), "{env}");
}

#[test]
fn tool_secrets_are_mounted_read_only_and_never_copied() {
    let with_secret = AGENT.replace(
        "  replicas: 3\n",
        "  replicas: 3\n  tools:\n    - name: crm\n      description: The CRM.\n      http:\n        url: http://crm:8080/x\n        secretHeaders:\n          - { name: Authorization, secretKeyRef: { name: crm-token, key: token }, prefix: \"Bearer \" }\n          - { name: X-Api-Key, secretKeyRef: { name: crm-token, key: key } }\n    - name: docs\n      description: The docs.\n      mcp:\n        url: http://docs:8080/mcp\n        secretHeaders:\n          - { name: Authorization, secretKeyRef: { name: docs, key: bearer } }\n",
    );
    let (_, built) = desired(&with_secret);
    let pod = value(&built.deployment)["spec"]["template"]["spec"].clone();
    let volumes = pod["volumes"].as_array().expect("volumes");
    assert!(volumes.contains(&json!({"name": "tool-secret-0", "secret": {"secretName": "crm-token", "defaultMode": 288, "optional": false, "items": [{"key": "key", "path": "key"}, {"key": "token", "path": "token"}]}})), "{volumes:?}");
    assert!(volumes.contains(&json!({"name": "tool-secret-1", "secret": {"secretName": "docs", "defaultMode": 288, "optional": false, "items": [{"key": "bearer", "path": "bearer"}]}})), "{volumes:?}");
    let mounts = pod["containers"][0]["volumeMounts"].as_array().expect("mounts");
    assert!(
        mounts.contains(
            &json!({"name": "tool-secret-0", "mountPath": "/etc/switchboard/secrets/crm-token", "readOnly": true})
        ),
        "{mounts:?}"
    );
    assert!(
        mounts.contains(
            &json!({"name": "tool-secret-1", "mountPath": "/etc/switchboard/secrets/docs", "readOnly": true})
        ),
        "{mounts:?}"
    );
    // The ConfigMap names the Secret, and holds no value (the operator never reads one).
    let runtime_json = &built.config_map.data.as_ref().expect("data")["runtime.json"];
    assert!(runtime_json.contains("crm-token"), "{runtime_json}");
    // An Agent without secret headers mounts none.
    let (_, plain) = desired(AGENT);
    let plain_pod = value(&plain.deployment)["spec"]["template"]["spec"].clone();
    assert!(!plain_pod.to_string().contains("tool-secret"), "{plain_pod}");
}
