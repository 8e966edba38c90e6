//! Two operator instances on one Lease: only the leader reconciles and writes; when it
//! shuts down gracefully it releases the Lease and the standby takes over.

mod common;

use std::time::Duration;

use common::{agent, namespace, objects, wait_accepted};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::operator::Operator;
use switchboard_tests::wait::until;

async fn holder(ns: &switchboard_tests::cluster::TestNamespace) -> anyhow::Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(ns.client(), &ns.name);
    Ok(leases.get_opt("switchboard-operator").await?.and_then(|l| l.spec).and_then(|s| s.holder_identity))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_and_a_standby_takes_over() {
    let ns = namespace("op-leader").await;
    let first = Operator::start(&ns, "first").expect("first");
    until("first to lead", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(holder(&ns).await?.filter(|h| h == "first"))
    })
    .await
    .expect("first leads");
    let second = Operator::start(&ns, "second").expect("second");

    apply_yaml(&ns.client(), &ns.name, &(objects("p", "wf") + &agent("a", "p", "wf", "") + &agent("b", "p", "wf", "")))
        .await
        .expect("apply");
    wait_accepted(&ns, "a").await;
    wait_accepted(&ns, "b").await;
    tokio::time::sleep(Duration::from_secs(3)).await; // the standby polls the Lease every 2 s
    assert!(first.metrics.reconciles("agent") >= 2, "the leader reconciled");
    assert_eq!(first.metrics.leader.get(), 1);
    assert_eq!(second.metrics.reconciles("agent"), 0, "the standby never reconciles");
    assert_eq!(second.metrics.reconciles("persona"), 0);
    assert_eq!(second.metrics.status_writes("agent"), 0, "the standby never writes");
    assert_eq!(second.metrics.routes_published.get(), 0);
    assert_eq!(second.metrics.leader.get(), 0);
    assert_eq!(holder(&ns).await.expect("lease").as_deref(), Some("first"));

    first.stop().await.expect("the leader stops cleanly and releases the Lease");
    until("second to lead", Duration::from_secs(10), || async {
        Ok::<_, anyhow::Error>(holder(&ns).await?.filter(|h| h == "second"))
    })
    .await
    .expect("second leads");
    apply_yaml(&ns.client(), &ns.name, &agent("c", "p", "wf", "")).await.expect("apply c");
    wait_accepted(&ns, "c").await;
    assert!(second.metrics.reconciles("agent") >= 1, "the new leader reconciles");
    assert_eq!(second.metrics.leader.get(), 1);
    second.stop().await.expect("stops");
    assert_eq!(holder(&ns).await.expect("lease"), None, "released on shutdown");
}
