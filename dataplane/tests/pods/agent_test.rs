//! An AgentTest on real pods: the operator runs `switchboard test` as a Job in the runtime
//! image, against the gateway's Service, on the scenario the AgentTest holds; the Job's
//! summary becomes the AgentTest's status. With `gateRollout`, a Persona edit waits on a
//! candidate pod until the Job's scenario passed there through the gateway's test-only
//! route, and only then reaches the live pods. A judged AgentTest with `speech:` steps runs
//! its judge and Amazon Polly against the simulator the runtime pods call, over https with
//! the chart's `runtime.bedrock.caBundle`, which its Job trusts as the runtime pods do.

use std::time::{Duration, Instant};

use crate::{Cluster, simulator, simulator_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn an_agent_test_runs_as_a_job_against_the_gateway_and_its_outcome_is_the_status() {
    let cluster = Cluster::from_env();
    let _sim = simulator().await;
    apply(&cluster, "balance", "[{ name: triage }, { name: idv }, { name: banking }]", "");
    let (result, job) = finished(&cluster, "balance").await;
    assert_eq!(
        result,
        "Passed/1/0",
        "{}\n{}",
        cluster.kubectl(&["get", "agenttest", "balance", "-o", "yaml"]),
        cluster.kubectl(&["logs", &format!("job/{job}"), "--tail=60"])
    );
    cluster.kubectl(&["delete", "agenttest", "balance", "--wait=false"]);
}

/// Waits until AgentTest `name`'s run has finished: its `result/passed/failed` and Job.
async fn finished(cluster: &Cluster, name: &str) -> (String, String) {
    let started = Instant::now();
    let status = "jsonpath={.status.result}/{.status.passed}/{.status.failed}";
    let result = loop {
        let result = cluster.kubectl(&["get", "agenttest", name, "-o", status]);
        if ["Passed/", "Failed/", "Error/"].iter().any(|done| result.starts_with(done)) {
            break result;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the AgentTest did not finish ({result}): {}",
            cluster.kubectl(&["get", "agenttest", name, "-o", "yaml"])
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let job = cluster.kubectl(&["get", "agenttest", name, "-o", "jsonpath={.status.job}"]);
    eprintln!("the AgentTest {name} ran as Job {job} in {:?}: {result}", started.elapsed());
    (result, job)
}

/// The judge, as the simulator plays it: PASS when the judged turn says the caller is
/// verified, FAIL otherwise (its system prompt tells the judge's calls from the agents').
const JUDGE_RULES: &str = r"  - name: judge-verified
    when: { system: strict judge, userText: '(?s)The latest turn:.*verified.*Rubric:' }
    reply: { text: 'PASS The agent told the caller they are verified.' }
  - name: judge-not-verified
    when: { system: strict judge }
    reply: { text: 'FAIL The agent did not say the caller is verified.' }
";

/// The caller's spoken turns: the voice script's phrase 1, and words it does not list, which
/// the simulator's Polly gives a phrase id of its own (and records).
const BALANCE: &str = "I'd like to check my balance";
const DETAILS: &str = "This is Ada Lovelace, account 12345678 and sort code 12-34-56";

/// The access key id of the AgentTest's AWS credentials (the simulator counts requests by it).
const TEST_ACCESS_KEY: &str = "AKIDAGENTTESTE2E";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn a_judged_spoken_agent_test_reaches_the_simulator_through_the_platforms_ca() {
    let cluster = Cluster::from_env();
    let sim = simulator_with(JUDGE_RULES).await;
    // The Job's judge and Polly are the simulator the runtime pods call, on the node's
    // address over https with a certificate of the chart's runtime.bedrock.caBundle; their
    // credentials a Secret of AWS keys, as the runtime pods get theirs.
    let endpoint = sim.endpoint_url().to_owned();
    assert!(endpoint.starts_with("https://"), "{endpoint}");
    kubectl_apply(
        &cluster,
        &format!(
            "apiVersion: v1
kind: Secret
metadata: {{ name: agent-test-aws }}
stringData: {{ AWS_ACCESS_KEY_ID: {TEST_ACCESS_KEY}, AWS_SECRET_ACCESS_KEY: not-a-secret }}
---
apiVersion: switchboard.dev/v1alpha1
kind: AgentTest
metadata: {{ name: judged }}
spec:
  agents: [{{ name: triage }}, {{ name: idv }}]
  judge: {{ model: amazon.nova-pro-v1:0, endpointUrl: '{endpoint}', credentialsSecretRef: {{ name: agent-test-aws }} }}
  speech: {{ voice: Matthew, endpointUrl: '{endpoint}', credentialsSecretRef: {{ name: agent-test-aws }} }}
  scenarios:
    - name: Verified by voice, judged
      agent: {triage}
      steps:
        - speech: {balance}
          expect: {{ agent: idv }}
        - speech: {details}
          expect:
            agent: idv
            tools: [{{ name: perform_idv_check, outcome: ok }}]
            judge: {{ rubric: The agent tells the caller that they are verified. }}
",
            triage = cluster.agent("triage"),
            balance = BALANCE,
            details = DETAILS,
        ),
    );
    let (result, job) = finished(&cluster, "judged").await;
    let logs = cluster.kubectl(&["logs", &format!("job/{job}"), "--tail=60"]);
    let yaml = cluster.kubectl(&["get", "agenttest", "judged", "-o", "yaml"]);
    assert_eq!(result, "Passed/1/0", "{yaml}\n{logs}");
    let args = get(&cluster, &["get", "job", &job], "{.spec.template.spec.containers[0].args}");
    let file = "/etc/switchboard/bedrock-ca/bedrock-ca.pem";
    for flag in ["--judge-ca-file", "--speech-ca-file"] {
        assert!(args.contains(&format!(r#""{flag}","{file}""#)), "{args}");
    }
    // The judge gave its verdict, signed with the AgentTest's credentials, over TLS that
    // trusted the platform's CA; Polly rendered the spoken turns (both passed).
    for said in ["Judged expectations are checked by amazon.nova-pro-v1:0", "(2 steps, 1 judged by a model,"] {
        assert!(logs.contains(said), "the Job's log says {said:?}:\n{logs}");
    }
    let stats = sim.stats();
    assert!(stats.access_keys.get(TEST_ACCESS_KEY).is_some_and(|n| *n >= 1), "the judge's calls: {stats:?}");
    let spoken = sim.spoken_phrases();
    assert!(spoken.values().any(|t| t == DETAILS), "Polly rendered the words the script does not list: {spoken:?}");
    cluster.kubectl(&["delete", "agenttest", "judged", "--wait=false"]);
    sim.shutdown().await;
}

/// Applies the AgentTest `name` of `agents` (YAML flow list) with `extra` spec lines: one
/// scenario, the balance after identity verification, from triage through idv to banking.
fn apply(cluster: &Cluster, name: &str, agents: &str, extra: &str) {
    let test = format!(
        "apiVersion: switchboard.dev/v1alpha1
kind: AgentTest
metadata: {{ name: {name} }}
spec:
  agents: {agents}
{extra}  scenarios:
    - name: Balance after identity verification
      agent: {triage}
      steps:
        - say: I'd like to check my balance
          expect: {{ agent: idv }}
        - say: My name is Ada Lovelace, account 12345678, sort code 12-34-56
          expect: {{ tools: [{{ name: perform_idv_check, outcome: ok }}] }}
        - say: My balance please
          expect: {{ agent: banking, transcript: {{ contains: '1234.56' }} }}
",
        triage = cluster.agent("triage")
    );
    kubectl_apply(cluster, &test);
}

/// `kubectl apply` of `yaml` in the test's namespace.
fn kubectl_apply(cluster: &Cluster, yaml: &str) {
    let file = std::env::temp_dir().join(format!("switchboard-agent-test-{}.yaml", uuid::Uuid::new_v4()));
    std::fs::write(&file, yaml).expect("the YAML is written");
    cluster.kubectl(&["apply", "-f", file.to_str().expect("utf-8")]);
    let _ = std::fs::remove_file(&file);
}

/// A `kubectl get -o jsonpath=` of `what` on `object`.
fn get(cluster: &Cluster, object: &[&str], path: &str) -> String {
    cluster.kubectl(&[object, &["-o", &format!("jsonpath={path}")]].concat())
}

/// Deployment `name`'s replicas and pod template config hash (the operator's annotation),
/// as `replicas/hash`; empty while there is no such Deployment.
fn deployment(cluster: &Cluster, name: &str) -> String {
    let path = r"jsonpath={.spec.replicas}/{.spec.template.metadata.annotations.switchboard\.dev/config-hash}";
    let output = std::process::Command::new(&cluster.kubectl)
        .args(["-n", &cluster.namespace, "get", "deployment", name, "-o", path])
        .output()
        .expect("kubectl runs");
    if output.status.success() { String::from_utf8_lossy(&output.stdout).into_owned() } else { String::new() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn a_gated_persona_edit_reaches_the_live_pods_only_after_its_scenario_passed_on_the_candidate() {
    let cluster = Cluster::from_env();
    let _sim = simulator().await;
    apply(&cluster, "gated", "[{ name: banking }]", "  gateRollout: true\n");
    let status = "{.status.result}/{.status.passed}/{.status.failed}";
    let dump = |cluster: &Cluster| {
        format!(
            "{}\n{}",
            cluster.kubectl(&["get", "agenttest", "gated", "-o", "yaml"]),
            cluster.kubectl(&["get", "agent", "banking", "-o", "yaml"])
        )
    };
    let started = Instant::now();
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(300), "{what}: {}", dump(&cluster));
            std::thread::sleep(Duration::from_secs(2));
        }
    };

    // banking's first rollout under the test is not held: the run tests its live pods.
    tokio::task::block_in_place(|| {
        wait("the first run", &|| get(&cluster, &["get", "agenttest", "gated"], status) == "Passed/1/0");
    });
    let first = get(&cluster, &["get", "agenttest", "gated"], "{.status.job}");
    let live = deployment(&cluster, "banking");
    assert!(live.contains('/'), "banking's Deployment: {live:?}");

    // A Persona edit is held on a candidate pod until the scenario passes there, through the
    // gateway's test-only route; then the live pods roll to it.
    let patch = format!(r#"{{"spec":{{"displayName":"Gated {}"}}}}"#, std::process::id());
    cluster.kubectl(&["patch", "persona", "banking", "--type", "merge", "-p", &patch]);
    let held = r#"{.status.conditions[?(@.type=="RolloutHeld")].status}/{.status.conditions[?(@.type=="RolloutHeld")].reason}"#;
    let hash = |d: &str| d.split_once('/').map(|(_, h)| h.to_owned()).unwrap_or_default();
    // Promoted, the live pods rolled to the spec the candidate passed (the run's status shows
    // Waiting while they roll, then the same run again), and the candidate keeps no pod.
    tokio::task::block_in_place(|| {
        wait("the promotion", &|| {
            let candidate = deployment(&cluster, "banking-candidate");
            get(&cluster, &["get", "agent", "banking"], held) == "False/Promoted"
                && get(&cluster, &["get", "agenttest", "gated"], "{.status.job}") != first
                && get(&cluster, &["get", "agenttest", "gated"], status) == "Passed/1/0"
                && candidate.starts_with("0/")
                && hash(&deployment(&cluster, "banking")) == hash(&candidate)
        });
    });
    let job = get(&cluster, &["get", "agenttest", "gated"], "{.status.job}");
    eprintln!("the gated edit was tested by Job {job} and promoted after {:?}", started.elapsed());
    assert_ne!(hash(&deployment(&cluster, "banking")), hash(&live), "the live pods rolled");
    let logs = cluster.kubectl(&["logs", &format!("job/{job}"), "--tail=80"]);
    let args = get(&cluster, &["get", "job", &job], "{.spec.template.spec.containers[0].args}");
    assert!(args.contains(r#""--candidate","banking""#), "{args}");
    assert!(logs.contains("served by their candidate pods: banking"), "{logs}");
    cluster.kubectl(&["delete", "agenttest", "gated", "--wait=false"]);
}
