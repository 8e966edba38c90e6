//! An AgentTest on real pods: the operator runs `switchboard test` as a Job in the runtime
//! image, against the gateway's Service, on the scenario the AgentTest holds; the Job's
//! summary becomes the AgentTest's status. With `gateRollout`, a Persona edit waits on a
//! candidate pod until the Job's scenario passed there through the gateway's test-only
//! route, and only then reaches the live pods.

use std::time::{Duration, Instant};

use crate::{Cluster, simulator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn an_agent_test_runs_as_a_job_against_the_gateway_and_its_outcome_is_the_status() {
    let cluster = Cluster::from_env();
    let _sim = simulator().await;
    apply(&cluster, "balance", "[{ name: triage }, { name: idv }, { name: banking }]", "");
    let started = Instant::now();
    let status = "jsonpath={.status.result}/{.status.passed}/{.status.failed}";
    let result = loop {
        let result = cluster.kubectl(&["get", "agenttest", "balance", "-o", status]);
        if ["Passed/", "Failed/", "Error/"].iter().any(|done| result.starts_with(done)) {
            break result;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the AgentTest did not finish ({result}): {}",
            cluster.kubectl(&["get", "agenttest", "balance", "-o", "yaml"])
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let job = cluster.kubectl(&["get", "agenttest", "balance", "-o", "jsonpath={.status.job}"]);
    eprintln!("the AgentTest ran as Job {job} in {:?}: {result}", started.elapsed());
    assert_eq!(
        result,
        "Passed/1/0",
        "{}\n{}",
        cluster.kubectl(&["get", "agenttest", "balance", "-o", "yaml"]),
        cluster.kubectl(&["logs", &format!("job/{job}"), "--tail=60"])
    );
    cluster.kubectl(&["delete", "agenttest", "balance", "--wait=false"]);
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
    let file = std::env::temp_dir().join(format!("switchboard-agent-test-{}.yaml", uuid::Uuid::new_v4()));
    std::fs::write(&file, test).expect("the AgentTest is written");
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
