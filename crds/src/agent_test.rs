//! The `AgentTest` resource: scenario tests (the same YAML shape as the files `switchboard
//! test` runs) that the operator runs as a Kubernetes Job against the session gateway
//! whenever the test, or an Agent under test, its Persona or its Workflow changes; the Job's
//! outcome lands in the status (`kubectl get agenttests`: result, passed, failed, last run).
//!
//! The scenarios are kept as objects here and checked for their outline only (a name and
//! steps, a bounded size, WAV files only from the ConfigMaps of `spec.audio`, `speech:`
//! steps only with `spec.speech`, which says how Amazon Polly renders them); the Job's
//! `switchboard test` checks every key before it runs anything and, when it refuses a
//! scenario, says where in its summary, which reaches the status. How a Job reports back:
//! [`crate::agent_test_summary`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::SecretKeyRef;
use crate::common::ObjectRef;

mod check;
pub use check::validate_agent_test;

/// Scenarios one AgentTest may hold.
pub const MAX_SCENARIOS: usize = 64;
/// The size of all its scenarios together, as JSON: they must fit one ConfigMap (1 MiB)
/// with room to spare.
pub const MAX_SCENARIO_BYTES: usize = 512 * 1024;
/// The longest AgentTest name: its Jobs are named `<name>-<10 hex digits of the hash>`,
/// and a Job's name becomes a pod label value (at most 63 characters).
pub const MAX_NAME_LEN: usize = 52;
/// Where an AgentTest's audio ConfigMaps are mounted in its Job's pod, one folder each.
pub const AUDIO_DIR: &str = "/etc/switchboard/audio";
/// Where the Secret of `spec.speech.credentialsSecretRef` is mounted in the Job's pod.
pub const SPEECH_CREDENTIALS_DIR: &str = "/etc/switchboard/speech-credentials";
/// The most audio ConfigMaps one AgentTest may mount.
pub const MAX_AUDIO: usize = 8;
/// The condition type that says whether the last run of the scenarios passed.
pub const CONDITION_PASSED: &str = "Passed";

/// Scenario tests of one or more Agents, run by the operator as a Job against the session
/// gateway whenever the test, an Agent under test, its Persona or its Workflow changes.
// kube's printcolumn(...) arguments repeat `type_ = "string"`, which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "switchboard.dev",
    version = "v1alpha1",
    kind = "AgentTest",
    namespaced,
    status = "AgentTestStatus",
    shortname = "sbtest",
    category = "switchboard",
    doc = "Scenario tests of Switchboard agents, run as a Job against the session gateway whenever the test, an Agent under test, its Persona or its Workflow changes.",
    printcolumn(name = "Result", type_ = "string", json_path = ".status.result"),
    printcolumn(name = "Passed", type_ = "integer", json_path = ".status.passed"),
    printcolumn(name = "Failed", type_ = "integer", json_path = ".status.failed"),
    printcolumn(name = "Last Run", type_ = "date", json_path = ".status.lastRun"),
    printcolumn(name = "Accepted", type_ = "string", json_path = ".status.conditions[?(@.type==\"Accepted\")].status"),
    printcolumn(name = "Divergence", type_ = "string", json_path = ".status.firstDivergence", priority = 1),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(
    validation = Rule::new("self.agents.all(a, self.agents.exists_one(b, b.name == a.name))").message("each Agent is listed once in spec.agents"),
    validation = Rule::new("self.scenarios.all(s, self.scenarios.exists_one(o, o.name == s.name))").message("scenario names must be unique")
)]
#[serde(rename_all = "camelCase")]
pub struct AgentTestSpec {
    /// The Agents under test, in this namespace. A change to any of them, or to the
    /// Persona or Workflow one of them uses, runs the scenarios again (once the Agent has
    /// accepted the change and its pods have rolled out).
    #[schemars(length(min = 1, max = 16))]
    pub agents: Vec<ObjectRef>,

    /// The scenarios, each in the shape of a scenario file of `switchboard test` (`name`,
    /// `agent`, `opening`, `steps` with `say` and `expect`). They run through the session
    /// gateway, like a client's sessions. A speech step's `audio:` names a WAV file of a
    /// ConfigMap in `audio`; `speech:` needs `speech` (Amazon Polly renders the words).
    #[schemars(length(min = 1, max = 64))]
    #[schemars(schema_with = "scenarios_schema")]
    pub scenarios: Vec<serde_json::Value>,

    /// The gateway credential: a key of a Secret in this namespace that holds an API key the
    /// gateway accepts (one of its `--api-keys`), sent as `Authorization: Bearer`. Only the
    /// Job's pod reads it (as an environment variable); the operator never does, and the key
    /// goes only to the gateway the operator is configured with. Like every Secret an
    /// AgentTest names, it must be open to Agents (the operator's `--agent-secrets`), else
    /// the AgentTest is not accepted. Leave it out for a gateway that needs no credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<SecretKeyRef>,

    /// Scenarios run at once (default 4).
    #[serde(default = "default_parallel")]
    #[schemars(range(min = 1, max = 16))]
    pub parallel: u16,

    /// How long one run may take, in seconds, before its Job is stopped and the run counts
    /// as an error (default 600).
    #[serde(default = "default_timeout")]
    #[schemars(range(min = 30, max = 3600))]
    pub timeout_seconds: u32,

    /// ConfigMaps in this namespace holding the WAV files of speech steps (as `binaryData`,
    /// 16 kHz mono 16-bit PCM; a ConfigMap holds at most 1 MiB, about 30 s of audio). Each
    /// is mounted read-only in the Job's pod at `/etc/switchboard/audio/<name>/`, and a step
    /// names its file there: `audio: /etc/switchboard/audio/<name>/<key>`. A change to
    /// their content does not start a run by itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub audio: Vec<ObjectRef>,

    /// A Bedrock text model that checks the scenarios' judged expectations
    /// (`expect.judge.rubric`) in the Job, as `switchboard test --judge-model` does. Without
    /// it, judged expectations are not checked (the Job's report counts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeSpec>,

    /// How the scenarios' `speech:` steps are rendered in the Job: by Amazon Polly, as
    /// `switchboard test --speech-voice` and the other `--speech-*` options do. Without it,
    /// `speech:` steps are refused (give `audio:` WAV files instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speech: Option<SpeechSpec>,

    /// Hold each Agent under test's rollouts until these scenarios pass (default false).
    /// A change to the Agent (its spec, Persona, Workflow or the ConfigMaps it reads) is
    /// first rolled out to one candidate pod that only test sessions reach; the live pods
    /// keep the last promoted spec until a run passes on the candidate, and the Agent's
    /// `RolloutHeld` condition says why it waits. An Agent's first rollout is not held.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gate_rollout: bool,
}

/// The judge model of an AgentTest's judged expectations.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JudgeSpec {
    /// The Bedrock model id, e.g. `amazon.nova-pro-v1:0`.
    #[schemars(length(min = 1, max = 200))]
    pub model: String,
    /// Its region (default: the Job's `AWS_REGION`, else `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub region: Option<String>,
    /// An `https://` endpoint instead of the region's public one (a VPC endpoint, or a
    /// Converse-compatible server). The Job trusts the platform's Bedrock CA bundle for it
    /// (the chart's `runtime.bedrock.caBundle`) instead of the public roots, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub endpoint_url: Option<String>,
    /// A Secret in this namespace with `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// optionally `AWS_SESSION_TOKEN`, mounted read-only in the Job's pod only (as an
    /// Agent's `credentials.secretRef` is in its pods), and like it open to Agents (the
    /// operator's `--agent-secrets`). Without it the Job uses the default AWS credential chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<ObjectRef>,
}

/// How an AgentTest's `speech:` steps are rendered: Amazon Polly's voice and where to reach it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpeechSpec {
    /// The Polly voice id (default `Joanna`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub voice: Option<String>,
    /// Its engine: `standard`, `neural` (the default), `long-form` or `generative`; the voice
    /// must have it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Polly's region (default: the Job's `AWS_REGION`, else `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub region: Option<String>,
    /// An `https://` endpoint instead of the region's public one (a VPC endpoint, or the
    /// Bedrock simulator). The Job trusts the platform's Bedrock CA bundle for it (the
    /// chart's `runtime.bedrock.caBundle`) instead of the public roots, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub endpoint_url: Option<String>,
    /// A Secret in this namespace with `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// optionally `AWS_SESSION_TOKEN`, mounted read-only in the Job's pod only, and open to
    /// Agents (the operator's `--agent-secrets`). Without it the Job uses the default AWS
    /// credential chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<ObjectRef>,
}

fn default_parallel() -> u16 {
    4
}

fn default_timeout() -> u32 {
    600
}

fn scenarios_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_SCENARIOS,
        "items": {
            "type": "object",
            "required": ["name", "steps"],
            "properties": {
                "name": { "type": "string", "minLength": 1, "maxLength": 200 },
                "steps": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 100,
                    "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
                }
            },
            "x-kubernetes-preserve-unknown-fields": true
        },
        "description": "The scenarios, each in the shape of a scenario file of `switchboard test` (`name`, `agent`, `opening`, `steps` with `say` and `expect`). A speech step's `audio:` names a WAV file of a ConfigMap in `audio` (`/etc/switchboard/audio/<name>/<key>`); `speech:` needs `speech` (Amazon Polly renders the words in the Job)."
    })
}

/// How the last run went.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TestResult {
    /// Waiting for an Agent under test to accept its spec and roll out its pods.
    Waiting,
    /// The Job runs.
    Running,
    /// Every scenario passed.
    Passed,
    /// At least one scenario failed.
    Failed,
    /// The run could not judge the scenarios (refused scenario files, the gateway out of
    /// reach, the Job stopped at its deadline or gone without a summary).
    Error,
}

impl TestResult {
    /// The result as written in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            TestResult::Waiting => "Waiting",
            TestResult::Running => "Running",
            TestResult::Passed => "Passed",
            TestResult::Failed => "Failed",
            TestResult::Error => "Error",
        }
    }
}

/// What the operator knows of an AgentTest's runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentTestStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted` (spec valid, Agents found) and `Passed` (the last finished run passed;
    /// `Unknown` while one runs or waits).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// How the current or last run went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<TestResult>,
    /// Scenarios that passed in the last finished run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<u32>,
    /// Scenarios that failed (or could not run) in the last finished run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<u32>,
    /// When the last run finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<Time>,
    /// The first divergence of the first failing scenario (or why the run could not judge
    /// them), as the Job's summary said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<String>,
    /// The Job of the current or last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The hash of what that run tests: the AgentTest's spec and, for each Agent under
    /// test, its spec and its Persona's and Workflow's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tested_hash: Option<String>,
    /// For each Agent under test, the pod config hash (`switchboard.dev/config-hash`) the
    /// last passing run tested, for the current spec of this AgentTest: with
    /// `gateRollout`, an Agent's held rollout is promoted once every AgentTest that gates it
    /// lists its candidate's hash here.
    // Always written, `{}` when empty: server-side apply on Kubernetes 1.20 turns a map it
    // owned and no longer receives into `null`, which the schema refuses.
    #[serde(default)]
    pub passed_configs: std::collections::BTreeMap<String, String>,
}
