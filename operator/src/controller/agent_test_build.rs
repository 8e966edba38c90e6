//! Build (pure): what one run of an AgentTest needs — the hash of what it tests, a
//! ConfigMap with its scenarios as files, and the Job that runs `switchboard test` on them
//! against the session gateway. No client, no clock: unit-tested from inline YAML.
//!
//! A run is named after the AgentTest and the first 10 hex digits of its hash: a new hash
//! (the test's spec, or what an Agent under test runs, changed) is a new Job; the same hash
//! is the same Job, so a reconcile never starts one run twice.
//!
//! The platform's Bedrock CA bundle (`--runtime-bedrock-ca-file`) reaches a run as it reaches
//! runtime pods: a `bedrock-ca.pem` key of the run's ConfigMap, mounted as a file. The judge
//! and Amazon Polly each trust it when they name an `endpointUrl` (a private endpoint, or the
//! simulator); without one they reach AWS's public endpoint, which the public roots verify
//! (a CA file replaces them, so it is not given there). A new bundle rolls the Agents' pods,
//! whose new config hash is a new run, with the new bundle.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath,
    PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements, SecretKeySelector, SecretVolumeSource, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use switchboard_crds::AgentTest;
use switchboard_crds::agent_test::{AUDIO_DIR, SPEECH_CREDENTIALS_DIR};

use crate::build::deployment::{restricted_container, runtime_default};
use crate::settings::CaBundle;
use switchboard_crds::catalog::namespace_of;
use switchboard_crds::contract::{self, BEDROCK_CA_FILE, MANAGED_BY, RUN_AS, RUNTIME_COMMAND};

/// `app.kubernetes.io/component` of a test run's Job, pods and ConfigMap.
pub const COMPONENT: &str = "agent-test";
/// The label naming the AgentTest a run belongs to.
pub const TEST_LABEL: &str = "switchboard.dev/agent-test";
/// The label naming the run (the first 10 hex digits of its hash).
pub const RUN_LABEL: &str = "switchboard.dev/agent-test-run";
/// The test container's name.
pub const CONTAINER: &str = "test";
/// Where the scenarios are mounted in the test container.
pub const SCENARIOS_DIR: &str = "/etc/switchboard/scenarios";
/// Where `switchboard test` writes its summary: the container's termination message.
pub const SUMMARY_PATH: &str = "/dev/termination-log";
/// The volume of the judge's credentials Secret.
pub const JUDGE_CREDENTIALS: &str = "judge-credentials";
/// The volume of Amazon Polly's credentials Secret (`spec.speech`).
pub const SPEECH_CREDENTIALS: &str = "speech-credentials";
/// The volume of the platform's Bedrock CA bundle (the run's ConfigMap's `bedrock-ca.pem`).
pub const BEDROCK_CA: &str = "bedrock-ca";
/// Where that bundle is mounted: the file `bedrock-ca.pem` in this folder.
pub const BEDROCK_CA_DIR: &str = "/etc/switchboard/bedrock-ca";
/// The environment variable `switchboard test` reads the gateway's API key from.
pub const API_KEY_ENV: &str = "SWITCHBOARD_TEST_API_KEY";

/// What one Agent under test runs: its name and its pods' config hash (the operator's
/// `switchboard.dev/config-hash`, which changes with the Agent, its Persona, its Workflow
/// and the ConfigMaps it reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deployed {
    /// The Agent.
    pub agent: String,
    /// Its Deployment's pod-template config hash.
    pub config_hash: String,
    /// Whether that is its candidate's (a rollout held until its tests pass): the run's
    /// sessions ask the gateway for the test-only candidate routes.
    pub candidate: bool,
}

/// What a passing run tested, as the AgentTest's `status.passedConfigs`: each Agent's
/// config hash.
pub fn passed_configs(deployed: &[Deployed]) -> BTreeMap<String, String> {
    deployed.iter().map(|d| (d.agent.clone(), d.config_hash.clone())).collect()
}

/// The SHA-256 (hex) of what a run tests: the AgentTest's spec and what each Agent under
/// test runs.
pub fn tested_hash(test: &AgentTest, deployed: &[Deployed]) -> String {
    let mut digest = Sha256::new();
    digest.update(serde_json::to_string(&test.spec).unwrap_or_default().as_bytes());
    for d in deployed {
        digest.update(b"\0");
        digest.update(d.agent.as_bytes());
        digest.update(b"=");
        digest.update(d.config_hash.as_bytes());
    }
    format!("{:x}", digest.finalize())
}

/// The run id of `hash`: its first 10 hex digits.
pub fn run_id(hash: &str) -> &str {
    hash.get(..10).unwrap_or(hash)
}

/// The name of the Job (and ConfigMap) of the run of `test` with `hash`.
pub fn run_name(test: &AgentTest, hash: &str) -> String {
    format!("{}-{}", test.name_any(), run_id(hash))
}

/// The labels of a run's objects and pods.
pub fn labels(test: &AgentTest, hash: &str) -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name", "switchboard-agent-test"),
        ("app.kubernetes.io/component", COMPONENT),
        ("app.kubernetes.io/part-of", "switchboard"),
        ("app.kubernetes.io/managed-by", MANAGED_BY),
        (TEST_LABEL, &test.name_any()),
        (RUN_LABEL, run_id(hash)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn meta(test: &AgentTest, hash: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(run_name(test, hash)),
        namespace: Some(namespace_of(test)),
        labels: Some(labels(test, hash)),
        owner_references: test.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

/// The scenarios as files, `scenario-01.yaml` onwards in the spec's order.
pub fn scenario_files(test: &AgentTest) -> BTreeMap<String, String> {
    test.spec
        .scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("scenario-{:02}.yaml", i + 1), serde_yaml::to_string(s).unwrap_or_default()))
        .collect()
}

/// Which of the run's AWS clients trust the platform's Bedrock CA bundle: (the judge,
/// Amazon Polly), each when the AgentTest gives it an `endpointUrl`.
pub fn trusts_bedrock_ca(test: &AgentTest) -> (bool, bool) {
    let spec = &test.spec;
    (
        spec.judge.as_ref().is_some_and(|j| j.endpoint_url.is_some()),
        spec.speech.as_ref().is_some_and(|s| s.endpoint_url.is_some()),
    )
}

/// The bundle `ca` when the run uses it (see [`trusts_bedrock_ca`]).
fn used_ca<'a>(test: &AgentTest, ca: Option<&'a CaBundle>) -> Option<&'a CaBundle> {
    let (judge, speech) = trusts_bedrock_ca(test);
    ca.filter(|_| judge || speech)
}

/// The ConfigMap of the run's scenarios and, when the run uses it, the platform's Bedrock
/// CA bundle `ca` as `bedrock-ca.pem`.
pub fn config_map(test: &AgentTest, hash: &str, ca: Option<&CaBundle>) -> ConfigMap {
    let mut data = scenario_files(test);
    if let Some(ca) = used_ca(test, ca) {
        data.insert(BEDROCK_CA_FILE.to_owned(), ca.0.clone());
    }
    ConfigMap { metadata: meta(test, hash), data: Some(data), ..Default::default() }
}

/// The Job of the run: `switchboard test` in the operator's runtime `image`, against
/// `gateway` (a `ws://` URL) — testing the held rollouts of the Agents `candidates` on
/// their candidate pods (`--candidate <agent>` each) —, its summary in the termination message,
/// never retried (a scenario that fails once is a finding, not noise). With the platform's
/// Bedrock CA bundle `ca`, a judge or Polly with an `endpointUrl` trusts it
/// (`--judge-ca-file`, `--speech-ca-file`), mounted from the run's ConfigMap.
pub fn job(
    test: &AgentTest,
    hash: &str,
    (gateway, candidates): (&str, &[&str]),
    (image, ca): (&str, Option<&CaBundle>),
) -> Job {
    let name = run_name(test, hash);
    let spec = &test.spec;
    let ca_path = format!("{BEDROCK_CA_DIR}/{BEDROCK_CA_FILE}");
    let (judge_trusts, speech_trusts) = trusts_bedrock_ca(test);
    let (judge_ca, speech_ca) = (ca.is_some() && judge_trusts, ca.is_some() && speech_trusts);
    let ca = judge_ca || speech_ca;
    let parallel = spec.parallel.to_string();
    let mut args =
        vec!["test", SCENARIOS_DIR, "--gateway", gateway, "--jobs", &parallel, "--summary-file", SUMMARY_PATH];
    for agent in candidates {
        args.extend(["--candidate", agent]);
    }
    let judge = spec.judge.as_ref();
    if let Some(judge) = judge {
        args.extend(["--judge-model", &judge.model]);
        if let Some(region) = &judge.region {
            args.extend(["--judge-region", region]);
        }
        if let Some(url) = &judge.endpoint_url {
            args.extend(["--judge-endpoint-url", url]);
        }
        if judge_ca {
            args.extend(["--judge-ca-file", &ca_path]);
        }
    }
    // Speech steps, rendered by Amazon Polly; its credentials a Secret mounted read-only too.
    let speech = spec.speech.as_ref();
    let speech_secret = speech.and_then(|s| s.credentials_secret_ref.as_ref()).map(|r| r.name.clone());
    if let Some(speech) = speech {
        let flags = [
            ("--speech-voice", &speech.voice),
            ("--speech-engine", &speech.engine),
            ("--speech-region", &speech.region),
            ("--speech-endpoint-url", &speech.endpoint_url),
        ];
        for (flag, value) in flags {
            if let Some(value) = value {
                args.extend([flag, value.as_str()]);
            }
        }
        if speech_ca {
            args.extend(["--speech-ca-file", &ca_path]);
        }
        if speech_secret.is_some() {
            args.extend(["--speech-credentials-dir", SPEECH_CREDENTIALS_DIR]);
        }
    }
    // The judge's credentials: a Secret mounted read-only, as runtime pods mount theirs.
    let judge_secret = judge.and_then(|j| j.credentials_secret_ref.as_ref()).map(|r| r.name.clone());
    let judge_env = judge_secret.as_ref().map(|_| EnvVar {
        name: contract::env::CREDENTIALS_DIR.to_owned(),
        value: Some(contract::CREDENTIALS_DIR.to_owned()),
        value_from: None,
    });
    let api_key = spec.api_key_secret_ref.as_ref().map(|r| EnvVar {
        name: API_KEY_ENV.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector { name: r.name.clone(), key: r.key.clone(), optional: Some(false) }),
            ..Default::default()
        }),
    });
    let quantity = |q: &str| Quantity(q.to_owned());
    let container = Container {
        name: CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![RUNTIME_COMMAND[0].to_owned()]),
        args: Some(args.iter().map(|a| (*a).to_owned()).collect()),
        env: Some(api_key.into_iter().chain(judge_env).collect::<Vec<_>>()).filter(|e| !e.is_empty()),
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".into(), quantity("50m")), ("memory".into(), quantity("64Mi"))].into()),
            limits: Some([("memory".into(), quantity("256Mi"))].into()),
            ..Default::default()
        }),
        security_context: Some(restricted_container()),
        volume_mounts: Some(
            [
                VolumeMount {
                    name: "scenarios".into(),
                    mount_path: SCENARIOS_DIR.into(),
                    read_only: Some(true),
                    ..Default::default()
                },
                VolumeMount { name: "tmp".into(), mount_path: "/tmp".into(), ..Default::default() },
            ]
            .into_iter()
            .chain(judge_secret.as_ref().map(|_| VolumeMount {
                name: JUDGE_CREDENTIALS.into(),
                mount_path: contract::CREDENTIALS_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            }))
            .chain(speech_secret.as_ref().map(|_| VolumeMount {
                name: SPEECH_CREDENTIALS.into(),
                mount_path: SPEECH_CREDENTIALS_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            }))
            .chain(ca.then(|| VolumeMount {
                name: BEDROCK_CA.into(),
                mount_path: BEDROCK_CA_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            }))
            .chain(spec.audio.iter().enumerate().map(|(i, cm)| VolumeMount {
                name: format!("audio-{i}"),
                mount_path: format!("{AUDIO_DIR}/{}", cm.name),
                read_only: Some(true),
                ..Default::default()
            }))
            .collect(),
        ),
        termination_message_path: Some(SUMMARY_PATH.to_owned()),
        termination_message_policy: Some("File".to_owned()),
        ..Default::default()
    };
    let pod = PodSpec {
        restart_policy: Some("Never".to_owned()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS),
            run_as_group: Some(RUN_AS),
            seccomp_profile: Some(runtime_default()),
            ..Default::default()
        }),
        containers: vec![container],
        volumes: Some(
            [
                // The run's ConfigMap: its scenarios in their folder, the CA bundle in its own.
                Volume {
                    name: "scenarios".into(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: name.clone(),
                        items: Some(scenario_files(test).into_keys().map(|key| item(&key)).collect()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Volume { name: "tmp".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() },
            ]
            .into_iter()
            .chain(judge_secret.map(|secret| Volume {
                name: JUDGE_CREDENTIALS.into(),
                secret: Some(SecretVolumeSource { secret_name: Some(secret), ..Default::default() }),
                ..Default::default()
            }))
            .chain(speech_secret.map(|secret| Volume {
                name: SPEECH_CREDENTIALS.into(),
                secret: Some(SecretVolumeSource { secret_name: Some(secret), ..Default::default() }),
                ..Default::default()
            }))
            .chain(ca.then(|| Volume {
                name: BEDROCK_CA.into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: name.clone(),
                    items: Some(vec![item(BEDROCK_CA_FILE)]),
                    optional: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            }))
            // Speech steps' WAV files: each ConfigMap of spec.audio in a folder of its own.
            .chain(spec.audio.iter().enumerate().map(|(i, cm)| Volume {
                name: format!("audio-{i}"),
                config_map: Some(ConfigMapVolumeSource {
                    name: cm.name.clone(),
                    optional: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            }))
            .collect(),
        ),
        ..Default::default()
    };
    Job {
        metadata: meta(test, hash),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(i64::from(spec.timeout_seconds)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels(test, hash)), ..Default::default() }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The ConfigMap key `key` as the file of that name.
fn item(key: &str) -> KeyToPath {
    KeyToPath { key: key.to_owned(), path: key.to_owned(), mode: None }
}

#[cfg(test)]
#[path = "agent_test_build_tests.rs"]
mod tests;
