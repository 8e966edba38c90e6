//! Reading the record: a list of sessions (narrowed, newest first, each with the Agents it
//! reached, in two queries whatever the number of rows) and one session with its events.

use std::collections::{BTreeMap, HashMap};

use sqlx::Row;
use sqlx::any::AnyRow;

use super::{EventRow, Filter, SessionRecord, Store, StoreError, Summary};

/// The columns of a session's row, as [`summary`] reads them.
const COLUMNS: &str = "id, started_at, ended_at, credential, caller, first_agent, last_agent, outcome, close_code,
                    hung_up_by, turns, input_tokens, output_tokens, cost_usd, summary, variant, transferred, analysis";

impl Store {
    /// Sessions matching `filter`, newest first.
    pub async fn list(&self, filter: &Filter) -> Result<Vec<Summary>, StoreError> {
        // The namespaces' condition is built here from placeholders only; the namespaces are
        // bound, as every other value.
        let namespaces = filter.namespaces.as_deref();
        if namespaces.is_some_and(<[String]>::is_empty) {
            return Ok(Vec::new());
        }
        let in_namespaces = namespaces.map_or(String::new(), |namespaces| {
            let each: Vec<String> = (0..namespaces.len()).map(|i| format!("first_agent LIKE ${}", 7 + i)).collect();
            format!("AND ({})", each.join(" OR "))
        });
        let sql = format!(
            "SELECT {COLUMNS} FROM switchboard_sessions
             WHERE started_at >= $1 AND started_at < $2
               AND ($3 = '' OR id IN (SELECT session_id FROM switchboard_session_agents WHERE agent = $3))
               AND ($4 = '' OR caller = $4 OR credential = $4)
               AND ($5 = '' OR outcome = $5)
               {in_namespaces}
             ORDER BY started_at DESC, id
             LIMIT $6"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(filter.since.unwrap_or(0))
            .bind(filter.until.unwrap_or(i64::MAX))
            .bind(filter.agent.clone().unwrap_or_default())
            .bind(filter.caller.clone().unwrap_or_default())
            .bind(filter.outcome.clone().unwrap_or_default())
            .bind(filter.limit.unwrap_or(50).clamp(1, 1000));
        for namespace in namespaces.unwrap_or_default() {
            // Namespaces are DNS labels (a scope's patterns are checked): no LIKE wildcards.
            query = query.bind(format!("{namespace}/%"));
        }
        let rows = query.fetch_all(&self.pool).await?;
        let mut sessions: Vec<Summary> = rows.iter().map(summary).collect::<Result<_, _>>()?;
        let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        let mut agents = self.agents_of(ids.iter().copied()).await?;
        let mut variants = self.variants_of(&ids).await?;
        for session in &mut sessions {
            session.agents = agents.remove(&session.id).unwrap_or_default();
            session.variants = variants.remove(&session.id).unwrap_or_default();
        }
        Ok(sessions)
    }

    /// One session and its events, if recorded.
    pub async fn show(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM switchboard_sessions WHERE id = $1")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let mut summary = summary(&row)?;
        summary.agents = self.agents_of([id]).await?.remove(id).unwrap_or_default();
        summary.variants = self.variants_of(&[id]).await?.remove(id).unwrap_or_default();
        let rows = sqlx::query(
            "SELECT at_us, agent, kind, data FROM switchboard_session_events WHERE session_id = $1 ORDER BY at_us, ord",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        let events = rows
            .iter()
            .map(|row| {
                let data: String = row.try_get("data")?;
                Ok(EventRow {
                    at_us: row.try_get("at_us")?,
                    agent: row.try_get("agent")?,
                    kind: row.try_get("kind")?,
                    data: serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data)),
                })
            })
            .collect::<Result<_, sqlx::Error>>()?;
        Ok(Some(SessionRecord { summary, events }))
    }

    /// The Agents each of `ids` reached, first reached first (the first event at each), in
    /// one query.
    async fn agents_of<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<HashMap<String, Vec<String>>, StoreError> {
        let ids: Vec<&str> = ids.into_iter().collect();
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT session_id, agent, MIN(at_us) AS first FROM switchboard_session_events
             WHERE session_id IN ({}) GROUP BY session_id, agent ORDER BY session_id, first",
            placeholders.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in &ids {
            query = query.bind(*id);
        }
        let mut agents: HashMap<String, Vec<String>> = HashMap::new();
        for row in query.fetch_all(&self.pool).await? {
            agents.entry(row.try_get("session_id")?).or_default().push(row.try_get("agent")?);
        }
        Ok(agents)
    }

    /// The variant each Agent ran in each of `ids`, by session and Agent, in one query
    /// (rows written before Agents' variants were kept apart: the first Agent's, from the
    /// session's row).
    async fn variants_of(&self, ids: &[&str]) -> Result<HashMap<String, BTreeMap<String, String>>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT a.session_id, a.agent, a.variant FROM switchboard_session_agents a
             WHERE a.session_id IN ({0}) AND a.variant IS NOT NULL
             UNION
             SELECT s.id AS session_id, s.first_agent AS agent, s.variant FROM switchboard_sessions s
             WHERE s.id IN ({0}) AND s.variant IS NOT NULL",
            placeholders.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in ids {
            query = query.bind(*id);
        }
        let mut variants: HashMap<String, BTreeMap<String, String>> = HashMap::new();
        for row in query.fetch_all(&self.pool).await? {
            let agents = variants.entry(row.try_get("session_id")?).or_default();
            // Both lines name the first Agent's once it is kept apart: the same variant.
            agents.entry(row.try_get("agent")?).or_insert(row.try_get("variant")?);
        }
        Ok(variants)
    }
}

fn summary(row: &AnyRow) -> Result<Summary, sqlx::Error> {
    Ok(Summary {
        id: row.try_get("id")?,
        started_at: row.try_get("started_at")?,
        ended_at: row.try_get("ended_at")?,
        credential: row.try_get("credential")?,
        caller: row.try_get("caller")?,
        first_agent: row.try_get("first_agent")?,
        last_agent: row.try_get("last_agent")?,
        agents: Vec::new(),
        outcome: row.try_get("outcome")?,
        close_code: row.try_get("close_code")?,
        hung_up_by: row.try_get("hung_up_by")?,
        turns: row.try_get("turns")?,
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        cost_usd: row.try_get("cost_usd")?,
        summary: row.try_get("summary")?,
        variant: row.try_get("variant")?,
        variants: BTreeMap::new(),
        transferred: row.try_get::<i64, _>("transferred")? != 0,
        analysis: row
            .try_get::<Option<String>, _>("analysis")?
            .map(|text| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Entry, Update};

    fn start(id: &str, agent: &str, at_ms: i64) -> Entry {
        Entry {
            session: id.into(),
            at_us: at_ms * 1000,
            ord: 0,
            agent: agent.into(),
            kind: "session_start",
            data: serde_json::Value::Null,
            update: Some(Update::Start { credential: "web".into() }),
        }
    }

    fn moved(id: &str, agent: &str, at_ms: i64) -> Entry {
        Entry { kind: "agent_joined", update: Some(Update::Agent), ..start(id, agent, at_ms) }
    }

    #[tokio::test]
    async fn a_readers_namespaces_are_left_out_before_the_limit_and_agents_come_in_one_query() {
        let dir = std::env::temp_dir().join(format!("switchboard-read-{}", uuid::Uuid::new_v4()));
        let store = Store::file(&dir.join("record.db")).expect("store");
        store.migrate().await.expect("migrates");
        // The bank's one session is older than another tenant's twenty.
        let mut batch = vec![start("bank-1", "bank/triage", 1_000), moved("bank-1", "bank/idv", 1_001)];
        batch.extend((0..20).map(|n| start(&format!("shop-{n}"), "shop/sales", 2_000 + n)));
        store.write(&batch).await.expect("writes");

        let limited = |namespaces: Option<Vec<String>>| Filter { limit: Some(5), namespaces, ..Filter::default() };
        let bank = store.list(&limited(Some(vec!["bank".into()]))).await.expect("lists");
        assert_eq!(bank.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["bank-1"]);
        assert_eq!(bank[0].agents, ["bank/triage", "bank/idv"]);
        let any = store.list(&limited(None)).await.expect("lists");
        assert_eq!(any.len(), 5);
        assert!(any.iter().all(|s| s.id.starts_with("shop-") && s.agents == ["shop/sales"]), "{any:?}");
        let both = store.list(&limited(Some(vec!["bank".into(), "shop".into()]))).await.expect("lists");
        assert_eq!(both.len(), 5);
        assert!(store.list(&limited(Some(Vec::new()))).await.expect("lists").is_empty(), "a scope of nothing");
        // A namespace is a prefix up to its slash only.
        assert!(store.list(&limited(Some(vec!["ban".into()]))).await.expect("lists").is_empty());
        let shown = store.show("bank-1").await.expect("shows").expect("recorded");
        assert_eq!(shown.summary.agents, ["bank/triage", "bank/idv"]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn who_hung_up_a_phone_call_is_on_its_row_and_in_its_end() {
        let dir = std::env::temp_dir().join(format!("switchboard-read-{}", uuid::Uuid::new_v4()));
        let store = Store::file(&dir.join("record.db")).expect("store");
        store.migrate().await.expect("migrates");
        let end = |id: &str, hung_up_by: Option<&'static str>| Entry {
            kind: "session_end",
            data: serde_json::json!({ "close_code": 1000, "hung_up_by": hung_up_by }),
            update: Some(Update::End { outcome: "ended", close_code: Some(1000), hung_up_by }),
            ..start(id, "bank/triage", 2_000)
        };
        let batch = [start("call", "bank/triage", 1_000), end("call", Some("media_timeout"))];
        store.write(&batch).await.expect("writes");
        store.write(&[start("web", "bank/triage", 1_000), end("web", None)]).await.expect("writes");
        let call = store.show("call").await.expect("shows").expect("recorded");
        assert_eq!(call.summary.hung_up_by.as_deref(), Some("media_timeout"));
        assert_eq!(call.events.last().map(|e| e.data["hung_up_by"].clone()), Some(serde_json::json!("media_timeout")));
        let web = store.show("web").await.expect("shows").expect("recorded");
        assert_eq!(web.summary.hung_up_by, None);
        let listed = serde_json::to_value(&web.summary).expect("JSON");
        assert!(listed.get("hung_up_by").is_none(), "absent for a session that is no phone call: {listed}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
