//! Where each pool's state lives: in this process (one gateway), or in Redis, shared by
//! every replica (the same `--redis-url` as the session store). Every change reads the
//! pool's state and the store's clock, applies a [`crate::policy`] step, and writes it back
//! only if nobody wrote in between (compare-and-set in one Lua script; a conflict reads and
//! tries again), so the policy is the same code in both places and every replica sees one
//! queue in one order. Time is the store's: Redis' `TIME` (gateways' clocks may differ),
//! this process' clock in memory.
//!
//! Keys: `switchboard:capacity:<account>/<region>`, a JSON [`Pool`]; it expires an hour
//! after its last change, so a pool nobody uses leaves nothing behind.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::policy::Pool;

const PREFIX: &str = "switchboard:capacity:";
/// How long an untouched pool's state stays in Redis.
const POOL_TTL_MS: u64 = 3_600_000;
/// Compare-and-set attempts before a change gives up (each conflict means another replica
/// changed the pool meanwhile, so a long run of them is contention far beyond a quota's).
const ATTEMPTS: usize = 64;

/// Reads the pool and the store's clock.
const READ: &str = r"
local t = redis.call('TIME')
return {t[1], t[2], redis.call('GET', KEYS[1]) or ''}
";

/// Writes the pool if it is still what was read (an empty value: none; deletes).
const WRITE: &str = r"
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
";

/// The capacity store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis failed.
    #[error("the capacity store (Redis) failed: {0}")]
    Redis(#[from] redis::RedisError),
    /// A pool's state in Redis does not decode.
    #[error("a capacity pool's state in Redis does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    /// Other replicas changed the pool every time this one tried.
    #[error("the capacity pool {0} changed under every one of {ATTEMPTS} attempts")]
    Contended(String),
}

/// Where the pools live.
pub(crate) enum Backend {
    /// This process.
    Memory(Mutex<BTreeMap<String, Pool>>),
    /// Redis, shared by every replica.
    Redis(redis::aio::ConnectionManager),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Memory(_) => "Backend::Memory",
            Self::Redis(_) => "Backend::Redis",
        })
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A connection to Redis at `url` (`rediss://` trusting `ca` when given), made on first use
/// and remade after a failure, with 2 s connection and response timeouts: what the capacity
/// pools here, and the gateway's session store and outage switches, talk to Redis through.
pub fn connect_lazily(url: &str, ca: Option<Vec<u8>>) -> redis::RedisResult<redis::aio::ConnectionManager> {
    let client = match ca {
        Some(root_cert) => {
            redis::Client::build_with_tls(url, redis::TlsCertificates { client_tls: None, root_cert: Some(root_cert) })?
        }
        None => redis::Client::open(url)?,
    };
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(1);
    redis::aio::ConnectionManager::new_lazy_with_config(client, config)
}

impl Backend {
    /// Redis at `url` (`rediss://` trusting `ca` when given); connects on first use.
    pub fn redis(url: &str, ca: Option<Vec<u8>>) -> Result<Self, StoreError> {
        Ok(Self::Redis(connect_lazily(url, ca)?))
    }

    /// Applies `change` to pool `name` at the store's time (ms), atomically; returns what
    /// it returned. `change` may run more than once (after a conflict) and must not act.
    pub async fn update<R>(&self, name: &str, mut change: impl FnMut(&mut Pool, u64) -> R) -> Result<R, StoreError> {
        match self {
            Self::Memory(pools) => {
                let mut pools = pools.lock().unwrap_or_else(PoisonError::into_inner);
                let pool = pools.entry(name.to_owned()).or_default();
                let out = change(pool, now_ms());
                if pool.is_idle() {
                    pools.remove(name);
                }
                Ok(out)
            }
            Self::Redis(conn) => {
                let key = format!("{PREFIX}{name}");
                let mut conn = conn.clone();
                for _ in 0..ATTEMPTS {
                    let (secs, micros, old): (u64, u64, String) =
                        redis::cmd("EVAL").arg(READ).arg(1).arg(&key).query_async(&mut conn).await?;
                    let now = secs.saturating_mul(1000).saturating_add(micros / 1000);
                    let mut pool: Pool = if old.is_empty() { Pool::default() } else { serde_json::from_str(&old)? };
                    let out = change(&mut pool, now);
                    let new = if pool.is_idle() { String::new() } else { serde_json::to_string(&pool)? };
                    if new == old {
                        return Ok(out);
                    }
                    let mut write = redis::cmd("EVAL");
                    write.arg(WRITE).arg(1).arg(&key).arg(&old).arg(&new).arg(POOL_TTL_MS);
                    let written: i64 = write.query_async(&mut conn).await?;
                    if written == 1 {
                        return Ok(out);
                    }
                    // Another replica wrote first: read again, after a moment that differs
                    // between replicas so they do not collide in step.
                    let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0] % 8);
                    tokio::time::sleep(Duration::from_millis(jitter)).await;
                }
                Err(StoreError::Contended(name.to_owned()))
            }
        }
    }
}
