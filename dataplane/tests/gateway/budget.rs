//! The gateway's memory budget, on a `switchboard gateway` process whose RSS is read from
//! /proc: hostile clients that each fill what their session may hold (typed lines of
//! 16 KiB, echoed into the replay buffer and the history; a small budget and replay buffer
//! keep the test short) are admitted until the sessions' bytes leave no room for one more; the next is refused with 1013 `memory_budget`, and the
//! process' memory grows by about the budget, not by what the clients send. Closing
//! sessions gives the room back. Prints the figures (RSS per session, held bytes).

use std::time::Duration;

use switchboard_core::protocol::{ServerMessage, close_code};

use crate::client::{Client, get, metric_sum};
use crate::fleet::Fleet;

/// The budget under test, and the replay buffer per session.
const BUDGET: usize = 3 << 19;
const REPLAY: usize = 64 << 10;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number")
}

/// Messages with their long texts cut, for a readable failure.
fn short(seen: &[ServerMessage]) -> Vec<String> {
    seen.iter().map(|m| m.to_json().chars().take(160).collect()).collect()
}

async fn held(addr: std::net::SocketAddr) -> f64 {
    metric_sum(&get(addr, "/metrics").await.1, "switchboard_gateway_memory_held_bytes", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_sessions_fill_the_budget_and_the_next_is_refused_without_the_process_growing_past_it() {
    // A model that answers at once and briefly: the bytes come from the clients.
    let script = switchboard_sim::Script::parse(
        "timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }\ndefault: { text: \"Noted.\" }\n",
    )
    .expect("script");
    let fleet = Fleet::with_script(
        &[],
        switchboard_gateway::auth::Auth::default(),
        switchboard_gateway::GatewayConfig::default(),
        switchboard_gateway::resume::Store::default(),
        script,
    )
    .await;
    let dir = crate::process::write_routes(&fleet, |_, addr| addr);
    let (budget, replay) = (BUDGET.to_string(), REPLAY.to_string());
    let limits = ["--memory-budget-bytes", &budget, "--replay-buffer-bytes", &replay];
    let args = [&limits[..], &["--ping-seconds", "1", "--ping-timeout-seconds", "5"]].concat();
    let process = crate::process::GatewayProcess::start(&dir, &args).await;
    let (addr, url) = (process.addr, process.url());
    let pid = process.child.id();
    let baseline = rss_kib(pid);

    let line = "x".repeat(16 * 1024);
    let mut hostile = Vec::new();
    let mut after_first = None;
    let refused = loop {
        assert!(hostile.len() < 100, "the budget never refused a session");
        let mut client = Client::start(&url, None).await;
        let first = client.next().await.expect("an answer");
        if let Err((code, _)) = &first {
            break (*code, client.seen.clone());
        }
        if let Ok(ServerMessage::BidiError { code, .. }) = &first
            && code == "memory_budget"
        {
            break (client.closed().await.0, client.seen.clone());
        }
        let greeting = tokio::time::timeout(
            Duration::from_secs(20),
            client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })),
        )
        .await;
        assert!(greeting.is_ok(), "no greeting: {:?}", short(&client.seen));
        for i in 0..4 {
            client.say(&format!("{i}{line}")).await;
            let turn = tokio::time::timeout(Duration::from_secs(30), client.turn()).await;
            assert!(turn.is_ok(), "turn {i} of session {} did not complete: {:?}", hostile.len(), short(&client.seen));
        }
        // Read on (and answer pings), as a live client does.
        hostile.push(tokio::spawn(async move { while client.next().await.is_some() {} }));
        after_first.get_or_insert(rss_kib(pid));
        eprintln!("session {}: held {:.0} KiB, RSS {} KiB", hostile.len(), held(addr).await / 1024.0, rss_kib(pid));
        // The gateway counts what a session holds at every ping (1 s here).
        tokio::time::sleep(Duration::from_millis(1200)).await;
    };
    let filled = rss_kib(pid);
    let held_now = held(addr).await;
    let sessions = hostile.len() as u64;
    let after_first = after_first.unwrap_or(baseline);
    println!(
        "budget {} KiB: {sessions} hostile sessions admitted (each sent 64 KiB), held {:.0} KiB; gateway RSS \
         {baseline} KiB at start, {after_first} KiB after the first session, {filled} KiB filled: {} KiB a \
         session after the first",
        BUDGET >> 10,
        held_now / 1024.0,
        filled.saturating_sub(after_first) / (sessions - 1).max(1),
    );
    assert_eq!(refused.0, close_code::TRY_AGAIN_LATER, "{:?}", refused.1);
    assert!(
        refused.1.iter().any(|m| matches!(m, ServerMessage::BidiError { code, message, .. }
            if code == "memory_budget" && message.contains("memory budget"))),
        "{:?}",
        refused.1
    );
    assert!(sessions >= 3, "several sessions fit the budget before it refused: {sessions}");
    assert!(held_now <= (BUDGET + (REPLAY + (384 << 10))) as f64, "held {held_now} bytes");
    // What the clients sent (200 KiB each) is not what the process keeps: it grew by about
    // the budget (allocator slack and buffers not counted allowed for, generously).
    let growth = filled.saturating_sub(baseline) * 1024;
    assert!(growth < (3 * BUDGET + (16 << 20)) as u64, "RSS grew {growth} bytes for a budget of {BUDGET}");

    // Sessions that end give their bytes back: a new session is admitted again.
    for reader in hostile.drain(..hostile.len() / 2) {
        reader.abort();
    }
    let mut admitted = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if held(addr).await + (REPLAY + (384 << 10)) as f64 <= BUDGET as f64 {
            admitted = true;
            break;
        }
    }
    assert!(admitted, "closed sessions gave their bytes back: held {}", held(addr).await);
    let mut client = Client::start(&url, None).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })).await;
    let _ = std::fs::remove_dir_all(&dir);
}
