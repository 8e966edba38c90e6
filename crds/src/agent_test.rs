//! The `AgentTest` resource: scenario tests (the same YAML shape as the files `switchboard
//! test` runs) that the operator runs as a Kubernetes Job against the session gateway
//! whenever the test, or an Agent under test, its Persona or its Workflow changes; the Job's
//! outcome lands in the status (`kubectl get agenttests`: result, passed, failed, last run).
//!
//! The scenarios are kept as objects here and checked for their outline only (a name and
//! steps, a bounded size, WAV files only from the ConfigMaps of `spec.audio`, no `speech:`
//! steps: those are rendered for local mode's simulator); the Job's
//! `switchboard test` checks every key before it runs anything and, when it refuses a
//! scenario, says where in its summary, which reaches the status. How a Job reports back:
//! [`crate::agent_test_summary`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::SecretKeyRef;
use crate::common::ObjectRef;
use crate::validate::{Problem, Reason, duplicates, is_dns_label};

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
    /// ConfigMap in `audio`; `speech:` is refused (it is rendered for local mode's simulator).
    #[schemars(length(min = 1, max = 64))]
    #[schemars(schema_with = "scenarios_schema")]
    pub scenarios: Vec<serde_json::Value>,

    /// The gateway credential: a key of a Secret in this namespace that holds an API key the
    /// gateway accepts (one of its `--api-keys`), sent as `Authorization: Bearer`. Only the
    /// Job's pod reads it (as an environment variable); the operator never does, and the key
    /// goes only to the gateway the operator is configured with. Leave it out for a gateway
    /// that needs no credential.
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
    /// Converse-compatible server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub endpoint_url: Option<String>,
    /// A Secret in this namespace with `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// optionally `AWS_SESSION_TOKEN`, mounted read-only in the Job's pod only (as an
    /// Agent's `credentials.secretRef` is in its pods). Without it the Job uses the default
    /// AWS credential chain.
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
        "description": "The scenarios, each in the shape of a scenario file of `switchboard test` (`name`, `agent`, `opening`, `steps` with `say` and `expect`). A speech step's `audio:` names a WAV file of a ConfigMap in `audio` (`/etc/switchboard/audio/<name>/<key>`); `speech:` is refused (it is rendered for local mode's simulator)."
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

/// Every problem with an AgentTest named `name`, on its own (whether its Agents exist is
/// the operator's check).
pub fn validate_agent_test(name: &str, spec: &AgentTestSpec) -> Vec<Problem> {
    let mut problems = Vec::new();
    let invalid = |field: String, message: String| Problem::new(Reason::InvalidField, field, message);
    if name.len() > MAX_NAME_LEN {
        problems.push(invalid(
            "metadata.name".into(),
            format!("is {} characters; at most {MAX_NAME_LEN} (its Jobs add 11)", name.len()),
        ));
    }
    if spec.agents.is_empty() {
        problems.push(invalid("spec.agents".into(), "name at least one Agent under test".into()));
    }
    for (i, agent) in spec.agents.iter().enumerate() {
        if !is_dns_label(&agent.name) {
            problems.push(invalid(format!("spec.agents[{i}].name"), format!("{:?} is not an Agent name", agent.name)));
        }
    }
    for dup in duplicates(spec.agents.iter().map(|a| a.name.as_str())) {
        problems.push(Problem::new(Reason::DuplicateName, "spec.agents", format!("Agent {dup:?} is listed twice")));
    }
    if spec.scenarios.is_empty() || spec.scenarios.len() > MAX_SCENARIOS {
        problems.push(invalid(
            "spec.scenarios".into(),
            format!("holds {} scenarios; give between 1 and {MAX_SCENARIOS}", spec.scenarios.len()),
        ));
    }
    let size = serde_json::to_string(&spec.scenarios).map_or(usize::MAX, |s| s.len());
    if size > MAX_SCENARIO_BYTES {
        problems.push(invalid(
            "spec.scenarios".into(),
            format!("are {size} bytes as JSON; at most {MAX_SCENARIO_BYTES}: split them over several AgentTests"),
        ));
    }
    if let Some(judge) = &spec.judge {
        problems.extend(check_judge(judge));
    }
    if spec.audio.len() > MAX_AUDIO {
        problems
            .push(invalid("spec.audio".into(), format!("lists {} ConfigMaps; at most {MAX_AUDIO}", spec.audio.len())));
    }
    for (i, audio) in spec.audio.iter().enumerate() {
        if !is_dns_label(&audio.name) {
            problems
                .push(invalid(format!("spec.audio[{i}].name"), format!("{:?} is not a ConfigMap name", audio.name)));
        }
    }
    let audio: Vec<&str> = spec.audio.iter().map(|a| a.name.as_str()).collect();
    let mut names = Vec::new();
    for (i, scenario) in spec.scenarios.iter().enumerate() {
        problems.extend(check_scenario(i, scenario, &audio));
        if let Some(name) = scenario.get("name").and_then(|n| n.as_str()) {
            names.push(name);
        }
    }
    for dup in duplicates(names) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.scenarios",
            format!("two scenarios are named {dup:?}: the report could not tell them apart"),
        ));
    }
    if !(1..=16).contains(&spec.parallel) {
        problems.push(invalid("spec.parallel".into(), format!("is {}; give 1 to 16", spec.parallel)));
    }
    if !(30..=3600).contains(&spec.timeout_seconds) {
        problems.push(invalid("spec.timeoutSeconds".into(), format!("is {}; give 30 to 3600", spec.timeout_seconds)));
    }
    problems
}

/// The judge's fields: what reaches the Job's command line must be plain.
fn check_judge(judge: &JudgeSpec) -> Vec<Problem> {
    let invalid = |field: &str, message: String| Problem::new(Reason::InvalidField, field, message);
    let mut problems = Vec::new();
    let plain = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c));
    if judge.model.is_empty() || judge.model.len() > 200 || !plain(&judge.model) {
        problems.push(invalid("spec.judge.model", format!("{:?} is not a Bedrock model id", judge.model)));
    }
    if let Some(region) = &judge.region
        && !(is_dns_label(region) && region.len() <= 64)
    {
        problems.push(invalid("spec.judge.region", format!("{region:?} is not an AWS region (e.g. us-east-1)")));
    }
    if let Some(url) = &judge.endpoint_url {
        let host = url.strip_prefix("https://").unwrap_or_default();
        if host.is_empty() || host.starts_with('/') || url.len() > 512 || !url.chars().all(|c| c.is_ascii_graphic()) {
            problems.push(invalid(
                "spec.judge.endpointUrl",
                format!("{url:?} is not an https:// URL with a host: the judge's credentials go there"),
            ));
        }
    }
    if let Some(secret) = &judge.credentials_secret_ref
        && !is_dns_label(&secret.name)
    {
        problems
            .push(invalid("spec.judge.credentialsSecretRef.name", format!("{:?} is not a Secret name", secret.name)));
    }
    problems
}

/// Whether `path` names a file of one of the `audio` ConfigMaps' mounts:
/// `/etc/switchboard/audio/<listed name>/<key>`, nothing else.
fn mounted_audio(path: &str, audio: &[&str]) -> bool {
    let Some(rest) = path.strip_prefix(AUDIO_DIR).and_then(|r| r.strip_prefix('/')) else { return false };
    let Some((name, key)) = rest.split_once('/') else { return false };
    let key_ok = !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    audio.contains(&name) && key_ok
}

/// The outline of one scenario: an object with a name and steps, WAV files only from the
/// `audio` ConfigMaps' mounts.
fn check_scenario(i: usize, scenario: &serde_json::Value, audio: &[&str]) -> Vec<Problem> {
    let field = |f: &str| format!("spec.scenarios[{i}]{f}");
    let invalid = |f: &str, message: &str| Problem::new(Reason::InvalidField, field(f), message.to_owned());
    let Some(object) = scenario.as_object() else {
        return vec![invalid("", "must be a scenario (a mapping with name and steps)")];
    };
    let mut problems = Vec::new();
    match object.get("name").and_then(|n| n.as_str()) {
        Some(name) if !name.trim().is_empty() && name.len() <= 200 => {}
        _ => problems.push(invalid(".name", "give the scenario a name (1 to 200 characters)")),
    }
    match object.get("steps").and_then(|s| s.as_array()) {
        Some(steps) if !steps.is_empty() && steps.len() <= 100 => {
            for (j, step) in steps.iter().enumerate() {
                if let Some(path) = step.get("audio")
                    && !path.as_str().is_some_and(|p| mounted_audio(p, audio))
                {
                    problems.push(invalid(
                        &format!(".steps[{j}].audio"),
                        "the Job has only the WAV files of spec.audio's ConfigMaps: name one as \
                         /etc/switchboard/audio/<ConfigMap>/<key>, with the ConfigMap listed in spec.audio",
                    ));
                }
                if step.get("speech").is_some() {
                    problems.push(invalid(
                        &format!(".steps[{j}].speech"),
                        "speech: is rendered for local mode's simulator, not a gateway: give the words as say: \
                         (run speech steps with `switchboard test` in local mode)",
                    ));
                }
            }
        }
        _ => problems.push(invalid(".steps", "give 1 to 100 steps")),
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(spec: serde_json::Value) -> AgentTest {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "switchboard.dev/v1alpha1", "kind": "AgentTest", "metadata": {"name": "t"}, "spec": spec
        }))
        .expect("AgentTest")
    }

    fn scenario(name: &str) -> serde_json::Value {
        serde_json::json!({"name": name, "agent": "triage", "steps": [{"say": "hello", "expect": {"agent": "triage"}}]})
    }

    #[test]
    fn a_valid_test_has_defaults_and_no_problems() {
        let t = test(serde_json::json!({"agents": [{"name": "triage"}], "scenarios": [scenario("a"), scenario("b")]}));
        assert_eq!((t.spec.parallel, t.spec.timeout_seconds), (4, 600));
        assert_eq!(validate_agent_test("t", &t.spec), vec![]);
        assert_eq!(kube::core::cel::validate_cel(&t).map_err(|e| e.to_string()), Ok(()));
    }

    #[test]
    fn each_problem_is_named_with_its_field() {
        let mut bad_steps = scenario("c");
        bad_steps["steps"] = serde_json::json!([{"audio": "caller.wav"}, {"speech": "Hello"}]);
        let t = test(serde_json::json!({
            "agents": [{"name": "triage"}, {"name": "triage"}, {"name": "Bad_Name"}],
            "scenarios": [scenario("a"), scenario("a"), {"steps": []}, bad_steps, "text"],
            "parallel": 0, "timeoutSeconds": 5
        }));
        let problems: Vec<String> =
            validate_agent_test(&"x".repeat(53), &t.spec).iter().map(|p| p.to_string()).collect();
        for expected in [
            "metadata.name: is 53 characters",
            "spec.agents[2].name: \"Bad_Name\" is not an Agent name",
            "DuplicateName: spec.agents: Agent \"triage\" is listed twice",
            "spec.scenarios[2].name: give the scenario a name",
            "spec.scenarios[2].steps: give 1 to 100 steps",
            "spec.scenarios[3].steps[0].audio: the Job has only the WAV files of spec.audio",
            "spec.scenarios[3].steps[1].speech: speech: is rendered for local mode's simulator",
            "spec.scenarios[4]: must be a scenario",
            "two scenarios are named \"a\"",
            "spec.parallel: is 0",
            "spec.timeoutSeconds: is 5",
        ] {
            assert!(problems.iter().any(|p| p.contains(expected)), "{expected:?} not in {problems:#?}");
        }
    }

    #[test]
    fn cel_rules_refuse_what_the_validator_refuses() {
        let twice = test(serde_json::json!({"agents": [{"name": "a"}, {"name": "a"}], "scenarios": [scenario("s")]}));
        let err = kube::core::cel::validate_cel(&twice).expect_err("duplicate agents").to_string();
        assert!(err.contains("each Agent is listed once"), "{err}");
        assert!(!validate_agent_test("t", &twice.spec).is_empty());
        let same = test(serde_json::json!({"agents": [{"name": "a"}], "scenarios": [scenario("s"), scenario("s")]}));
        let err = kube::core::cel::validate_cel(&same).expect_err("duplicate scenarios").to_string();
        assert!(err.contains("scenario names must be unique"), "{err}");
        assert!(!validate_agent_test("t", &same.spec).is_empty());
    }

    #[test]
    fn wav_files_come_only_from_the_listed_config_maps() {
        let with = |audio: serde_json::Value, path: &str| {
            let mut s = scenario("s");
            s["steps"] = serde_json::json!([{"audio": path}]);
            let t = test(serde_json::json!({"agents": [{"name": "a"}], "scenarios": [s], "audio": audio}));
            validate_agent_test("t", &t.spec).iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        let listed = serde_json::json!([{"name": "caller-wavs"}]);
        assert_eq!(with(listed.clone(), "/etc/switchboard/audio/caller-wavs/balance.wav"), Vec::<String>::new());
        for bad in [
            "caller.wav",
            "/etc/switchboard/audio/other/balance.wav",
            "/etc/switchboard/audio/caller-wavs/../../scenarios/x",
            "/etc/switchboard/audio/caller-wavs/",
            "/etc/passwd",
        ] {
            let problems = with(listed.clone(), bad);
            assert!(problems.iter().any(|p| p.contains("spec.scenarios[0].steps[0].audio")), "{bad}: {problems:?}");
        }
        let problems = with(serde_json::json!([{"name": "Bad_Name"}]), "/etc/switchboard/audio/Bad_Name/x.wav");
        assert!(problems.iter().any(|p| p.contains("spec.audio[0].name")), "{problems:?}");
    }

    #[test]
    fn a_judge_is_checked_before_it_reaches_a_command_line() {
        let judged = |judge: serde_json::Value| {
            let t = test(serde_json::json!({"agents": [{"name": "a"}], "scenarios": [scenario("s")], "judge": judge}));
            validate_agent_test("t", &t.spec).iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        let ok = serde_json::json!({"model": "amazon.nova-pro-v1:0", "region": "eu-west-1",
            "endpointUrl": "https://bedrock.vpce.example", "credentialsSecretRef": {"name": "judge-aws"}});
        assert_eq!(judged(ok), Vec::<String>::new());
        let bad = judged(serde_json::json!({"model": "m --gateway ws://evil", "region": "Not A Region",
            "endpointUrl": "http://plain.example", "credentialsSecretRef": {"name": "Bad_Name"}}));
        for field in
            ["spec.judge.model", "spec.judge.region", "spec.judge.endpointUrl", "spec.judge.credentialsSecretRef.name"]
        {
            assert!(bad.iter().any(|p| p.starts_with(&format!("InvalidField: {field}: "))), "{field}: {bad:?}");
        }
    }

    #[test]
    fn oversized_scenarios_are_refused() {
        let mut big = scenario("big");
        big["description"] = serde_json::Value::String("x".repeat(MAX_SCENARIO_BYTES));
        let t = test(serde_json::json!({"agents": [{"name": "a"}], "scenarios": [big]}));
        let problems = validate_agent_test("t", &t.spec);
        assert!(problems.iter().any(|p| p.message.contains("split them over several AgentTests")), "{problems:?}");
    }
}
