//! The session summary: once a session's end (or abandonment) is written, a text model reads
//! its record — the redacted lines, tool calls, transfers and outcome, never anything the
//! record does not hold — and writes what the caller wanted, what the agents did and how it
//! ended, in at most three sentences. The summary is redacted again (what a model writes
//! is not trusted), bounded, stored with the session and sent in its end-of-call report,
//! which waits for it (at most one model call's timeout).
//!
//! Off unless a model is configured (`--record-summary-model`): it costs a model call per
//! session. Sessions are summarised one at a time; a backlog waits in a bounded queue, and
//! what does not fit goes on unsummarised (counted).

use std::sync::Arc;
use std::time::Duration;

use prometheus::IntCounterVec;
use switchboard_models::{Message, ModelRequest, TextModel, collect_reply};
use tokio::sync::mpsc;

use super::Redactor;
use super::store::{SessionRecord, Store};

/// Sessions waiting for their summary; more go on without one (counted).
const QUEUE: usize = 1024;

/// What the model is told.
const INSTRUCTIONS: &str = "You write the summary of a customer conversation for the company's records. \
In at most three plain sentences say what the caller wanted, what the agents did (checks, tools, transfers) \
and how the conversation ended. State only what the transcript shows. Keep every [redacted:...] marker as it \
is and never guess what it hides. Write the summary only, with no heading.";

/// How summaries are made.
#[derive(Clone, Debug)]
pub struct SummaryConfig {
    /// The text model (a Bedrock model or inference profile id).
    pub model_id: String,
    /// The most transcript sent, in bytes: a longer one keeps its start and, mostly, its end.
    pub max_input_bytes: usize,
    /// How long one summary may take.
    pub timeout: Duration,
    /// The most tokens the model may write.
    pub max_tokens: u32,
    /// The longest summary kept, in characters (a longer one is cut).
    pub max_chars: usize,
}

impl SummaryConfig {
    /// Summaries by `model_id`, of at most 24 KiB of transcript, in at most 30 s, 300
    /// tokens and 2,000 characters.
    pub fn new(model_id: impl Into<String>) -> Self {
        Self {
            model_id: model_id.into(),
            max_input_bytes: 24 * 1024,
            timeout: Duration::from_secs(30),
            max_tokens: 300,
            max_chars: 2000,
        }
    }
}

/// The summarising task: ended sessions' ids in, summaries stored, ids passed on.
#[derive(Debug)]
pub struct Summarizer {
    model: Arc<dyn TextModel>,
    config: SummaryConfig,
    store: Store,
    redactor: Redactor,
    rx: mpsc::Receiver<String>,
    next: Option<mpsc::Sender<String>>,
    outcomes: IntCounterVec,
}

impl Summarizer {
    /// A summariser writing into `store` with `model`, redacting with `redactor`, counting
    /// in `outcomes`; and the queue the writer feeds with ended sessions' ids.
    pub fn new(
        model: Arc<dyn TextModel>,
        config: SummaryConfig,
        store: Store,
        redactor: Redactor,
        outcomes: IntCounterVec,
    ) -> (Self, mpsc::Sender<String>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Self { model, config, store, redactor, rx, next: None, outcomes }, tx)
    }

    /// Passes each id on to `next` (the webhook) once its summary is written or failed.
    pub fn reporting_to(mut self, next: mpsc::Sender<String>) -> Self {
        self.next = Some(next);
        self
    }

    /// Summarises until every sender is gone.
    pub async fn run(mut self) {
        while let Some(id) = self.rx.recv().await {
            let outcome = self.summarize(&id).await;
            self.outcomes.with_label_values(&[outcome]).inc();
            if let Some(next) = &self.next
                && next.try_send(id).is_err()
            {
                tracing::warn!("the end-of-call report queue is full; a report is dropped");
            }
        }
    }

    async fn summarize(&self, id: &str) -> &'static str {
        let record = match self.store.show(id).await {
            Ok(Some(record)) => record,
            Ok(None) => return "unknown_session",
            Err(error) => {
                tracing::warn!(session_id = %id, "no summary: cannot read the record: {error}");
                return "failed";
            }
        };
        if !record.events.iter().any(|e| e.kind == "user" || e.kind == "assistant") {
            return "empty";
        }
        let transcript = transcript(&record, self.config.max_input_bytes);
        let mut request = ModelRequest::new(self.config.model_id.clone(), vec![Message::user_text(transcript)]);
        request.system = INSTRUCTIONS.to_owned();
        request.max_tokens = self.config.max_tokens;
        request.temperature = 0.2;
        let reply = match tokio::time::timeout(self.config.timeout, collect_reply(self.model.stream(&request))).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(error)) => {
                tracing::warn!(session_id = %id, model = %self.config.model_id, "no summary: the model failed: {error}");
                return "failed";
            }
            Err(_) => {
                tracing::warn!(session_id = %id, "no summary: the model took over {} s", self.config.timeout.as_secs());
                return "timeout";
            }
        };
        let text = self.redactor.text(reply.text.trim()).into_owned();
        if text.is_empty() {
            return "empty";
        }
        let text = bounded(text, self.config.max_chars);
        match self.store.set_summary(id, &text).await {
            Ok(()) => "written",
            Err(error) => {
                tracing::warn!(session_id = %id, "the summary was not stored: {error}");
                "failed"
            }
        }
    }
}

/// What the model reads of `record`: who said what, what was done, how it ended; at most
/// `max_bytes` (the first quarter and the rest from the end, the gap marked).
pub fn transcript(record: &SessionRecord, max_bytes: usize) -> String {
    let mut lines: Vec<String> =
        record.events.iter().filter_map(|event| line(&event.kind, &event.agent, &event.data)).collect();
    lines.push(format!("[the session is {}]", record.summary.outcome));
    let total: usize = lines.iter().map(|l| l.len() + 1).sum();
    if total <= max_bytes {
        return lines.join("\n");
    }
    let (mut head, mut used) = (Vec::new(), 0);
    for line in &lines {
        if used + line.len() + 1 > max_bytes / 4 {
            break;
        }
        used += line.len() + 1;
        head.push(line.as_str());
    }
    let mut tail = Vec::new();
    for line in lines[head.len()..].iter().rev() {
        if used + line.len() + 1 > max_bytes.saturating_sub(64) {
            break;
        }
        used += line.len() + 1;
        tail.push(line.as_str());
    }
    tail.reverse();
    let left_out = lines.len() - head.len() - tail.len();
    format!("{}\n[... {left_out} lines left out ...]\n{}", head.join("\n"), tail.join("\n"))
}

fn line(kind: &str, agent: &str, data: &serde_json::Value) -> Option<String> {
    let s = |key: &str| data.get(key).and_then(serde_json::Value::as_str).unwrap_or_default();
    Some(match kind {
        "user" => format!("Caller: {}", s("text")),
        "assistant" => format!("Agent {agent}: {}", s("text")),
        "tool_complete" => format!("[{agent} used the tool {}]", s("name")),
        "tool_error" => format!("[{agent}'s tool {} failed: {}]", s("name"), s("kind")),
        "handoff" => format!("[transferred from {} to {}: {}]", s("from"), s("to"), s("reason")),
        "consent_request" => format!("[{agent} asked the caller's consent to {}]", s("name")),
        _ => return None,
    })
}

/// `text` cut at a character boundary to at most `max` characters, marked when cut.
fn bounded(text: String, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{EventRow, Summary};

    fn record(events: &[(&str, &str, serde_json::Value)]) -> SessionRecord {
        let summary: Summary = serde_json::from_value(json!({
            "id": "s", "started_at": 0, "ended_at": null, "credential": "", "caller": null,
            "first_agent": "bank/triage", "last_agent": "bank/triage", "outcome": "ended", "close_code": null,
            "turns": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0
        }))
        .expect("summary");
        let events = events
            .iter()
            .enumerate()
            .map(|(i, (kind, agent, data))| EventRow {
                at_us: i as i64,
                agent: (*agent).into(),
                kind: (*kind).into(),
                data: data.clone(),
            })
            .collect();
        SessionRecord { summary, events }
    }

    #[test]
    fn the_transcript_names_speakers_tools_and_transfers_and_skips_the_rest() {
        let r = record(&[
            ("session_start", "bank/triage", json!({"credential": "web"})),
            ("user", "bank/triage", json!({"text": "My balance please"})),
            ("handoff", "bank/triage", json!({"from": "triage", "to": "idv", "reason": "verify first"})),
            ("tool_complete", "bank/idv", json!({"name": "perform_idv_check", "result": {"verified": true}})),
            ("assistant", "bank/idv", json!({"text": "You're verified, account [redacted:account]."})),
            ("usage", "bank/idv", json!({"input": 10})),
            ("session_end", "bank/idv", json!({"close_code": 1000})),
        ]);
        assert_eq!(
            transcript(&r, 10_000),
            "Caller: My balance please\n[transferred from triage to idv: verify first]\n[bank/idv used the tool \
             perform_idv_check]\nAgent bank/idv: You're verified, account [redacted:account].\n[the session is ended]"
        );
    }

    #[test]
    fn a_long_transcript_keeps_its_start_and_end_within_the_bound() {
        let events: Vec<_> = (0..200)
            .map(|i| ("user", "bank/triage", json!({ "text": format!("line {i:03} {}", "x".repeat(40)) })))
            .collect();
        let t = transcript(&record(&events), 2000);
        assert!(t.len() <= 2000, "{}", t.len());
        assert!(t.starts_with("Caller: line 000"), "{t}");
        assert!(t.ends_with(&format!("line 199 {}\n[the session is ended]", "x".repeat(40))), "{t}");
        assert!(t.contains("lines left out"), "{t}");
    }

    #[test]
    fn summaries_are_cut_at_a_character_boundary() {
        assert_eq!(bounded("héllo".into(), 2), "hé…");
        assert_eq!(bounded("hi".into(), 2), "hi");
    }
}
