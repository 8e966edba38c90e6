//! Shared by the operator test files: a namespace with the CRDs and an in-process operator,
//! small inline objects, and waiting for `Accepted`.

#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use switchboard_crds::Agent;
use switchboard_crds::common::{CONDITION_ACCEPTED, ResourceStatus, find_condition};
use switchboard_tests::cluster::{TestNamespace, cluster};
use switchboard_tests::manifests::install_crds;
use switchboard_tests::operator::Operator;
use switchboard_tests::wait::until;

/// A fresh namespace (CRDs installed) and an operator watching it.
pub async fn setup(prefix: &str) -> (TestNamespace, Operator) {
    let ns = namespace(prefix).await;
    let op = Operator::start(&ns, "test-operator").expect("operator starts");
    (ns, op)
}

/// A fresh namespace with the CRDs installed.
pub async fn namespace(prefix: &str) -> TestNamespace {
    let cluster = cluster().await.expect("control plane");
    install_crds(&cluster.client).await.expect("CRDs install and become Established");
    TestNamespace::new(&cluster, prefix).await.expect("namespace")
}

/// The `Accepted` condition of an Agent, Persona or Workflow.
pub trait HasAccepted {
    /// The condition, if set.
    fn accepted_condition(&self) -> Option<Condition>;
}

impl HasAccepted for Agent {
    fn accepted_condition(&self) -> Option<Condition> {
        self.status.as_ref().and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED).cloned())
    }
}

impl<K: kube::Resource + HasStatus> HasAccepted for K {
    fn accepted_condition(&self) -> Option<Condition> {
        self.resource_status().and_then(|s| find_condition(&s.conditions, CONDITION_ACCEPTED).cloned())
    }
}

/// Personas and Workflows share [`ResourceStatus`].
pub trait HasStatus {
    /// The status.
    fn resource_status(&self) -> Option<&ResourceStatus>;
}

impl HasStatus for switchboard_crds::Persona {
    fn resource_status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }
}

impl HasStatus for switchboard_crds::Workflow {
    fn resource_status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }
}

/// The `Accepted` condition of `obj`.
pub fn accepted<K: HasAccepted>(obj: &K) -> Option<Condition> {
    obj.accepted_condition()
}

/// Waits until Agent `name` is Accepted=True for its current generation.
pub async fn wait_accepted(ns: &TestNamespace, name: &str) -> Agent {
    let agents: Api<Agent> = Api::namespaced(ns.client(), &ns.name);
    until(&format!("Agent {name} Accepted=True"), Duration::from_secs(20), || async {
        let a = agents.get(name).await?;
        let ok = accepted(&a).is_some_and(|c| c.status == "True")
            && a.status.as_ref().and_then(|s| s.observed_generation) == a.metadata.generation;
        Ok::<_, anyhow::Error>(ok.then_some(a))
    })
    .await
    .expect("accepted")
}

/// A Persona named `name` with display name `display`.
pub fn persona(name: &str, display: &str) -> String {
    format!(
        "---\napiVersion: switchboard.dev/v1alpha1\nkind: Persona\nmetadata: {{name: {name}}}\nspec:\n  displayName: {display}\n  systemPrompt: \"You are {{name}}.\"\n"
    )
}

/// A one-node Workflow named `name`.
pub fn workflow(name: &str) -> String {
    format!(
        "---\napiVersion: switchboard.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}}}\nspec:\n  entry: hello\n  nodes:\n    - {{id: hello, kind: message, instruction: Greet the caller.}}\n"
    )
}

/// A Persona and a Workflow.
pub fn objects(persona_name: &str, workflow_name: &str) -> String {
    persona(persona_name, "Sam") + &workflow(workflow_name)
}

/// A text Agent; `extra` is appended to its spec (indented two spaces).
pub fn agent(name: &str, persona: &str, workflow: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: switchboard.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {name}}}\nspec:\n  mode: text\n  personaRef: {{name: {persona}}}\n  workflowRef: {{name: {workflow}}}\n{extra}"
    )
}
