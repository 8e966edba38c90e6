//! A session that lives for many multiples of every TTL the gateway sets in Redis, the
//! timings scaled down: pings every 200 ms, a 1 s ping timeout (the hold's lease), a 3 s
//! resume window (the snapshot's and parked entry's TTL), a 5 s idle timeout. Two gateway
//! replicas share a real redis-server, in front of real runtimes against the simulator.
//! The caller is verified early, then asks banking for the balance turn after turn for
//! 18 s, reading (answering pings) between turns, every other pause over twice the lease
//! with nothing said (the hold is checked in Redis after each); the Redis keys' TTLs are
//! read directly at the end. The client drops; the session parks, and resumes through the
//! other replica with its token: nothing lost, nothing doubled, the verified caller still
//! served.
//!
//! Prints how long the session lived against the lease, the window and the idle timeout.

use std::time::{Duration, Instant};

use switchboard_core::protocol::{ServerMessage, TranscriptRole};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::redis::Redis;
use crate::resume::{position, resume_start};

/// How long the session lives before the client drops.
const LIVE: Duration = Duration::from_secs(18);
/// The pauses between turns, in turn (the client reads all the while): the long one is
/// over twice the hold's lease with nothing said, so only the renewals keep the hold.
const PAUSES: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(2500)];
const BALANCE: &str = "1234.56 GBP";

fn config() -> GatewayConfig {
    GatewayConfig {
        ping_interval: Duration::from_millis(200),
        ping_timeout: Duration::from_secs(1),
        resume_window: Duration::from_secs(3),
        park_grace: Duration::from_secs(1),
        // Also scaled: the session lives for several idle timeouts, never idle for one.
        idle_timeout: Duration::from_secs(5),
        ..GatewayConfig::default()
    }
}

fn store(redis: &Redis) -> Store {
    let signer = switchboard_core::grant::GatewaySigner::from_seed(&crate::fleet::KEY);
    Store::redis(&redis.url, signer, None).expect("redis store")
}

/// Every `switchboard:*` key with its remaining time to live in ms (-1: none).
async fn ttls(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(String, i64)> {
    let keys: Vec<String> = redis::AsyncCommands::keys(conn, "switchboard:*").await.expect("KEYS");
    let mut out = Vec::new();
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(conn).await.expect("PTTL");
        out.push((key, ttl));
    }
    out.sort();
    out
}

/// Reads for `pause` (the client's socket answers the gateway's pings meanwhile); nothing
/// but the agent's state (ready after its turn) is expected to arrive.
async fn read_for(client: &mut Client, pause: Duration) {
    let until = Instant::now() + pause;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match client.next_within(left).await {
            None => return,
            Some(Some(Ok(ServerMessage::BidiSessionState { .. }))) => {}
            Some(Some(Ok(message))) => panic!("nothing was asked, yet {message:?} arrived"),
            Some(other) => panic!("the session ended between turns: {other:?}; seen {:#?}", client.seen),
        }
    }
}

fn user_lines(messages: &[ServerMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::BidiTranscriptStream { role: TranscriptRole::User, text, is_final: true, .. } => {
                Some(text.clone())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_living_many_times_every_redis_ttl_keeps_its_hold_and_resumes_on_another_replica() {
    let redis = Redis::start();
    let config = config();
    let lease = config.ping_timeout.max(config.ping_interval * 3);
    let fleet = Fleet::with(&[], Auth::default(), config.clone(), store(&redis)).await;
    let (_b, b_url, _b_stop) = fleet.replica(Auth::default(), config.clone(), store(&redis)).await;
    let mut conn = redis::Client::open(redis.url.as_str())
        .expect("client")
        .get_multiplexed_async_connection()
        .await
        .expect("connects to redis");

    let began = Instant::now();
    let mut client = Client::start(&fleet.url, None).await;
    client.verify_at_idv().await;
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let answer = client.turn().await;
    assert!(replies(&answer).iter().any(|r| r.contains(BALANCE)), "{answer:?}");
    let mut asked = 1;
    while began.elapsed() < LIVE {
        read_for(&mut client, PAUSES[asked % 2]).await;
        let held = ttls(&mut conn).await;
        let holds = held.iter().filter(|(k, ttl)| k.starts_with("switchboard:parking:") && *ttl > 0).count();
        assert_eq!(holds, 1, "held after a pause, at {:?}: {held:?}", began.elapsed());
        client.say("My balance please").await;
        let answer = client.turn().await;
        assert!(
            replies(&answer).iter().any(|r| r.contains(BALANCE)),
            "turn {asked} at {:?}: {answer:?}",
            began.elapsed()
        );
        asked += 1;
    }
    let lived = began.elapsed();

    // Redis holds the live session by its newest token only, each key with a TTL of a
    // lease or a window from now: nothing counts from the session's start.
    let held = ttls(&mut conn).await;
    let (token, last_seq) = position(&client.seen);
    let parking: Vec<_> = held.iter().filter(|(k, _)| k.starts_with("switchboard:parking:")).collect();
    let snapshots: Vec<_> = held.iter().filter(|(k, _)| k.starts_with("switchboard:snapshot:")).collect();
    assert_eq!((parking.len(), snapshots.len()), (1, 1), "one hold and one snapshot: {held:?}");
    let key = parking[0].0.trim_start_matches("switchboard:parking:");
    assert_eq!(snapshots[0].0, format!("switchboard:snapshot:{key}"), "{held:?}");
    for (name, ttl) in &held {
        let bound = if name.starts_with("switchboard:parking:") { lease } else { config.resume_window };
        assert!(*ttl > 0 && *ttl <= bound.as_millis() as i64, "{name}: {ttl} ms (bound {bound:?}); {held:?}");
    }
    assert!(
        held.iter()
            .any(|(name, ttl)| name.starts_with("switchboard:parking:") && *ttl > (lease / 4).as_millis() as i64),
        "the lease was renewed within the last ping intervals: {held:?}"
    );

    let balances = |messages: &[ServerMessage]| replies(messages).iter().filter(|r| r.contains(BALANCE)).count();
    let asks =
        |messages: &[ServerMessage]| user_lines(messages).iter().filter(|l| l.contains("balance please")).count();
    assert_eq!((asks(&client.seen), balances(&client.seen)), (asked, asked), "each turn once: {:#?}", client.seen);

    // The client drops: the session parks, its entry's TTL counted from the park.
    drop(client);
    let parked_at = Instant::now();
    let parked = loop {
        let now = ttls(&mut conn).await;
        if let Some((_, ttl)) = now.iter().find(|(k, _)| k == &format!("switchboard:session:{key}")) {
            break (*ttl, now);
        }
        assert!(parked_at.elapsed() < Duration::from_secs(2), "parked within a ping timeout: {now:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(parked.0 > 0 && parked.0 <= config.resume_window.as_millis() as i64, "the parked entry: {parked:?}");

    // Resumed through the other replica: nothing replayed that was received, the verified
    // caller served by banking.
    let mut client = Client::connect(&b_url).await;
    client.send(&resume_start(&token, last_seq)).await;
    let opened =
        client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    // Only what followed the last message read (the agent's state after its turn) comes
    // again, numbered on from the client's last: no line of the 18 s is sent twice.
    let Some(ServerMessage::BidiConnectionStart { seq: Some(seq), .. }) = opened.last() else { panic!("{opened:?}") };
    assert_eq!(*seq, last_seq + opened.len() as u64, "numbered on from the client's last message: {opened:?}");
    assert!(
        opened[..opened.len() - 1].iter().all(|m| matches!(m, ServerMessage::BidiSessionState { .. })),
        "nothing the client had is sent twice: {opened:?}"
    );
    client.say("My balance please").await;
    let answer = client.turn().await;
    assert!(replies(&answer).iter().any(|r| r.contains(BALANCE)), "still verified after the resume: {answer:?}");
    assert_eq!((asks(&client.seen), balances(&client.seen)), (1, 1), "the one new turn: {:#?}", client.seen);
    eprintln!(
        "long session: lived {:.1} s ({asked} balance turns) against a {:.1} s hold lease ({:.0}x), a {:.1} s resume window ({:.0}x) and a {:.1} s idle timeout; parked with {} ms to live, resumed on the other replica",
        lived.as_secs_f64(),
        lease.as_secs_f64(),
        lived.as_secs_f64() / lease.as_secs_f64(),
        config.resume_window.as_secs_f64(),
        lived.as_secs_f64() / config.resume_window.as_secs_f64(),
        config.idle_timeout.as_secs_f64(),
        parked.0
    );
}
