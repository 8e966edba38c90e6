//! Two leaders never write at once. Two real operator processes share one Lease on the real
//! control plane; each talks to the API server through its own recording proxy, so the test
//! sees every request a process sends.
//!
//! - A leader frozen with SIGSTOP in the middle of a wave of reconciles loses the Lease to
//!   the standby, and once resumed sends no write at all (its fence closed while it was
//!   frozen; the reconciles it had under way fail instead of finishing) and exits.
//! - A leader whose API server becomes unreachable (its proxy black-holes every request)
//!   stops leading before its Lease could expire, so the standby that takes over afterwards
//!   is alone.

mod common;

use std::time::{Duration, Instant};

use common::{agent, namespace, objects, wait_accepted};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use switchboard_tests::api_proxy::ApiProxy;
use switchboard_tests::cluster::TestNamespace;
use switchboard_tests::manifests::apply_yaml;
use switchboard_tests::process::OperatorProcess;
use switchboard_tests::wait::until;

const LEASE_SECONDS: u32 = 6;
/// Agents applied at once just before the leader is frozen.
const WAVE: usize = 24;
const LEASE: Duration = Duration::from_secs(LEASE_SECONDS as u64);

async fn holder(ns: &TestNamespace) -> anyhow::Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(ns.client(), &ns.name);
    Ok(leases.get_opt("switchboard-operator").await?.and_then(|l| l.spec).and_then(|s| s.holder_identity))
}

async fn wait_holder(ns: &TestNamespace, who: &str, within: Duration) -> Instant {
    until(&format!("{who} to hold the Lease"), within, || async {
        Ok::<_, anyhow::Error>(holder(ns).await?.filter(|h| h == who).map(|_| Instant::now()))
    })
    .await
    .expect("lease holder")
}

async fn wait_exit(op: &mut OperatorProcess, within: Duration) -> (Instant, std::process::ExitStatus) {
    let start = Instant::now();
    loop {
        if let Some(status) = op.exited().expect("wait") {
            return (Instant::now(), status);
        }
        assert!(start.elapsed() < within, "{} did not exit within {within:?}:\n{}", op.identity, op.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A namespace with a Persona, a Workflow and Agents `a` and `b`, and two proxies.
async fn setup(prefix: &str) -> (TestNamespace, ApiProxy, ApiProxy) {
    let ns = namespace(prefix).await;
    let yaml = objects("p", "wf") + &agent("a", "p", "wf", "") + &agent("b", "p", "wf", "");
    apply_yaml(&ns.client(), &ns.name, &yaml).await.expect("apply");
    let first = ApiProxy::start(ns.client()).await.expect("proxy");
    let second = ApiProxy::start(ns.client()).await.expect("proxy");
    (ns, first, second)
}

fn start(ns: &TestNamespace, proxy: &ApiProxy, identity: &str) -> OperatorProcess {
    let kubeconfig = proxy.kubeconfig(&std::env::temp_dir(), &ns.name).expect("kubeconfig");
    OperatorProcess::start(&kubeconfig, &ns.name, identity, LEASE_SECONDS, &[]).expect("operator process")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_loses_the_lease_and_resumed_writes_nothing() {
    let (ns, proxy_a, proxy_b) = setup("op-freeze").await;
    let mut a = start(&ns, &proxy_a, "a");
    wait_holder(&ns, "a", Duration::from_secs(20)).await;
    wait_accepted(&ns, "a").await;
    wait_accepted(&ns, "b").await;
    let b = start(&ns, &proxy_b, "b");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(holder(&ns).await.expect("lease").as_deref(), Some("a"), "the standby waits");

    // Frozen in the middle of a wave of reconciles, as a long GC pause or a paused VM
    // would catch it. To freeze it at a moment when every reconcile it runs waits for an
    // answer (and no request is half-sent), its proxy holds everything but the Lease.
    proxy_a.hold(true);
    let wave: String = (0..WAVE).map(|i| agent(&format!("c{i}"), "p", "wf", "")).collect();
    apply_yaml(&ns.client(), &ns.name, &wave).await.expect("apply the wave");
    let mut waiting = 0;
    until("a's reconciles to all wait for answers", Duration::from_secs(20), || {
        let now = proxy_a.requests().iter().filter(|r| r.delayed).count();
        let settled = now > 0 && now == waiting;
        waiting = now;
        async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Ok::<_, ()>(settled.then_some(()))
        }
    })
    .await
    .expect("a reconciles the wave");
    a.signal("STOP").expect("freeze a");
    let frozen = Instant::now();
    let took_over = wait_holder(&ns, "b", Duration::from_secs(30)).await;
    assert!(
        took_over - frozen >= LEASE * 2 / 3,
        "the standby took over {:?} after the freeze, before the frozen leader's fence closed",
        took_over - frozen
    );
    for i in 0..WAVE {
        wait_accepted(&ns, &format!("c{i}")).await;
    }
    // The answers a's reconciles wait for reach its sockets while it is frozen.
    proxy_a.hold(false);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let resumed = Instant::now();
    a.signal("CONT").expect("resume a");
    let (_, status) = wait_exit(&mut a, Duration::from_secs(30)).await;
    assert!(!status.success(), "a resumed leader that lost its Lease exits with an error: {}", a.log_text());
    let late: Vec<_> = proxy_a.requests().into_iter().filter(|r| r.at >= resumed && r.is_write()).collect();
    assert!(late.is_empty(), "the resumed ex-leader sent writes: {late:#?}\n{}", a.log_text());
    assert_eq!(holder(&ns).await.expect("lease").as_deref(), Some("b"));
    assert_eq!(b.metric("switchboard_operator_leader"), Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_before_its_lease_expires() {
    let (ns, proxy_a, proxy_b) = setup("op-blackhole").await;
    let mut a = start(&ns, &proxy_a, "a");
    wait_holder(&ns, "a", Duration::from_secs(20)).await;
    wait_accepted(&ns, "a").await;
    let _b = start(&ns, &proxy_b, "b");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(a.metric("switchboard_operator_leader"), Some(1.0));

    proxy_a.black_hole(true);
    let cut = Instant::now();
    // The first moment `a` reports it no longer leads (its controllers stop at that moment).
    let stopped = until("a to stop leading", Duration::from_secs(30), || async {
        Ok::<_, ()>((a.metric("switchboard_operator_leader") != Some(1.0)).then(Instant::now))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", a.log_text()));
    // The last renewal that reached the API server; the Lease it wrote is valid until
    // LEASE after it (at the earliest a standby may take over then).
    let last_renewal = proxy_a
        .requests()
        .into_iter()
        .filter(|r| !r.held && r.method == http::Method::PUT && r.path.contains("/leases/"))
        .map(|r| r.at)
        .max()
        .expect("a renewed its Lease before the cut");
    assert!(last_renewal <= cut);
    assert!(
        stopped < last_renewal + LEASE,
        "a stopped leading {:?} after its last renewal: not before its Lease of {LEASE:?} expired",
        stopped - last_renewal
    );
    let (exited, status) = wait_exit(&mut a, Duration::from_secs(30)).await;
    assert!(!status.success());
    assert!(a.log_text().contains("could not renew the Lease"), "{}", a.log_text());
    let took_over = wait_holder(&ns, "b", Duration::from_secs(30)).await;
    assert!(took_over > stopped, "the standby took over only after the leader stopped");
    let late: Vec<_> = proxy_a.requests().into_iter().filter(|r| r.at >= stopped && r.is_write()).collect();
    assert!(late.is_empty(), "a sent writes after it stopped leading: {late:#?}");
    proxy_a.black_hole(false);
    let _ = exited;
}
