//! Writing entries: one transaction per batch, each entry's change to its session's row
//! ([`Update`]) and its event; and marking sessions whose client never came back.

use super::{Store, StoreError};
use crate::{Entry, Update};

impl Store {
    /// Writes `batch` in one transaction: all of it or none.
    pub async fn write(&self, batch: &[Entry]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for entry in batch {
            if let Some(update) = &entry.update {
                update_session(&mut tx, self, entry, update).await?;
                if matches!(update, Update::State { .. } | Update::CallerSeen { .. } | Update::CallerMemory { .. }) {
                    // Not an event of the conversation.
                    continue;
                }
            }
            sqlx::query(
                "INSERT INTO switchboard_session_events (session_id, at_us, ord, agent, kind, data)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            )
            .bind(entry.session.as_ref())
            .bind(entry.at_us)
            .bind(entry.ord)
            .bind(entry.agent.as_str())
            .bind(entry.kind)
            .bind(entry.data.to_string())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Keeps `summary` as session `id`'s summary.
    pub async fn set_summary(&self, id: &str, summary: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE switchboard_sessions SET summary = $2 WHERE id = $1")
            .bind(id)
            .bind(summary)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Keeps session `id`'s analysis (`analysis`: JSON, the fields or the error), its event
    /// (at `agent`, the Agent whose analysis it is) and what the analysis cost, added to the
    /// session's tokens and cost, in one transaction.
    pub async fn set_analysis(
        &self,
        id: &str,
        agent: &str,
        analysis: &serde_json::Value,
        (input, output, cost): (i64, i64, f64),
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE switchboard_sessions SET analysis = $2, input_tokens = input_tokens + $3,
             output_tokens = output_tokens + $4, cost_usd = cost_usd + $5 WHERE id = $1",
        )
        .bind(id)
        .bind(analysis.to_string())
        .bind(input)
        .bind(output)
        .bind(cost)
        .execute(&mut *tx)
        .await?;
        // After every event of the session (it ended): its own time, its own order.
        sqlx::query(
            "INSERT INTO switchboard_session_events (session_id, at_us, ord, agent, kind, data)
             VALUES ($1, $2, 0, $3, 'analysis', $4) ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(crate::now_us())
        .bind(agent)
        .bind(analysis.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Sessions parked (their client went) before `before` (unix ms) and never resumed:
    /// marked `abandoned` (their reports due at once, when reports are sent), and their ids
    /// returned — to one caller only, when several
    /// gateways sweep the same database at once.
    pub async fn abandon(&self, before: i64) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "UPDATE switchboard_sessions SET outcome = 'abandoned', report_due = $2
             WHERE outcome = 'parked' AND ended_at < $1 RETURNING id",
        )
        .bind(before)
        .bind(self.report_grace_ms.map(|_| crate::now_us() / 1000))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|row| sqlx::Row::try_get::<String, _>(row, "id")).collect::<Result<_, _>>()?)
    }
}

async fn update_session(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    store: &Store,
    entry: &Entry,
    update: &Update,
) -> Result<(), sqlx::Error> {
    let id = entry.session.as_ref();
    match update {
        Update::Start { credential } => {
            sqlx::query(
                "INSERT INTO switchboard_sessions (id, started_at, credential, first_agent, last_agent, outcome, replica)
                 VALUES ($1, $2, $3, $4, $4, 'live', $5)
                 ON CONFLICT (id) DO UPDATE SET outcome = 'live', ended_at = NULL, replica = excluded.replica",
            )
            .bind(id)
            .bind(entry.at_us / 1000)
            .bind(credential.as_str())
            .bind(entry.agent.as_str())
            .bind(store.replica())
            .execute(&mut **tx)
            .await?;
        }
        Update::Agent => {
            sqlx::query("UPDATE switchboard_sessions SET last_agent = $2 WHERE id = $1")
                .bind(id)
                .bind(entry.agent.as_str())
                .execute(&mut **tx)
                .await?;
        }
        Update::Caller(caller) => {
            sqlx::query("UPDATE switchboard_sessions SET caller = $2 WHERE id = $1")
                .bind(id)
                .bind(caller.as_str())
                .execute(&mut **tx)
                .await?;
        }
        Update::Usage { input, output, cost } => {
            sqlx::query(
                "UPDATE switchboard_sessions SET input_tokens = input_tokens + $2, output_tokens = output_tokens + $3,
                 cost_usd = cost_usd + $4 WHERE id = $1",
            )
            .bind(id)
            .bind(*input)
            .bind(*output)
            .bind(*cost)
            .execute(&mut **tx)
            .await?;
        }
        Update::Variant(variant) => {
            // The variant of the Agent the session started at, on its row (the end-of-call
            // report's); and every Agent's on its line of the session's Agents (the first
            // kept: a session keeps its variant), which the comparison reads. The line may
            // come before the handoff's `Agent` update: either writes it first.
            sqlx::query(
                "UPDATE switchboard_sessions SET variant = $2 WHERE id = $1 AND first_agent = $3 AND variant IS NULL",
            )
            .bind(id)
            .bind(variant.as_str())
            .bind(entry.agent.as_str())
            .execute(&mut **tx)
            .await?;
            sqlx::query(
                "INSERT INTO switchboard_session_agents (session_id, agent, variant) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, agent)
                 DO UPDATE SET variant = COALESCE(switchboard_session_agents.variant, excluded.variant)",
            )
            .bind(id)
            .bind(entry.agent.as_str())
            .bind(variant.as_str())
            .execute(&mut **tx)
            .await?;
        }
        Update::Transferred => {
            sqlx::query("UPDATE switchboard_sessions SET transferred = 1 WHERE id = $1")
                .bind(id)
                .execute(&mut **tx)
                .await?;
        }
        Update::Turn => {
            sqlx::query("UPDATE switchboard_sessions SET turns = turns + 1 WHERE id = $1")
                .bind(id)
                .execute(&mut **tx)
                .await?;
        }
        Update::State { credential, token, sealed } => {
            sqlx::query(
                "INSERT INTO switchboard_session_continuation (session_id, credential, token, saved_at, state)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (session_id) DO UPDATE SET credential = excluded.credential,
                 token = excluded.token, saved_at = excluded.saved_at, state = excluded.state",
            )
            .bind(id)
            .bind(credential.as_str())
            .bind(token.as_str())
            .bind(entry.at_us / 1000)
            .bind(sealed.as_str())
            .execute(&mut **tx)
            .await?;
        }
        Update::CallerSeen { caller, namespace } => {
            Store::caller_seen(tx, caller, namespace, id, entry.at_us / 1000).await?;
        }
        Update::CallerMemory { caller, key, value } => {
            if let Err(why) = Store::caller_memory(tx, caller, key, value, entry.at_us / 1000).await? {
                tracing::warn!(session_id = %id, %key, "a caller memory key is not kept: {why:?}");
            }
        }
        Update::End { outcome, close_code, hung_up_by } => {
            // An ended session's report is due (a parked one's only once it is abandoned).
            let due = if *outcome == "ended" { store.report_due_after(entry.at_us / 1000) } else { None };
            sqlx::query(
                "UPDATE switchboard_sessions SET ended_at = $2, outcome = $3, close_code = $4, report_due = $5,
                 hung_up_by = $6 WHERE id = $1",
            )
            .bind(id)
            .bind(entry.at_us / 1000)
            .bind(*outcome)
            .bind(close_code.map(i64::from))
            .bind(due)
            .bind(*hung_up_by)
            .execute(&mut **tx)
            .await?;
        }
    }
    if matches!(update, Update::Start { .. } | Update::Agent) {
        sqlx::query(
            "INSERT INTO switchboard_session_agents (session_id, agent) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(entry.agent.as_str())
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}
