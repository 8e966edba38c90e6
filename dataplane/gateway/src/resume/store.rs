//! Where parked sessions wait: in this process, or in Redis, shared by every gateway
//! replica, each parked session sealed with the gateway's key (see [`super`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use switchboard_core::grant::GatewaySigner;

use super::Parked;

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
    Redis(#[from] redis::RedisError),
    /// A stored session does not decode.
    #[error("a parked session in the store does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    /// A stored session is not sealed with this gateway's key.
    #[error(
        "a parked session in the store is not sealed with the gateway's key (changed, moved, or written by someone else); it is refused"
    )]
    Tampered,
}

/// Where parked sessions wait.
#[derive(Clone)]
pub enum Store {
    /// In this process (one gateway replica).
    Memory(Arc<Mutex<HashMap<String, (Instant, Entry)>>>),
    /// Redis, shared by every replica; parked sessions sealed with the gateway's key.
    Redis(redis::aio::ConnectionManager, Box<GatewaySigner>),
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
#[derive(Clone, Debug)]
pub enum Entry {
    /// Attached to a client, or being parked.
    Parking,
    /// Parked.
    Parked(Box<Parked>),
}

const PREFIX: &str = "switchboard:session:";
/// What a seal signs before the store key and the session's JSON.
const SEAL_DOMAIN: &[u8] = b"switchboard parked session\0";
/// An Ed25519 signature.
const SEAL_BYTES: usize = 64;

/// What the seal of the session `json` parked at `key` signs.
fn sealed(key: &str, json: &[u8]) -> Vec<u8> {
    [SEAL_DOMAIN, key.as_bytes(), b"\0", json].concat()
}

/// The stored value of `session` at `key`: its seal, then its JSON.
fn seal(signer: &GatewaySigner, key: &str, session: &Parked) -> Result<Vec<u8>, StoreError> {
    let json = serde_json::to_vec(session)?;
    let mut value = signer.seal(&sealed(key, &json)).to_vec();
    value.extend_from_slice(&json);
    Ok(value)
}

/// The session stored at `key` as `value`, if its seal is this gateway's.
fn open(signer: &GatewaySigner, key: &str, value: &[u8]) -> Result<Parked, StoreError> {
    if value.len() < SEAL_BYTES {
        return Err(StoreError::Tampered);
    }
    let (signature, json) = value.split_at(SEAL_BYTES);
    if !signer.public().opens(&sealed(key, json), signature) {
        return Err(StoreError::Tampered);
    }
    Ok(serde_json::from_slice(json)?)
}
const PARKING: &str = "switchboard:parking:";

impl Store {
    /// A Redis store at `url` (`redis://`, `rediss://`), connected; parked sessions are
    /// sealed with `signer` (the gateway's key, which every replica shares).
    pub async fn redis(url: &str, signer: GatewaySigner) -> Result<Self, StoreError> {
        let client = redis::Client::open(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(2)));
        Ok(Self::Redis(client.get_connection_manager_with_config(config).await?, Box::new(signer)))
    }

    /// Whether other gateway replicas see this store.
    pub fn is_shared(&self) -> bool {
        matches!(self, Self::Redis(..))
    }

    /// Marks `key` as held (attached, or being parked) for `ttl`.
    pub async fn mark_parking(&self, key: &str, ttl: Duration) -> Result<(), StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
                map.insert(key.to_owned(), (Instant::now() + ttl, Entry::Parking));
            }
            Self::Redis(conn, _) => {
                let () = conn.clone().pset_ex(format!("{PARKING}{key}"), 1, millis(ttl)).await?;
            }
        }
        Ok(())
    }

    /// Parks `session` at `key` for `ttl` (and clears the parking mark).
    pub async fn park(&self, key: &str, session: &Parked, ttl: Duration) -> Result<(), StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                map.retain(|_, (expires, _)| *expires > now);
                map.insert(key.to_owned(), (now + ttl, Entry::Parked(Box::new(session.clone()))));
            }
            Self::Redis(conn, signer) => {
                let value = seal(signer, key, session)?;
                let mut conn = conn.clone();
                redis::pipe()
                    .atomic()
                    .pset_ex(format!("{PREFIX}{key}"), value, millis(ttl))
                    .del(format!("{PARKING}{key}"))
                    .exec_async(&mut conn)
                    .await?;
            }
        }
        Ok(())
    }

    /// Clears a parking mark whose session could not be parked.
    pub async fn unmark(&self, key: &str) -> Result<(), StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
                if matches!(map.get(key), Some((_, Entry::Parking))) {
                    map.remove(key);
                }
            }
            Self::Redis(conn, _) => {
                let () = conn.clone().del(format!("{PARKING}{key}")).await?;
            }
        }
        Ok(())
    }

    /// Takes the session parked at `key`, waiting up to `wait` while it is still held (by
    /// a gateway that has not seen its client go yet) or being parked. At most one caller
    /// gets it.
    pub async fn take(&self, key: &str, wait: Duration) -> Result<Taken, StoreError> {
        let deadline = Instant::now() + wait;
        loop {
            match self.try_take(key).await? {
                (Some(parked), _) => return Ok(Taken::Parked(Box::new(parked))),
                (None, false) => return Ok(Taken::Unknown),
                (None, true) if Instant::now() >= deadline => return Ok(Taken::Held),
                (None, true) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    async fn try_take(&self, key: &str) -> Result<(Option<Parked>, bool), StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                match map.remove(key) {
                    Some((expires, Entry::Parked(session))) if expires > now => Ok((Some(*session), false)),
                    Some((expires, Entry::Parking)) if expires > now => {
                        map.insert(key.to_owned(), (expires, Entry::Parking));
                        Ok((None, true))
                    }
                    _ => Ok((None, false)),
                }
            }
            Self::Redis(conn, signer) => {
                let mut conn = conn.clone();
                // The mark first: a park writes the session and clears the mark at once, so
                // a mark seen here means the session is (or will be) there, and no mark
                // means it is there already or never will be. (The other order lost a
                // session parked between the two reads: neither was seen.)
                let parking: bool = conn.exists(format!("{PARKING}{key}")).await?;
                let value: Option<Vec<u8>> = conn.get_del(format!("{PREFIX}{key}")).await?;
                match value {
                    Some(value) => Ok((Some(open(signer, key, &value)?), false)),
                    None => Ok((None, parking)),
                }
            }
        }
    }
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::Replay;
    use crate::session::kept::Kept;

    fn parked() -> Parked {
        Parked {
            session_id: "s".into(),
            namespace: "bank".into(),
            agent: "triage".into(),
            voice: None,
            modalities: vec![],
            kept: Kept::default(),
            handoff: None,
            generation: 0,
            replay: Replay::default(),
        }
    }

    #[test]
    fn a_sealed_session_opens_only_unchanged_at_its_key_with_the_key_that_sealed_it() {
        let signer = GatewaySigner::from_seed(&[5; 32]);
        let value = seal(&signer, "k", &parked()).expect("sealed");
        assert_eq!(open(&signer, "k", &value).expect("opens").agent, "triage");
        let changed = String::from_utf8_lossy(&value[SEAL_BYTES..]).replace("triage", "banking");
        let forged = [&value[..SEAL_BYTES], changed.as_bytes()].concat();
        assert!(matches!(open(&signer, "k", &forged), Err(StoreError::Tampered)), "changed");
        assert!(matches!(open(&signer, "other", &value), Err(StoreError::Tampered)), "moved to another key");
        let other = GatewaySigner::from_seed(&[6; 32]);
        assert!(matches!(open(&other, "k", &value), Err(StoreError::Tampered)), "another gateway's key");
        let unsealed = serde_json::to_vec(&parked()).expect("json");
        assert!(matches!(open(&signer, "k", &unsealed), Err(StoreError::Tampered)), "written without a seal");
        assert!(matches!(open(&signer, "k", b"short"), Err(StoreError::Tampered)));
    }

    #[tokio::test]
    async fn memory_store_gives_a_parked_session_once_and_waits_while_parking() {
        let store = Store::default();
        let ttl = Duration::from_secs(30);
        assert!(matches!(store.take("k", Duration::ZERO).await.expect("take"), Taken::Unknown));
        store.mark_parking("k", ttl).await.expect("mark");
        assert!(matches!(store.take("k", Duration::from_millis(60)).await.expect("take"), Taken::Held));
        let waiting = {
            let store = store.clone();
            tokio::spawn(async move { store.take("k", Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(120)).await;
        store.park("k", &parked(), ttl).await.expect("park");
        let taken = waiting.await.expect("joins").expect("take").parked();
        assert_eq!(taken.map(|p| p.agent).as_deref(), Some("triage"), "the early resume waited for the park");
        assert!(matches!(store.take("k", Duration::ZERO).await.expect("take"), Taken::Unknown), "taken once only");
        // Expiry.
        store.park("e", &parked(), Duration::from_millis(30)).await.expect("park");
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(matches!(store.take("e", Duration::ZERO).await.expect("take"), Taken::Unknown), "expired");
        // A mark whose park failed does not hold resumes.
        store.mark_parking("u", ttl).await.expect("mark");
        store.unmark("u").await.expect("unmark");
        assert!(matches!(store.take("u", Duration::from_secs(5)).await.expect("take"), Taken::Unknown));
    }
}
