//! The caller across sessions: what the record keeps about a verified caller, beyond any
//! one session, in the same store as the conversation record (SQLite or PostgreSQL).
//!
//! - **Who**: a caller is the value an Agent's identity provider wrote into `verifiedUser`,
//!   reduced to the stable id the identity assertion names
//!   ([`switchboard_core::assertion::subject`]), within the Agent's namespace. The store
//!   keys it by [`caller_id`]: the hex SHA-256 of namespace, identity key and that id, so
//!   the raw id (an account number) is never a column, an index or a log line. (A digest
//!   of a short number can be searched for by whoever holds the database; it keeps the id
//!   out of sight, it is not encryption.)
//! - **What**: the memory keys of the caller — a session memory key whose name starts
//!   with `caller` and an upper-case letter (`callerPreferences`, `callerOpenTasks`; see
//!   [`is_caller_key`]), as the Agents' tools `remember` them — and which sessions the
//!   caller had, whose model-written summaries (the record's) come back as
//!   `callerHistory`.
//! - **Bounds**: at most [`MAX_KEYS`] keys per caller and [`MAX_VALUE_BYTES`] per value;
//!   more is not kept (logged by the writer).
//!
//! Callers not seen for the retention period are deleted by the record's writer; one
//! caller is deleted on request ([`Store::delete_caller`]: `switchboard callers delete`).

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};
use sqlx::Row as _;

use super::{Store, StoreError};

/// The tables, in order; each statement is idempotent.
pub(super) const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS switchboard_callers (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        first_seen BIGINT NOT NULL,
        last_seen BIGINT NOT NULL
    )",
    "CREATE INDEX IF NOT EXISTS switchboard_callers_last_seen ON switchboard_callers (last_seen)",
    "CREATE TABLE IF NOT EXISTS switchboard_caller_memory (
        caller_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (caller_id, key)
    )",
    "CREATE TABLE IF NOT EXISTS switchboard_caller_sessions (
        caller_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seen_at BIGINT NOT NULL,
        PRIMARY KEY (caller_id, session_id)
    )",
];

/// The memory key the restored summaries of a caller's past sessions come back under
/// (written by the gateway only; a session's own writes to it are not kept).
pub const HISTORY_KEY: &str = "callerHistory";
/// Most memory keys kept per caller.
pub const MAX_KEYS: i64 = 32;
/// Longest value kept, in bytes of compact JSON.
pub const MAX_VALUE_BYTES: usize = 16 * 1024;
/// Past sessions whose summaries come back.
pub const HISTORY_SESSIONS: i64 = 3;

/// Whether memory key `key` belongs to the caller rather than the session: `caller`, then
/// an upper-case letter (`callerPreferences`), and not [`HISTORY_KEY`].
pub fn is_caller_key(key: &str) -> bool {
    key.strip_prefix("caller").and_then(|rest| rest.bytes().next()).is_some_and(|b| b.is_ascii_uppercase())
        && key != HISTORY_KEY
}

/// The store's id of the caller a `verifiedUser` value names in `namespace`.
pub fn caller_id(namespace: &str, verified_user: &serde_json::Value) -> String {
    caller_id_of(namespace, &switchboard_core::assertion::subject(verified_user))
}

/// The store's id of the caller with stable id `subject` (the identity assertion's `sub`)
/// in `namespace`.
pub fn caller_id_of(namespace: &str, subject: &str) -> String {
    let mut hash = Sha256::new();
    for part in [namespace, switchboard_core::assertion::IDENTITY_KEY, subject] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hex::encode(hash.finalize())
}

/// What is kept of a caller, as it comes back into a session's memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallerState {
    /// The caller's memory keys and values.
    pub memory: BTreeMap<String, serde_json::Value>,
    /// Summaries of the caller's latest past sessions, newest first.
    pub history: Vec<PastSession>,
}

/// One past session of a caller.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PastSession {
    /// When it started, unix ms.
    pub started_at: i64,
    /// The record's summary of it.
    pub summary: String,
}

impl CallerState {
    /// The memory keys a session gets: the caller's keys, and `callerHistory` when there
    /// are summaries.
    pub fn into_memory(self) -> BTreeMap<String, serde_json::Value> {
        let mut memory = self.memory;
        if !self.history.is_empty() {
            memory.insert(HISTORY_KEY.to_owned(), serde_json::json!(self.history));
        }
        memory
    }
}

/// Why a caller's value was not kept.
#[derive(Debug, PartialEq, Eq)]
pub enum NotKept {
    /// Over [`MAX_VALUE_BYTES`].
    TooLarge,
    /// The caller already has [`MAX_KEYS`] other keys.
    TooManyKeys,
}

impl Store {
    /// The caller `caller` was seen in session `session` at `at` (unix ms).
    pub(super) async fn caller_seen(
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        caller: &str,
        namespace: &str,
        session: &str,
        at: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO switchboard_callers (id, namespace, first_seen, last_seen) VALUES ($1, $2, $3, $3)
             ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen",
        )
        .bind(caller)
        .bind(namespace)
        .bind(at)
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "INSERT INTO switchboard_caller_sessions (caller_id, session_id, seen_at) VALUES ($1, $2, $3)
             ON CONFLICT DO NOTHING",
        )
        .bind(caller)
        .bind(session)
        .bind(at)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Keeps `value` as the caller's `key` (`null` forgets it); the caller must have been
    /// seen first.
    pub(super) async fn caller_memory(
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        caller: &str,
        key: &str,
        value: &serde_json::Value,
        at: i64,
    ) -> Result<Result<(), NotKept>, sqlx::Error> {
        if value.is_null() {
            sqlx::query("DELETE FROM switchboard_caller_memory WHERE caller_id = $1 AND key = $2")
                .bind(caller)
                .bind(key)
                .execute(&mut **tx)
                .await?;
            return Ok(Ok(()));
        }
        let text = value.to_string();
        if text.len() > MAX_VALUE_BYTES {
            return Ok(Err(NotKept::TooLarge));
        }
        let others: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM switchboard_caller_memory WHERE caller_id = $1 AND key <> $2")
                .bind(caller)
                .bind(key)
                .fetch_one(&mut **tx)
                .await?;
        if others >= MAX_KEYS {
            return Ok(Err(NotKept::TooManyKeys));
        }
        sqlx::query(
            "INSERT INTO switchboard_caller_memory (caller_id, key, value, updated_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (caller_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(caller)
        .bind(key)
        .bind(text)
        .bind(at)
        .execute(&mut **tx)
        .await?;
        Ok(Ok(()))
    }

    /// What is kept of caller `caller`, with the summaries of its past sessions other than
    /// `session`; `None` for a caller not kept.
    pub async fn caller(&self, caller: &str, session: &str) -> Result<Option<CallerState>, StoreError> {
        let known: Option<i64> = sqlx::query_scalar("SELECT last_seen FROM switchboard_callers WHERE id = $1")
            .bind(caller)
            .fetch_optional(&self.pool)
            .await?;
        if known.is_none() {
            return Ok(None);
        }
        let rows = sqlx::query("SELECT key, value FROM switchboard_caller_memory WHERE caller_id = $1 ORDER BY key")
            .bind(caller)
            .fetch_all(&self.pool)
            .await?;
        let mut memory = BTreeMap::new();
        for row in &rows {
            let (key, value): (String, String) = (row.try_get("key")?, row.try_get("value")?);
            let value = serde_json::from_str(&value).unwrap_or(serde_json::Value::String(value));
            memory.insert(key, value);
        }
        let rows = sqlx::query(
            "SELECT s.started_at, s.summary FROM switchboard_caller_sessions c
             JOIN switchboard_sessions s ON s.id = c.session_id
             WHERE c.caller_id = $1 AND c.session_id <> $2 AND s.summary IS NOT NULL
             ORDER BY s.started_at DESC, s.id LIMIT $3",
        )
        .bind(caller)
        .bind(session)
        .bind(HISTORY_SESSIONS)
        .fetch_all(&self.pool)
        .await?;
        let history = rows
            .iter()
            .map(|row| Ok(PastSession { started_at: row.try_get("started_at")?, summary: row.try_get("summary")? }))
            .collect::<Result<_, sqlx::Error>>()?;
        Ok(Some(CallerState { memory, history }))
    }

    /// Deletes everything kept of caller `caller` (its memory and which sessions it had;
    /// the sessions' own record stays under the record's retention); whether it was kept.
    pub async fn delete_caller(&self, caller: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        for statement in [
            "DELETE FROM switchboard_caller_memory WHERE caller_id = $1",
            "DELETE FROM switchboard_caller_sessions WHERE caller_id = $1",
        ] {
            sqlx::query(statement).bind(caller).execute(&mut *tx).await?;
        }
        let gone = sqlx::query("DELETE FROM switchboard_callers WHERE id = $1").bind(caller).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(gone.rows_affected() > 0)
    }

    /// Deletes the callers last seen before `before` (unix ms); returns how many.
    pub async fn expire_callers(&self, before: i64) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        for statement in [
            "DELETE FROM switchboard_caller_memory
             WHERE caller_id IN (SELECT id FROM switchboard_callers WHERE last_seen < $1)",
            "DELETE FROM switchboard_caller_sessions
             WHERE caller_id IN (SELECT id FROM switchboard_callers WHERE last_seen < $1)",
        ] {
            sqlx::query(statement).bind(before).execute(&mut *tx).await?;
        }
        let gone =
            sqlx::query("DELETE FROM switchboard_callers WHERE last_seen < $1").bind(before).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(gone.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn caller_keys_are_the_caller_prefixed_ones_but_the_history() {
        for key in ["callerPreferences", "callerOpenTasks", "callerX"] {
            assert!(is_caller_key(key), "{key}");
        }
        for key in ["caller", "callers", "callerHistory", "verifiedUser", "Caller", "caller_prefs"] {
            assert!(!is_caller_key(key), "{key}");
        }
    }

    #[test]
    fn a_caller_is_keyed_by_namespace_and_stable_id_never_in_the_clear() {
        let ada = json!({ "name": "Ada", "accountNumber": "12345678" });
        let id = caller_id("bank", &ada);
        assert_eq!(id, caller_id_of("bank", "12345678"));
        assert_eq!(id.len(), 64);
        assert!(!id.contains("12345678"));
        assert_ne!(id, caller_id_of("shop", "12345678"), "another namespace is another caller");
        assert_ne!(id, caller_id_of("bank", "87654321"));
        assert_ne!(caller_id_of("ban", "k12345678"), caller_id_of("bank", "12345678"), "parts are separated");
    }
}
