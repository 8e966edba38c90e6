//! The breakers' trips shared by the gateway replicas, through the Redis they already share
//! (`--redis-url`, as sessions and the model quota): a model outage one replica found is not
//! found again, session by failing session, by every other.
//!
//! - **Told.** When a replica's breaker for an Agent trips (or opens again while ramping),
//!   it writes `switchboard:outage:<namespace>/<name>`: a small JSON [`Trip`] (an id, the
//!   replica, the cause) that expires with the Agent's `openSeconds` — the store holds at
//!   most one short-lived key per Agent with outage mode, and nothing once the outage is
//!   over.
//! - **Learned.** Every [`POLL`], each replica reads those keys for the Agents it routes
//!   whose breaker is on (one pipelined round trip, at most [`MAX_POLLED`] Agents) and opens
//!   its own breaker for the time left ([`super::breaker::Breaker::learn`]: never longer
//!   than its own `openSeconds`, once per trip, never its own). From there each replica
//!   ramps back on its own, judging by the turns it relays.
//! - **Bounded and optional.** The writes queue ([`QUEUE`], more are dropped and logged);
//!   an unreachable Redis costs a log line, never a session: each replica then judges alone,
//!   as without Redis. What is read is checked (size, shape) and a bad entry is skipped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;
use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};
use switchboard_crds::routing::RoutingTable;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::Outages;

/// The keys' prefix.
pub const PREFIX: &str = "switchboard:outage:";
/// How often a replica reads the other replicas' trips.
pub const POLL: Duration = Duration::from_millis(500);
/// The most Agents read at each poll (the first, in the table's order).
pub const MAX_POLLED: usize = 2_000;
/// Trips waiting to be written; more are dropped.
pub const QUEUE: usize = 64;
/// The largest entry read; a larger one is not a trip.
const MAX_ENTRY_BYTES: usize = 512;

/// One replica's trip of an Agent's breaker, as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trip {
    /// This trip (a random id): learned once.
    pub id: String,
    /// The replica that tripped (a random id per process).
    pub replica: String,
    /// `errors`, `slow_first_audio` or `probe_failed`.
    pub cause: String,
}

/// A trip for the store: the Agent (`namespace/name`), the trip, how long it holds.
pub type Tripped = (String, Trip, Duration);

/// Starts sharing `outages`' trips through Redis (`conn`, which may connect on first use)
/// until `stop` is cancelled, learning the others' for the Agents of the routing view
/// `routes` (the gateway's directory: anything that holds the routing table).
pub fn spawn<D>(outages: Arc<Outages>, routes: watch::Receiver<D>, conn: ConnectionManager, stop: CancellationToken)
where
    D: AsRef<RoutingTable> + Send + Sync + 'static,
{
    let trips = outages.share();
    tokio::spawn(run(outages, routes, conn, trips, stop));
}

async fn run<D: AsRef<RoutingTable>>(
    outages: Arc<Outages>,
    routes: watch::Receiver<D>,
    mut conn: ConnectionManager,
    mut trips: mpsc::Receiver<Tripped>,
    stop: CancellationToken,
) {
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut learned: HashMap<String, String> = HashMap::new();
    let mut failing = false;
    loop {
        let result = tokio::select! {
            () = stop.cancelled() => return,
            trip = trips.recv() => match trip {
                Some(trip) => tell(&mut conn, trip).await,
                None => return,
            },
            _ = poll.tick() => learn(&outages, &routes, &mut conn, &mut learned).await,
        };
        match result {
            Err(error) if !failing => {
                failing = true;
                tracing::warn!("cannot share outage trips through Redis: {error}; each gateway judges alone meanwhile");
            }
            Ok(()) if failing => {
                failing = false;
                tracing::info!("outage trips are shared through Redis again");
            }
            _ => {}
        }
    }
}

/// Writes a trip of this replica, expiring when it stops holding.
async fn tell(conn: &mut ConnectionManager, (agent, trip, holds): Tripped) -> redis::RedisResult<()> {
    let Ok(value) = serde_json::to_string(&trip) else { return Ok(()) };
    let ms = u64::try_from(holds.as_millis()).unwrap_or(u64::MAX).max(1);
    redis::cmd("SET").arg(format!("{PREFIX}{agent}")).arg(value).arg("PX").arg(ms).query_async::<()>(conn).await
}

/// Reads the trips of the Agents whose breaker is on, and opens this replica's breakers
/// for those it has not learned yet.
async fn learn<D: AsRef<RoutingTable>>(
    outages: &Outages,
    routes: &watch::Receiver<D>,
    conn: &mut ConnectionManager,
    learned: &mut HashMap<String, String>,
) -> redis::RedisResult<()> {
    let watched: Vec<(String, switchboard_crds::agent::Breaker)> = {
        let directory = routes.borrow();
        let table = directory.as_ref();
        // Only Agents whose breaker is on and that no switch holds open anyway.
        let watched = table.outages.iter().filter(|(agent, outage)| {
            let namespace = agent.split_once('/').map_or("", |(namespace, _)| namespace);
            !outage.active && outage.breaker.enabled && !table.namespace_outages.contains_key(namespace)
        });
        watched.take(MAX_POLLED).map(|(agent, outage)| (agent.clone(), outage.breaker.clone())).collect()
    };
    learned.retain(|agent, _| watched.iter().any(|(a, _)| a == agent));
    if watched.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for (agent, _) in &watched {
        let key = format!("{PREFIX}{agent}");
        pipe.cmd("GET").arg(&key).cmd("PTTL").arg(&key);
    }
    let replies: Vec<Value> = pipe.query_async(conn).await?;
    let now = Instant::now();
    for ((agent, rules), reply) in watched.iter().zip(replies.chunks(2)) {
        let [entry, left] = reply else { continue };
        let Some(trip) = trip(entry) else { continue };
        let left = redis::from_redis_value_ref::<i64>(left).unwrap_or(0);
        if trip.replica == outages.replica() || learned.get(agent) == Some(&trip.id) || left <= 0 {
            continue;
        }
        learned.insert(agent.clone(), trip.id.clone());
        let remaining = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        outages.learn(agent, rules, &trip, remaining, now);
    }
    Ok(())
}

/// A stored entry as a trip, if it is one.
fn trip(entry: &Value) -> Option<Trip> {
    let bytes = match entry {
        Value::BulkString(bytes) if bytes.len() <= MAX_ENTRY_BYTES => bytes,
        Value::Nil => return None,
        _ => {
            tracing::debug!("an outage trip in Redis is not a small string: skipped");
            return None;
        }
    };
    let trip: Trip = serde_json::from_slice(bytes).ok()?;
    let bounded = |s: &str| !s.is_empty() && s.len() <= 64;
    (bounded(&trip.id) && bounded(&trip.replica) && bounded(&trip.cause)).then_some(trip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_small_well_formed_entry_is_a_trip() {
        let good = Trip { id: "t1".into(), replica: "r1".into(), cause: "errors".into() };
        let json = serde_json::to_vec(&good).expect("json");
        assert_eq!(trip(&Value::BulkString(json)), Some(good));
        assert_eq!(trip(&Value::Nil), None);
        assert_eq!(trip(&Value::Int(3)), None);
        assert_eq!(trip(&Value::BulkString(b"not json".to_vec())), None);
        let empty = br#"{"id":"","replica":"r","cause":"errors"}"#.to_vec();
        assert_eq!(trip(&Value::BulkString(empty)), None);
        let long = format!(r#"{{"id":"{}","replica":"r","cause":"errors"}}"#, "x".repeat(600)).into_bytes();
        assert_eq!(trip(&Value::BulkString(long)), None);
    }
}
