//! The model quota shared by two `switchboard gateway` processes on a real redis-server,
//! in front of real runtimes on the simulator ([`switchboard_gateway::capacity`]):
//!
//! - A burst over the quota queues across both gateways — each waiting client told its
//!   position and the Agent's hold message — and is served in arrival order as slots free,
//!   on whichever gateway. Agents without a hold message tell the place in the gateway's
//!   sentence.
//! - A gateway killed with SIGKILL stops renewing its leases: once they lapse, its slots go
//!   to the sessions waiting at the other.
//! - Two tenants (namespaces `bank` and `retail`, each guaranteed half): bank bursts into
//!   the whole quota while retail is quiet; then retail's new session goes ahead of bank's
//!   waiting one and is served when a slot frees, while bank's waits.
//! - An Agent that refuses rather than queues: a session past the quota gets
//!   `capacity_full`, a retry hint and close 1013 — never an accepted, silent socket.

use std::path::Path;
use std::time::{Duration, Instant};

use switchboard_core::protocol::{ErrorCode, ServerMessage};
use switchboard_crds::agent::WhenFull;
use switchboard_crds::routing::RoutingTable;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_gateway::{GatewayConfig, Reach};
use switchboard_sim::banking_script;

use crate::client::{Client, get, metric_sum};
use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};
use crate::redis::Redis;

fn started(m: &ServerMessage) -> bool {
    matches!(m, ServerMessage::BidiConnectionStart { .. })
}

/// What the Agent of the two-gateway test tells a waiting caller.
const HOLD: &str = "All our advisers are busy; please stay on the line.";

/// The next message: `bidi_session_queued`'s position, or 0 for the session's start. The
/// hold message is the gateway's sentence with the place.
async fn place(client: &mut Client) -> u32 {
    queued(client, None).await
}

/// [`place`] at an Agent whose hold message is [`HOLD`].
async fn held(client: &mut Client) -> u32 {
    queued(client, Some(HOLD)).await
}

async fn queued(client: &mut Client, hold: Option<&str>) -> u32 {
    match client.next().await {
        Some(Ok(ServerMessage::BidiSessionQueued { position, estimated_wait_seconds, message, agent })) => {
            assert!(estimated_wait_seconds > 0, "an estimate comes with the place");
            // Every session here waits for a triage (the default, or a tenant's).
            let named =
                agent.split_once('/').is_some_and(|(namespace, name)| !namespace.is_empty() && name == "triage");
            assert!(named, "the place names the Agent waited for as namespace/name: {agent:?}");
            match hold {
                Some(hold) => assert_eq!(message, hold, "the Agent's hold message"),
                None => {
                    let said = match position {
                        1 => "You are next in line".to_owned(),
                        n => format!("You are number {n} in line"),
                    };
                    assert!(message.contains(&said), "a hold message with the place: {message:?}");
                }
            }
            position
        }
        Some(Ok(m)) if started(&m) => 0,
        other => panic!("expected a place in the queue or the start: {other:?}"),
    }
}

/// The pool triage's sessions count in, and the routes folder with `edit` applied.
fn routes(fleet: &Fleet, edit: impl Fn(&mut RoutingTable)) -> (String, std::path::PathBuf) {
    let dir = write_routes(fleet, |_, addr| addr);
    let path = dir.join("routes.json");
    let mut table = RoutingTable::parse(&std::fs::read_to_string(&path).expect("routes")).expect("parses");
    edit(&mut table);
    std::fs::write(&path, table.to_json()).expect("routes");
    let pool = table.routes.iter().find(|r| r.name == "triage").expect("triage").capacity.pool.clone();
    (pool, dir)
}

async fn gateway(dir: &Path, redis: &Redis, pool: &str, quota: u32) -> GatewayProcess {
    let quota = format!("{pool}={quota}");
    // Leases lapse 2 s after a gateway's last heartbeat; waiting sessions look every 50 ms.
    let args = [
        "--redis-url",
        &redis.url,
        "--capacity-quota",
        &quota,
        "--capacity-lease-seconds",
        "2",
        "--capacity-poll-ms",
        "50",
    ];
    GatewayProcess::start(dir, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_share_one_quota_queue_in_order_and_a_dead_ones_slots_lapse() {
    let redis = Redis::start();
    let fleet = Fleet::start(&[]).await;
    let (pool, dir) = routes(&fleet, |table| {
        for route in &mut table.routes {
            route.capacity.hold_message = Some(HOLD.into());
        }
    });
    let a = gateway(&dir, &redis, &pool, 2).await;
    let mut b = gateway(&dir, &redis, &pool, 2).await;

    // Two sessions fill the quota, one through each gateway.
    let mut first = Client::start(&a.url(), None).await;
    assert_eq!(held(&mut first).await, 0);
    let mut second = Client::start(&b.url(), None).await;
    assert_eq!(held(&mut second).await, 0);
    // The burst: three more, alternating gateways, each told its place in the one queue.
    let mut third = Client::start(&b.url(), None).await;
    assert_eq!(held(&mut third).await, 1);
    let mut fourth = Client::start(&a.url(), None).await;
    assert_eq!(held(&mut fourth).await, 2);
    let mut fifth = Client::start(&b.url(), None).await;
    assert_eq!(held(&mut fifth).await, 3);
    let (_, metrics) = get(a.addr, "/metrics").await;
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_capacity_in_use", &[("namespace", "bank")]), 2.0);
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_capacity_queued", &[("namespace", "bank")]), 3.0);

    // A waiting client that leaves frees its place: the fifth moves up.
    fourth.close().await;
    assert_eq!(held(&mut fifth).await, 2, "the place behind the one that left moves up");

    // The first session ends: the first in line (at the other gateway) starts; the rest
    // move up.
    first.close().await;
    assert_eq!(held(&mut third).await, 0, "the first in line takes the freed slot");
    assert_eq!(held(&mut fifth).await, 1);
    let turn = third.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    assert!(!turn.is_empty(), "the queued session is served: the greeting");

    // Gateway b dies holding two slots (second, third): once its heartbeat lapses (2 s),
    // the waiting session on a takes one. fifth was at b too — it goes with b; so one more
    // waits at a.
    let mut sixth = Client::start(&a.url(), None).await;
    assert_eq!(held(&mut sixth).await, 2, "behind fifth");
    b.kill();
    let killed = Instant::now();
    drop((second, third, fifth));
    loop {
        match held(&mut sixth).await {
            0 => break,
            n => assert!(n >= 1),
        }
    }
    let lapsed = killed.elapsed();
    println!("a dead gateway's slots went to the sessions waiting elsewhere {} ms after the kill", lapsed.as_millis());
    assert!(lapsed >= Duration::from_millis(1000), "not before its lease lapsed: {lapsed:?}");
    assert!(lapsed < Duration::from_secs(10), "soon after its lease lapsed: {lapsed:?}");
    let (_, metrics) = get(a.addr, "/metrics").await;
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_capacity_in_use", &[("namespace", "bank")]), 1.0);
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_capacity_queued", &[("namespace", "bank")]), 0.0);
    assert!(metric_sum(&metrics, "switchboard_gateway_capacity_wait_seconds_count", &[("outcome", "served")]) >= 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_refuses_past_its_quota_says_so_with_a_retry_hint() {
    let redis = Redis::start();
    let fleet = Fleet::start(&[]).await;
    let (pool, dir) = routes(&fleet, |table| {
        for route in &mut table.routes {
            route.capacity.when_full = WhenFull::Refuse;
        }
    });
    let a = gateway(&dir, &redis, &pool, 1).await;
    let b = gateway(&dir, &redis, &pool, 1).await;
    let mut first = Client::start(&a.url(), None).await;
    assert_eq!(place(&mut first).await, 0);
    let mut refused = Client::start(&b.url(), None).await;
    match refused.next().await {
        Some(Ok(ServerMessage::BidiError {
            code: ErrorCode::CapacityFull, retry_after_seconds, recoverable, ..
        })) => {
            assert!(!recoverable);
            assert!(retry_after_seconds.is_some_and(|s| s >= 1), "a retry hint: {retry_after_seconds:?}");
        }
        other => panic!("capacity_full expected: {other:?}"),
    }
    assert_eq!(refused.closed().await.0, 1013, "try again later");
    // Once the slot is free, the same Agent serves at once.
    first.close().await;
    let mut again = Client::start(&b.url(), None).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match again.next().await {
            Some(Ok(m)) if started(&m) => break,
            Some(Ok(ServerMessage::BidiError { code: ErrorCode::CapacityFull, .. })) | Some(Err(_))
                if Instant::now() < deadline =>
            {
                // The release reaches the store a moment after the close.
                tokio::time::sleep(Duration::from_millis(100)).await;
                again = Client::start(&b.url(), None).await;
            }
            other => panic!("served once the slot is free: {other:?}"),
        }
    }
    let (_, metrics) = get(b.addr, "/metrics").await;
    assert!(metric_sum(&metrics, "switchboard_gateway_capacity_refused_total", &[("reason", "agent_refuses")]) >= 1.0);
}

/// A routes folder (with the fleets' gateway key) naming triage of every fleet, each in its
/// own namespace.
fn tenant_routes(fleets: &[&Fleet]) -> (String, std::path::PathBuf) {
    let dir = write_routes(fleets[0], |_, addr| addr);
    let mut routes = Vec::new();
    for fleet in fleets {
        let directory = fleet.directory.borrow().clone();
        for route in directory.table().routes.iter() {
            let target = directory.lookup(&route.namespace, &route.name, Reach::Live).expect("a target");
            let mut route = target.route.clone();
            route.service = target.ready[0].ip().to_string();
            route.port = target.ready[0].port();
            route.default = false;
            routes.push(route);
        }
    }
    let pool = routes[0].capacity.pool.clone();
    std::fs::write(dir.join("routes.json"), RoutingTable::new(routes).to_json()).expect("routes");
    (pool, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_share_waits_while_anothers_guarantee_is_served() {
    let redis = Redis::start();
    let bank = Fleet::start(&[]).await;
    let retail = Fleet::edited(
        &[],
        Auth::default(),
        GatewayConfig::default(),
        Store::default(),
        banking_script().expect("script"),
        None,
        |spec| spec.agent.namespace = "retail".into(),
    )
    .await;
    let (pool, dir) = tenant_routes(&[&bank, &retail]);
    let quota = format!("{pool}=2");
    let args = [
        "--redis-url",
        &redis.url,
        "--capacity-quota",
        &quota,
        "--capacity-share",
        "bank=0.5",
        "--capacity-share",
        "retail=0.5",
        "--capacity-poll-ms",
        "50",
    ];
    let a = GatewayProcess::start(&dir, &args).await;
    let b = GatewayProcess::start(&dir, &args).await;

    // Retail is quiet: bank bursts into both slots, and waits for a third.
    let mut bank1 = Client::start(&a.url(), Some("bank/triage")).await;
    assert_eq!(place(&mut bank1).await, 0);
    let mut bank2 = Client::start(&b.url(), Some("bank/triage")).await;
    assert_eq!(place(&mut bank2).await, 0, "a tenant bursts into unused capacity");
    let mut bank3 = Client::start(&a.url(), Some("bank/triage")).await;
    assert_eq!(place(&mut bank3).await, 1);
    // Retail comes, under its guarantee: ahead of bank's waiting session.
    let mut retail1 = Client::start(&b.url(), Some("retail/triage")).await;
    assert_eq!(place(&mut retail1).await, 1, "a tenant under its share goes first");
    assert_eq!(place(&mut bank3).await, 2, "the tenant over its share steps back");
    let (_, metrics) = get(a.addr, "/metrics").await;
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_capacity_in_use", &[("namespace", "bank")]), 2.0);
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_capacity_queued", &[("namespace", "retail")]), 1.0);
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_capacity_guaranteed", &[("namespace", "retail")]), 1.0);

    // A bank session ends: retail's is served, bank's keeps waiting.
    bank1.close().await;
    assert_eq!(place(&mut retail1).await, 0, "the guarantee is served");
    retail1.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    assert_eq!(place(&mut bank3).await, 1);
    assert!(bank3.next_within(Duration::from_millis(500)).await.is_none(), "bank waits: {:?}", bank3.seen);
    // Then bank's turn.
    bank2.close().await;
    assert_eq!(place(&mut bank3).await, 0);
}

/// Without Redis (one gateway, local mode): the same rules, in the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_one_gateway_counts_in_process() {
    let probe = Fleet::start(&[]).await;
    let pool = probe.directory.borrow().lookup("bank", "triage", Reach::Live).expect("triage").route.capacity.pool;
    drop(probe);
    let mut config = GatewayConfig::default();
    config.capacity.quotas.insert(pool, 1);
    config.capacity.poll = Duration::from_millis(50);
    let fleet = Fleet::with(&[], Auth::default(), config, Store::default()).await;
    let mut first = Client::start(&fleet.url, None).await;
    assert_eq!(place(&mut first).await, 0);
    let mut second = Client::start(&fleet.url, None).await;
    assert_eq!(place(&mut second).await, 1);
    first.close().await;
    assert_eq!(place(&mut second).await, 0, "served when the slot frees");
}
