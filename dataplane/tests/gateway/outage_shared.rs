//! An outage breaker's trip shared by two `switchboard gateway` processes on a real
//! redis-server ([`switchboard_gateway::outage::shared`]), in front of real runtimes on the
//! simulator whose first model requests fail:
//!
//! - gateway `a` relays the failing turns and trips; gateway `b`, which served none of
//!   them, sends its next new sessions to the fallback (cause `breaker`, told when to try
//!   again) within a poll, and counts the learned trip — it never tripped itself;
//! - the trip in Redis is one key per Agent that expires with the open time: once it is
//!   over the key is gone and `b` serves again.

use std::time::{Duration, Instant};

use switchboard_core::protocol::ServerMessage;
use switchboard_crds::agent::{Breaker, Person};
use switchboard_crds::routing::{RouteOutage, RoutingTable};
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::auth::Auth;
use switchboard_gateway::resume::Store;
use switchboard_sim::service_error::ErrorKind;
use switchboard_sim::{Script, banking_script};

use crate::client::{Client, get, metric_sum};
use crate::fleet::Fleet;
use crate::process::{GatewayProcess, write_routes};
use crate::redis::Redis;

/// Two turns' model requests fail (the runtime tries each call three times).
const FAILING_REQUESTS: u64 = 6;
/// How long a trip holds.
const OPEN_SECONDS: u32 = 8;

fn outage() -> RouteOutage {
    RouteOutage {
        active: false,
        person: Some(Person {
            name: "advisor".into(),
            address: "+442079460001".into(),
            description: String::new(),
            transfer: Default::default(),
        }),
        message: Some("Putting you through to an advisor.".into()),
        breaker: Breaker {
            error_percent: 50,
            min_turns: 2,
            window_seconds: 60,
            first_audio_seconds: 10,
            open_seconds: OPEN_SECONDS,
            ramp_percent: vec![100],
            probe_turns: 1,
            ..Breaker::default()
        },
        text: false,
    }
}

/// A session's first outcome at `url`: served (`Ok`), or the fallback's cause and retry
/// hint. A session admitted in the moment the breaker trips — the last failing turn is
/// counted just after its client read the turn's end — is told of the outage at once
/// (`bidi_session_outage`, before its `bidi_connection_start`): that is the trip too, with
/// no hint.
async fn session(url: &str) -> Result<Client, (String, Option<u64>)> {
    let mut client = Client::start(url, Some("triage")).await;
    match client.next().await {
        Some(Ok(ServerMessage::BidiSessionFallback { cause, retry_after_seconds, .. })) => {
            let (code, _) = client.closed().await;
            assert_eq!(code, 4513, "the fallback's close");
            Err((cause, retry_after_seconds))
        }
        Some(Ok(ServerMessage::BidiSessionOutage { active: true, cause, .. })) => {
            client.close().await;
            Err((cause, None))
        }
        Some(Ok(ServerMessage::BidiConnectionStart { .. })) => Ok(client),
        other => panic!("a session start or a fallback first: {other:?}"),
    }
}

/// Asks something and reads to the end of the turn, or the model's failure.
async fn ask(client: &mut Client) {
    client.say("What are your opening hours?").await;
    loop {
        match client.next().await {
            Some(Ok(
                ServerMessage::BidiResponseComplete { .. } | ServerMessage::BidiError { recoverable: false, .. },
            )) => {
                return;
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return,
        }
    }
}

async fn trip_key(redis: &Redis) -> Option<String> {
    let client = redis::Client::open(redis.url.as_str()).expect("redis url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
    redis::cmd("GET").arg("switchboard:outage:bank/triage").query_async(&mut conn).await.expect("GET")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trip_at_one_gateway_opens_the_others_breaker_through_redis_until_it_expires() {
    let redis = Redis::start();
    let mut script: Script = banking_script().expect("script");
    script.faults.error = Some(switchboard_sim::script::ErrorFault {
        kind: ErrorKind::ServiceUnavailable,
        first: Some(FAILING_REQUESTS),
        message: None,
    });
    let fleet = Fleet::with_script(&[], Auth::default(), GatewayConfig::default(), Store::default(), script).await;
    let dir = write_routes(&fleet, |_, addr| addr);
    let path = dir.join("routes.json");
    let mut table = RoutingTable::parse(&std::fs::read_to_string(&path).expect("routes")).expect("parses");
    table.outages.insert("bank/triage".into(), outage());
    std::fs::write(&path, table.to_json()).expect("routes");
    let args = ["--redis-url", redis.url.as_str()];
    let a = GatewayProcess::start(&dir, &args).await;
    let b = GatewayProcess::start(&dir, &args).await;
    assert_eq!(trip_key(&redis).await, None, "nothing in Redis before a trip");

    // The failing turns go through a until its breaker trips.
    let mut failing = 0;
    loop {
        match session(&a.url()).await {
            Ok(mut client) => {
                ask(&mut client).await;
                client.close().await;
                failing += 1;
                assert!(failing <= 4, "a trips after two failed turns");
            }
            Err((cause, _)) => {
                assert_eq!(cause, "breaker");
                break;
            }
        }
    }
    let tripped = Instant::now();
    let stored = trip_key(&redis).await.expect("a's trip is in Redis");
    assert!(stored.contains("\"cause\":\"errors\""), "{stored}");

    // b served none of those turns: its breaker opens from a's trip, within a poll or so.
    let (cause, retry) = loop {
        match session(&b.url()).await {
            Err(fallback @ (_, Some(_))) => break fallback,
            // Admitted as b learnt of the trip: the next session gets the fallback.
            Err((cause, None)) => assert_eq!(cause, "breaker"),
            Ok(client) => {
                client.close().await;
                assert!(tripped.elapsed() < Duration::from_secs(3), "b learns a's trip within a few polls");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    println!("b sent new sessions to the fallback {} ms after a tripped", tripped.elapsed().as_millis());
    assert_eq!(cause, "breaker");
    assert!(retry.is_some_and(|s| (1..=u64::from(OPEN_SECONDS)).contains(&s)), "told when to try again: {retry:?}");
    let (_, metrics) = get(b.addr, "/metrics").await;
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_outage_learned_total", &[("agent", "bank/triage")]), 1.0);
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_outage_trips_total", &[]), 0.0, "b never tripped itself");
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_outage_state", &[("agent", "bank/triage")]), 2.0);
    let (_, metrics) = get(a.addr, "/metrics").await;
    assert_eq!(metric_sum(&metrics, "switchboard_gateway_outage_learned_total", &[]), 0.0, "a never learns its own");

    // The trip expires with the open time: the key is gone, and b serves again (the
    // simulator's failures are spent: its turns are good).
    let deadline = tripped + Duration::from_secs(u64::from(OPEN_SECONDS) + 10);
    while trip_key(&redis).await.is_some() {
        assert!(Instant::now() < deadline, "the trip expires with the open time");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(tripped.elapsed() >= Duration::from_secs(u64::from(OPEN_SECONDS) - 2), "not before the open time");
    let mut served = loop {
        match session(&b.url()).await {
            Ok(client) => break client,
            Err((cause, _)) => {
                assert_eq!(cause, "breaker");
                assert!(Instant::now() < deadline, "b serves again once the open time is over");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    ask(&mut served).await;
    served.close().await;
}
