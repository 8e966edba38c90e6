//! The record under load: a flood of sessions while its PostgreSQL is down. What waits for
//! the store stays within its byte budget (and so within the gateway's memory budget); what
//! does not fit is dropped and counted, never a session's start or end; once the database is
//! back, everything kept is written — nothing lost that was not counted. Prints its figures
//! (BENCHMARKS.md, "The record under a flood").

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_record::log::SessionLog;
use switchboard_record::{RecordConfig, Store};

use crate::postgres::Postgres;
use crate::record::recorder_with;

/// The budget of what waits for the store in this test (the default is 64 MiB).
const PENDING: usize = 8 << 20;

/// `sessions` sessions of `lines` user lines of `bytes` bytes each, from start to end;
/// `prefix` names them.
fn converse(
    recorder: &std::sync::Arc<switchboard_record::Recorder>,
    prefix: &str,
    sessions: usize,
    lines: usize,
    bytes: usize,
) {
    for s in 0..sessions {
        let mut log = SessionLog::new(recorder.clone(), &format!("{prefix}-{s}"));
        log.started("bank/triage", "web", false, None, &[]);
        for n in 0..lines {
            log.server(
                "bank/triage",
                &serde_json::to_string(&ServerMessage::BidiTranscriptStream {
                    role: TranscriptRole::User,
                    text: format!("{n} {}", "x".repeat(bytes)),
                    delta: false,
                    is_final: true,
                    input_id: None,
                })
                .expect("json"),
            );
        }
        log.ended("bank/triage", "ended", None);
    }
}

fn counter(metrics: &str, line: &str) -> u64 {
    metrics.lines().find_map(|l| l.strip_prefix(line)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_while_the_database_is_down_stays_within_its_bytes_and_loses_nothing_uncounted() {
    let pg = Postgres::start();
    let store = Store::open(&pg.url).expect("store");
    let config =
        RecordConfig { pending_bytes: PENDING, flush_interval: Duration::from_millis(50), ..RecordConfig::default() };
    let (recorder, stop) = recorder_with(store.clone(), None, config, None);
    let pending = recorder.pending();

    // Healthy: 200 sessions of 20 lines of 1 kB, written as they come.
    let started = Instant::now();
    converse(&recorder, "calm", 200, 20, 1_000);
    while pending.load(Ordering::Relaxed) > 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "the healthy record did not drain in 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let healthy = started.elapsed();

    // Down: 400 sessions of 50 lines of 2 kB (about 40 MB) while PostgreSQL is stopped.
    pg.stop();
    let mut highest = 0;
    let flood = Instant::now();
    for batch in 0..20 {
        converse(&recorder, &format!("flood{batch}"), 20, 50, 2_000);
        highest = highest.max(pending.load(Ordering::Relaxed));
    }
    let flooded = flood.elapsed();
    highest = highest.max(pending.load(Ordering::Relaxed));
    // The budget, and the sessions' starts and ends past it (small, never dropped).
    assert!(highest <= PENDING + 400 * 2 * 1_024, "{highest} bytes waited, over the budget");
    let metrics = recorder.metrics.render();
    let dropped = counter(&metrics, r#"switchboard_gateway_record_entries_dropped_total{reason="bytes_full"} "#);
    assert!(dropped > 0, "40 MB against 8 MiB drops entries: {metrics}");

    // Back: everything kept is written.
    pg.start_again();
    let back = Instant::now();
    while pending.load(Ordering::Relaxed) > 0 {
        assert!(back.elapsed() < Duration::from_secs(120), "the backlog was not written within 2 minutes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drained = back.elapsed();
    let metrics = recorder.metrics.render();
    let written = counter(&metrics, "switchboard_gateway_record_entries_written_total ");
    let dropped_all: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("switchboard_gateway_record_entries_dropped_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    // Each session: its start, its lines, its end.
    let pushed = (200 * (20 + 2) + 400 * (50 + 2)) as u64;
    assert_eq!(written + dropped_all, pushed, "every entry written or counted as dropped: {metrics}");
    // Every session has its start and its end.
    let ended = store
        .list(&switchboard_record::store::Filter { limit: Some(1000), ..Default::default() })
        .await
        .expect("lists");
    assert_eq!(ended.len(), 600, "every session recorded");
    assert!(ended.iter().all(|s| s.outcome == "ended"), "every session's end written");
    println!(
        "record flood: healthy 4,400 entries (4.4 MB) written in {:.2} s ({:.0} entries/s); database down: \
         20,800 entries (~41.6 MB) pushed in {:.2} s, at most {:.1} MiB waiting (budget {} MiB), {dropped} dropped \
         (bytes_full), none of them a start or an end; database back: the {:.1} MiB kept written in {:.2} s; \
         written + dropped = pushed ({pushed})",
        healthy.as_secs_f64(),
        4_400.0 / healthy.as_secs_f64(),
        flooded.as_secs_f64(),
        highest as f64 / 1_048_576.0,
        PENDING >> 20,
        highest as f64 / 1_048_576.0,
        drained.as_secs_f64(),
    );
    stop.cancel();
}
