//! Variants compared: for one Agent running variants (`spec.variants`), the sessions that
//! reached it over a time window (started there, or handed to it), grouped by the variant
//! of that Agent they ran, side by side on what a
//! team decides a promotion on — how many were resolved (the analysis's `resolved` field),
//! how many were put through to a person, how long they lasted, what they cost — and the
//! rest of the analysis: each `boolean` or short text answer counted by value (an `enum`'s
//! values), each number's mean. `switchboard variants compare` and the gateway's
//! `GET /v1/variants/compare` both answer with it.
//!
//! Bounded: at most [`MAX_SESSIONS`] sessions are read (the newest of the window; the answer
//! says when the window held more), at most [`MAX_VALUES`] distinct answers of a field are
//! counted (the rest under `(other)`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::Row;
use switchboard_crds::agent::RESOLVED_FIELD;

use super::store::{Store, StoreError};

/// The most sessions one comparison reads.
pub const MAX_SESSIONS: i64 = 50_000;
/// The most distinct answers of one field counted (more go under `(other)`).
pub const MAX_VALUES: usize = 32;
/// The longest text answer counted as a value (longer text is free text: not compared).
const MAX_VALUE_LEN: usize = 63;

/// What to compare.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CompareQuery {
    /// The Agent (`namespace/name`): its sessions are those that reached it.
    pub agent: String,
    /// Started at or after (unix ms).
    pub since: Option<i64>,
    /// Started before (unix ms).
    pub until: Option<i64>,
}

/// The variants of one Agent side by side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The Agent.
    pub agent: String,
    /// The window (unix ms; `until` absent: up to now).
    pub since: i64,
    /// The window's end.
    pub until: Option<i64>,
    /// Sessions read.
    pub sessions: u64,
    /// The window held more than [`MAX_SESSIONS`]: the newest were read.
    pub truncated: bool,
    /// One entry per variant, by name; sessions that ran none (before the Agent had
    /// variants) under `variant: null`, last.
    pub variants: Vec<VariantFigures>,
}

/// One variant's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VariantFigures {
    /// The variant (none: sessions that ran none).
    pub variant: Option<String>,
    /// Sessions that started with it.
    pub sessions: u64,
    /// Of them, ended or abandoned (the figures below count these; live and parked ones
    /// are still going).
    pub finished: u64,
    /// Put through to a person.
    pub transferred: u64,
    /// `transferred` / `finished`.
    pub transfer_rate: Option<f64>,
    /// Analysed (their analysis answered the fields).
    pub analysed: u64,
    /// Whose analysis failed (a model error, an unreadable answer).
    pub analysis_errors: u64,
    /// Whose analysis answered `resolved: true`.
    pub resolved: u64,
    /// `resolved` / the sessions whose analysis answered `resolved` at all.
    pub resolution_rate: Option<f64>,
    /// Duration of the finished sessions, milliseconds: mean, median, 90th percentile.
    pub duration_ms: Option<Spread>,
    /// What the finished sessions cost (USD, with their analysis): in all, and the mean.
    pub cost_usd: f64,
    /// The mean cost of a finished session (USD).
    pub mean_cost_usd: Option<f64>,
    /// The analysis's other answers: per field, its counts by value (booleans and short
    /// text such as an enum's values) or, for numbers, their mean.
    pub fields: BTreeMap<String, FieldFigures>,
}

/// Mean and percentiles of a set of durations.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The mean.
    pub mean: f64,
    /// The median.
    pub p50: i64,
    /// The 90th percentile.
    pub p90: i64,
}

/// One analysis field's answers across a variant's sessions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldFigures {
    /// Sessions answered, by value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// The mean of a number field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// How many numbers the mean is of.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub numbers: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One session as the comparison reads it.
#[derive(Clone, Debug, Default)]
pub struct SessionFacts {
    /// The variant of the compared Agent it ran.
    pub variant: Option<String>,
    /// `ended`, `abandoned`, `live`, ...
    pub outcome: String,
    /// Unix ms.
    pub started_at: i64,
    /// Unix ms.
    pub ended_at: Option<i64>,
    /// USD.
    pub cost_usd: f64,
    /// Put through to a person.
    pub transferred: bool,
    /// Its analysis, as stored.
    pub analysis: Option<Value>,
}

impl Store {
    /// The variants of `query.agent` compared over the window.
    pub async fn compare_variants(&self, query: &CompareQuery) -> Result<Comparison, StoreError> {
        let since = query.since.unwrap_or(0);
        // Each session that reached the Agent, with the variant it ran there: kept on the
        // session's line for the Agent; for rows written before that was kept, the row's
        // own (the variant of the Agent it started at).
        let rows = sqlx::query(
            "SELECT COALESCE(a.variant, CASE WHEN s.first_agent = a.agent THEN s.variant END) AS variant,
                    s.outcome, s.started_at, s.ended_at, s.cost_usd, s.transferred, s.analysis
             FROM switchboard_session_agents a JOIN switchboard_sessions s ON s.id = a.session_id
             WHERE a.agent = $1 AND s.started_at >= $2 AND s.started_at < $3
             ORDER BY s.started_at DESC LIMIT $4",
        )
        .bind(query.agent.as_str())
        .bind(since)
        .bind(query.until.unwrap_or(i64::MAX))
        .bind(MAX_SESSIONS + 1)
        .fetch_all(&self.pool)
        .await?;
        let truncated = rows.len() as i64 > MAX_SESSIONS;
        let rows = rows
            .iter()
            .take(MAX_SESSIONS as usize)
            .map(|row| {
                Ok(SessionFacts {
                    variant: row.try_get("variant")?,
                    outcome: row.try_get("outcome")?,
                    started_at: row.try_get("started_at")?,
                    ended_at: row.try_get("ended_at")?,
                    cost_usd: row.try_get("cost_usd")?,
                    transferred: row.try_get::<i64, _>("transferred")? != 0,
                    analysis: row
                        .try_get::<Option<String>, _>("analysis")?
                        .and_then(|text: String| serde_json::from_str(&text).ok()),
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let mut comparison = compare(&query.agent, &rows);
        comparison.since = since;
        comparison.until = query.until;
        comparison.truncated = truncated;
        Ok(comparison)
    }
}

/// The comparison of `rows` (sessions of `agent`).
pub fn compare(agent: &str, rows: &[SessionFacts]) -> Comparison {
    let mut groups: BTreeMap<Option<&str>, Vec<&SessionFacts>> = BTreeMap::new();
    for row in rows {
        groups.entry(row.variant.as_deref()).or_default().push(row);
    }
    let mut variants: Vec<VariantFigures> = groups.into_iter().map(|(variant, rows)| figures(variant, &rows)).collect();
    // Named variants by name; sessions without one last.
    variants.sort_by(|a, b| (a.variant.is_none(), &a.variant).cmp(&(b.variant.is_none(), &b.variant)));
    Comparison {
        agent: agent.to_owned(),
        since: 0,
        until: None,
        sessions: rows.len() as u64,
        truncated: false,
        variants,
    }
}

fn figures(variant: Option<&str>, rows: &[&SessionFacts]) -> VariantFigures {
    let mut out =
        VariantFigures { variant: variant.map(str::to_owned), sessions: rows.len() as u64, ..Default::default() };
    let finished: Vec<&&SessionFacts> =
        rows.iter().filter(|r| matches!(r.outcome.as_str(), "ended" | "abandoned" | "lost")).collect();
    out.finished = finished.len() as u64;
    let (mut answered, mut durations, mut sums) = (0u64, Vec::new(), BTreeMap::<String, f64>::new());
    for row in &finished {
        out.transferred += u64::from(row.transferred);
        out.cost_usd += row.cost_usd;
        if let Some(end) = row.ended_at {
            durations.push((end - row.started_at).max(0));
        }
        let Some(analysis) = &row.analysis else { continue };
        if analysis.get("error").is_some() {
            out.analysis_errors += 1;
            continue;
        }
        let Some(fields) = analysis.get("fields").and_then(Value::as_object) else { continue };
        out.analysed += 1;
        if let Some(resolved) = fields.get(RESOLVED_FIELD).and_then(Value::as_bool) {
            answered += 1;
            out.resolved += u64::from(resolved);
        }
        for (name, value) in fields {
            let field = out.fields.entry(name.clone()).or_default();
            let key = match value {
                Value::Bool(b) => b.to_string(),
                Value::String(text) if text.chars().count() <= MAX_VALUE_LEN => text.clone(),
                Value::Number(n) => {
                    *sums.entry(name.clone()).or_default() += n.as_f64().unwrap_or(0.0);
                    field.numbers += 1;
                    continue;
                }
                _ => continue,
            };
            let key = if field.counts.len() >= MAX_VALUES && !field.counts.contains_key(&key) {
                "(other)".to_owned()
            } else {
                key
            };
            *field.counts.entry(key).or_default() += 1;
        }
    }
    for (name, sum) in sums {
        if let Some(field) = out.fields.get_mut(&name)
            && field.numbers > 0
        {
            field.mean = Some(sum / field.numbers as f64);
        }
    }
    out.fields.retain(|_, f| !f.counts.is_empty() || f.numbers > 0);
    let rate = |n: u64, of: u64| (of > 0).then(|| n as f64 / of as f64);
    out.transfer_rate = rate(out.transferred, out.finished);
    out.resolution_rate = rate(out.resolved, answered);
    out.mean_cost_usd = (out.finished > 0).then(|| out.cost_usd / out.finished as f64);
    out.duration_ms = spread(&mut durations);
    out
}

/// Mean, median and 90th percentile (nearest rank) of `values`.
fn spread(values: &mut [i64]) -> Option<Spread> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = |p: f64| values[((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
    Some(Spread { mean, p50: rank(0.5), p90: rank(0.9) })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(
        variant: Option<&str>,
        duration: i64,
        cost: f64,
        transferred: bool,
        analysis: Option<Value>,
    ) -> SessionFacts {
        SessionFacts {
            variant: variant.map(str::to_owned),
            outcome: "ended".into(),
            started_at: 1_000,
            ended_at: Some(1_000 + duration),
            cost_usd: cost,
            transferred,
            analysis,
        }
    }

    fn answered(resolved: bool, reason: &str, score: f64) -> Option<Value> {
        Some(
            json!({ "model": "m", "fields": { "resolved": resolved, "reason": reason, "score": score, "note": "x".repeat(80) } }),
        )
    }

    #[test]
    fn variants_are_compared_on_resolution_transfers_duration_cost_and_answers() {
        let rows = vec![
            row(Some("zoe"), 1_000, 0.01, false, answered(true, "balance", 4.0)),
            row(Some("zoe"), 3_000, 0.03, false, answered(true, "balance", 5.0)),
            row(Some("zoe"), 2_000, 0.02, true, answered(false, "fraud", 3.0)),
            row(Some("control"), 10_000, 0.10, true, answered(false, "other", 1.0)),
            row(Some("control"), 20_000, 0.20, false, Some(json!({ "model": "m", "error": "the model failed" }))),
            SessionFacts { outcome: "live".into(), ended_at: None, ..row(Some("control"), 0, 0.0, false, None) },
            row(None, 500, 0.0, false, None),
        ];
        let c = compare("bank/triage", &rows);
        assert_eq!(c.sessions, 7);
        let names: Vec<_> = c.variants.iter().map(|v| v.variant.clone()).collect();
        assert_eq!(names, [Some("control".to_owned()), Some("zoe".to_owned()), None]);
        let zoe = &c.variants[1];
        assert_eq!((zoe.sessions, zoe.finished, zoe.analysed, zoe.resolved, zoe.transferred), (3, 3, 3, 2, 1));
        assert_eq!(zoe.resolution_rate, Some(2.0 / 3.0));
        assert_eq!(zoe.transfer_rate, Some(1.0 / 3.0));
        assert_eq!(zoe.duration_ms, Some(Spread { mean: 2_000.0, p50: 2_000, p90: 3_000 }));
        assert!((zoe.cost_usd - 0.06).abs() < 1e-9 && (zoe.mean_cost_usd.expect("mean") - 0.02).abs() < 1e-9);
        assert_eq!(zoe.fields["reason"].counts, BTreeMap::from([("balance".into(), 2), ("fraud".into(), 1)]));
        assert_eq!(zoe.fields["resolved"].counts, BTreeMap::from([("false".into(), 1), ("true".into(), 2)]));
        assert_eq!((zoe.fields["score"].mean, zoe.fields["score"].numbers), (Some(4.0), 3));
        assert!(!zoe.fields.contains_key("note"), "free text is not compared");
        let control = &c.variants[0];
        assert_eq!((control.sessions, control.finished, control.analysed, control.analysis_errors), (3, 2, 1, 1));
        assert_eq!(control.resolution_rate, Some(0.0));
        assert_eq!(c.variants[2].resolution_rate, None, "nothing analysed: no rate");
    }

    #[test]
    fn a_fields_values_are_bounded() {
        let rows: Vec<SessionFacts> = (0..40)
            .map(|n| row(Some("a"), 1, 0.0, false, Some(json!({ "fields": { "reason": format!("r{n}") } }))))
            .collect();
        let counts = &compare("x/y", &rows).variants[0].fields["reason"].counts;
        assert_eq!(counts.len(), MAX_VALUES + 1);
        assert_eq!(counts["(other)"], 40 - MAX_VALUES as u64);
    }

    fn entry(id: &str, agent: &str, at_ms: i64, kind: &'static str, update: crate::Update) -> crate::Entry {
        crate::Entry {
            session: id.into(),
            at_us: at_ms * 1000,
            ord: 0,
            agent: agent.into(),
            kind,
            data: Value::Null,
            update: Some(update),
        }
    }

    fn variant(id: &str, agent: &str, at_ms: i64, name: &str) -> crate::Entry {
        entry(id, agent, at_ms, "variant", crate::Update::Variant(name.into()))
    }

    /// Each Agent a session reached keeps the variant it ran there: a session handed from
    /// triage to idv is compared under triage's variant at triage and idv's at idv (it was
    /// only the first Agent's before); rows from before keep the first Agent's.
    #[tokio::test]
    async fn every_agent_a_session_reached_is_compared_by_its_own_variant() {
        let dir = std::env::temp_dir().join(format!("switchboard-compare-{}", uuid::Uuid::new_v4()));
        let store = Store::file(&dir.join("record.db")).expect("store");
        store.migrate().await.expect("migrates");
        let start = |id: &str, agent: &str, at| {
            entry(id, agent, at, "session_start", crate::Update::Start { credential: "web".into() })
        };
        let batch = vec![
            // Handed off: idv's variant is recorded before the handoff's own line.
            start("s1", "bank/triage", 1_000),
            variant("s1", "bank/triage", 1_001, "brief"),
            variant("s1", "bank/idv", 1_002, "strict"),
            entry("s1", "bank/idv", 1_003, "agent_joined", crate::Update::Agent),
            // A second variant of idv's is kept as the first: a session keeps its variant.
            variant("s1", "bank/idv", 1_004, "lenient"),
            entry(
                "s1",
                "bank/idv",
                1_005,
                "session_end",
                crate::Update::End { outcome: "ended", close_code: Some(1000), hung_up_by: None },
            ),
            // Started at idv.
            start("s2", "bank/idv", 2_000),
            variant("s2", "bank/idv", 2_001, "lenient"),
        ];
        store.write(&batch).await.expect("writes");

        let compared = |agent: &str| CompareQuery { agent: agent.into(), since: None, until: None };
        let idv = store.compare_variants(&compared("bank/idv")).await.expect("compares");
        let by: Vec<(Option<&str>, u64)> = idv.variants.iter().map(|v| (v.variant.as_deref(), v.sessions)).collect();
        assert_eq!(by, [(Some("lenient"), 1), (Some("strict"), 1)], "{idv:?}");
        assert_eq!(idv.variants[1].finished, 1, "the handed-off session ended");
        let triage = store.compare_variants(&compared("bank/triage")).await.expect("compares");
        let by: Vec<(Option<&str>, u64)> = triage.variants.iter().map(|v| (v.variant.as_deref(), v.sessions)).collect();
        assert_eq!(by, [(Some("brief"), 1)]);

        let shown = store.show("s1").await.expect("shows").expect("recorded").summary;
        assert_eq!(shown.variant.as_deref(), Some("brief"), "the row keeps the first Agent's");
        let want = BTreeMap::from([
            ("bank/idv".to_owned(), "strict".to_owned()),
            ("bank/triage".to_owned(), "brief".to_owned()),
        ]);
        assert_eq!(shown.variants, want);
        let listed = store.list(&crate::store::Filter::default()).await.expect("lists");
        let s1 = listed.iter().find(|s| s.id == "s1").expect("listed");
        assert_eq!(s1.variants, want);

        // A row from before the Agents' variants were kept apart: its own variant, at its
        // first Agent only.
        store.write(&[start("old", "bank/triage", 3_000)]).await.expect("writes");
        sqlx::query("UPDATE switchboard_sessions SET variant = 'control' WHERE id = 'old'")
            .execute(&store.pool)
            .await
            .expect("an old row");
        let triage = store.compare_variants(&compared("bank/triage")).await.expect("compares");
        let by: Vec<(Option<&str>, u64)> = triage.variants.iter().map(|v| (v.variant.as_deref(), v.sessions)).collect();
        assert_eq!(by, [(Some("brief"), 1), (Some("control"), 1)]);
        let old = store.show("old").await.expect("shows").expect("recorded").summary;
        assert_eq!(old.variants, BTreeMap::from([("bank/triage".to_owned(), "control".to_owned())]));
        let _ = std::fs::remove_dir_all(dir);
    }
}
