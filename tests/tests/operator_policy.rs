//! No privilege borrowed through the operator, on the real control plane: an Agent cannot
//! make the operator overwrite an object of its name that it does not own (the routing
//! table, or anyone's ConfigMap), nor run its pods as a ServiceAccount the platform team did
//! not open to Agents (annotation or `--agent-service-accounts`); and a phone number is one
//! Agent's: the later claim is refused (`NumberTaken`) until the first goes.

mod common;

use std::time::Duration;

use common::{accepted, agent, namespace, objects, wait_accepted};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{Patch, PatchParams};
use switchboard_crds::Agent;
use switchboard_crds::routing::{DEFAULT_ROUTES_NAME, ROUTES_KEY};
use switchboard_tests::cluster::TestNamespace;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::{self, Operator, routing_table};
use switchboard_tests::wait::until;

/// Waits until Agent `name` is Accepted=False with `reason`; returns the message.
async fn wait_refused(ns: &TestNamespace, name: &str, reason: &str) -> String {
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    until(&format!("Agent {name} Accepted=False ({reason})"), Duration::from_secs(20), || async {
        let a = agents.get(name).await?;
        Ok::<_, kube::Error>(accepted(&a).filter(|c| c.status == "False" && c.reason == reason).map(|c| c.message))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn absent<K>(ns: &TestNamespace, name: &str) -> bool
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(ns.client(), &ns.name).get_opt(name).await.expect("get").is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_overwrite_an_object_of_its_name_that_it_does_not_own() {
    let ns = namespace("op-names").await;
    let _op = Operator::start(&ns, "names").expect("operator");
    apply_yaml(&ns.client(), &ns.name, &(objects("p", "wf") + &agent("x", "p", "wf", ""))).await.expect("apply");
    wait_accepted(&ns, "x").await;
    until("the routing table", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(routing_table(&ns).await?.filter(|t| t.routes.len() == 1))
    })
    .await
    .expect("published");
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    // Someone else's ConfigMap (written by a person, not by the operator).
    let theirs = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: payroll}\ndata: {owner: finance}\n";
    apply_yaml(&ns.client(), &ns.name, theirs).await.expect("their ConfigMap");

    // Agents named like the routing table and like their ConfigMap.
    let squatters = agent(DEFAULT_ROUTES_NAME, "p", "wf", "") + &agent("payroll", "p", "wf", "");
    apply_yaml(&ns.client(), &ns.name, &squatters).await.expect("apply");
    let message = wait_refused(&ns, DEFAULT_ROUTES_NAME, "ChildNameTaken").await;
    assert!(
        message.contains(&format!("ConfigMap named {}/{DEFAULT_ROUTES_NAME}", ns.name))
            && message.contains("Rename the Agent"),
        "the reason says what is in the way and what to do: {message}"
    );
    wait_refused(&ns, "payroll", "ChildNameTaken").await;
    // Give a (wrong) second reconcile every chance to write.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let routes = configmaps.get(DEFAULT_ROUTES_NAME).await.expect("routing table");
    let data = routes.data.clone().unwrap_or_default();
    assert!(
        data.contains_key(ROUTES_KEY) && !data.contains_key("runtime.json"),
        "the routing table is intact: {data:?}"
    );
    assert!(routes.metadata.owner_references.unwrap_or_default().is_empty(), "nobody took the routing table over");
    let table = routing_table(&ns).await.expect("table").expect("present");
    assert!(table.routes.iter().any(|r| r.name == "x"), "{table:?}");
    let payroll = configmaps.get("payroll").await.expect("their ConfigMap");
    assert_eq!(payroll.data.unwrap_or_default().into_iter().collect::<Vec<_>>(), [("owner".into(), "finance".into())]);
    assert!(payroll.metadata.owner_references.unwrap_or_default().is_empty());
    // Nothing else was made for the refused Agents either (all checks come before any write).
    for name in [DEFAULT_ROUTES_NAME, "payroll"] {
        assert!(absent::<Deployment>(&ns, name).await, "no Deployment {name}");
        assert!(absent::<Service>(&ns, name).await, "no Service {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_only_as_a_service_account_opened_to_agents() {
    let ns = namespace("op-accounts").await;
    let mut args = operator::args(&ns.name, "accounts", Default::default());
    args.agent_service_accounts = vec![format!("{}/listed", ns.name)];
    let _op = Operator::start_args(&ns, args).expect("operator");
    let accounts = "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: payments-irsa}\n\
                    ---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: listed}\n";
    apply_yaml(&ns.client(), &ns.name, accounts).await.expect("accounts");
    let with_account = |name: &str, account: &str| {
        agent(name, "p", "wf", &format!("  credentials: {{serviceAccountName: {account}}}\n"))
    };
    let yaml = objects("p", "wf") + &with_account("borrower", "payments-irsa") + &with_account("listed", "listed");
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");

    // Listed by the platform team: accepted, its pods run as the account.
    wait_accepted(&ns, "listed").await;
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), &ns.name);
    let pod = deployments.get("listed").await.expect("Deployment").spec.and_then(|s| s.template.spec).expect("pod");
    assert_eq!(pod.service_account_name.as_deref(), Some("listed"));

    // Another team's account, not opened to Agents: refused, nothing runs as it.
    let message = wait_refused(&ns, "borrower", "ServiceAccountNotAllowed").await;
    assert!(
        message.contains("switchboard.dev/agent-usable") && message.contains("--agent-service-accounts"),
        "the reason says how the platform team can allow it: {message}"
    );
    assert!(absent::<Deployment>(&ns, "borrower").await, "no pods run as the borrowed account");

    // Its owner opens it to Agents: the Agent is accepted (its next reconcile, here woken
    // by a spec change; else the periodic re-check).
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(ns.client(), &ns.name);
    let opt_in = serde_json::json!({ "metadata": { "annotations": { "switchboard.dev/agent-usable": "true" } } });
    sas.patch("payments-irsa", &PatchParams::default(), &Patch::Merge(&opt_in)).await.expect("annotate");
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    let bump = serde_json::json!({ "spec": { "replicas": 2 } });
    agents.patch("borrower", &PatchParams::default(), &Patch::Merge(&bump)).await.expect("bump");
    wait_accepted(&ns, "borrower").await;
    let pod = deployments.get("borrower").await.expect("Deployment").spec.and_then(|s| s.template.spec).expect("pod");
    assert_eq!(pod.service_account_name.as_deref(), Some("payments-irsa"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_gets_only_the_secrets_the_platform_listed() {
    let ns = namespace("op-secrets").await;
    let mut args = operator::args(&ns.name, "secrets", Default::default());
    args.agent_secrets = vec![format!("{}/crm-token", ns.name)];
    let _op = Operator::start_args(&ns, args).expect("operator");
    let tool = |secret: &str| {
        format!(
            "  tools:\n    - name: crm\n      description: The CRM.\n      http:\n        url: http://crm:8080/x\n        secretHeaders:\n          - {{ name: Authorization, secretKeyRef: {{ name: {secret}, key: token }}, prefix: \"Bearer \" }}\n"
        )
    };
    let yaml = objects("p", "wf")
        + &agent("listed", "p", "wf", &tool("crm-token"))
        + &agent("snooper", "p", "wf", &tool("payroll-db"))
        + &agent("keys", "p", "wf", "  credentials: {secretRef: {name: someone-elses-aws-keys}}\n");
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");

    // Listed: accepted, and its pods mount that Secret's key read-only.
    wait_accepted(&ns, "listed").await;
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), &ns.name);
    let pod = deployments.get("listed").await.expect("Deployment").spec.and_then(|s| s.template.spec).expect("pod");
    let volumes = serde_json::to_value(pod.volumes.unwrap_or_default()).expect("json");
    assert!(volumes.to_string().contains(r#""secretName":"crm-token""#), "{volumes}");

    // Another Secret of the namespace, through a tool or as credentials: refused, no pods.
    for (name, secret) in [("snooper", "payroll-db"), ("keys", "someone-elses-aws-keys")] {
        let message = wait_refused(&ns, name, "SecretNotAllowed").await;
        assert!(
            message.contains(&format!("{}/{secret}", ns.name)) && message.contains("--agent-secrets"),
            "the reason names the Secret and how to allow it: {message}"
        );
        assert!(absent::<Deployment>(&ns, name).await, "no pods for {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phone_number_is_one_agents_and_the_later_claim_waits_for_it() {
    let ns = namespace("op-numbers").await;
    let _op = Operator::start(&ns, "numbers").expect("operator");
    let voice = |name: &str, numbers: &str| {
        agent(name, "p", "wf", &format!("  telephony: {{numbers: [{numbers}]}}\n")).replace("mode: text", "mode: voice")
    };
    // `answering` claims first (and sorts first: the same creation second would agree).
    let first = objects("p", "wf") + &voice("answering", "\"+442079460000\"");
    apply_yaml(&ns.client(), &ns.name, &first).await.expect("apply");
    wait_accepted(&ns, "answering").await;
    apply_yaml(&ns.client(), &ns.name, &voice("later", "\"+15551234567\", \"+442079460000\"")).await.expect("apply");
    let message = wait_refused(&ns, "later", "NumberTaken").await;
    assert!(
        message.contains(&format!("+442079460000 is claimed by Agent {}/answering", ns.name))
            && message.contains("remove the number")
            && !message.contains("+15551234567"),
        "the reason names the number, who has it and what to do: {message}"
    );
    // The routing table gives the number to the first claim only.
    let table = until("the routing table with the number", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(routing_table(&ns).await?.filter(|t| t.routes.iter().any(|r| !r.numbers.is_empty())))
    })
    .await
    .expect("published");
    let claims: Vec<(&str, &[String])> = table.routes.iter().map(|r| (r.name.as_str(), r.numbers.as_slice())).collect();
    assert_eq!(claims, [("answering", &["+442079460000".to_owned()][..])], "{table:?}");

    // A number not E.164: the API server refuses it (the CRD's pattern).
    let bad = apply_yaml(&ns.client(), &ns.name, &voice("national", "\"020 7946 0000\"")).await;
    let bad = format!("{:#}", bad.expect_err("not E.164"));
    assert!(bad.contains("spec.telephony.numbers") && bad.contains("should match"), "{bad}");

    // The first claim goes: the later one is accepted now, and routed with both numbers.
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    agents.delete("answering", &Default::default()).await.expect("delete");
    wait_accepted(&ns, "later").await;
    until("the number moves to the later claim", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(routing_table(&ns).await?.filter(|t| {
            t.routes.iter().any(|r| r.name == "later" && r.numbers == ["+15551234567", "+442079460000"])
                && !t.routes.iter().any(|r| r.name == "answering")
        }))
    })
    .await
    .expect("the later claim is routed");
}
