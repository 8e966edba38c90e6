//! Where parked sessions wait: in this process, or in Redis, shared by every gateway
//! replica, each parked session sealed with the gateway's key (see [`super`]).
//!
//! Redis is a help, not a dependency: the gateway starts without it (the connection is
//! made on first use, and made again after a failure), serves new sessions while it is
//! down, and says so where it matters — a resume is refused with `store_unavailable`
//! (1013, try again) and a session that cannot park ends as it would without a store.
//! After a failure, every operation fails at once for [`BACKOFF`] instead of each one
//! waiting out a connection timeout on the relay's path. One multiplexed connection
//! (pipelined, reconnecting) serves all of a replica's sessions, as redis-rs advises over a
//! pool for async use. Credentials go in the URL (`redis://user:password@host`,
//! from a Secret); `rediss://` is TLS, with a private CA if given.
//!
//! In Redis, an attached session is also held by a lease with a snapshot ([`redis`]), so
//! a gateway that dies without parking its sessions (SIGKILL, a lost node) does not take
//! them along: once the lease lapses, a resume through any replica takes the snapshot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use switchboard_core::grant::GatewaySigner;

use super::Parked;
use crate::budget::Account;

mod redis;
pub(crate) use redis::connect_lazily;
mod seal;

use redis::Shared;
pub use redis::{BACKOFF, Renewal};
pub use seal::{open_text, seal_text};

/// Aliases followed from a resume key (a token rotates at each handoff; a client that
/// missed several new tokens in a row is rare).
const MAX_ALIAS_HOPS: usize = 4;

/// What a resume found.
#[derive(Debug)]
pub enum Taken {
    /// The parked session, now the caller's.
    Parked(Box<Parked>),
    /// The session is still attached to a connection (after the wait).
    Held,
    /// No such session: an unknown, expired, spent or another key's token.
    Unknown,
}

impl Taken {
    /// The parked session, if that is what was found.
    pub fn parked(self) -> Option<Parked> {
        match self {
            Self::Parked(parked) => Some(*parked),
            _ => None,
        }
    }
}

/// The session store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis failed.
    #[error("the session store (Redis) failed: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// Redis failed moments ago; not tried again until the backoff is over.
    #[error("the session store (Redis) is unavailable (it failed {0} ms ago)")]
    Unavailable(u128),
    /// A stored session does not decode.
    #[error("a parked session in the store does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    /// A stored session is not sealed with this gateway's key.
    #[error(
        "a parked session in the store is not sealed with the gateway's key (changed, moved, or written by someone else); it is refused"
    )]
    Tampered,
    /// A mark for every replica asked of a store only this replica sees.
    #[error("the gateway has no shared store (--redis-url) to keep marks every replica sees")]
    NotShared,
}

/// Where parked sessions wait.
#[derive(Clone)]
pub enum Store {
    /// In this process (one gateway replica).
    Memory(Arc<Mutex<HashMap<String, (Instant, Entry)>>>),
    /// Redis, shared by every replica; parked sessions sealed with the gateway's key.
    Redis(Arc<Shared>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_shared() { "Store::Redis" } else { "Store::Memory" })
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::Memory(Arc::default())
    }
}

/// An in-memory entry.
#[derive(Debug)]
pub enum Entry {
    /// Attached to a client, or being parked.
    Parking,
    /// Parked, with its count toward the gateway's memory budget (given back when the
    /// entry goes).
    Parked(Box<Parked>, Option<Account>),
    /// The session's newer key (its token rotated).
    Alias(String),
}

impl Store {
    /// A Redis store at `url` (`redis://`, `rediss://` for TLS, trusting `ca` — PEM — on
    /// top of the system's roots when given); parked sessions are sealed with `signer` (the
    /// gateway's key, which every replica shares). It connects on first use: a Redis that
    /// is down does not stop the gateway ([`Store::ping`] says whether it answers).
    pub fn redis(url: &str, signer: GatewaySigner, ca: Option<Vec<u8>>) -> Result<Self, StoreError> {
        Ok(Self::Redis(Arc::new(Shared::open(url, signer, ca)?)))
    }

    /// Whether the store answers (Redis' PING; the in-memory store always does).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Self::Memory(_) => Ok(()),
            Self::Redis(shared) => shared.ping().await,
        }
    }

    /// Marks `key` taken for `ttl` if no one took it yet (`SET NX`): `true` for the first
    /// taker of every replica sharing the store, `false` afterwards while the mark lasts.
    /// Only a shared store keeps such marks: the in-memory store answers
    /// [`StoreError::NotShared`] (a replica alone keeps its own, where it knows what they mean).
    pub async fn take_once(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        match self {
            Self::Memory(_) => Err(StoreError::NotShared),
            Self::Redis(shared) => shared.take_once(key, ttl).await,
        }
    }

    /// Whether other gateway replicas see this store.
    pub fn is_shared(&self) -> bool {
        matches!(self, Self::Redis(..))
    }

    fn memory(
        map: &Mutex<HashMap<String, (Instant, Entry)>>,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Entry)>> {
        let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        map.retain(|_, (expires, _)| *expires > now);
        map
    }

    /// Holds the attached session at `key` for `lease` (renewed by [`Store::renew`]), with
    /// its `snapshot` for the resume `window` (Redis only: a gateway that dies takes an
    /// in-memory store with it). The `previous` key (its older token's) becomes an alias of
    /// `key` for the window, so a client that did not get the new token resumes with the old.
    pub async fn hold(
        &self,
        key: &str,
        previous: Option<&str>,
        snapshot: Option<&Parked>,
        lease: Duration,
        window: Duration,
    ) -> Result<(), StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = Self::memory(map);
                let now = Instant::now();
                map.insert(key.to_owned(), (now + lease, Entry::Parking));
                if let Some(old) = previous {
                    map.insert(old.to_owned(), (now + window, Entry::Alias(key.to_owned())));
                }
                Ok(())
            }
            Self::Redis(shared) => shared.hold(key, previous, snapshot, lease, window).await,
        }
    }

    /// Renews the hold on `key` (and replaces its snapshot with `snapshot` when given).
    pub async fn renew(
        &self,
        key: &str,
        snapshot: Option<&Parked>,
        lease: Duration,
        window: Duration,
    ) -> Result<Renewal, StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = Self::memory(map);
                if let Some((expires, Entry::Parking)) = map.get_mut(key) {
                    *expires = Instant::now() + lease;
                }
                Ok(Renewal::Kept)
            }
            Self::Redis(shared) => shared.renew(key, snapshot, lease, window).await,
        }
    }

    /// Parks `session` at `key` for `ttl` (and clears the mark and the snapshot). In this
    /// process, the session's `account` (its bytes, toward the memory budget) stays with
    /// it; Redis' memory is not the gateway's.
    pub async fn park(
        &self,
        key: &str,
        session: &Parked,
        ttl: Duration,
        account: Option<Account>,
    ) -> Result<(), StoreError> {
        match self {
            Self::Memory(map) => {
                let entry = Entry::Parked(Box::new(session.clone()), account);
                Self::memory(map).insert(key.to_owned(), (Instant::now() + ttl, entry));
                Ok(())
            }
            Self::Redis(shared) => shared.park(key, session, ttl).await,
        }
    }

    /// The session at `key` is not held any more and leaves nothing to resume (it ended, or
    /// its park failed).
    pub async fn unmark(&self, key: &str) -> Result<(), StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = Self::memory(map);
                if matches!(map.get(key), Some((_, Entry::Parking))) {
                    map.remove(key);
                }
                Ok(())
            }
            Self::Redis(shared) => shared.release(key).await,
        }
    }

    /// Takes the session at `key` (or at the newer key it is an alias of), waiting up to
    /// `wait` while it is still held (by a gateway that has not seen its client go yet) or
    /// being parked. At most one caller gets it. In Redis, a session whose holder's lease
    /// lapsed (the gateway died) is taken from its snapshot.
    pub async fn take(&self, key: &str, wait: Duration) -> Result<Taken, StoreError> {
        let key = self.resolve(key).await?;
        let deadline = Instant::now() + wait;
        loop {
            match self.try_take(&key).await? {
                (Some(parked), _) => return Ok(Taken::Parked(Box::new(parked))),
                (None, false) => return Ok(Taken::Unknown),
                (None, true) if Instant::now() >= deadline => return Ok(Taken::Held),
                (None, true) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// The key the session at `key` now goes by (through the aliases of rotated tokens).
    pub async fn resolve(&self, key: &str) -> Result<String, StoreError> {
        match self {
            Self::Memory(map) => {
                let map = Self::memory(map);
                let mut key = key;
                for _ in 0..MAX_ALIAS_HOPS {
                    match map.get(key) {
                        Some((_, Entry::Alias(newer))) => key = newer,
                        _ => break,
                    }
                }
                Ok(key.to_owned())
            }
            Self::Redis(shared) => shared.resolve(key).await,
        }
    }

    async fn try_take(&self, key: &str) -> Result<(Option<Parked>, bool), StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = Self::memory(map);
                match map.remove(key) {
                    Some((_, Entry::Parked(session, _))) => Ok((Some(*session), false)),
                    Some((expires, held @ Entry::Parking)) => {
                        map.insert(key.to_owned(), (expires, held));
                        Ok((None, true))
                    }
                    Some((expires, alias @ Entry::Alias(_))) => {
                        map.insert(key.to_owned(), (expires, alias));
                        Ok((None, false))
                    }
                    None => Ok((None, false)),
                }
            }
            Self::Redis(shared) => shared.try_take(key).await,
        }
    }
}

#[cfg(test)]
mod tests;
