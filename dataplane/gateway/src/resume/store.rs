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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use switchboard_core::grant::GatewaySigner;

use super::Parked;
use crate::budget::Account;

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
}

/// Where parked sessions wait.
#[derive(Clone)]
pub enum Store {
    /// In this process (one gateway replica).
    Memory(Arc<Mutex<HashMap<String, (Instant, Entry)>>>),
    /// Redis, shared by every replica; parked sessions sealed with the gateway's key.
    Redis(Arc<Shared>),
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

/// How long after a failure operations fail at once rather than try Redis again.
pub const BACKOFF: Duration = Duration::from_secs(3);

impl Shared {
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
    fn note<T>(&self, result: redis::RedisResult<T>) -> Result<T, StoreError> {
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

/// `session` sealed for `key` as text (the conversation record's continuation state): the
/// seal in hex, then the JSON.
pub fn seal_text(signer: &GatewaySigner, key: &str, session: &Parked) -> Result<String, StoreError> {
    let json = serde_json::to_string(session)?;
    let seal = signer.seal(&sealed(key, json.as_bytes()));
    Ok(format!("{}{json}", hex::encode(seal)))
}

/// The session sealed for `key` as `text` by [`seal_text`], if the seal is this gateway's.
pub fn open_text(signer: &GatewaySigner, key: &str, text: &str) -> Result<Parked, StoreError> {
    let split = SEAL_BYTES * 2;
    if !text.is_char_boundary(split) || text.len() < split {
        return Err(StoreError::Tampered);
    }
    let (seal, json) = text.split_at(split);
    let seal = hex::decode(seal).map_err(|_| StoreError::Tampered)?;
    if !signer.public().opens(&sealed(key, json.as_bytes()), &seal) {
        return Err(StoreError::Tampered);
    }
    Ok(serde_json::from_str(json)?)
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
    /// A Redis store at `url` (`redis://`, `rediss://` for TLS, trusting `ca` — PEM — on
    /// top of the system's roots when given); parked sessions are sealed with `signer` (the
    /// gateway's key, which every replica shares). It connects on first use: a Redis that
    /// is down does not stop the gateway ([`Store::ping`] says whether it answers).
    pub fn redis(url: &str, signer: GatewaySigner, ca: Option<Vec<u8>>) -> Result<Self, StoreError> {
        let client = match ca {
            Some(root_cert) => redis::Client::build_with_tls(
                url,
                redis::TlsCertificates { client_tls: None, root_cert: Some(root_cert) },
            )?,
            None => redis::Client::open(url)?,
        };
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(1);
        let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self::Redis(Arc::new(Shared { conn, signer, failed_at: Mutex::default() })))
    }

    /// Whether the store answers (Redis' PING; the in-memory store always does).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Self::Memory(_) => Ok(()),
            Self::Redis(shared) => {
                let mut conn = shared.conn.clone();
                shared.note(redis::cmd("PING").query_async::<String>(&mut conn).await).map(drop)
            }
        }
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
            Self::Redis(shared) => {
                let () = shared.note(shared.conn()?.pset_ex(format!("{PARKING}{key}"), 1, millis(ttl)).await)?;
            }
        }
        Ok(())
    }

    /// Parks `session` at `key` for `ttl` (and clears the parking mark). In this process,
    /// the session's `account` (its bytes, toward the memory budget) stays with it; Redis'
    /// memory is not the gateway's.
    pub async fn park(
        &self,
        key: &str,
        session: &Parked,
        ttl: Duration,
        account: Option<Account>,
    ) -> Result<(), StoreError> {
        match self {
            Self::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                map.retain(|_, (expires, _)| *expires > now);
                map.insert(key.to_owned(), (now + ttl, Entry::Parked(Box::new(session.clone()), account)));
            }
            Self::Redis(shared) => {
                let value = seal(&shared.signer, key, session)?;
                let mut conn = shared.conn()?;
                let result = redis::pipe()
                    .atomic()
                    .pset_ex(format!("{PREFIX}{key}"), value, millis(ttl))
                    .del(format!("{PARKING}{key}"))
                    .exec_async(&mut conn)
                    .await;
                shared.note(result)?;
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
            Self::Redis(shared) => {
                let () = shared.note(shared.conn()?.del(format!("{PARKING}{key}")).await)?;
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
                map.retain(|_, (expires, _)| *expires > now);
                match map.remove(key) {
                    Some((expires, Entry::Parked(session, _))) if expires > now => Ok((Some(*session), false)),
                    Some((expires, Entry::Parking)) if expires > now => {
                        map.insert(key.to_owned(), (expires, Entry::Parking));
                        Ok((None, true))
                    }
                    _ => Ok((None, false)),
                }
            }
            Self::Redis(shared) => {
                let mut conn = shared.conn()?;
                // The mark first: a park writes the session and clears the mark at once, so
                // a mark seen here means the session is (or will be) there, and no mark
                // means it is there already or never will be. (The other order lost a
                // session parked between the two reads: neither was seen.)
                let parking: bool = shared.note(conn.exists(format!("{PARKING}{key}")).await)?;
                let value: Option<Vec<u8>> = shared.note(conn.get_del(format!("{PREFIX}{key}")).await)?;
                match value {
                    Some(value) => Ok((Some(open(&shared.signer, key, &value)?), false)),
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

    #[test]
    fn continuation_state_opens_only_untouched_for_its_key_and_signer() {
        let signer = GatewaySigner::from_seed(&[5; 32]);
        let text = seal_text(&signer, "continue:s:web", &parked()).expect("seals");
        assert_eq!(open_text(&signer, "continue:s:web", &text).expect("opens").session_id, "s");
        assert!(
            matches!(open_text(&signer, "continue:s:web2", &text), Err(StoreError::Tampered)),
            "another credential"
        );
        let other = GatewaySigner::from_seed(&[6; 32]);
        assert!(matches!(open_text(&other, "continue:s:web", &text), Err(StoreError::Tampered)), "another gateway");
        let changed = text.replace("triage", "banking");
        assert_ne!(changed, text);
        assert!(matches!(open_text(&signer, "continue:s:web", &changed), Err(StoreError::Tampered)), "edited");
        assert!(matches!(open_text(&signer, "continue:s:web", "short"), Err(StoreError::Tampered)));
    }

    fn parked() -> Parked {
        Parked {
            session_id: "s".into(),
            namespace: "bank".into(),
            agent: "triage".into(),
            voice: None,
            modalities: vec![],
            model: None,
            audio: None,
            kept: Kept::default(),
            handoff: None,
            generation: 0,
            replay: Replay::default(),
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        }
    }

    #[test]
    fn a_sealed_session_opens_only_unchanged_at_its_key_with_the_key_that_sealed_it() {
        let signer = GatewaySigner::from_seed(&[5; 32]);
        let value = seal(&signer, "k", &parked()).expect("sealed");
        let opened = open(&signer, "k", &value).expect("opens");
        assert_eq!((opened.agent.as_str(), opened.traceparent), ("triage", parked().traceparent));
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
        store.park("k", &parked(), ttl, None).await.expect("park");
        let taken = waiting.await.expect("joins").expect("take").parked();
        assert_eq!(taken.map(|p| p.agent).as_deref(), Some("triage"), "the early resume waited for the park");
        assert!(matches!(store.take("k", Duration::ZERO).await.expect("take"), Taken::Unknown), "taken once only");
        // Expiry.
        store.park("e", &parked(), Duration::from_millis(30), None).await.expect("park");
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(matches!(store.take("e", Duration::ZERO).await.expect("take"), Taken::Unknown), "expired");
        // A mark whose park failed does not hold resumes.
        store.mark_parking("u", ttl).await.expect("mark");
        store.unmark("u").await.expect("unmark");
        assert!(matches!(store.take("u", Duration::from_secs(5)).await.expect("take"), Taken::Unknown));
    }

    #[tokio::test]
    async fn a_parked_session_counts_toward_the_budget_until_taken_or_expired() {
        let budget = crate::budget::MemoryBudget::new(Some(1 << 20), 0);
        let store = Store::default();
        let mut account = budget.account();
        account.set(5000);
        store.park("k", &parked(), Duration::from_secs(30), Some(account)).await.expect("park");
        assert_eq!(budget.held(), 5000, "parked here, counted here");
        assert!(store.take("k", Duration::ZERO).await.expect("take").parked().is_some());
        assert_eq!(budget.held(), 0, "taken: given back");
        let mut account = budget.account();
        account.set(7000);
        store.park("e", &parked(), Duration::from_millis(20), Some(account)).await.expect("park");
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(matches!(store.take("other", Duration::ZERO).await.expect("take"), Taken::Unknown));
        assert_eq!(budget.held(), 0, "expired entries are swept, and their bytes given back");
    }
}
