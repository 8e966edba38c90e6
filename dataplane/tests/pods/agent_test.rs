//! An AgentTest on real pods: the operator runs `switchboard test` as a Job in the runtime
//! image, against the gateway's Service, on the scenario the AgentTest holds; the Job's
//! summary becomes the AgentTest's status.

use std::time::{Duration, Instant};

use crate::{Cluster, simulator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-pod cluster; tests/cluster/e2e-smoke.sh runs it"]
async fn an_agent_test_runs_as_a_job_against_the_gateway_and_its_outcome_is_the_status() {
    let cluster = Cluster::from_env();
    let _sim = simulator().await;
    let test = format!(
        "apiVersion: switchboard.dev/v1alpha1
kind: AgentTest
metadata: {{ name: balance }}
spec:
  agents: [{{ name: triage }}, {{ name: idv }}, {{ name: banking }}]
  scenarios:
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
