//! The Deployment child: the runtime pods, running `switchboard runtime` in the Agent's
//! mode with the RuntimeSpec mounted, probes, resources, a restricted security context, a
//! drain-length termination grace period and the Agent's model credentials.
//!
//! The contract with the runtime: env `MODE`, `SWITCHBOARD_RUNTIME_SPEC`
//! (`/etc/switchboard/runtime.json`) and `SWITCHBOARD_LISTEN` (`0.0.0.0:8080`); port 8080
//! named `http` serving `/v1/session`, `/healthz` (liveness), `/readyz` (readiness, false
//! while draining) and `/metrics`; a writable `/tmp` (an emptyDir, as the root filesystem
//! is read-only). With `autoscaling`, `replicas` is left out so the HPA owns it.
//!
//! Credentials: the Agent's `credentials.secretRef` is mounted read-only at
//! `/etc/switchboard/aws-credentials` (`SWITCHBOARD_CREDENTIALS_DIR`), not given as
//! environment variables: the runtime reads the files again as they age, so a rotated
//! Secret reaches running pods (the kubelet updates mounted Secrets in place) without a
//! rollout — and without the operator reading Secrets to hash them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, KeyToPath, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use switchboard_crds::Agent;
use switchboard_crds::contract::{
    self, BEDROCK_CA_FILE, CONFIG_DIR, CREDENTIALS_DIR, HEALTH_PATH, PORT_NAME, READY_PATH, RUN_AS, RUNTIME_COMMAND,
    RUNTIME_PORT, RUNTIME_SPEC_FILE, RUNTIME_SPEC_PATH, SECRETS_DIR,
};

use super::{CONFIG_HASH_ANNOTATION, child_meta, labels, selector_labels};
use crate::settings::BuildSettings;

/// The runtime container's name.
pub const CONTAINER: &str = "runtime";

/// The Deployment of `agent`, whose RuntimeSpec hashes to `config_hash`.
pub fn build(agent: &Agent, config_hash: &str, settings: &BuildSettings) -> Deployment {
    let replicas = if agent.spec.autoscaling.is_some() { None } else { Some(agent.spec.replicas.unwrap_or(1)) };
    Deployment {
        metadata: child_meta(agent),
        spec: Some(DeploymentSpec {
            replicas,
            revision_history_limit: Some(3),
            selector: LabelSelector { match_labels: Some(selector_labels(agent)), ..Default::default() },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".to_owned()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::String("25%".to_owned())),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(agent)),
                    annotations: Some([(CONFIG_HASH_ANNOTATION.to_owned(), config_hash.to_owned())].into()),
                    ..Default::default()
                }),
                spec: Some(pod_spec(agent, settings)),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod_spec(agent: &Agent, settings: &BuildSettings) -> PodSpec {
    let credentials = agent.spec.credentials.as_ref();
    let grace = i64::from(agent.spec.sessions.drain_timeout_seconds) + i64::from(settings.drain_margin_seconds);
    PodSpec {
        containers: vec![container(agent, settings)],
        service_account_name: credentials.and_then(|c| c.service_account_name.clone()),
        // The runtime never calls the Kubernetes API; IRSA injects its own projected token.
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(grace),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS),
            run_as_group: Some(RUN_AS),
            fs_group: Some(RUN_AS),
            seccomp_profile: Some(runtime_default()),
            ..Default::default()
        }),
        volumes: Some(
            [
                Volume {
                    name: "config".to_owned(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: agent.name_any(),
                        items: Some(
                            std::iter::once(RUNTIME_SPEC_FILE)
                                .chain(settings.runtime_bedrock_ca.as_ref().map(|_| BEDROCK_CA_FILE))
                                .map(|file| KeyToPath { key: file.to_owned(), path: file.to_owned(), mode: None })
                                .collect(),
                        ),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "tmp".to_owned(),
                    empty_dir: Some(EmptyDirVolumeSource {
                        size_limit: Some(Quantity("256Mi".to_owned())),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ]
            .into_iter()
            .chain(credentials_secret(agent).map(|secret| Volume {
                name: CREDENTIALS_VOLUME.to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.to_owned()),
                    // Every key: AWS_SESSION_TOKEN is there only for temporary credentials.
                    items: None,
                    default_mode: Some(0o440),
                    optional: Some(false),
                }),
                ..Default::default()
            }))
            .chain(tool_secrets(agent).into_iter().enumerate().map(|(i, (secret, keys))| Volume {
                name: format!("tool-secret-{i}"),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret),
                    items: Some(keys.into_iter().map(|key| KeyToPath { path: key.clone(), key, mode: None }).collect()),
                    // Readable by the pod's group (fsGroup), not by others.
                    default_mode: Some(0o440),
                    optional: Some(false),
                }),
                ..Default::default()
            }))
            .collect(),
        ),
        ..Default::default()
    }
}

/// The volume of the Agent's credentials Secret.
const CREDENTIALS_VOLUME: &str = "credentials";

/// The Secret of the Agent's `credentials.secretRef`, if any.
fn credentials_secret(agent: &Agent) -> Option<&str> {
    agent.spec.credentials.as_ref().and_then(|c| c.secret_ref.as_ref()).map(|s| s.name.as_str())
}

/// The Secrets (name -> keys) the Agent's tools read header values from, in name order:
/// the pods mount each at `/etc/switchboard/secrets/<name>`, only the keys named.
pub fn tool_secrets(agent: &Agent) -> BTreeMap<String, BTreeSet<String>> {
    let mut secrets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for tool in &agent.spec.tools {
        if let Some((_, secret_headers)) = tool.headers() {
            for header in secret_headers {
                let reference = &header.secret_key_ref;
                secrets.entry(reference.name.clone()).or_default().insert(reference.key.clone());
            }
        }
    }
    secrets
}

fn container(agent: &Agent, settings: &BuildSettings) -> Container {
    let env = |name: &str, value: String| EnvVar { name: name.to_owned(), value: Some(value), value_from: None };
    let resources = agent.spec.resources.clone().unwrap_or_else(|| settings.default_resources());
    let mut vars = vec![
        env(contract::env::MODE, agent.spec.mode.as_str().to_owned()),
        env(contract::env::RUNTIME_SPEC, RUNTIME_SPEC_PATH.to_owned()),
        env(contract::env::LISTEN, contract::LISTEN_ADDR.to_owned()),
        env(contract::env::LOG_FORMAT, settings.runtime_log_format.as_str().to_owned()),
    ];
    if let Some(threads) = worker_threads(&resources) {
        vars.push(env(contract::env::WORKER_THREADS, threads.to_string()));
    }
    if let Some(key) = &settings.gateway_public_key {
        vars.push(env(contract::env::GATEWAY_PUBLIC_KEY, key.to_string()));
    }
    // Grants name the pod they are for; the pod knows its own address from the API.
    vars.push(EnvVar {
        name: contract::env::POD_IP.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            // With the API version the server would default, so the applied object and the
            // built one are equal.
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".to_owned()),
                field_path: "status.podIP".to_owned(),
            }),
            ..Default::default()
        }),
    });
    // The Agent's own `model.endpoint` wins over the platform's.
    if let Some(endpoint) = settings.runtime_bedrock_endpoint.as_ref().filter(|_| agent.spec.model.endpoint.is_none()) {
        vars.push(env(contract::env::BEDROCK_ENDPOINT, endpoint.clone()));
    }
    if settings.runtime_bedrock_ca.is_some() {
        vars.push(env(contract::env::BEDROCK_CA_FILE, format!("{CONFIG_DIR}/{BEDROCK_CA_FILE}")));
    }
    if credentials_secret(agent).is_some() {
        vars.push(env(contract::env::CREDENTIALS_DIR, CREDENTIALS_DIR.to_owned()));
    }
    vars.extend(settings.traces.env(agent));
    if !settings.runtime_record_redact.is_empty() {
        let rules: Vec<String> = settings.runtime_record_redact.iter().map(|rule| rule.as_flag()).collect();
        vars.push(env(contract::env::RECORD_REDACT, rules.join("\n")));
    }
    Container {
        name: CONTAINER.to_owned(),
        image: Some(settings.runtime_image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![RUNTIME_COMMAND[0].to_owned()]),
        args: Some(vec![RUNTIME_COMMAND[1].to_owned()]),
        env: Some(vars),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.to_owned()),
            container_port: i32::from(RUNTIME_PORT),
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        }]),
        liveness_probe: Some(probe(HEALTH_PATH, 10, 3)),
        readiness_probe: Some(probe(READY_PATH, 5, 1)),
        resources: Some(resources),
        security_context: Some(restricted_container()),
        volume_mounts: Some(
            [
                VolumeMount {
                    name: "config".to_owned(),
                    mount_path: CONFIG_DIR.to_owned(),
                    read_only: Some(true),
                    ..Default::default()
                },
                VolumeMount { name: "tmp".to_owned(), mount_path: "/tmp".to_owned(), ..Default::default() },
            ]
            .into_iter()
            .chain(credentials_secret(agent).map(|_| VolumeMount {
                name: CREDENTIALS_VOLUME.to_owned(),
                mount_path: CREDENTIALS_DIR.to_owned(),
                read_only: Some(true),
                ..Default::default()
            }))
            .chain(tool_secrets(agent).into_keys().enumerate().map(|(i, secret)| VolumeMount {
                name: format!("tool-secret-{i}"),
                mount_path: format!("{SECRETS_DIR}/{secret}"),
                read_only: Some(true),
                ..Default::default()
            }))
            .collect(),
        ),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Default::default()
    }
}

/// How many async worker threads the runtime should run: its CPU limit rounded down when
/// it has one (it cannot use more), else its CPU request rounded up; at least one. `None`
/// (the runtime's own default, one per CPU it may use) when neither is set or readable.
///
/// Sized from the pod and not from the node: without this a runtime requesting 100m on a
/// 64-core node would start 64 workers, and every worker beyond what the pod gets costs
/// wake-ups between threads (one worker used ~18 % less CPU per text turn than two).
pub(crate) fn worker_threads(resources: &ResourceRequirements) -> Option<u32> {
    let cores = |map: &Option<std::collections::BTreeMap<String, Quantity>>| {
        map.as_ref().and_then(|m| m.get("cpu")).and_then(|q| cpu_millis(&q.0))
    };
    let threads = match (cores(&resources.limits), cores(&resources.requests)) {
        (Some(limit), _) => limit / 1000,
        (None, Some(request)) => request.div_ceil(1000),
        (None, None) => return None,
    };
    Some(u32::try_from(threads).unwrap_or(u32::MAX).clamp(1, 1024))
}

/// A CPU quantity in millicores: `250m`, `2`, `1.5`, `0.1`; `None` for other forms.
fn cpu_millis(quantity: &str) -> Option<u64> {
    let quantity = quantity.trim();
    if let Some(millis) = quantity.strip_suffix('m') {
        return millis.parse().ok();
    }
    let (whole, fraction) = quantity.split_once('.').unwrap_or((quantity, ""));
    if fraction.len() > 3 || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let fraction: u64 = if fraction.is_empty() { 0 } else { format!("{fraction:0<3}").parse().ok()? };
    whole.checked_mul(1000)?.checked_add(fraction)
}

fn probe(path: &str, period_seconds: i32, failure_threshold: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(PORT_NAME.to_owned()),
            scheme: Some("HTTP".to_owned()),
            ..Default::default()
        }),
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(2),
        failure_threshold: Some(failure_threshold),
        success_threshold: Some(1),
        ..Default::default()
    }
}

/// The container runtime's default seccomp profile (the `restricted` Pod Security level).
pub(crate) fn runtime_default() -> SeccompProfile {
    SeccompProfile { type_: "RuntimeDefault".to_owned(), localhost_profile: None }
}

/// A container of the `restricted` Pod Security level with a read-only root: no privilege
/// escalation, no capabilities, non-root, the default seccomp profile. The runtime pods'
/// and the AgentTest Jobs' containers.
pub(crate) fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_owned()]), add: None }),
        seccomp_profile: Some(runtime_default()),
        ..Default::default()
    }
}
