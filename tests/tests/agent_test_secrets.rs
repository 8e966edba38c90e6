//! An AgentTest may name only the Secrets the platform opened to Agents (issue 40, item 10),
//! on the real control plane with the real operator in-process and the real Job controller.
//!
//! An AgentTest's Job mounts its `apiKeySecretRef` and the judge's and Polly's
//! `credentialsSecretRef`, and sends what they hold on (to the gateway, and signed AWS
//! requests to the `endpointUrl` its author chose). Proven here: with `--agent-secrets`
//! listing some of a namespace's Secrets, an AgentTest naming another is `Accepted=False`
//! (`SecretNotAllowed`, the Secret, the field and the flag named), gets a Warning Event and no
//! Job, while one naming only listed Secrets beside it gets its Job; once its author names a
//! listed Secret instead, it runs. Without the check the refused test got a Job mounting the
//! unlisted Secret.

mod common;

use std::time::Duration;

use common::{agent, namespace, objects, wait_accepted};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use switchboard_crds::AgentTest;
use switchboard_crds::common::{CONDITION_ACCEPTED, find_condition};
use switchboard_operator::controller::agent_test_build::TEST_LABEL;
use switchboard_operator::controller::policy::REASON_SECRET;
use switchboard_operator::settings::BuildSettings;
use switchboard_tests::cluster::TestNamespace;
use switchboard_tests::kubelet::{agent_pods, mark_pods_ready};
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::{self, Operator};
use switchboard_tests::wait::until;

/// An AgentTest of Agent `bank` whose judge's credentials are Secret `judge`.
fn agent_test(name: &str, judge: &str) -> String {
    format!(
        r#"---
apiVersion: switchboard.dev/v1alpha1
kind: AgentTest
metadata: {{name: {name}}}
spec:
  agents: [{{name: bank}}]
  apiKeySecretRef: {{name: gateway-key, key: api-key}}
  judge: {{model: amazon.nova-pro-v1:0, endpointUrl: 'https://judge.attacker.example', credentialsSecretRef: {{name: {judge}}}}}
  speech: {{voice: Matthew, credentialsSecretRef: {{name: polly-aws}}}}
  scenarios:
    - name: Greets the caller
      steps:
        - say: Hello
          expect: {{judge: {{rubric: The agent greets the caller.}}}}
"#
    )
}

/// AgentTest `name`'s `Accepted` condition once it has the status `status`.
async fn accepted(ns: &TestNamespace, name: &str, status: &str) -> Condition {
    let api: Api<AgentTest> = Api::namespaced(ns.client(), &ns.name);
    until(&format!("AgentTest {name}: Accepted={status}"), Duration::from_secs(60), || async {
        let t = api.get(name).await?;
        let c = t.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED)).cloned();
        Ok::<_, kube::Error>(c.filter(|c| c.status == status))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The Jobs of AgentTest `test`.
async fn jobs(ns: &TestNamespace, test: &str) -> Vec<Job> {
    let api: Api<Job> = Api::namespaced(ns.client(), &ns.name);
    let list = api.list(&ListParams::default().labels(&format!("{TEST_LABEL}={test}"))).await.expect("jobs");
    list.items
}

/// Plays the kubelet for Agent `bank`'s pods until AgentTest `test` has a Job.
async fn wait_job(ns: &TestNamespace, test: &str) -> Job {
    until(&format!("a test Job of {test}"), Duration::from_secs(90), || async {
        mark_pods_ready(&ns.client(), &ns.name, &agent_pods("bank")).await?;
        Ok::<_, anyhow::Error>(jobs(ns, test).await.into_iter().next())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The Secrets a Job's pod mounts or reads a key of.
fn secrets_of(job: &Job) -> String {
    let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod spec");
    let volumes = serde_json::to_value(&pod.volumes).expect("json");
    let env = serde_json::to_value(&pod.containers[0].env).expect("json");
    format!("{volumes} {env}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_test_mounts_only_the_secrets_the_platform_opened_to_agents() {
    // A cluster-wide operator (the chart's, chart_install.rs) would reconcile these AgentTests
    // too, with its own --agent-secrets: not while this runs.
    let _turn = switchboard_tests::helm::cluster_wide_operator_turn(false);
    let ns = namespace("op-agenttest-secrets").await;
    let build = BuildSettings {
        runtime_image: "registry.local/switchboard:test".into(),
        agent_test_gateway: Some("ws://sb-switchboard-gateway.sb.svc:80".into()),
        ..Default::default()
    };
    let mut args = operator::args(&ns.name, "test-operator", build);
    args.agent_secrets = ["gateway-key", "polly-aws", "judge-aws"].map(|s| format!("{}/{s}", ns.name)).to_vec();
    let _op = Operator::start_args(&ns, args).expect("operator starts");
    let yaml = objects("p", "wf")
        + &agent("bank", "p", "wf", "  replicas: 1\n")
        + &agent_test("listed", "judge-aws")
        + &agent_test("snoop", "payroll-db");
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");
    wait_accepted(&ns, "bank").await;

    // Only listed Secrets: its Job mounts them (and shows the Agent's pods are ready for one).
    let job = wait_job(&ns, "listed").await;
    let mounted = secrets_of(&job);
    for secret in ["gateway-key", "polly-aws", "judge-aws"] {
        assert!(mounted.contains(&format!("\"{secret}\"")), "{secret}: {mounted}");
    }

    // Another Secret of the namespace for the judge, whose endpoint its author chose: refused
    // with what to do, a Warning Event, and no Job.
    let refused = accepted(&ns, "snoop", "False").await;
    assert_eq!(refused.reason, REASON_SECRET);
    let message = &refused.message;
    let secret = format!("{}/payroll-db", ns.name);
    assert!(
        message.starts_with(&format!("Secret {secret} (in spec.judge.credentialsSecretRef) is not open to Agents"))
            && message.contains("--agent-secrets")
            && message.contains("operator.agentSecrets"),
        "the reason names the Secret, its field and how to allow it: {message}"
    );
    assert!(!message.contains("gateway-key") && !message.contains("polly-aws"), "only the unlisted one: {message}");
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    let event = until("a NotAccepted Warning Event of snoop", Duration::from_secs(20), || async {
        let list = events.list(&ListParams::default()).await?;
        Ok::<_, kube::Error>(list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("snoop")
                && e.reason.as_deref() == Some("NotAccepted")
                && e.type_.as_deref() == Some("Warning")
        }))
    })
    .await
    .expect("an Event");
    assert_eq!(event.message.as_deref(), Some(message.as_str()));
    assert!(jobs(&ns, "snoop").await.is_empty(), "no Job for a refused AgentTest");

    // Its author names a listed Secret instead: accepted, and it runs.
    let api: Api<AgentTest> = Api::namespaced(ns.client(), &ns.name);
    let fix = serde_json::json!({"spec": {"judge": {"credentialsSecretRef": {"name": "judge-aws"}}}});
    api.patch("snoop", &PatchParams::default(), &Patch::Merge(&fix)).await.expect("patch");
    accepted(&ns, "snoop", "True").await;
    let job = wait_job(&ns, "snoop").await;
    assert!(!secrets_of(&job).contains("payroll-db"), "{}", job.name_any());
}
