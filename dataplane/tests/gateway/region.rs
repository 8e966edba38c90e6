//! Region fallback ([`switchboard_gateway::capacity`]): two `switchboard gateway` processes
//! on a real redis-server, in front of real runtimes on the simulator, which plays both
//! regions (it knows a request's region from its SigV4 signature). triage (hybrid) names a
//! fallback region, `us-west-2` (`spec.model.voiceFallback.region`).
//!
//! - **Full**: with one stream allowed in each region, the first voice call opens its Nova
//!   Sonic stream in us-east-1 (triage greets each caller: its stream speaks); the second, through the other gateway, is placed on
//!   us-west-2 and its stream opens there; the third waits in us-east-1's queue. The
//!   placement is counted (`cause="full"`) and in the session's record (`region`).
//! - **Failing**: us-east-1 throttles every stream. idv (voice, no fallback region, opened
//!   to clients for the test) fails twice with `model_throttled`, which marks its pool
//!   `default/us-east-1` failing in the shared store; the next triage call, through the other
//!   gateway, is placed on us-west-2 at once (`cause="failing"`) — triage tries no stream in
//!   us-east-1 — and is served there.

use std::time::Duration;

use switchboard_core::protocol::ServerMessage;
use switchboard_crds::agent::VoiceFallback;
use switchboard_crds::routing::RoutingTable;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::Script;

use crate::client::{get, metric_sum};
use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};
use crate::redis::Redis;
use crate::voice_common::{self as common, Call, Encoding};

const OWN: &str = "default/us-east-1";
const FALLBACK: &str = "default/us-west-2";

/// A fleet whose triage falls back to us-west-2, on the simulator running `faults`.
async fn fleet(faults: &str) -> Fleet {
    let script = Script::parse(&common::script("", faults)).expect("the voice script");
    Fleet::edited(&[], Auth::default(), GatewayConfig::default(), Store::default(), script, None, |spec| {
        if spec.agent.name == "idv" {
            spec.persona.spec.speak_first = true;
            spec.gateway.expose = true;
        }
        if spec.agent.name == "triage" {
            // It greets the caller as the call starts: its stream's first words.
            spec.persona.spec.speak_first = true;
            spec.model.voice_fallback = Some(VoiceFallback { model_id: None, region: Some("us-west-2".into()) });
        }
    })
    .await
}

/// The routes folder; triage's route names its fallback region.
fn routes(fleet: &Fleet) -> std::path::PathBuf {
    let dir = write_routes(fleet, |_, addr| addr);
    let text = std::fs::read_to_string(dir.join("routes.json")).expect("routes");
    let table = RoutingTable::parse(&text).expect("parses");
    let triage = table.routes.iter().find(|r| r.name == "triage").expect("triage");
    assert_eq!(triage.capacity.pool, OWN);
    assert_eq!(triage.capacity.fallback_pool().as_deref(), Some(FALLBACK), "from voiceFallback.region");
    dir
}

/// The simulator's faults: us-east-1 throttles every Nova Sonic stream.
pub(crate) fn east_throttles() -> String {
    let model = switchboard_crds::agent::ModelSettings::default().voice_model_id;
    format!("modelFaults:\n  - {{model: \"{model}\", region: us-east-1, error: {{kind: throttling}}}}\n")
}

/// Two failures within a minute mark a region failing for a minute.
pub(crate) const FAILOVER: [&str; 6] = [
    "--capacity-region-failures",
    "2",
    "--capacity-region-failure-window-seconds",
    "60",
    "--capacity-region-failover-seconds",
    "60",
];

pub(crate) fn started(m: &ServerMessage) -> bool {
    matches!(m, ServerMessage::BidiConnectionStart { .. })
}

/// Triage's greeting, spoken: its stream answers.
pub(crate) async fn greeted(call: &mut Call) {
    let heard = call.until(|m| common::is_final_reply(m, "through to Example Bank")).await;
    assert!(common::audio_bytes(&heard) > 0, "the greeting is spoken: {:#?}", common::summary(&heard));
}

/// Sonic streams the simulator saw signed for `region`.
fn streams_in(fleet: &Fleet, region: &str) -> u64 {
    fleet.sim.stats().regions.get(region).copied().unwrap_or(0)
}

async fn until_streams(fleet: &Fleet, region: &str, want: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while streams_in(fleet, region) < want {
        assert!(tokio::time::Instant::now() < deadline, "{want} requests in {region}: {:?}", fleet.sim.stats().regions);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn fallbacks(gateway: &GatewayProcess, cause: &str) -> f64 {
    let (_, metrics) = get(gateway.addr, "/metrics").await;
    let labels = [("pool", OWN), ("to", FALLBACK), ("cause", cause)];
    metric_sum(&metrics, "switchboard_gateway_capacity_region_fallbacks_total", &labels)
}

/// The `region` entries of the recorded sessions in `db`.
pub(crate) async fn recorded_regions(db: &std::path::Path) -> Vec<serde_json::Value> {
    let store = switchboard_record::store::Store::file(db).expect("record");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut found = Vec::new();
        for session in store.list(&Default::default()).await.unwrap_or_default() {
            if let Ok(Some(record)) = store.show(&session.id).await {
                found.extend(record.events.into_iter().filter(|e| e.kind == "region").map(|e| e.data));
            }
        }
        if !found.is_empty() || tokio::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_region_sends_new_sessions_to_the_fallback_region_across_gateways() {
    let redis = Redis::start();
    let fleet = fleet("").await;
    let dir = routes(&fleet);
    let db = dir.join("record.db");
    let record = format!("sqlite://{}", db.display());
    let quotas = ["--capacity-quota", &format!("{OWN}=1"), "--capacity-quota", &format!("{FALLBACK}=1")];
    let shared = ["--redis-url", redis.url.as_str(), "--capacity-poll-ms", "50"];
    let a = GatewayProcess::start(&dir, &[&quotas[..], &shared[..]].concat()).await;
    let b =
        GatewayProcess::start(&dir, &[&quotas[..], &shared[..], &["--record-database-url", &record]].concat()).await;

    // The first call takes us-east-1's one stream.
    let mut first = Call::start(&a.url(), "triage", &["audio"], Encoding::Binary).await;
    first.until(started).await;
    greeted(&mut first).await;
    until_streams(&fleet, "us-east-1", 1).await;
    assert_eq!(streams_in(&fleet, "us-west-2"), 0);

    // The second, at the other gateway, goes to us-west-2: its stream opens there.
    let mut second = Call::start(&b.url(), "triage", &["audio"], Encoding::Binary).await;
    second.until(started).await;
    until_streams(&fleet, "us-west-2", 1).await;
    assert_eq!(fallbacks(&b, "full").await, 1.0);
    greeted(&mut second).await;

    // Both regions full: the third waits in its own region's queue.
    let mut third = Call::start(&a.url(), "triage", &["audio"], Encoding::Binary).await;
    match third.next().await {
        ServerMessage::BidiSessionQueued { position, .. } => assert_eq!(position, 1),
        other => panic!("expected a place in the queue: {other:?}"),
    }
    assert_eq!(fallbacks(&a, "full").await, 0.0, "no fallback had a slot");
    drop(first);
    third.until(started).await;
    greeted(&mut third).await;

    drop(second);
    let regions = recorded_regions(&db).await;
    assert_eq!(regions, [serde_json::json!({"region": "us-west-2", "cause": "full"})], "the record says where");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_region_sends_new_sessions_to_the_fallback_region_across_gateways() {
    let redis = Redis::start();
    let fleet = fleet(&east_throttles()).await;
    let dir = routes(&fleet);
    let args = [&["--redis-url", redis.url.as_str()][..], &FAILOVER[..]].concat();
    let a = GatewayProcess::start(&dir, &args).await;
    let b = GatewayProcess::start(&dir, &args).await;

    // Two idv calls fail: us-east-1 throttles, and idv has nowhere else to go. Each failure
    // reaches the gateway.
    for _ in 0..2 {
        let mut call = Call::start(&a.url(), "idv", &["audio"], Encoding::Binary).await;
        let seen =
            call.until(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "model_throttled")).await;
        assert!(!seen.iter().any(|m| matches!(m, ServerMessage::BidiSessionFallback { .. })));
    }
    // The second failure marks us-east-1 failing (the report is on its way as the error is
    // relayed: wait for it).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, metrics) = get(a.addr, "/metrics").await;
        let marked = metric_sum(&metrics, "switchboard_gateway_capacity_region_failing_total", &[("pool", OWN)]);
        if marked == 1.0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "us-east-1 is marked failing: {marked}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let east = streams_in(&fleet, "us-east-1");
    assert_eq!(streams_in(&fleet, "us-west-2"), 0);

    // A triage call at the other gateway goes straight to us-west-2 and is served there.
    let mut call = Call::start(&b.url(), "triage", &["audio"], Encoding::Binary).await;
    call.until(started).await;
    greeted(&mut call).await;
    assert!(streams_in(&fleet, "us-west-2") >= 1, "{:?}", fleet.sim.stats().regions);
    assert_eq!(fallbacks(&b, "failing").await, 1.0);
    assert_eq!(streams_in(&fleet, "us-east-1"), east, "no new stream tried the failing region");
}

/// A session placed on the fallback region that drops and resumes through the other
/// gateway opens its stream in the fallback region again and takes its slot there: with
/// one stream allowed in each region, us-east-1's stays the first call's and us-west-2's the
/// resumed one's (before, the resume took a slot of its Agent's own region and opened its
/// stream there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_placed_on_the_fallback_region_resumes_there_through_the_other_gateway() {
    let redis = Redis::start();
    let fleet = fleet("").await;
    let dir = routes(&fleet);
    let quotas = ["--capacity-quota", &format!("{OWN}=1"), "--capacity-quota", &format!("{FALLBACK}=1")];
    let shared = ["--redis-url", redis.url.as_str(), "--capacity-poll-ms", "50"];
    let a = GatewayProcess::start(&dir, &[&quotas[..], &shared[..]].concat()).await;
    let b = GatewayProcess::start(&dir, &[&quotas[..], &shared[..]].concat()).await;

    let mut first = Call::start(&a.url(), "triage", &["audio"], Encoding::Binary).await;
    first.until(started).await;
    greeted(&mut first).await;
    until_streams(&fleet, "us-east-1", 1).await;
    let mut second = Call::start(&b.url(), "triage", &["audio"], Encoding::Binary).await;
    second.until(started).await;
    until_streams(&fleet, "us-west-2", 1).await;
    greeted(&mut second).await;

    // The second call's network goes; it resumes at the other gateway, and talks on.
    let (token, last_seq) = crate::resume::position(&second.seen);
    second.vanish().await;
    let mut resumed = Call::resume(&a.url(), &token, last_seq, Encoding::Binary).await;
    resumed.until(started).await;
    resumed.say(common::HOURS, 600);
    let hours = resumed.until(|m| common::is_final_reply(m, "We are open")).await;
    assert!(common::audio_bytes(&hours) > 0, "answered aloud: {:#?}", common::summary(&hours));
    assert_eq!(streams_in(&fleet, "us-west-2"), 2, "its stream opened in the fallback region again");
    assert_eq!(streams_in(&fleet, "us-east-1"), 1, "none in its Agent's own region");
    let (_, metrics) = get(a.addr, "/metrics").await;
    let in_use = |pool| metric_sum(&metrics, "switchboard_gateway_capacity_in_use", &[("pool", pool)]);
    assert_eq!((in_use(OWN), in_use(FALLBACK)), (1.0, 1.0), "one slot in each region:\n{metrics}");
    assert_eq!(fallbacks(&a, "full").await, 0.0, "a resume is not a new placement");
    resumed.hang_up().await;
    drop(first);
}
