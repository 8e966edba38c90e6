//! Resume: a client that loses its socket comes back with its token and the number of
//! the last message it received, and the session goes on — on the same gateway (in-memory
//! store) or on another replica sharing a real Redis; a draining replica moves its
//! clients; expired and foreign tokens are refused.

use std::time::Duration;

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart, close_code};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;

use crate::client::{Client, replies};
use crate::fleet::Fleet;
use crate::redis::Redis;

/// The token of the newest `bidi_connection_start` in `seen` and the number of the last
/// message received (every message after it counts one).
pub fn position(seen: &[ServerMessage]) -> (String, u64) {
    let at = seen
        .iter()
        .rposition(|m| matches!(m, ServerMessage::BidiConnectionStart { .. }))
        .expect("a bidi_connection_start was received");
    let ServerMessage::BidiConnectionStart { resume_token: Some(token), seq: Some(seq), .. } = &seen[at] else {
        panic!("the gateway's bidi_connection_start carries a token and its number: {:?}", seen[at]);
    };
    (token.clone(), seq + (seen.len() - at - 1) as u64)
}

pub fn resume_start(token: &str, last_seq: u64) -> ClientMessage {
    ClientMessage::SessionStart(SessionStart {
        resume_token: Some(token.to_owned()),
        last_seq: Some(last_seq),
        ..Default::default()
    })
}

/// Reads the agent's greeting (a final line; no turn was asked for).
async fn greeting(client: &mut Client) {
    client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
}

fn said(messages: &[ServerMessage], needle: &str) -> usize {
    replies(messages).iter().filter(|r| r.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_mid_turn_resumes_with_its_memory_and_gets_the_reply_it_missed() {
    let fleet = Fleet::start(&[]).await;
    let mut client = Client::start(&fleet.url, None).await;
    greeting(&mut client).await;
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    let (token, last_seq) = position(&client.seen);
    let before = client.seen.clone();

    // The answer to this is produced while the client is away.
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    drop(client);

    let mut back = Client::connect(&fleet.url).await;
    back.send(&resume_start(&token, last_seq)).await;
    let resumed = back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    assert_eq!(said(&resumed, "you're verified"), 1, "the missed reply is replayed first: {resumed:?}");
    let (_, new_seq) = position(&back.seen);
    assert!(new_seq > last_seq, "numbers go on across connections");
    assert!(
        !resumed
            .iter()
            .any(|m| matches!(m, ServerMessage::BidiConnectionStart { resume_token: Some(t), .. } if *t == token)),
        "a fresh token"
    );

    // The memory survived: the verified caller gets the balance.
    back.say("My balance please").await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = back.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "{balance:?}");
    let everything: Vec<_> = before.iter().chain(back.seen.iter()).cloned().collect();
    assert_eq!(said(&everything, "you're verified"), 1, "no reply twice");

    // The old token is spent.
    let mut again = Client::connect(&fleet.url).await;
    again.send(&resume_start(&token, last_seq)).await;
    assert_eq!(again.closed().await.0, close_code::RESUME_REFUSED);
    let metrics = fleet.gateway.metrics.render();
    for needle in [
        r#"switchboard_gateway_sessions_parked_total{agent="bank/idv"} 1"#,
        r#"switchboard_gateway_sessions_resumed_total{agent="bank/idv"} 1"#,
        r#"switchboard_gateway_sessions_refused_total{reason="resume_refused"} 1"#,
    ] {
        assert!(metrics.contains(needle), "{needle} in\n{metrics}");
    }
}

/// Alice's session at `url`, from triage's greeting to idv's first answer.
async fn alice_at_idv(url: &str) -> Client {
    let mut client = Client::connect_with(url, &[ALICE]).await;
    client.send(&ClientMessage::SessionStart(SessionStart::default())).await;
    greeting(&mut client).await;
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.turn().await;
    client
}

/// Alice resumes at `url` with `token` and `last_seq`, at idv, and gives her details: she
/// is verified.
async fn verified_after_resuming(url: &str, token: &str, last_seq: u64) -> Client {
    let mut client = Client::connect_with(url, &[ALICE]).await;
    client.send(&resume_start(token, last_seq)).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(replies(&verified).iter().any(|r| r.contains("you're verified")), "{verified:?}");
    client
}

/// Whether the fleet's store answers within 10 s (it reconnects by itself).
async fn store_answers(fleet: &Fleet) -> bool {
    for _ in 0..50 {
        if fleet.gateway.store.ping().await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// The fleet gateways' key (every replica has it, as the chart's Secret gives it).
fn fleet_key() -> switchboard_core::grant::GatewaySigner {
    switchboard_core::grant::GatewaySigner::from_seed(&crate::fleet::KEY)
}

fn keys() -> Auth {
    use sha2::Digest;
    let digest =
        |key: &str| sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>();
    Auth::new(Some(&format!("alice {}\nbob {}\n", digest("alice-key"), digest("bob-key"))), vec![]).expect("keys")
}

const ALICE: (&str, &str) = ("authorization", "Bearer alice-key");
const BOB: (&str, &str) = ("authorization", "Bearer bob-key");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_redis_resume_each_others_sessions_and_a_draining_one_moves_its_clients() {
    let redis = Redis::start();
    let config = GatewayConfig { resume_window: Duration::from_secs(3), ..GatewayConfig::default() };
    let store = || async { Store::redis(&redis.url, fleet_key(), None).expect("redis store") };
    let fleet = Fleet::with(&[], keys(), config.clone(), store().await).await;
    let (b, b_url, b_stop) = fleet.replica(keys(), config.clone(), store().await).await;

    let client = alice_at_idv(&fleet.url).await;
    let (token, last_seq) = position(&client.seen);
    drop(client);

    // Another key cannot use the token.
    let mut thief = Client::connect_with(&b_url, &[BOB]).await;
    thief.send(&resume_start(&token, last_seq)).await;
    assert_eq!(thief.closed().await.0, close_code::RESUME_REFUSED, "{:?}", thief.seen);

    // Alice continues through the other replica.
    let mut client = verified_after_resuming(&b_url, &token, last_seq).await;

    // Replica B drains: its client is told to resume, and does, on the first.
    let _ = b_stop.send(());
    let (code, reason) = client.closed().await;
    assert_eq!(code, close_code::GOING_AWAY, "{reason}");
    assert!(reason.contains("resume"), "{reason}");
    let (token, last_seq) = position(&client.seen);
    let mut client = Client::connect_with(&fleet.url, &[ALICE]).await;
    client.send(&resume_start(&token, last_seq)).await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = client.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "verified after two moves: {balance:?}");
    assert_eq!(said(&client.seen, "you're verified"), 0, "nothing replayed that was already received");
    let metrics = b.metrics.render();
    assert!(metrics.contains(r#"switchboard_gateway_sessions_resumed_total{agent="bank/idv"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"switchboard_gateway_sessions_parked_total{agent="bank/idv"} 1"#), "{metrics}");

    // Past the resume window, the token is refused.
    let (token, last_seq) = position(&client.seen);
    drop(client);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut late = Client::connect_with(&fleet.url, &[ALICE]).await;
    late.send(&resume_start(&token, last_seq)).await;
    let (code, _) = late.closed().await;
    assert_eq!(code, close_code::RESUME_REFUSED, "{:?}", late.seen);
    assert!(
        late.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { message, .. } if message.contains("expired"))),
        "{:?}",
        late.seen
    );
}

/// Whoever can write to Redis cannot make a parked session say who the caller is: a parked
/// session whose memory was changed in Redis (the verified caller swapped for another
/// customer) is refused on resume, with its own code, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_session_changed_in_redis_is_refused_on_resume() {
    let redis = Redis::start();
    let store = Store::redis(&redis.url, fleet_key(), None).expect("redis store");
    let fleet = Fleet::with(&[], keys(), GatewayConfig::default(), store).await;
    let mut client = alice_at_idv(&fleet.url).await;
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    client.turn().await;
    let (token, last_seq) = position(&client.seen);
    drop(client);

    // In Redis, the parked session's verified caller becomes another customer.
    let mut conn = redis::Client::open(redis.url.as_str())
        .expect("client")
        .get_multiplexed_async_connection()
        .await
        .expect("connects");
    let mut keys_found: Vec<String> = Vec::new();
    for _ in 0..100 {
        keys_found = redis::AsyncCommands::keys(&mut conn, "switchboard:session:*").await.expect("KEYS");
        if !keys_found.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let [key] = &keys_found[..] else { panic!("one parked session: {keys_found:?}") };
    let value: Vec<u8> = redis::AsyncCommands::get(&mut conn, key).await.expect("GET");
    let text = String::from_utf8_lossy(&value).into_owned();
    assert!(text.contains("12345678"), "the verified caller is in the parked session");
    let forged = text.replace("12345678", "87654321").replace("Ada Lovelace", "Alan Turing");
    let () = redis::AsyncCommands::set(&mut conn, key, forged.as_bytes()).await.expect("SET");

    let mut back = Client::connect_with(&fleet.url, &[ALICE]).await;
    back.send(&resume_start(&token, last_seq)).await;
    let (code, _) = back.closed().await;
    assert_eq!(code, close_code::RESUME_REFUSED, "{:?}", back.seen);
    assert!(
        back.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, message, .. }
            if code == "resume_refused" && message.contains("not sealed with the gateway's key"))),
        "{:?}",
        back.seen
    );
    assert!(!back.seen.iter().any(|m| matches!(m, ServerMessage::BidiConnectionStart { .. })), "no session");
    let metrics = fleet.gateway.metrics.render();
    assert!(
        metrics.contains(r#"switchboard_gateway_sessions_refused_total{reason="session_tampered"} 1"#),
        "{metrics}"
    );
}

/// Redis is a help, not a dependency: a gateway whose Redis is down starts, serves new
/// sessions, and refuses a resume with `store_unavailable` (1013: try again) instead of
/// failing the session; once Redis answers, sessions park and resume through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_serves_while_its_redis_is_down_and_resumes_once_it_is_back() {
    // Reserved for this test: no other test's program takes it while Redis is down.
    let port = Redis::free_port();
    let store = Store::redis(&format!("redis://127.0.0.1:{port}"), fleet_key(), None).expect("a lazy store");
    assert!(store.ping().await.is_err(), "nothing listens yet");
    let fleet = Fleet::with(&[], keys(), GatewayConfig::default(), store).await;

    let client = alice_at_idv(&fleet.url).await;
    let (token, last_seq) = position(&client.seen);
    drop(client);
    let mut back = Client::connect_with(&fleet.url, &[ALICE]).await;
    back.send(&resume_start(&token, last_seq)).await;
    let (code, _) = back.closed().await;
    assert_eq!(code, close_code::TRY_AGAIN_LATER, "{:?}", back.seen);
    assert!(
        back.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { code, message, .. }
            if code == "store_unavailable" && message.contains("Redis"))),
        "said plainly: {:?}",
        back.seen
    );

    let _redis = Redis::start_on(port);
    tokio::time::sleep(switchboard_gateway::resume::STORE_BACKOFF + Duration::from_millis(500)).await;
    assert!(store_answers(&fleet).await, "the store reconnects by itself");
    let mut client = alice_at_idv(&fleet.url).await;
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    client.turn().await;
    let (token, last_seq) = position(&client.seen);
    drop(client);
    let mut back = Client::connect_with(&fleet.url, &[ALICE]).await;
    back.send(&resume_start(&token, last_seq)).await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    back.say("My balance please").await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    let balance = back.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "resumed through Redis: {balance:?}");
}

/// Chaos: Redis restarts (killed, an empty one started on its port) under a live session.
/// The session goes on through it — a turn while Redis is down, a handoff after it is back —
/// and once Redis answers again the session parks and resumes through the new server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_session_rides_out_a_redis_restart_and_resumes_through_the_new_one() {
    let redis = Redis::start();
    let port = redis.port;
    let store = Store::redis(&redis.url, fleet_key(), None).expect("store");
    let fleet = Fleet::with(&[], keys(), GatewayConfig::default(), store).await;
    let mut client = alice_at_idv(&fleet.url).await;

    drop(redis);
    client.say("My name is Ada Lovelace, account 12345678, sort code 12-34-56").await;
    let verified = client.turn().await;
    assert!(
        replies(&verified).iter().any(|r| r.contains("you're verified")),
        "served while Redis is down: {verified:?}"
    );

    let _redis = Redis::start_on(port);
    assert!(store_answers(&fleet).await, "the store reconnects to the new server by itself");
    client.say("My balance please").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    client.turn().await;
    let (token, last_seq) = position(&client.seen);
    drop(client);
    let mut back = Client::connect_with(&fleet.url, &[ALICE]).await;
    back.send(&resume_start(&token, last_seq)).await;
    back.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "banking")).await;
    back.say("And my balance again please").await;
    let balance = back.turn().await;
    assert!(replies(&balance).iter().any(|r| r.contains("1234.56 GBP")), "resumed through the new Redis: {balance:?}");
    assert!(!back.seen.iter().any(|m| matches!(m, ServerMessage::BidiError { .. })), "{:?}", back.seen);
}

/// A client whose connection drops during a handoff, before it read the new token the
/// target's `bidi_connection_start` brought (the frame was on its way), resumes with the
/// token it has, through another replica: the store keeps the older token's key as a
/// sealed alias of the newer one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_mid_handoff_resumes_with_the_token_it_had() {
    let redis = Redis::start();
    let store = || Store::redis(&redis.url, fleet_key(), None).expect("redis store");
    let fleet = Fleet::with(&[], keys(), GatewayConfig::default(), store()).await;
    let (_b, b_url, _b_stop) = fleet.replica(keys(), GatewayConfig::default(), store()).await;
    let mut client = Client::connect_with(&fleet.url, &[ALICE]).await;
    client.send(&ClientMessage::SessionStart(SessionStart::default())).await;
    greeting(&mut client).await;
    client.say("I'd like to check my balance").await;
    client.until(|m| matches!(m, ServerMessage::BidiConnectionStart { agent, .. } if agent == "idv")).await;
    // What the client had read before idv's start: triage's token.
    let read = client.seen[..client.seen.len() - 1].to_vec();
    drop(client);
    let (token, last_seq) = position(&read);
    let client = verified_after_resuming(&b_url, &token, last_seq).await;
    let all: Vec<ServerMessage> = read.iter().chain(&client.seen).cloned().collect();
    assert_eq!(said(&all, "To verify your identity"), 1, "idv's first answer, once: {all:?}");
}
