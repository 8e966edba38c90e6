//! AgentTests on the real control plane (issue 29), with the real operator in-process and
//! the real Deployment, ReplicaSet and Job controllers of kube-controller-manager. There is
//! no kubelet: the test plays it — it marks an Agent's pods Ready (so its rollout completes)
//! and ends a test Job's pod with the summary `switchboard test --summary-file` would leave
//! as its termination message; the Job controller then marks the Job Complete or Failed.
//!
//! Proven here: a run waits for the Agent's pods; the operator creates the Job (the image,
//! the gateway URL, the API key from the Secret, the scenarios from a ConfigMap it owns);
//! a Persona edit (which rolls the Agent's pods) starts a new Job and removes the old one;
//! a failed and a passed run reach the status and `kubectl get agenttests`; an AgentTest
//! naming a missing Agent is not accepted. With `gateRollout`, an edit is held: the live
//! pods keep their spec while a candidate pod runs the new one under a test-only route; a
//! failed run keeps it held (the Agent says why), a passing one promotes it. With the
//! platform's Bedrock CA bundle, a judge and Polly on their own endpoints trust it: the run's
//! ConfigMap holds it as the Agent's does, the Job mounts it and passes `--*-ca-file`.

mod common;

use std::time::Duration;

use common::{agent, namespace, objects, persona, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use switchboard_crds::agent_test::{CONDITION_PASSED, TestResult};
use switchboard_crds::common::{CONDITION_ACCEPTED, CONDITION_ROLLOUT_HELD, find_condition};
use switchboard_crds::{Agent, AgentTest};
use switchboard_operator::build::CONFIG_HASH_ANNOTATION;
use switchboard_operator::controller::agent_test_build::{
    API_KEY_ENV, BEDROCK_CA, CONTAINER, JUDGE_CREDENTIALS, RUN_LABEL, SPEECH_CREDENTIALS, TEST_LABEL,
};
use switchboard_operator::settings::{BuildSettings, CaBundle};
use switchboard_tests::cluster::TestNamespace;
use switchboard_tests::kubelet::{agent_pods, mark_pods_ready};
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::{self, Operator, routing_table};
use switchboard_tests::wait::until;

const GATEWAY: &str = "ws://sb-switchboard-gateway.sb.svc:80";
const IMAGE: &str = "registry.local/switchboard:test";

fn agent_test(name: &str, agents: &str, parallel: u16) -> String {
    format!(
        r#"---
apiVersion: switchboard.dev/v1alpha1
kind: AgentTest
metadata: {{name: {name}}}
spec:
  agents: [{agents}]
  apiKeySecretRef: {{name: gateway-key, key: api-key}}
  judge: {{model: amazon.nova-pro-v1:0, region: eu-west-1, credentialsSecretRef: {{name: judge-aws}}}}
  speech: {{voice: Matthew, credentialsSecretRef: {{name: polly-aws}}}}
  parallel: {parallel}
  scenarios:
    - name: Greets the caller
      agent: bank
      steps:
        - say: Hello
          expect: {{agent: bank, noError: true}}
    - name: Answers a second turn
      steps:
        - say: What can you do?
          expect: {{transcript: {{notContains: sorry}}}}
    - name: Hears the caller
      steps:
        - audio: /etc/switchboard/audio/caller-wavs/hello.wav
          expect: {{noError: true}}
        - speech: What can you do?
          expect: {{noError: true}}
  audio: [{{name: caller-wavs}}]
"#
    )
}

/// An operator for `ns` with `settings`, the Secrets [`agent_test`] names open to Agents
/// (`--agent-secrets`; `agent_test_secrets.rs` shows an unlisted one refused).
fn start(ns: &TestNamespace, settings: BuildSettings) -> Operator {
    let mut args = operator::args(&ns.name, "test-operator", settings);
    args.agent_secrets = ["gateway-key", "judge-aws", "polly-aws"].map(|s| format!("{}/{s}", ns.name)).to_vec();
    Operator::start_args(ns, args).expect("operator starts")
}

/// Waits until AgentTest `name`'s status satisfies `ok`; returns it.
async fn wait_status(ns: &TestNamespace, name: &str, what: &str, ok: impl Fn(&AgentTest) -> bool) -> AgentTest {
    let api: Api<AgentTest> = Api::namespaced(ns.client(), &ns.name);
    until(&format!("AgentTest {name}: {what}"), Duration::from_secs(60), || async {
        let t = api.get(name).await?;
        Ok::<_, kube::Error>(ok(&t).then_some(t))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn result(t: &AgentTest) -> Option<TestResult> {
    t.status.as_ref().and_then(|s| s.result)
}

/// Plays the kubelet for the Agent's pods until a test Job other than `not` exists.
async fn wait_job(ns: &TestNamespace, test: &str, not: Option<&str>) -> Job {
    let jobs: Api<Job> = Api::namespaced(ns.client(), &ns.name);
    let selector = format!("{TEST_LABEL}={test}");
    until(&format!("a new test Job of {test}"), Duration::from_secs(90), || async {
        mark_pods_ready(&ns.client(), &ns.name, &agent_pods("bank")).await?;
        let list = jobs.list(&ListParams::default().labels(&selector)).await?;
        let job = list
            .items
            .into_iter()
            .find(|j| Some(j.name_any().as_str()) != not && j.metadata.deletion_timestamp.is_none());
        Ok::<_, anyhow::Error>(job)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Ends the Job's pod as a kubelet would: its test container terminated with `summary` as
/// its termination message and exit code `code`.
async fn end_pod(ns: &TestNamespace, job: &Job, summary: &str, code: i32) {
    let pods: Api<Pod> = Api::namespaced(ns.client(), &ns.name);
    let run = job.labels().get(RUN_LABEL).cloned().expect("run label");
    let selector = format!("{RUN_LABEL}={run}");
    let pod = until("the Job controller's pod", Duration::from_secs(30), || async {
        Ok::<_, kube::Error>(pods.list(&ListParams::default().labels(&selector)).await?.items.into_iter().next())
    })
    .await
    .expect("a pod");
    let now = Timestamp::now().to_string();
    let status = serde_json::json!({"status": {
        "phase": if code == 0 { "Succeeded" } else { "Failed" },
        "startTime": now,
        "containerStatuses": [{
            "name": CONTAINER, "ready": false, "restartCount": 0, "image": IMAGE, "imageID": "",
            "state": {"terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
                "message": summary, "startedAt": now, "finishedAt": now}},
        }],
    }});
    pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await.expect("pod status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_tests_run_as_jobs_on_every_change_and_report_their_outcome() {
    // A cluster-wide operator (the chart's, chart_install.rs) would reconcile these AgentTests
    // too, with its own --agent-secrets: not while this runs.
    let _turn = switchboard_tests::helm::cluster_wide_operator_turn(false);
    let ns = namespace("op-agenttest").await;
    let settings =
        BuildSettings { runtime_image: IMAGE.into(), agent_test_gateway: Some(GATEWAY.into()), ..Default::default() };
    let _op = start(&ns, settings);
    let yaml =
        objects("p", "wf") + &agent("bank", "p", "wf", "  replicas: 1\n") + &agent_test("smoke", "{name: bank}", 4);
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");
    wait_accepted(&ns, "bank").await;

    // No pod is ready yet: the run waits for the rollout (first, maybe, for the operator
    // to accept the Agent: its Deployment's appearance wakes the AgentTest again).
    let passed =
        |t: &AgentTest| t.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_PASSED)).cloned();
    let waiting = wait_status(&ns, "smoke", "Waiting for the rollout", |t| {
        result(t) == Some(TestResult::Waiting) && passed(t).is_some_and(|c| c.message.contains("rolling out"))
    })
    .await;
    let passed = passed(&waiting).expect("Passed condition");
    assert_eq!(passed.status, "Unknown");
    assert!(
        passed.message.starts_with("Agent bank's pods are rolling out: ") && passed.message.contains(" 0 available"),
        "{}",
        passed.message
    );

    // Pods ready: the Job, as the unit tests build it, with its ConfigMap.
    let first = wait_job(&ns, "smoke", None).await;
    let pod = first.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod spec");
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some(IMAGE));
    let args = c.args.clone().unwrap_or_default().join(" ");
    assert!(args.starts_with(&format!("test /etc/switchboard/scenarios --gateway {GATEWAY} --jobs 4")), "{args}");
    assert!(args.contains(" --judge-model amazon.nova-pro-v1:0 --judge-region eu-west-1 "), "{args}");
    // Speech steps, rendered by Amazon Polly in the Job: its voice and credentials.
    assert!(
        args.ends_with("--speech-voice Matthew --speech-credentials-dir /etc/switchboard/speech-credentials"),
        "{args}"
    );
    let polly = pod.volumes.iter().flatten().find(|v| v.name == SPEECH_CREDENTIALS).expect("Polly's Secret");
    assert_eq!(polly.secret.as_ref().and_then(|s| s.secret_name.as_deref()), Some("polly-aws"));
    let wavs = c.volume_mounts.iter().flatten().find(|m| m.mount_path == "/etc/switchboard/audio/caller-wavs");
    assert!(wavs.is_some_and(|m| m.read_only == Some(true)), "the speech step's WAV files: {:?}", c.volume_mounts);
    let judge_volume = pod.volumes.iter().flatten().find(|v| v.name == JUDGE_CREDENTIALS).expect("the judge's Secret");
    assert_eq!(judge_volume.secret.as_ref().and_then(|s| s.secret_name.as_deref()), Some("judge-aws"));
    let env = &c.env.as_ref().expect("env")[0];
    let secret = env.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()).expect("the key from a Secret");
    assert_eq!((env.name.as_str(), secret.name.as_str(), secret.key.as_str()), (API_KEY_ENV, "gateway-key", "api-key"));
    let owner = &first.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("AgentTest", "smoke"));
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let cm = cms.get(&first.name_any()).await.expect("the scenarios' ConfigMap");
    let data = cm.data.unwrap_or_default();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["scenario-01.yaml", "scenario-02.yaml", "scenario-03.yaml"]);
    assert!(data["scenario-01.yaml"].contains("name: Greets the caller"), "{data:?}");
    let running = wait_status(&ns, "smoke", "Running", |t| result(t) == Some(TestResult::Running)).await;
    assert_eq!(running.status.and_then(|s| s.job), Some(first.name_any()));

    // A Persona edit rolls the Agent's pods: once they are ready, a new Job; the old goes.
    apply_yaml(&ns.client(), &ns.name, &persona("p", "Robin")).await.expect("Persona edited");
    let second = wait_job(&ns, "smoke", Some(&first.name_any())).await;
    let jobs: Api<Job> = Api::namespaced(ns.client(), &ns.name);
    until("the first Job and its ConfigMap deleted", Duration::from_secs(60), || async {
        let gone = jobs.get_opt(&first.name_any()).await?.is_none() && cms.get_opt(&first.name_any()).await?.is_none();
        Ok::<_, kube::Error>(gone.then_some(()))
    })
    .await
    .expect("the old run is removed");

    // It fails: the Job controller marks the Job Failed; the summary reaches the status.
    let summary = r#"{"passed":1,"failed":1,"total":2,"firstDivergence":"Greets the caller, step 1 of 1 (say: \"Hello\"): agent: expected bank, got triage"}"#;
    end_pod(&ns, &second, summary, 1).await;
    let failed = wait_status(&ns, "smoke", "Failed", |t| result(t) == Some(TestResult::Failed)).await;
    let status = failed.status.expect("status");
    assert_eq!(
        (status.passed, status.failed, status.job.as_deref()),
        (Some(1), Some(1), Some(second.name_any().as_str()))
    );
    assert!(status.last_run.is_some());
    assert_eq!(
        status.first_divergence.as_deref(),
        Some("Greets the caller, step 1 of 1 (say: \"Hello\"): agent: expected bank, got triage")
    );
    let condition = find_condition(&status.conditions, CONDITION_PASSED).expect("Passed");
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "Failed"));

    // The test itself changes: a new run, which passes.
    apply_yaml(&ns.client(), &ns.name, &agent_test("smoke", "{name: bank}", 2)).await.expect("AgentTest edited");
    let third = wait_job(&ns, "smoke", Some(&second.name_any())).await;
    end_pod(&ns, &third, r#"{"passed":2,"failed":0,"total":2}"#, 0).await;
    let ok = wait_status(&ns, "smoke", "Passed", |t| result(t) == Some(TestResult::Passed)).await;
    let status = ok.status.expect("status");
    assert_eq!((status.passed, status.failed, status.first_divergence), (Some(2), Some(0), None));
    let (listed, table) = ns.kubectl(&["get", "agenttests"]).expect("kubectl runs");
    assert!(listed, "{table}");
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "RESULT", "PASSED", "FAILED", "LAST", "RUN", "ACCEPTED", "AGE"], "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row[..4], ["smoke", "Passed", "2", "0"], "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_test_of_a_missing_agent_is_not_accepted() {
    // A cluster-wide operator (the chart's, chart_install.rs) would reconcile these AgentTests
    // too, with its own --agent-secrets: not while this runs.
    let _turn = switchboard_tests::helm::cluster_wide_operator_turn(false);
    let ns = namespace("op-agenttest-missing").await;
    let settings = BuildSettings { agent_test_gateway: Some(GATEWAY.into()), ..Default::default() };
    let _op = start(&ns, settings);
    apply_yaml(&ns.client(), &ns.name, &agent_test("orphan", "{name: bank}, {name: nobody}", 4)).await.expect("apply");
    let t = wait_status(&ns, "orphan", "Accepted=False", |t| {
        t.status
            .as_ref()
            .and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED))
            .is_some_and(|c| c.status == "False")
    })
    .await;
    let c = t.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED)).expect("Accepted");
    assert_eq!(c.reason, "AgentNotFound");
    assert!(c.message.contains("no Agent bank, nobody in namespace"), "{}", c.message);
    let jobs: Api<Job> = Api::namespaced(ns.client(), &ns.name);
    assert!(jobs.list(&ListParams::default()).await.expect("list").items.is_empty(), "no Job for a refused test");
}

/// The Deployment `name`'s replicas and pod config hash (`None`: no such Deployment).
async fn deployment(ns: &TestNamespace, name: &str) -> Option<(Option<i32>, String)> {
    let api: Api<Deployment> = Api::namespaced(ns.client(), &ns.name);
    let d = api.get_opt(name).await.expect("reading a Deployment")?;
    let spec = d.spec.expect("spec");
    let hash = spec.template.metadata.and_then(|m| m.annotations).and_then(|mut a| a.remove(CONFIG_HASH_ANNOTATION));
    Some((spec.replicas, hash.expect("a config hash")))
}

/// Waits until Agent `name`'s `RolloutHeld` condition satisfies `ok`; returns it.
async fn wait_held(ns: &TestNamespace, name: &str, what: &str, ok: impl Fn(&Condition) -> bool) -> Condition {
    let api: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    until(&format!("Agent {name}: {what}"), Duration::from_secs(60), || async {
        let a = api.get(name).await?;
        let c = a.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_ROLLOUT_HELD)).cloned();
        Ok::<_, kube::Error>(c.filter(|c| ok(c)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_agent_rolls_out_to_live_pods_only_after_its_tests_pass_on_the_candidate() {
    // A cluster-wide operator (the chart's, chart_install.rs) would reconcile these AgentTests
    // too, with its own --agent-secrets: not while this runs.
    let _turn = switchboard_tests::helm::cluster_wide_operator_turn(false);
    let ns = namespace("op-agenttest-gate").await;
    let settings =
        BuildSettings { runtime_image: IMAGE.into(), agent_test_gateway: Some(GATEWAY.into()), ..Default::default() };
    let _op = start(&ns, settings);
    let gated = |parallel: u16| agent_test("smoke", "{name: bank}", parallel) + "  gateRollout: true\n";
    let yaml = objects("p", "wf") + &agent("bank", "p", "wf", "  replicas: 2\n") + &gated(4);
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");
    wait_accepted(&ns, "bank").await;

    // The first rollout is not held: the run tests the live pods, and passes.
    let first = wait_job(&ns, "smoke", None).await;
    let args =
        |job: &Job| job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod").containers[0].args.clone();
    assert!(!args(&first).unwrap_or_default().contains(&"--candidate".to_owned()), "{:?}", args(&first));
    end_pod(&ns, &first, r#"{"passed":2,"failed":0,"total":2}"#, 0).await;
    let passed = wait_status(&ns, "smoke", "Passed", |t| result(t) == Some(TestResult::Passed)).await;
    let (_, live_hash) = deployment(&ns, "bank").await.expect("the live Deployment");
    let configs = passed.status.expect("status").passed_configs;
    assert_eq!(configs.get("bank"), Some(&live_hash), "{configs:?}");
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    let bank = agents.get("bank").await.expect("Agent");
    assert!(bank.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_ROLLOUT_HELD)).is_none());

    // A Persona edit is held: the live pods keep their spec, one candidate pod gets the new
    // one, and the routing table lists it as a test-only route.
    apply_yaml(&ns.client(), &ns.name, &persona("p", "Robin")).await.expect("Persona edited");
    let held = wait_held(&ns, "bank", "RolloutHeld=True", |c| c.status == "True").await;
    assert_eq!(held.reason, "TestsPending");
    let (candidate_replicas, candidate_hash) = until("the candidate Deployment", Duration::from_secs(30), || async {
        Ok::<_, kube::Error>(deployment(&ns, "bank-candidate").await)
    })
    .await
    .expect("a candidate");
    assert_eq!(candidate_replicas, Some(1));
    assert_ne!(candidate_hash, live_hash);
    assert!(
        held.message.contains(&format!("config {} runs on the candidate pod", &candidate_hash[..10])),
        "{}",
        held.message
    );
    assert_eq!(deployment(&ns, "bank").await, Some((Some(2), live_hash.clone())), "the live pods are not rolled");
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let runtime_json = |cm: ConfigMap| cm.data.unwrap_or_default().remove("runtime.json").unwrap_or_default();
    assert!(!runtime_json(cms.get("bank").await.expect("live ConfigMap")).contains("Robin"));
    assert!(runtime_json(cms.get("bank-candidate").await.expect("candidate ConfigMap")).contains("Robin"));
    let services: Api<Service> = Api::namespaced(ns.client(), &ns.name);
    let selector = services.get("bank").await.expect("live Service").spec.and_then(|s| s.selector).unwrap_or_default();
    assert_eq!(
        selector.get("app.kubernetes.io/instance").map(String::as_str),
        Some("bank"),
        "candidate pods are not selected"
    );
    until("the candidate route", Duration::from_secs(30), || async {
        let table = routing_table(&ns).await?;
        let host = table.as_ref().and_then(|t| t.candidate(&ns.name, "bank").map(str::to_owned));
        Ok::<_, anyhow::Error>(host.filter(|h| *h == format!("bank-candidate.{}.svc", ns.name)))
    })
    .await
    .expect("the routing table lists the candidate");

    // Its pods ready, the candidate is tested (test sessions ask for candidate routes); the
    // run fails: the live pods stay, and the Agent says which scenario failed.
    let second = wait_job(&ns, "smoke", Some(&first.name_any())).await;
    assert!(args(&second).unwrap_or_default().windows(2).any(|w| w == ["--candidate", "bank"]), "{:?}", args(&second));
    let summary = r#"{"passed":1,"failed":1,"total":2,"firstDivergence":"Greets the caller, step 1 of 1 (say: \"Hello\"): agent: expected bank, got triage"}"#;
    end_pod(&ns, &second, summary, 1).await;
    wait_status(&ns, "smoke", "Failed", |t| result(t) == Some(TestResult::Failed)).await;
    let failed =
        wait_held(&ns, "bank", "held with the failing scenario", |c| c.message.contains("Failed: Greets the caller"))
            .await;
    assert_eq!(failed.status, "True");
    assert_eq!(deployment(&ns, "bank").await, Some((Some(2), live_hash.clone())));

    // The test is fixed: its new run on the candidate passes, and the candidate is promoted.
    apply_yaml(&ns.client(), &ns.name, &gated(2)).await.expect("AgentTest edited");
    let third = wait_job(&ns, "smoke", Some(&second.name_any())).await;
    assert!(args(&third).unwrap_or_default().windows(2).any(|w| w == ["--candidate", "bank"]), "{:?}", args(&third));
    end_pod(&ns, &third, r#"{"passed":2,"failed":0,"total":2}"#, 0).await;
    let promoted = wait_held(&ns, "bank", "promoted", |c| c.status == "False").await;
    assert_eq!(promoted.reason, "Promoted");
    assert_eq!(deployment(&ns, "bank").await, Some((Some(2), candidate_hash.clone())), "the live pods roll");
    assert!(runtime_json(cms.get("bank").await.expect("live ConfigMap")).contains("Robin"));
    assert_eq!(deployment(&ns, "bank-candidate").await, Some((Some(0), candidate_hash)), "no candidate pod left");
    until("the candidate route gone", Duration::from_secs(30), || async {
        let table =
            routing_table(&ns).await?.filter(|t| t.candidates.is_empty() && t.route(&ns.name, "bank").is_some());
        Ok::<_, anyhow::Error>(table)
    })
    .await
    .expect("no candidate route");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_and_polly_on_their_own_endpoints_trust_the_platforms_bedrock_ca_as_runtime_pods_do() {
    // A cluster-wide operator (the chart's, chart_install.rs) would reconcile these AgentTests
    // too, with its own --agent-secrets: not while this runs.
    let _turn = switchboard_tests::helm::cluster_wide_operator_turn(false);
    let ns = namespace("op-agenttest-ca").await;
    let bundle = CaBundle("-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n".into());
    let settings = BuildSettings {
        runtime_image: IMAGE.into(),
        agent_test_gateway: Some(GATEWAY.into()),
        runtime_bedrock_ca: Some(bundle.clone()),
        ..Default::default()
    };
    let _op = start(&ns, settings);
    let sim = "https://10.0.0.5:28443";
    let test = format!(
        "---
apiVersion: switchboard.dev/v1alpha1
kind: AgentTest
metadata: {{name: judged}}
spec:
  agents: [{{name: bank}}]
  judge: {{model: amazon.nova-pro-v1:0, endpointUrl: '{sim}', credentialsSecretRef: {{name: judge-aws}}}}
  speech: {{voice: Matthew, endpointUrl: '{sim}'}}
  scenarios:
    - name: Greets the caller
      agent: bank
      steps:
        - speech: Hello
          expect: {{judge: {{rubric: The agent greets the caller.}}}}
"
    );
    let yaml = objects("p", "wf") + &agent("bank", "p", "wf", "  replicas: 1\n") + &test;
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");
    wait_accepted(&ns, "bank").await;

    let job = wait_job(&ns, "judged", None).await;
    let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod spec");
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap_or_default().join(" ");
    let file = "/etc/switchboard/bedrock-ca/bedrock-ca.pem";
    assert!(args.contains(&format!("--judge-endpoint-url {sim} --judge-ca-file {file}")), "{args}");
    assert!(args.contains(&format!("--speech-endpoint-url {sim} --speech-ca-file {file}")), "{args}");
    let mount = c.volume_mounts.iter().flatten().find(|m| m.name == BEDROCK_CA).expect("the bundle is mounted");
    assert_eq!((mount.mount_path.as_str(), mount.read_only), ("/etc/switchboard/bedrock-ca", Some(true)));
    let source = pod.volumes.iter().flatten().find(|v| v.name == BEDROCK_CA).and_then(|v| v.config_map.as_ref());
    let source = source.expect("the bundle's volume: the run's ConfigMap");
    assert_eq!(source.name, job.name_any());
    assert_eq!(source.items.iter().flatten().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["bedrock-ca.pem"]);
    // The run's ConfigMap holds the bundle the operator has, as the Agent's ConfigMap does for
    // its runtime pods.
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let run = cms.get(&job.name_any()).await.expect("the run's ConfigMap").data.unwrap_or_default();
    assert_eq!(run.keys().collect::<Vec<_>>(), ["bedrock-ca.pem", "scenario-01.yaml"]);
    let runtime = cms.get("bank").await.expect("the Agent's ConfigMap").data.unwrap_or_default();
    assert_eq!((run.get("bedrock-ca.pem"), runtime.get("bedrock-ca.pem")), (Some(&bundle.0), Some(&bundle.0)));
}
