//! What follows a session is kept in the store, so nothing is lost when a receiver or a
//! gateway is down: an end-of-call report is tried until its receiver takes it, with
//! backoff, from the store; a gateway killed (SIGKILL) with a live session leaves it `lost`
//! and reported by the replica that sweeps next, instead of `live` for ever.

use std::time::{Duration, Instant};

use switchboard_core::protocol::{ClientMessage, ServerMessage};
use switchboard_record::webhook::{Report, Retry, WebhookConfig};
use switchboard_record::{RecordConfig, Store};

use crate::client::Client;
use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};
use crate::record::{
    conversation, ended, fleet, keys, metrics_showing, receiver_failing, recorder, recorder_with, session_id,
};

fn webhook(url: &str) -> WebhookConfig {
    WebhookConfig { url: url.parse().expect("url"), secret: b"the bank's secret".to_vec(), retry: Retry::default() }
}

/// The pauses of [`a_report_is_tried_until_the_receiver_takes_it`]: the product's backoff
/// (doubling) from a tenth of its first second, polled as often, so that five failures take
/// 3.1 s of pauses instead of 31 s.
const QUICK: Retry = Retry { first_pause: Duration::from_millis(100), poll: Duration::from_millis(100) };

/// The receiver fails five times in a row (the old sender's every attempt, about 15 s):
/// the report is tried again, with backoff, until it is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_is_tried_until_the_receiver_takes_it() {
    let dir = std::env::temp_dir().join(format!("switchboard-delivery-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let (hook, mut posts) = receiver_failing(5).await;
    let (recorder, stop) = recorder(store.clone(), Some(WebhookConfig { retry: QUICK, ..webhook(&hook) }));
    let fleet = fleet(recorder.clone(), keys()).await;
    let id = conversation(&fleet.url, &[("x-api-key", "web-key")], || async {}).await.id;
    ended(&store, &id).await;
    let started = Instant::now();
    // Five refused (503), the sixth taken: each attempt comes within a minute of the last.
    for _ in 0..6 {
        let post = tokio::time::timeout(Duration::from_secs(60), posts.recv()).await;
        let (headers, body) = post.expect("another attempt within a minute").expect("a post");
        assert_eq!(headers["x-switchboard-delivery"], id.as_str());
        let report: Report = serde_json::from_str(&body).expect("a report");
        assert_eq!(report.session_id, id);
    }
    // Backoff: each pause counts from the failure before it, so the five of them (0.1 +
    // 0.2 + 0.4 + 0.8 + 1.6 s, doubling) passed in full.
    let pauses: Duration = (0..5).map(|n| QUICK.first_pause * (1 << n)).sum();
    assert!(started.elapsed() >= pauses, "{:?} for pauses of {pauses:?}", started.elapsed());
    let delivered = r#"switchboard_gateway_webhook_deliveries_total{outcome="delivered"} 1"#;
    let retried = r#"switchboard_gateway_webhook_deliveries_total{outcome="retried"} 5"#;
    let metrics = metrics_showing(&recorder, delivered).await;
    assert!(metrics.contains(delivered) && metrics.contains(retried), "{metrics}");
    // Nothing is due any more: no second delivery in 3.5 s (past the pause a sixth failure
    // would have had, 3.2 s, and 35 polls).
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert!(posts.try_recv().is_err(), "delivered once");
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}

/// A gateway process with a live session is killed; another replica's writer (here, one
/// in this process on the same database) finds the session's replica silent, marks the
/// session `lost` — ended at the last thing recorded of it — and reports it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_gateways_live_session_is_lost_and_reported_by_another_replica() {
    let fleet = Fleet::with_script(
        &[],
        switchboard_gateway::auth::Auth::default(),
        switchboard_gateway::GatewayConfig::default(),
        switchboard_gateway::resume::Store::default(),
        switchboard_sim::banking_script().expect("script"),
    )
    .await;
    let dir = write_routes(&fleet, |_, addr| addr);
    let file = dir.join("record.db");
    let url = format!("sqlite:{}", file.display());
    let mut gateway = GatewayProcess::start(&dir, &["--record-database-url", &url]).await;
    let mut client = Client::connect(&gateway.url()).await;
    client.send(&ClientMessage::SessionStart(Default::default())).await;
    let hello = client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
    let id = session_id(&hello);
    client.say("Hello").await;
    client.turn().await;
    let store = Store::file(&file).expect("store");
    let mut live = None;
    for _ in 0..100 {
        live = store.show(&id).await.ok().flatten();
        if live.as_ref().is_some_and(|r| r.summary.turns >= 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let live = live.expect("the session is recorded");
    assert_eq!(live.summary.outcome, "live");
    gateway.kill();

    let (hook, mut posts) = receiver_failing(0).await;
    let config = RecordConfig { abandon_after: Duration::from_secs(2), ..RecordConfig::default() };
    let (_recorder, stop) = recorder_with(store.clone(), Some(webhook(&hook)), config, None);
    let post = tokio::time::timeout(Duration::from_secs(30), posts.recv()).await;
    let (headers, body) = post.expect("a report within 30 s").expect("a post");
    assert_eq!(headers["x-switchboard-delivery"], id.as_str());
    let report: Report = serde_json::from_str(&body).expect("a report");
    assert_eq!(report.outcome, "lost");
    assert_eq!(report.agents, ["bank/triage"]);
    let lost = store.show(&id).await.expect("store").expect("the record");
    assert_eq!(lost.summary.outcome, "lost");
    let ended_at = lost.summary.ended_at.expect("ended");
    assert!(ended_at >= lost.summary.started_at, "{:?}", lost.summary);
    // The client's connection went with the gateway (what it had sent before is read first).
    let gone = tokio::time::timeout(Duration::from_secs(10), async { while let Some(Ok(_)) = client.next().await {} });
    assert!(gone.await.is_ok(), "the client's connection went with the gateway");
    stop.cancel();
    let _ = std::fs::remove_dir_all(dir);
}
