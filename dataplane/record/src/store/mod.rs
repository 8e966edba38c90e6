//! Where records go: one code path over SQLite (an embedded file: local mode, a single
//! gateway) and PostgreSQL (a cluster's replicas share it), through sqlx's `Any` driver.
//! Queries use `$n` placeholders, which both read. The schema is created at first use
//! (under an advisory lock on PostgreSQL, so replicas starting together do not race).
//!
//! Three tables: `switchboard_sessions` (one row per session: who, where, outcome, tokens,
//! cost), `switchboard_session_agents` (every Agent a session reached, for search) and
//! `switchboard_session_events` (everything that happened, in order: `at_us` from the
//! gateway's clock, then `ord`). Writes are idempotent per event, so a batch retried
//! after an outage does not duplicate what a commit already kept.

use std::time::Duration;

use serde::Serialize;
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Row};

pub mod callers;
mod delivery;
mod read;
mod write;

/// The schema, in order; each statement is idempotent.
const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS switchboard_sessions (
        id TEXT PRIMARY KEY,
        started_at BIGINT NOT NULL,
        ended_at BIGINT,
        credential TEXT NOT NULL,
        caller TEXT,
        first_agent TEXT NOT NULL,
        last_agent TEXT NOT NULL,
        outcome TEXT NOT NULL,
        close_code BIGINT,
        turns BIGINT NOT NULL DEFAULT 0,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        summary TEXT
    )",
    "CREATE INDEX IF NOT EXISTS switchboard_sessions_started ON switchboard_sessions (started_at)",
    "CREATE TABLE IF NOT EXISTS switchboard_session_agents (
        session_id TEXT NOT NULL,
        agent TEXT NOT NULL,
        PRIMARY KEY (session_id, agent)
    )",
    "CREATE INDEX IF NOT EXISTS switchboard_session_agents_agent ON switchboard_session_agents (agent)",
    "CREATE TABLE IF NOT EXISTS switchboard_session_events (
        session_id TEXT NOT NULL,
        at_us BIGINT NOT NULL,
        ord BIGINT NOT NULL,
        agent TEXT NOT NULL,
        kind TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, at_us, ord)
    )",
    // What a session needs to be continued later (`session_start.continue_from`): its
    // memory and last turns, unredacted and sealed with the gateway's key, for the
    // credential that held it and the holder of its newest resume token (`token`: the
    // SHA-256 of credential and token, as the resume store keys it; empty once used);
    // kept for a day, not for the record's retention. It replaces the table of state
    // saved without a token, which anyone who knew a session id could continue.
    "DROP TABLE IF EXISTS switchboard_session_state",
    "CREATE TABLE IF NOT EXISTS switchboard_session_continuation (
        session_id TEXT PRIMARY KEY,
        credential TEXT NOT NULL,
        token TEXT NOT NULL,
        saved_at BIGINT NOT NULL,
        state TEXT NOT NULL
    )",
];

/// Columns added to the tables after they were first made (table, column, type): the
/// summary; the replica that holds a live session, when its report is due (unix ms; none:
/// delivered, or nothing to deliver) and how many deliveries were tried ([`delivery`]).
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("switchboard_sessions", "summary", "TEXT"),
    ("switchboard_sessions", "replica", "TEXT"),
    ("switchboard_sessions", "report_due", "BIGINT"),
    ("switchboard_sessions", "report_attempts", "BIGINT NOT NULL DEFAULT 0"),
    // The variant of the Agent the session started at; whether the caller was put through
    // to a person; the analysis of the session (JSON: `analysis`).
    ("switchboard_sessions", "variant", "TEXT"),
    ("switchboard_sessions", "transferred", "BIGINT NOT NULL DEFAULT 0"),
    ("switchboard_sessions", "analysis", "TEXT"),
    // The variant each Agent the session reached ran (variants are compared per Agent).
    ("switchboard_session_agents", "variant", "TEXT"),
    // Who hung up a phone call (`caller`, `agent`, `media_timeout`, ...), as its SIP edge said.
    ("switchboard_sessions", "hung_up_by", "TEXT"),
];

/// A store that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL names no supported database.
    #[error(
        "the record database URL must start with postgres:// (or postgresql://) or sqlite: (a file: sqlite:///var/lib/switchboard/record.db); got {0:?}"
    )]
    Scheme(String),
    /// The database refused or failed.
    #[error("the record database failed: {0}")]
    Database(#[from] sqlx::Error),
}

/// The record's database.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) pool: AnyPool,
    postgres: bool,
    /// Where it is, without credentials (logs).
    pub display: String,
    /// The gateway replica whose writer writes through this handle
    /// ([`Store::writing_as`]): its sessions' rows name it, and its heartbeat says it lives.
    replica: Option<std::sync::Arc<str>>,
    /// When reports are sent ([`Store::reporting`]): how long after a session's end its
    /// report is due from the store, should the gateway that ended it not deliver it first.
    report_grace_ms: Option<i64>,
}

/// What a list of sessions is narrowed to.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct Filter {
    /// Started at or after (unix ms).
    pub since: Option<i64>,
    /// Started before (unix ms).
    pub until: Option<i64>,
    /// Reached this Agent (`namespace/name`).
    pub agent: Option<String>,
    /// The verified caller or the credential.
    pub caller: Option<String>,
    /// `ended`, `live`, `parked`, `abandoned`, `lost`.
    pub outcome: Option<String>,
    /// Most rows (default 50, at most 1000).
    pub limit: Option<i64>,
    /// Only sessions that started in these namespaces (none: any). Set from the reader's
    /// scope, never from a query string: the rows of other namespaces are left out by the
    /// query itself, before its limit.
    #[serde(skip)]
    pub namespaces: Option<Vec<String>>,
}

/// One session's row.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Summary {
    /// The session id.
    pub id: String,
    /// Unix ms.
    pub started_at: i64,
    /// Unix ms, once it ended.
    pub ended_at: Option<i64>,
    /// The API key's name or the JWT subject that opened it (empty without checks).
    pub credential: String,
    /// The verified caller (`verifiedUser`), redacted as the record is.
    pub caller: Option<String>,
    /// The Agent it started at.
    pub first_agent: String,
    /// The Agent it was last with.
    pub last_agent: String,
    /// Every Agent it reached, in the order first reached.
    #[serde(default)]
    pub agents: Vec<String>,
    /// `live`, `ended`, `parked` (the client went; it may still resume), `abandoned` (parked
    /// past the resume window: it never came back), `lost` (its gateway replica died while
    /// it was live).
    pub outcome: String,
    /// The close code it ended with.
    pub close_code: Option<i64>,
    /// Who hung up, for a phone call's session: `caller` (the phone's BYE), `agent` (the
    /// agent ended the conversation), `transfer` (the caller was put through to a person),
    /// `media_timeout` (no RTP from the phone for the edge's media timeout), `edge` (the
    /// edge shutting down, a failure); an outbound call's `callee`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hung_up_by: Option<String>,
    /// User turns.
    pub turns: i64,
    /// Tokens read.
    pub input_tokens: i64,
    /// Tokens generated.
    pub output_tokens: i64,
    /// What it cost, USD ([`super::price`]).
    pub cost_usd: f64,
    /// What happened, in a few sentences by a model ([`super::summary`]), once written.
    #[serde(default)]
    pub summary: Option<String>,
    /// The variant of the Agent it started at, when that Agent runs variants.
    #[serde(default)]
    pub variant: Option<String>,
    /// The variant each Agent it reached ran, by Agent (`namespace/name`), for those that
    /// run variants: a session handed from one Agent to another carries both.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub variants: std::collections::BTreeMap<String, String>,
    /// Whether the caller was put through to a person.
    #[serde(default)]
    pub transferred: bool,
    /// The analysis of the session ([`super::analysis`]), once made: `{"model", "fields"}`,
    /// or `{"model", "error"}` when it failed.
    #[serde(default)]
    pub analysis: Option<serde_json::Value>,
}

/// One thing that happened.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct EventRow {
    /// Unix µs.
    pub at_us: i64,
    /// The Agent serving the session then.
    pub agent: String,
    /// What happened (`user`, `assistant`, `tool_start`, ...).
    pub kind: String,
    /// Its details (redacted).
    pub data: serde_json::Value,
}

/// A session with everything that happened in it.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SessionRecord {
    /// The row.
    #[serde(flatten)]
    pub summary: Summary,
    /// The events, in order.
    pub events: Vec<EventRow>,
}

impl Store {
    /// A store at `url` (`postgres://…`, `sqlite:<file>`, `sqlite:///<absolute file>`);
    /// nothing is contacted until first use. A SQLite file and its folder are created when
    /// missing.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let postgres = url.starts_with("postgres://") || url.starts_with("postgresql://");
        let url = if postgres {
            url.to_owned()
        } else if let Some(file) = sqlite_file(url) {
            if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
            }
            let path = url.trim_start_matches("sqlite:").trim_start_matches("//");
            format!("sqlite://{path}{}", if path.contains('?') { "" } else { "?mode=rwc" })
        } else {
            return Err(StoreError::Scheme(url.to_owned()));
        };
        let display = redact_password(&url);
        let pool = AnyPoolOptions::new()
            .max_connections(if postgres { 4 } else { 1 })
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy(&url)?;
        Ok(Self { pool, postgres, display, replica: None, report_grace_ms: None })
    }

    /// This handle writes for gateway replica `replica` (a fresh id per process): every
    /// session it starts or resumes names it, so that another replica can tell, once the
    /// replica's heartbeat stops ([`Store::heartbeat`]), that its live sessions were lost.
    pub fn writing_as(mut self, replica: &str) -> Self {
        self.replica = Some(replica.into());
        self
    }

    /// Sessions ended or abandoned through this handle are due for their end-of-call report
    /// (`report_due`) `grace` after their end: the store is the reports' queue, so a report
    /// not delivered by then — its gateway died, the receiver was down — is sent from it,
    /// by any replica ([`Store::claim_due_reports`]).
    pub fn reporting(mut self, grace: Duration) -> Self {
        self.report_grace_ms = Some(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX));
        self
    }

    /// The replica this handle writes for, if any ([`Store::writing_as`]).
    fn replica(&self) -> Option<&str> {
        self.replica.as_deref()
    }

    /// When the report of a session that ended at `ended_at` (unix ms) is due, if reports
    /// are sent ([`Store::reporting`]).
    fn report_due_after(&self, ended_at: i64) -> Option<i64> {
        self.report_grace_ms.map(|grace| ended_at.saturating_add(grace))
    }

    /// A SQLite file at `path`.
    pub fn file(path: &std::path::Path) -> Result<Self, StoreError> {
        Self::open(&format!("sqlite:{}", path.display()))
    }

    /// Creates the tables when missing.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        if self.postgres {
            // Replicas starting at once: one creates, the others wait and find it done.
            sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock(7142317)) AS locked").execute(&mut *tx).await?;
        } else {
            // Readers (`switchboard sessions`) go on while the gateway writes.
            sqlx::query("PRAGMA journal_mode=WAL").execute(&mut *tx).await.ok();
        }
        for statement in SCHEMA.iter().chain(callers::SCHEMA) {
            sqlx::query(*statement).execute(&mut *tx).await?;
        }
        // Columns added since the table was first made (names and types: this file's
        // constants, so the statements built from them are safe).
        for (table, column, kind) in ADDED_COLUMNS {
            if self.postgres {
                let add = format!("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {kind}");
                sqlx::query(sqlx::AssertSqlSafe(add)).execute(&mut *tx).await?;
            } else {
                let found: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pragma_table_info($1) WHERE name = $2")
                    .bind(*table)
                    .bind(*column)
                    .fetch_one(&mut *tx)
                    .await?;
                if found == 0 {
                    let add = format!("ALTER TABLE {table} ADD COLUMN {column} {kind}");
                    sqlx::query(sqlx::AssertSqlSafe(add)).execute(&mut *tx).await?;
                }
            }
        }
        for statement in delivery::SCHEMA {
            sqlx::query(*statement).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Deletes the sessions that started before `before` (unix ms); returns how many.
    pub async fn expire(&self, before: i64) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "DELETE FROM switchboard_session_events WHERE session_id IN
             (SELECT id FROM switchboard_sessions WHERE started_at < $1)",
        )
        .bind(before)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM switchboard_session_agents WHERE session_id IN
             (SELECT id FROM switchboard_sessions WHERE started_at < $1)",
        )
        .bind(before)
        .execute(&mut *tx)
        .await?;
        let gone = sqlx::query("DELETE FROM switchboard_sessions WHERE started_at < $1")
            .bind(before)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(gone.rows_affected())
    }

    /// Takes the state saved for continuing session `id`, if saved since `since` (unix
    /// ms) for the holder of the resume token whose store key is `token`
    /// (the gateway's `resume::store_key`): the token is used up in the same statement, so of
    /// two claims with one token exactly one gets the state.
    pub async fn claim_state(&self, id: &str, token: &str, since: i64) -> Result<Option<SavedState>, StoreError> {
        if token.is_empty() {
            return Ok(None);
        }
        let claimed = sqlx::query(
            "UPDATE switchboard_session_continuation SET token = ''
             WHERE session_id = $1 AND token = $2 AND saved_at >= $3
             RETURNING credential, state",
        )
        .bind(id)
        .bind(token)
        .bind(since)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = claimed else { return Ok(None) };
        let summary = sqlx::query("SELECT summary FROM switchboard_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .map(|row| row.try_get::<Option<String>, _>("summary"))
            .transpose()?
            .flatten();
        Ok(Some(SavedState { credential: row.try_get("credential")?, sealed: row.try_get("state")?, summary }))
    }

    /// Deletes continuation state saved before `before` (unix ms); returns how many.
    pub async fn expire_state(&self, before: i64) -> Result<u64, StoreError> {
        let gone = sqlx::query("DELETE FROM switchboard_session_continuation WHERE saved_at < $1")
            .bind(before)
            .execute(&self.pool)
            .await?;
        Ok(gone.rows_affected())
    }
}

/// What is saved for continuing a session ([`Store::claim_state`]).
#[derive(Clone, Debug)]
pub struct SavedState {
    /// The credential that held the session (only it may continue it).
    pub credential: String,
    /// The session's state, sealed with the gateway's key.
    pub sealed: String,
    /// The record's model-written summary of the session, once written.
    pub summary: Option<String>,
}

/// The file a `sqlite:` URL names (its options after `?` aside), if it is one.
pub fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let path = url.strip_prefix("sqlite:")?.trim_start_matches("//");
    let path = path.split('?').next().unwrap_or_default();
    (!path.is_empty()).then(|| std::path::PathBuf::from(path))
}

/// `url` without the password.
fn redact_password(url: &str) -> String {
    let url = match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    };
    // A password among the options (`?password=…`, libpq's and sqlx's form).
    let Some((base, options)) = url.split_once('?') else { return url };
    let options: Vec<String> = options
        .split('&')
        .map(|option| match option.split_once('=') {
            Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}=***"),
            _ => option.to_owned(),
        })
        .collect();
    format!("{base}?{}", options.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_their_file_and_passwords_stay_out_of_logs() {
        assert_eq!(sqlite_file("sqlite:rec/record.db"), Some("rec/record.db".into()));
        assert_eq!(sqlite_file("sqlite:///var/lib/r.db?mode=ro"), Some("/var/lib/r.db".into()));
        assert_eq!(sqlite_file("sqlite:"), None);
        assert_eq!(sqlite_file("postgres://db/r"), None);
        assert_eq!(redact_password("postgres://sb:secret@db:5432/r"), "postgres://sb:***@db:5432/r");
        assert_eq!(
            redact_password("postgres://db:5432/r?user=sb&password=secret&sslmode=require"),
            "postgres://db:5432/r?user=sb&password=***&sslmode=require"
        );
        assert_eq!(redact_password("postgres://sb:a@db/r?PASSWORD=b"), "postgres://sb:***@db/r?PASSWORD=***");
        assert!(matches!(Store::open("mysql://db/r"), Err(StoreError::Scheme(_))));
    }
}
