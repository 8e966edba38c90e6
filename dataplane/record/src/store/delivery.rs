//! What happens after a session, kept in the store so that no gateway's end loses it:
//!
//! - **Replicas' heartbeats.** Each gateway's writer says, every sweep, that its replica
//!   lives (`switchboard_gateway_replicas`); each session's row names the replica that last
//!   started or resumed it. A `live` session whose replica has not been heard of for a
//!   while — the gateway was killed, its node lost — is marked `lost` by whichever replica
//!   sweeps next, ended at the last thing recorded of it, and reported like an ended one.
//! - **Reports due.** A session's end (or its abandonment, or its loss) makes its
//!   end-of-call report due (`report_due`, unix ms). The gateway that ended it delivers it at
//!   once; a report still due after that — the receiver was down, the gateway died — is
//!   claimed from the store by any replica and tried again with backoff for as long as the
//!   session is kept (its retention). A claim moves `report_due` past the delivery's time
//!   limit (a lease: should the claimant die, the report is due again then), so replicas
//!   polling together rarely send one twice; a receiver drops repeats by
//!   `X-Switchboard-Delivery`. Delivery is at least once.

use super::{Store, StoreError};

/// Tables and indexes (after the sessions table has its added columns).
pub(super) const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS switchboard_gateway_replicas (
        id TEXT PRIMARY KEY,
        seen_at BIGINT NOT NULL
    )",
    "CREATE INDEX IF NOT EXISTS switchboard_sessions_report_due ON switchboard_sessions (report_due)",
    "CREATE INDEX IF NOT EXISTS switchboard_sessions_outcome ON switchboard_sessions (outcome)",
];

/// Replicas not heard of for this long are forgotten (their sessions were swept long before).
const FORGET_REPLICAS_MS: i64 = 86_400_000;

impl Store {
    /// Says that this handle's replica lives, at `now` (unix ms).
    pub async fn heartbeat(&self, now: i64) -> Result<(), StoreError> {
        let Some(replica) = self.replica() else { return Ok(()) };
        sqlx::query(
            "INSERT INTO switchboard_gateway_replicas (id, seen_at) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
        )
        .bind(replica)
        .bind(now)
        .execute(&self.pool)
        .await?;
        sqlx::query("DELETE FROM switchboard_gateway_replicas WHERE seen_at < $1")
            .bind(now - FORGET_REPLICAS_MS)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Live sessions that started before `before` (unix ms) whose replica has not been heard
    /// of since then: marked `lost`, ended at the last thing recorded of them,
    /// their reports due at once when reports are sent; their ids, to one caller only.
    pub async fn lose(&self, before: i64, now: i64) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "UPDATE switchboard_sessions SET outcome = 'lost',
                 ended_at = COALESCE(
                     (SELECT MAX(e.at_us) / 1000 FROM switchboard_session_events e
                      WHERE e.session_id = switchboard_sessions.id),
                     started_at),
                 report_due = $2
             WHERE outcome = 'live' AND replica IS NOT NULL AND started_at < $1
               AND NOT EXISTS (SELECT 1 FROM switchboard_gateway_replicas r
                               WHERE r.id = switchboard_sessions.replica AND r.seen_at >= $1)
             RETURNING id",
        )
        .bind(before)
        .bind(self.report_grace_ms.map(|_| now))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|row| sqlx::Row::try_get::<String, _>(row, "id")).collect::<Result<_, _>>()?)
    }

    /// Takes session `id`'s report for delivery if it is due at all (whenever): moves its due
    /// time to `lease_until` and counts the attempt. Returns the attempt's number, or none
    /// when nothing is due (delivered, or claimed by another).
    pub async fn claim_report(&self, id: &str, lease_until: i64) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query(
            "UPDATE switchboard_sessions SET report_due = $2, report_attempts = report_attempts + 1
             WHERE id = $1 AND report_due IS NOT NULL
             RETURNING report_attempts",
        )
        .bind(id)
        .bind(lease_until)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| sqlx::Row::try_get::<i64, _>(&row, "report_attempts")).transpose()?)
    }

    /// Takes up to `limit` reports due by `now` (oldest first) for delivery, as
    /// [`Store::claim_report`] does: their session ids and attempt numbers.
    pub async fn claim_due_reports(
        &self,
        now: i64,
        lease_until: i64,
        limit: i64,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        // The outer `report_due <= $1` is checked again on the row a concurrent claimant
        // updated first (PostgreSQL's read-committed re-check), so only one takes it.
        let rows = sqlx::query(
            "UPDATE switchboard_sessions SET report_due = $2, report_attempts = report_attempts + 1
             WHERE id IN (SELECT id FROM switchboard_sessions WHERE report_due <= $1 ORDER BY report_due LIMIT $3)
               AND report_due <= $1
             RETURNING id, report_attempts",
        )
        .bind(now)
        .bind(lease_until)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((sqlx::Row::try_get(row, "id")?, sqlx::Row::try_get(row, "report_attempts")?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Session `id`'s report is done with (delivered, or refused for good): no longer due.
    pub async fn report_done(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE switchboard_sessions SET report_due = NULL WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Session `id`'s report failed: due again at `at` (unix ms).
    pub async fn report_again(&self, id: &str, at: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE switchboard_sessions SET report_due = $2 WHERE id = $1 AND report_due IS NOT NULL")
            .bind(id)
            .bind(at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
