//! Region placement offline: the real `switchboard local` binary on a copy of
//! `examples/banking` whose triage names a fallback region
//! (`spec.model.voiceFallback.region: us-west-2`) and speaks first, the model quota on its
//! command line (`--capacity-quota`: local mode counts in its one process, with no Redis,
//! by the gateway's rules).
//!
//! - **Full**: one stream allowed in each region: the first voice call is served in
//!   us-east-1; the second is placed on us-west-2 and greeted from there; the third waits
//!   in us-east-1's queue and is served when the first hangs up. Where each session was
//!   served is what a client can read afterwards: the second session's record has its
//!   `region` entry (`{"region": "us-west-2", "cause": "full"}`), the others none; local
//!   mode's `/metrics` count the placement (`cause="full"`) and the runtime's stream opened
//!   on the fallback (`switchboard_model_fallbacks_total{reason="placed"}`).
//! - **Failing**: the simulator throttles every stream in us-east-1: idv (voice, no
//!   fallback region, exposed for the test) fails twice with `model_throttled`, which marks
//!   the pool `default/us-east-1` failing; the next triage call is placed on us-west-2 at
//!   once (`cause="failing"`) and greeted there, and its record says so.

use std::path::Path;
use std::time::Duration;

use switchboard_core::protocol::ServerMessage;

use crate::client::{get, metric_sum};
use crate::outage_local::{Local, start_with};
use crate::region::{greeted, recorded_regions, started};
use crate::voice_common::{self as common, Call, Encoding};

const OWN: &str = "default/us-east-1";
const FALLBACK: &str = "default/us-west-2";

/// Replaces `from` with `to` once in the file `name` of `agents`, which must hold it.
fn edit(agents: &Path, name: &str, from: &str, to: &str) {
    let path = agents.join(name);
    let text = std::fs::read_to_string(&path).expect("the example's file");
    let edited = text.replacen(from, to, 1);
    assert_ne!(edited, text, "{name} has {from:?}: the test edits it there");
    std::fs::write(&path, edited).expect("written");
}

/// Local mode whose triage speaks first and falls back to us-west-2, with `args` (quotas,
/// a simulator script) and its record in its folder.
async fn local(name: &str, args: &[&str], expose_idv: bool) -> (Local, std::path::PathBuf) {
    let db = std::env::temp_dir().join(format!("switchboard-{name}-record-{}.db", uuid::Uuid::new_v4()));
    let record = format!("sqlite:{}", db.display());
    let args = [args, &["--record-database-url", &record]].concat();
    let local = start_with(name, &args, |agents| {
        edit(agents, "triage.yaml", "  greeting: ", "  speakFirst: true\n  greeting: ");
        edit(
            agents,
            "triage.yaml",
            "spec:\n  mode: hybrid\n",
            "spec:\n  mode: hybrid\n  model:\n    voiceFallback:\n      region: us-west-2\n",
        );
        if expose_idv {
            edit(agents, "idv.yaml", "  gateway:\n    expose: false", "  gateway:\n    expose: true");
        }
    })
    .await;
    (local, db)
}

async fn metrics(local: &Local) -> String {
    let (status, text) = get(local.addr(), "/metrics").await;
    assert_eq!(status, 200, "{text}");
    text
}

async fn placed(local: &Local, cause: &str) -> f64 {
    let labels = [("pool", OWN), ("to", FALLBACK), ("cause", cause)];
    metric_sum(&metrics(local).await, "switchboard_gateway_capacity_region_fallbacks_total", &labels)
}

/// Streams the runtime opened on the fallback region because the gateway placed them there.
async fn opened_on_fallback(local: &Local) -> f64 {
    let labels = [("reason", "placed")];
    metric_sum(&metrics(local).await, "switchboard_model_fallbacks_total", &labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_places_a_session_on_the_fallback_region_when_its_own_is_full() {
    let quotas = ["--capacity-quota", &format!("{OWN}=1"), "--capacity-quota", &format!("{FALLBACK}=1")];
    let (local, db) = local("region-full", &quotas, false).await;

    let mut first = Call::start(&local.url, "triage", &["audio"], Encoding::Binary).await;
    first.until(started).await;
    greeted(&mut first).await;
    assert_eq!(placed(&local, "full").await, 0.0, "the first is served in its own region");

    // us-east-1's one stream is taken: the second goes to us-west-2, and is greeted there.
    let mut second = Call::start(&local.url, "triage", &["audio"], Encoding::Binary).await;
    second.until(started).await;
    greeted(&mut second).await;
    assert_eq!(placed(&local, "full").await, 1.0);
    assert_eq!(opened_on_fallback(&local).await, 1.0, "its stream opened on us-west-2");

    // Both full: the third waits in its own region's queue, and is served there in turn.
    let mut third = Call::start(&local.url, "triage", &["audio"], Encoding::Binary).await;
    match third.next().await {
        ServerMessage::BidiSessionQueued { position, .. } => assert_eq!(position, 1),
        other => panic!("expected a place in the queue: {other:?}"),
    }
    drop(first);
    third.until(started).await;
    greeted(&mut third).await;
    assert_eq!(placed(&local, "full").await, 1.0, "the third was not placed");
    assert_eq!(opened_on_fallback(&local).await, 1.0);
    drop(second);
    drop(third);

    let regions = recorded_regions(&db).await;
    assert_eq!(regions, [serde_json::json!({"region": "us-west-2", "cause": "full"})], "the record says where");
    drop(local);
    let _ = std::fs::remove_file(&db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_places_new_sessions_on_the_fallback_region_while_its_own_fails() {
    let script = std::env::temp_dir().join(format!("switchboard-region-failing-{}.yaml", uuid::Uuid::new_v4()));
    std::fs::write(&script, common::script("", &crate::region::east_throttles())).expect("the script");
    let args = [&["--sim-script", script.to_str().expect("a path")][..], &crate::region::FAILOVER[..]].concat();
    let (local, db) = local("region-failing", &args, true).await;

    // Two idv calls fail: us-east-1 throttles, and idv has nowhere else to go.
    for _ in 0..2 {
        let mut call = Call::start(&local.url, "idv", &["audio"], Encoding::Binary).await;
        let seen =
            call.until(|m| matches!(m, ServerMessage::BidiError { code, .. } if code == "model_throttled")).await;
        assert!(!seen.iter().any(|m| matches!(m, ServerMessage::BidiSessionFallback { .. })));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let marked =
            metric_sum(&metrics(&local).await, "switchboard_gateway_capacity_region_failing_total", &[("pool", OWN)]);
        if marked == 1.0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "us-east-1 is marked failing: {marked}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A triage call goes straight to us-west-2 and is greeted from there.
    let mut call = Call::start(&local.url, "triage", &["audio"], Encoding::Binary).await;
    call.until(started).await;
    greeted(&mut call).await;
    assert_eq!(placed(&local, "failing").await, 1.0);
    assert_eq!(opened_on_fallback(&local).await, 1.0, "its stream opened on us-west-2");
    drop(call);

    let regions = recorded_regions(&db).await;
    assert!(
        regions.contains(&serde_json::json!({"region": "us-west-2", "cause": "failing"})),
        "the record says where and why: {regions:?}"
    );
    drop(local);
    let _ = std::fs::remove_file(&db);
    let _ = std::fs::remove_file(&script);
}
