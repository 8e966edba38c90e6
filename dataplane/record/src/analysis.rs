//! Every call analysed: once a session's end is written (and its summary, when one is
//! made), a text model reads its redacted record — the same transcript the summary reads —
//! and fills the fields the Agent the session started at declares (`spec.record.analysis`:
//! e.g. `resolved: boolean`, `reason: enum`, `sentiment`, `follow_up`). It is asked through
//! the judge machinery the scenario tests' judged expectations use
//! ([`switchboard_models::judge`]), and answers one JSON object, which is checked against the
//! declared fields: every field present, of its type, an enum's value among its values.
//!
//! The answer is kept on the session's row and as its `analysis` event, sent in its
//! end-of-call report (which waits for it), and counted: analyses by outcome, and sessions
//! by Agent, variant and `resolved` (the resolution rate). What the call cost — its tokens,
//! priced by the price table — is added to the session's tokens and cost and to the
//! gateway's cost metrics under the Agent and the analysis model.
//!
//! A failure is never a lost record: a model error, a timeout, an answer that is not the
//! declared fields — each is kept as the session's analysis `{"model", "error"}` with a
//! reason a person can act on, and the session's report goes out as usual.
//!
//! Off by default: only sessions that started at an Agent with `spec.record.analysis` are
//! analysed; which Agents have it, the gateway's routing table says ([`AnalysisBook`]).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{Map, Value, json};
use switchboard_crds::agent::{AnalysisFieldType, AnalysisSettings, RESOLVED_FIELD};
use switchboard_models::TextModel;
use switchboard_models::judge::{Question, ask};
use tokio::sync::mpsc;

use super::store::{SessionRecord, Store};
use super::{Prices, RecordMetrics, Redactor};

/// Sessions waiting for their analysis; more go on without one (counted).
const QUEUE: usize = 1024;
/// The longest free-text answer kept, in characters.
const MAX_TEXT: usize = 500;
/// How much of an unreadable answer its error quotes, in characters.
const QUOTED: usize = 200;

/// What the model is told (the fields follow in the prompt).
const INSTRUCTIONS: &str = "You are a strict analyst of customer conversations for the company's records. \
You get the transcript of one conversation (lines 'Caller:' are the caller's, 'Agent <name>:' the agent's, \
'[...]' what the system did) and a list of fields to fill. Judge only from what the transcript shows. Answer \
with exactly one JSON object whose keys are the field names and nothing else: a boolean field true or false, \
a number field a number, an enum field exactly one of its listed values, a string field a short sentence. \
Keep every [redacted:...] marker as it is and never guess what it hides.";

/// Which Agents' sessions are analysed, and how: the gateway's routing table.
pub trait AnalysisSource: Send + Sync {
    /// The analysis settings of `agent` (`namespace/name`), if it has some.
    fn of(&self, agent: &str) -> Option<AnalysisSettings>;
    /// Whether any Agent has some (none: an ended session is not even read).
    fn any(&self) -> bool;
}

/// Where the analyst finds an Agent's analysis settings; empty (nothing analysed) until the
/// gateway sets its source ([`AnalysisBook::set`]).
#[derive(Clone, Default)]
pub struct AnalysisBook(Arc<RwLock<Option<Arc<dyn AnalysisSource>>>>);

impl std::fmt::Debug for AnalysisBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnalysisBook")
    }
}

impl AnalysisBook {
    /// Looks settings up in `source` from now on.
    pub fn set(&self, source: Arc<dyn AnalysisSource>) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(source);
    }

    fn source(&self) -> Option<Arc<dyn AnalysisSource>> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The analysis settings of `agent`, if it has some.
    pub fn of(&self, agent: &str) -> Option<AnalysisSettings> {
        self.source().and_then(|source| source.of(agent))
    }

    /// Whether any Agent has analysis settings.
    pub fn any(&self) -> bool {
        self.source().is_some_and(|source| source.any())
    }
}

/// How analyses are made.
#[derive(Clone, Debug)]
pub struct AnalysisConfig {
    /// The model of Agents that name none (`--record-analysis-model`); none: such Agents'
    /// sessions get an error saying so.
    pub default_model: Option<String>,
    /// The most transcript sent, in bytes.
    pub max_input_bytes: usize,
    /// How long one analysis may take.
    pub timeout: Duration,
    /// The most tokens the model may write.
    pub max_tokens: u32,
}

impl Default for AnalysisConfig {
    /// No default model, 24 KiB of transcript, 30 s, 600 tokens.
    fn default() -> Self {
        Self { default_model: None, max_input_bytes: 24 * 1024, timeout: Duration::from_secs(30), max_tokens: 600 }
    }
}

/// The analysing task: ended sessions' ids in, analyses stored, ids passed on.
#[derive(Debug)]
pub struct Analyst {
    model: Option<Arc<dyn TextModel>>,
    config: AnalysisConfig,
    store: Store,
    book: AnalysisBook,
    redactor: Redactor,
    prices: Prices,
    metrics: RecordMetrics,
    rx: mpsc::Receiver<String>,
    next: Option<mpsc::Sender<String>>,
}

/// What became of one session's analysis (the metric's `outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Written,
    Off,
    Empty,
    NoModel,
    ModelError,
    Timeout,
    Malformed,
    StoreError,
    UnknownSession,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Self::Written => "written",
            Self::Off => "off",
            Self::Empty => "empty",
            Self::NoModel => "no_model",
            Self::ModelError => "model_error",
            Self::Timeout => "timeout",
            Self::Malformed => "malformed",
            Self::StoreError => "store_error",
            Self::UnknownSession => "unknown_session",
        }
    }
}

impl Analyst {
    /// An analyst asking `model` (none: only errors are written), finding Agents' settings
    /// in `book`; and the queue ended sessions' ids go to.
    pub fn new(
        model: Option<Arc<dyn TextModel>>,
        config: AnalysisConfig,
        store: Store,
        book: AnalysisBook,
        redactor: Redactor,
        prices: Prices,
        metrics: RecordMetrics,
    ) -> (Self, mpsc::Sender<String>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Self { model, config, store, book, redactor, prices, metrics, rx, next: None }, tx)
    }

    /// Passes each id on to `next` (the webhook) once its analysis is written or failed.
    pub fn reporting_to(mut self, next: mpsc::Sender<String>) -> Self {
        self.next = Some(next);
        self
    }

    /// Analyses until every sender is gone.
    pub async fn run(mut self) {
        while let Some(id) = self.rx.recv().await {
            let outcome = self.analyse(&id).await;
            if outcome != Outcome::Off {
                self.metrics.analyses.with_label_values(&[outcome.label()]).inc();
            }
            if let Some(next) = &self.next
                && next.try_send(id).is_err()
            {
                tracing::warn!("the end-of-call report queue is full; a report is dropped");
            }
        }
    }

    async fn analyse(&self, id: &str) -> Outcome {
        if !self.book.any() {
            return Outcome::Off;
        }
        let record = match self.store.show(id).await {
            Ok(Some(record)) => record,
            Ok(None) => return Outcome::UnknownSession,
            Err(error) => {
                tracing::warn!(session_id = %id, "no analysis: cannot read the record: {error}");
                return Outcome::StoreError;
            }
        };
        let agent = record.summary.first_agent.clone();
        let Some(settings) = self.book.of(&agent) else { return Outcome::Off };
        if record.summary.analysis.is_some() {
            // Analysed already (a report sent again from the store comes this way too).
            return Outcome::Off;
        }
        if !record.events.iter().any(|e| e.kind == "user" || e.kind == "assistant") {
            return Outcome::Empty;
        }
        let Some(model_id) = settings.model.clone().or_else(|| self.config.default_model.clone()) else {
            let error = format!(
                "no analysis model: {agent} sets no spec.record.analysis.model and the gateway has no --record-analysis-model"
            );
            return self.keep(&record, "", Err((Outcome::NoModel, error)), None).await;
        };
        let Some(model) = &self.model else {
            let error = "the gateway has no analysis model client: start it with --record-analysis-model".to_owned();
            return self.keep(&record, &model_id, Err((Outcome::NoModel, error)), None).await;
        };
        let question = Question {
            model_id: &model_id,
            instructions: INSTRUCTIONS,
            prompt: prompt(&settings, &record, self.config.max_input_bytes),
            max_tokens: self.config.max_tokens,
            timeout: self.config.timeout,
        };
        let reply = match ask(model.as_ref(), question).await {
            Ok(reply) => reply,
            Err(error) => {
                let outcome = match error {
                    switchboard_models::judge::JudgeError::Timeout { .. } => Outcome::Timeout,
                    switchboard_models::judge::JudgeError::Failed { .. } => Outcome::ModelError,
                };
                tracing::warn!(session_id = %id, model = %model_id, "no analysis: {error}");
                return self.keep(&record, &model_id, Err((outcome, error.to_string())), None).await;
            }
        };
        let usage = reply.usage.map(|u| (u.input_tokens, u.output_tokens));
        let fields = parse(&settings, &reply.text).map(|mut fields| {
            // What a model writes is not trusted: its text is redacted as the record is.
            for value in fields.values_mut() {
                if let Value::String(text) = value {
                    *text = self.redactor.text(text).into_owned();
                }
            }
            fields
        });
        let fields = fields.map_err(|why| {
            let quoted: String = self.redactor.text(reply.text.trim()).chars().take(QUOTED).collect();
            (Outcome::Malformed, format!("the analysis model {model_id} {why}; it answered {quoted:?}"))
        });
        self.keep(&record, &model_id, fields, usage).await
    }

    /// Stores the analysis (or its error) with what it cost, and counts it.
    async fn keep(
        &self,
        record: &SessionRecord,
        model_id: &str,
        fields: Result<Map<String, Value>, (Outcome, String)>,
        usage: Option<(u64, u64)>,
    ) -> Outcome {
        let summary = &record.summary;
        let agent = summary.first_agent.as_str();
        let (input, output) = usage.unwrap_or((0, 0));
        let cost = if usage.is_some() {
            let cost = self.prices.cost(model_id, input, output, None);
            if cost.is_none() {
                self.metrics.unpriced.with_label_values(&[model_id]).inc();
            }
            let cost = cost.unwrap_or(0.0);
            self.metrics.cost.with_label_values(&[agent, model_id]).inc_by((cost * 1e6).round() as u64);
            self.metrics.tokens.with_label_values(&[agent, model_id, "input"]).inc_by(input);
            self.metrics.tokens.with_label_values(&[agent, model_id, "output"]).inc_by(output);
            cost
        } else {
            0.0
        };
        let (outcome, mut analysis) = match fields {
            Ok(fields) => {
                if let Some(resolved) = fields.get(RESOLVED_FIELD).and_then(Value::as_bool) {
                    let variant = summary.variant.as_deref().unwrap_or_default();
                    let resolved = if resolved { "true" } else { "false" };
                    self.metrics.resolved.with_label_values(&[agent, variant, resolved]).inc();
                }
                (Outcome::Written, json!({ "model": model_id, "fields": fields }))
            }
            Err((outcome, error)) => (outcome, json!({ "model": model_id, "error": error })),
        };
        analysis["input_tokens"] = json!(input);
        analysis["output_tokens"] = json!(output);
        analysis["cost_usd"] = json!(cost);
        let (input, output) = (i64::try_from(input).unwrap_or(i64::MAX), i64::try_from(output).unwrap_or(i64::MAX));
        match self.store.set_analysis(&summary.id, agent, &analysis, (input, output, cost)).await {
            Ok(()) => outcome,
            Err(error) => {
                tracing::warn!(session_id = %summary.id, "the analysis was not stored: {error}");
                Outcome::StoreError
            }
        }
    }
}

/// What the model reads: the fields to fill, each with its type and meaning, then the
/// transcript (as the summary reads it, bounded).
pub fn prompt(settings: &AnalysisSettings, record: &SessionRecord, max_bytes: usize) -> String {
    let fields: Vec<String> = settings
        .fields
        .iter()
        .map(|field| {
            let kind = match field.kind {
                AnalysisFieldType::Enum => format!("one of {}", field.values.join(" | ")),
                other => other.as_str().to_owned(),
            };
            format!("- {} ({kind}): {}", field.name, field.description.trim())
        })
        .collect();
    format!("Fields to fill:\n{}\n\nTranscript:\n{}", fields.join("\n"), super::summary::transcript(record, max_bytes))
}

/// The declared fields in the model's answer: one JSON object (surrounding prose or a code
/// fence is allowed), every declared field present and of its kind; keys not declared are
/// left out. An error says what is wrong, for the record.
pub fn parse(settings: &AnalysisSettings, answer: &str) -> Result<Map<String, Value>, String> {
    let (Some(open), Some(close)) = (answer.find('{'), answer.rfind('}')) else {
        return Err("did not answer a JSON object".to_owned());
    };
    if close < open {
        return Err("did not answer a JSON object".to_owned());
    }
    let object: Map<String, Value> = serde_json::from_str(&answer[open..=close])
        .map_err(|e| format!("did not answer a readable JSON object ({e})"))?;
    let mut fields = Map::new();
    let mut wrong = Vec::new();
    for field in &settings.fields {
        let Some(value) = object.get(&field.name) else {
            wrong.push(format!("{} is missing", field.name));
            continue;
        };
        let kept = match (field.kind, value) {
            (AnalysisFieldType::Boolean, Value::Bool(_)) | (AnalysisFieldType::Number, Value::Number(_)) => {
                Some(value.clone())
            }
            (AnalysisFieldType::Enum, Value::String(text)) if field.values.contains(text) => Some(value.clone()),
            (AnalysisFieldType::String, Value::String(text)) => {
                Some(Value::String(text.chars().take(MAX_TEXT).collect()))
            }
            _ => None,
        };
        match kept {
            Some(value) => {
                fields.insert(field.name.clone(), value);
            }
            None => {
                let expected = match field.kind {
                    AnalysisFieldType::Enum => format!("one of [{}]", field.values.join(", ")),
                    other => format!("a {}", other.as_str()),
                };
                let shown: String = value.to_string().chars().take(60).collect();
                wrong.push(format!("{} is {shown}, not {expected}", field.name));
            }
        }
    }
    if wrong.is_empty() { Ok(fields) } else { Err(format!("did not fill the declared fields: {}", wrong.join("; "))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AnalysisSettings {
        serde_json::from_value(json!({ "fields": [
            {"name": "resolved", "type": "boolean", "description": "The caller got what they asked for."},
            {"name": "reason", "type": "enum", "values": ["balance", "fraud", "other"], "description": "Why they called."},
            {"name": "score", "type": "number", "description": "How well it went from 1 to 5."},
            {"name": "follow_up", "type": "string", "description": "What is left to do."},
        ]}))
        .expect("settings")
    }

    #[test]
    fn an_answer_fills_every_declared_field_with_its_kind() {
        let fields = parse(
            &settings(),
            "Here you are:\n```json\n{\"resolved\": true, \"reason\": \"balance\", \"score\": 4, \"follow_up\": \"none\", \"extra\": 1}\n```",
        )
        .expect("fields");
        assert_eq!(
            Value::Object(fields),
            json!({"resolved": true, "reason": "balance", "score": 4, "follow_up": "none"})
        );
    }

    #[test]
    fn a_wrong_answer_says_which_fields_are_wrong() {
        let error = parse(&settings(), r#"{"resolved": "yes", "reason": "billing", "score": 3}"#).expect_err("wrong");
        assert!(error.contains("resolved is \"yes\", not a boolean"), "{error}");
        assert!(error.contains("reason is \"billing\", not one of [balance, fraud, other]"), "{error}");
        assert!(error.contains("follow_up is missing"), "{error}");
        assert_eq!(parse(&settings(), "I cannot tell.").expect_err("prose"), "did not answer a JSON object");
        assert!(parse(&settings(), "} {").is_err());
        assert!(parse(&settings(), "{resolved: true}").expect_err("not JSON").contains("readable JSON object"));
    }

    #[test]
    fn the_prompt_lists_the_fields_before_the_transcript() {
        let record: SessionRecord = serde_json::from_value(json!({
            "id": "s", "started_at": 0, "ended_at": null, "credential": "", "caller": null,
            "first_agent": "bank/triage", "last_agent": "bank/triage", "outcome": "ended", "close_code": null,
            "turns": 1, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
            "events": [{"at_us": 1, "agent": "bank/triage", "kind": "user", "data": {"text": "My balance please"}}]
        }))
        .expect("record");
        let text = prompt(&settings(), &record, 10_000);
        assert!(
            text.starts_with("Fields to fill:\n- resolved (boolean): The caller got what they asked for.\n"),
            "{text}"
        );
        assert!(text.contains("- reason (one of balance | fraud | other): Why they called."), "{text}");
        assert!(text.ends_with("Transcript:\nCaller: My balance please\n[the session is ended]"), "{text}");
    }
}
