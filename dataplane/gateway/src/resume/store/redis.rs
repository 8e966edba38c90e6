//! The Redis store: parked sessions, the marks of sessions held by a live gateway, their
//! snapshots, and the aliases of rotated resume keys — all but the marks sealed
//! ([`super::seal`]). Keys:
//!
//! - `switchboard:parking:<key>`: held. A gateway holds each attached session by a short
//!   lease it renews (every ping interval); a session being parked keeps its mark until
//!   it is parked. A resume waits while the mark stands.
//! - `switchboard:snapshot:<key>`: the attached session as of its last turn boundary,
//!   handoff or new token, kept for the resume window. When the lease lapses (the gateway
//!   holding it died: SIGKILL, a lost node), a resume takes the snapshot instead of waiting.
//! - `switchboard:session:<key>`: parked (the client went; the gateway parked it whole).
//! - `switchboard:taken:<key>`: a snapshot was taken by a resume. A holder still alive
//!   (its lease had lapsed: Redis unreachable from it) learns from it that the session
//!   lives elsewhere now; a snapshot gone without it (Redis restarted empty) is written
//!   again.
//! - `switchboard:alias:<key>`: the newer key of a session whose token rotated (every
//!   `bidi_connection_start` brings a new one, a handoff included), so a client that
//!   dropped before it read the new token resumes with the old one.
//!
//! Marks taken once across replicas ([`Shared::take_once`]) live beside them: the ids of
//! spent app-context tokens (`switchboard:app-context:jti:<jti>`, while the token lives).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use switchboard_core::grant::GatewaySigner;

use super::seal::{open, open_alias, seal, seal_alias};
use super::{MAX_ALIAS_HOPS, StoreError};
use crate::resume::Parked;

const PREFIX: &str = "switchboard:session:";
const PARKING: &str = "switchboard:parking:";
const SNAPSHOT: &str = "switchboard:snapshot:";
const ALIAS: &str = "switchboard:alias:";
const TAKEN: &str = "switchboard:taken:";

/// How long the mark of a taken snapshot stays: longer than any holder stays cut off from
/// Redis and alive.
const TAKEN_TTL: Duration = Duration::from_secs(3600);

/// How long after a failure operations fail at once rather than try Redis again.
pub const BACKOFF: Duration = Duration::from_secs(3);

/// Renews a held session's lease and its snapshot — only while its snapshot is still
/// there. A snapshot taken by a resume elsewhere (the lease had lapsed) means the session
/// now lives on another connection, and this holder must let go (0); one gone otherwise
/// (Redis restarted empty) is to be written again (2).
const RENEW: &str = r"
if redis.call('EXISTS', KEYS[2]) == 0 then
  if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
  return 2
end
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
";

/// Takes a snapshot, leaving the mark that says it was taken.
const TAKE_SNAPSHOT: &str = r"
local value = redis.call('GET', KEYS[1])
if value then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
end
return value
";

/// What a renewal found.
#[derive(Debug, PartialEq, Eq)]
pub enum Renewal {
    /// The hold is renewed.
    Kept,
    /// A resume elsewhere took the session: let it go.
    Taken,
    /// The store lost the hold (Redis restarted empty): register it again.
    Lost,
}

/// The Redis store's connection, key and health.
pub struct Shared {
    conn: redis::aio::ConnectionManager,
    signer: GatewaySigner,
    /// When Redis last failed in a way that says it is unreachable.
    failed_at: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("failed_at", &self.failed_at).finish_non_exhaustive()
    }
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The store key a snapshot of the session at `key` is sealed for (never the parked
/// session's: one is not the other).
fn snapshot_seal_key(key: &str) -> String {
    format!("snapshot:{key}")
}

/// How the session store connects to Redis: as the capacity store does (one helper, in the
/// capacity crate, the lowest that talks to Redis).
pub(crate) use switchboard_capacity::store::connect_lazily;

impl Shared {
    /// A store at `url` (see [`super::Store::redis`]).
    pub(super) fn open(url: &str, signer: GatewaySigner, ca: Option<Vec<u8>>) -> Result<Self, StoreError> {
        Ok(Self { conn: connect_lazily(url, ca)?, signer, failed_at: Mutex::default() })
    }

    /// A connection to use now, or why not.
    fn conn(&self) -> Result<redis::aio::ConnectionManager, StoreError> {
        let failed_at = *self.failed_at.lock().unwrap_or_else(PoisonError::into_inner);
        match failed_at.map(|at| at.elapsed()) {
            Some(since) if since < BACKOFF => Err(StoreError::Unavailable(since.as_millis())),
            _ => Ok(self.conn.clone()),
        }
    }

    /// Notes how an operation went: an unreachable Redis starts the backoff, an answer
    /// ends it.
    pub(super) fn note<T>(&self, result: redis::RedisResult<T>) -> Result<T, StoreError> {
        let unreachable = result.as_ref().err().is_some_and(|e| {
            e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
        });
        let mut failed_at = self.failed_at.lock().unwrap_or_else(PoisonError::into_inner);
        if unreachable {
            *failed_at = Some(Instant::now());
        } else if result.is_ok() {
            *failed_at = None;
        }
        Ok(result?)
    }

    /// Holds the session at `key` by a lease, with its snapshot; the `previous` key (its
    /// older token's) becomes an alias of `key`, its mark and snapshot gone.
    pub(super) async fn hold(
        &self,
        key: &str,
        previous: Option<&str>,
        snapshot: Option<&Parked>,
        lease: Duration,
        window: Duration,
    ) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic().pset_ex(format!("{PARKING}{key}"), 1, millis(lease)).ignore();
        if let Some(snapshot) = snapshot {
            let value = seal(&self.signer, &snapshot_seal_key(key), snapshot)?;
            pipe.pset_ex(format!("{SNAPSHOT}{key}"), value, millis(window)).ignore();
        }
        if let Some(old) = previous {
            pipe.del(format!("{PARKING}{old}")).ignore().del(format!("{SNAPSHOT}{old}")).ignore();
            pipe.pset_ex(format!("{ALIAS}{old}"), seal_alias(&self.signer, old, key), millis(window)).ignore();
        }
        let mut conn = self.conn()?;
        self.note(pipe.exec_async(&mut conn).await)
    }

    /// Renews the lease on `key` (and its snapshot: replaced by `snapshot` when given).
    pub(super) async fn renew(
        &self,
        key: &str,
        snapshot: Option<&Parked>,
        lease: Duration,
        window: Duration,
    ) -> Result<Renewal, StoreError> {
        let value = match snapshot {
            Some(snapshot) => seal(&self.signer, &snapshot_seal_key(key), snapshot)?,
            None => Vec::new(),
        };
        let mut conn = self.conn()?;
        let mut renew = redis::cmd("EVAL");
        renew.arg(RENEW).arg(3).arg(format!("{PARKING}{key}")).arg(format!("{SNAPSHOT}{key}"));
        renew.arg(format!("{TAKEN}{key}")).arg(millis(lease)).arg(millis(window)).arg(value);
        let renewed: i64 = self.note(renew.query_async(&mut conn).await)?;
        Ok(match renewed {
            0 => Renewal::Taken,
            2 => Renewal::Lost,
            _ => Renewal::Kept,
        })
    }

    /// Parks `session` at `key` for `ttl`; its mark and snapshot go.
    pub(super) async fn park(&self, key: &str, session: &Parked, ttl: Duration) -> Result<(), StoreError> {
        let value = seal(&self.signer, key, session)?;
        let mut conn = self.conn()?;
        let result = redis::pipe()
            .atomic()
            .pset_ex(format!("{PREFIX}{key}"), value, millis(ttl))
            .del(format!("{PARKING}{key}"))
            .del(format!("{SNAPSHOT}{key}"))
            .exec_async(&mut conn)
            .await;
        self.note(result)
    }

    /// The session at `key` is no longer held, and cannot be resumed from a snapshot.
    pub(super) async fn release(&self, key: &str) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let mut pipe = redis::pipe();
        pipe.atomic().del(format!("{PARKING}{key}")).ignore().del(format!("{SNAPSHOT}{key}")).ignore();
        self.note(pipe.exec_async(&mut conn).await)
    }

    /// The key `key` now goes by: followed through aliases (at most [`MAX_ALIAS_HOPS`]).
    pub(super) async fn resolve(&self, key: &str) -> Result<String, StoreError> {
        let mut conn = self.conn()?;
        let mut key = key.to_owned();
        for _ in 0..MAX_ALIAS_HOPS {
            let value: Option<Vec<u8>> = self.note(conn.get(format!("{ALIAS}{key}")).await)?;
            match value {
                Some(value) => key = open_alias(&self.signer, &key, &value)?,
                None => break,
            }
        }
        Ok(key)
    }

    /// Takes what is at `key`: the parked session, or — when no gateway holds it any more
    /// — its snapshot. The second value: whether it is still held (worth waiting for).
    pub(super) async fn try_take(&self, key: &str) -> Result<(Option<Parked>, bool), StoreError> {
        let mut conn = self.conn()?;
        // The mark first: a park writes the session and clears the mark at once, so a mark
        // seen here means the session is (or will be) there, and no mark means it is there
        // already or never will be. (The other order lost a session parked between the two
        // reads: neither was seen.)
        let held: bool = self.note(conn.exists(format!("{PARKING}{key}")).await)?;
        let value: Option<Vec<u8>> = self.note(conn.get_del(format!("{PREFIX}{key}")).await)?;
        if let Some(value) = value {
            return Ok((Some(open(&self.signer, key, &value)?), false));
        }
        if held {
            return Ok((None, true));
        }
        // Nobody holds it and it was never parked: the gateway that held it is gone.
        let mut take = redis::cmd("EVAL");
        take.arg(TAKE_SNAPSHOT).arg(2).arg(format!("{SNAPSHOT}{key}")).arg(format!("{TAKEN}{key}"));
        take.arg(millis(TAKEN_TTL));
        let snapshot: Option<Vec<u8>> = self.note(take.query_async(&mut conn).await)?;
        match snapshot {
            Some(value) => Ok((Some(open(&self.signer, &snapshot_seal_key(key), &value)?), false)),
            None => Ok((None, false)),
        }
    }

    /// Sets `key` for `ttl` unless it is set (`SET key 1 NX PX ttl`): whether this call set it.
    pub(super) async fn take_once(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let mut set = redis::cmd("SET");
        set.arg(key).arg(1).arg("NX").arg("PX").arg(millis(ttl));
        let answer: Option<String> = self.note(set.query_async(&mut conn).await)?;
        Ok(answer.is_some())
    }

    /// Whether Redis answers.
    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        self.note(redis::cmd("PING").query_async::<String>(&mut conn).await).map(drop)
    }
}
