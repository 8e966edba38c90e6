//! The conversation record: the gateway sees every frame of every session, so it keeps
//! what happened — start and end (who, which credential, which Agents, outcome, close
//! code), every final user and assistant line with its time and the Agent that spoke, tool
//! calls with input, result, duration and outcome, consents asked and answered, handoffs,
//! memory changes, errors, interruptions, turn latency, tokens and cost — redacted
//! ([`redact`]) before it leaves the session's task.
//!
//! Recording never slows or breaks a conversation: a session's task hands each entry to a
//! bounded queue without waiting ([`Recorder::push`]; a full queue drops the entry, counted
//! and logged), and one writer task ([`writer`]) batches entries into the store ([`store`]:
//! SQLite or PostgreSQL). While the store is down the writer keeps a bounded backlog and
//! writes it once the store is back; what does not fit is dropped and counted. The writer
//! also enforces retention.
//!
//! Bounded in bytes, not only in entries: what waits for the store — the queue and the
//! backlog together — is counted ([`Entry::bytes`]) against [`RecordConfig::pending_bytes`]
//! and in the gateway's memory budget ([`Recorder::pending`]); past it, an entry is dropped
//! (counted as `bytes_full`). And a session's own record is bounded
//! ([`RecordConfig::session_bytes`]): past it, what was said and done is no longer kept
//! (one `record_truncated` event says so); its start, end, turns, tokens and cost still are.
//!
//! [`log::SessionLog`] turns one session's frames into entries; the session machine hands
//! it the frames it delivers, once each (never a replay), skipping reply audio.
//!
//! The record is its own crate, below the gateway: it knows frames, entries and its store,
//! not the gateway's sessions, servers or credentials. The gateway's side — the HTTP API
//! that serves it and restoring a verified caller's memory from it when a runtime session
//! opens — is the gateway's `record` module, which re-exports this crate under the paths
//! it always had (`switchboard_gateway::record::...`). `switchboard sessions` and
//! `switchboard callers` read the store directly.

pub mod analysis;
pub mod compare;
pub mod log;
pub mod price;
/// Redaction lives in the agent core: runtimes redact what they put into traces with it.
pub use switchboard_core::redact;
pub mod reporting;
pub mod store;
pub mod summary;
pub mod webhook;
pub mod writer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::{Encoder as _, IntCounter, IntCounterVec, IntGauge, Opts, Registry};
use switchboard_crds::agent::RedactRule;
use tokio::sync::mpsc;

pub use log::SessionLog;
pub use price::Prices;
pub use redact::Redactor;
pub use store::Store;

/// Where the gateway serves the record (`GET /v1/sessions`, `GET /v1/sessions/{id}`): the
/// end-of-call webhook links each session's record under it.
pub const RECORD_PATH: &str = "/v1/sessions";

/// One thing that happened in a session, ready for the store.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The session.
    pub session: Arc<str>,
    /// When, unix µs (the gateway's clock).
    pub at_us: i64,
    /// Orders entries of the same µs (set by the recorder).
    pub ord: i64,
    /// The Agent serving the session (`namespace/name`).
    pub agent: String,
    /// What happened.
    pub kind: &'static str,
    /// Its details, redacted.
    pub data: serde_json::Value,
    /// What it changes of the session's row.
    pub update: Option<Update>,
}

impl Entry {
    /// About what the entry holds in memory, and will take in the store: its strings and
    /// the size of its data as JSON (estimated without writing it out).
    pub fn bytes(&self) -> usize {
        let update = match &self.update {
            Some(Update::State { credential, token, sealed }) => credential.len() + token.len() + sealed.len(),
            Some(Update::CallerMemory { caller, key, value }) => caller.len() + key.len() + json_bytes(value),
            Some(Update::CallerSeen { caller, namespace }) => caller.len() + namespace.len(),
            Some(Update::Caller(caller) | Update::Variant(caller)) => caller.len(),
            Some(Update::Start { credential }) => credential.len(),
            _ => 0,
        };
        ENTRY_OVERHEAD + self.agent.len() + json_bytes(&self.data) + update
    }
}

/// What an entry costs beyond its strings (its struct, the queue's slot, the session id's
/// share), an estimate.
const ENTRY_OVERHEAD: usize = 160;

/// About the bytes `value` takes as JSON: strings and keys at their length plus quotes,
/// numbers and literals at a few bytes.
pub fn json_bytes(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|item| json_bytes(item) + 1).sum::<usize>(),
        Value::Object(fields) => 2 + fields.iter().map(|(key, item)| key.len() + 4 + json_bytes(item)).sum::<usize>(),
    }
}

/// A change to a session's row.
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
    /// The session started (or resumed) at `Entry::agent`.
    Start {
        /// The API key's name or the JWT subject.
        credential: String,
    },
    /// It reached `Entry::agent` (a handoff).
    Agent,
    /// The caller was verified as this (redacted).
    Caller(String),
    /// Tokens used, and what they cost.
    Usage {
        /// Read.
        input: i64,
        /// Generated.
        output: i64,
        /// USD.
        cost: f64,
    },
    /// A user turn was answered.
    Turn,
    /// The session runs this variant of `Entry::agent` (kept on its row when that is the
    /// Agent it started at: variants are compared by it).
    Variant(String),
    /// The caller was put through to a person (`transfer_result` of outcome `transferred`).
    Transferred,
    /// What continuing the session later needs (sealed; not an event of the record).
    State {
        /// The credential that may continue it.
        credential: String,
        /// The store key of its newest resume token (the gateway's `resume::store_key`): only
        /// its holder may continue it (empty: nobody may).
        token: String,
        /// The sealed state (the gateway's `resume::seal_text`).
        sealed: String,
    },
    /// The verified caller ([`store::callers::caller_id`]) had this session (not an event
    /// of the record).
    CallerSeen {
        /// The caller's id in the store.
        caller: String,
        /// The namespace of the Agent that verified it.
        namespace: String,
    },
    /// A caller memory key changed ([`store::callers::is_caller_key`]; not an event of the
    /// record: the `memory` event has it, redacted).
    CallerMemory {
        /// The caller's id in the store.
        caller: String,
        /// The memory key.
        key: String,
        /// Its value, as the session holds it (`null`: forgotten).
        value: serde_json::Value,
    },
    /// It ended, or its client went.
    End {
        /// `ended`, `parked`, `failed`.
        outcome: &'static str,
        /// The close code, when one was sent.
        close_code: Option<u16>,
        /// Who hung up a phone call (`caller`, `agent`, `transfer`, `media_timeout`, `edge`...:
        /// [`switchboard_core::outbound::HungUpBy`]), as its SIP edge said; `None` for any
        /// other session.
        hung_up_by: Option<&'static str>,
    },
}

/// How the record is kept.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    /// Entries waiting for the writer; more are dropped (counted).
    pub queue: usize,
    /// Bytes of entries waiting for the store, the queue's and the backlog's together
    /// ([`Entry::bytes`]); more are dropped (counted as `bytes_full`).
    pub pending_bytes: usize,
    /// Bytes of what a session said and did that its record keeps; past it only its
    /// figures (start, end, turns, tokens, cost) are.
    pub session_bytes: usize,
    /// Entries kept while the store is down; more are dropped (counted).
    pub backlog: usize,
    /// Sessions are deleted this long after they started; none: kept.
    pub retention: Option<Duration>,
    /// Callers ([`store::callers`]) not seen for this long are deleted; none: kept.
    pub caller_retention: Option<Duration>,
    /// The longest a batch waits to fill.
    pub flush_interval: Duration,
    /// The most entries in one write.
    pub batch: usize,
    /// How long a session's state is kept for continuing it.
    pub state_ttl: Duration,
    /// A session parked this long ago (its client went) that no client resumed is marked
    /// `abandoned` and reported; longer than the resume window, so no resume can follow.
    /// A live session whose gateway replica has not been heard of for as long is `lost`.
    pub abandon_after: Duration,
    /// This gateway replica's id in the record (by default a fresh one per process): its
    /// sessions' rows name it and its writer's heartbeat says it lives
    /// ([`store::Store::writing_as`]).
    pub replica: String,
}

impl Default for RecordConfig {
    fn default() -> Self {
        Self {
            queue: 65_536,
            pending_bytes: 64 << 20,
            session_bytes: 2 << 20,
            backlog: 200_000,
            retention: Some(Duration::from_secs(30 * 86_400)),
            caller_retention: Some(Duration::from_secs(365 * 86_400)),
            flush_interval: Duration::from_millis(200),
            batch: 512,
            state_ttl: Duration::from_secs(86_400),
            abandon_after: Duration::from_secs(90),
            replica: format!("gw-replica-{}", uuid::Uuid::new_v4()),
        }
    }
}

/// The record's metrics (their own registry, rendered after the gateway's).
#[derive(Clone, Debug)]
pub struct RecordMetrics {
    registry: Registry,
    /// Entries written.
    pub written: IntCounter,
    /// Entries dropped, by why (`queue_full`, `backlog_full`, `bytes_full`).
    pub dropped: IntCounterVec,
    /// Failed writes (the batch waits in the backlog).
    pub write_errors: IntCounter,
    /// Entries waiting in the backlog.
    pub backlog: IntGauge,
    /// Cost in USD by Agent (`namespace/name`) and model, in micro-dollars (integers add
    /// exactly; divide by 1e6).
    pub cost: IntCounterVec,
    /// Tokens by Agent, model and direction.
    pub tokens: IntCounterVec,
    /// Usage reports of a model the price table does not know.
    pub unpriced: IntCounterVec,
    /// End-of-call reports by outcome.
    pub webhook: IntCounterVec,
    /// Session summaries by outcome.
    pub summaries: IntCounterVec,
    /// Session analyses by outcome ([`analysis`]).
    pub analyses: IntCounterVec,
    /// Analysed sessions by Agent, variant and the answer of their `resolved` field.
    pub resolved: IntCounterVec,
}

impl RecordMetrics {
    /// A fresh registry with every metric.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = &Registry::new();
        let counter = |name: &str, help: &str| -> Result<IntCounter, prometheus::Error> {
            let c = IntCounter::new(name, help)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let vec = |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
            let c = IntCounterVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let backlog =
            IntGauge::new("switchboard_gateway_record_backlog", "Record entries waiting for the store to come back.")?;
        registry.register(Box::new(backlog.clone()))?;
        Ok(Self {
            registry: registry.clone(),
            written: counter(
                "switchboard_gateway_record_entries_written_total",
                "Record entries written to the store.",
            )?,
            dropped: vec(
                "switchboard_gateway_record_entries_dropped_total",
                "Record entries dropped: the queue or the outage backlog was full (queue_full, backlog_full), or what waits for the store held its bytes (bytes_full).",
                &["reason"],
            )?,
            write_errors: counter(
                "switchboard_gateway_record_write_errors_total",
                "Failed writes to the record store (the entries wait in the backlog).",
            )?,
            backlog,
            cost: vec(
                "switchboard_gateway_cost_microdollars_total",
                "What sessions cost by the price table, in millionths of a US dollar, by agent (namespace/name) and model.",
                &["agent", "model"],
            )?,
            tokens: vec(
                "switchboard_gateway_tokens_total",
                "Tokens used by sessions, by agent (namespace/name), model and direction (input, output).",
                &["agent", "model", "direction"],
            )?,
            unpriced: vec(
                "switchboard_gateway_unpriced_usage_total",
                "Usage reports of a model the price table does not know (its cost counts as 0).",
                &["model"],
            )?,
            webhook: vec(
                "switchboard_gateway_webhook_deliveries_total",
                "End-of-call report attempts by outcome: delivered, refused (a 4xx answer: not tried again), retried (failed: due again after a pause), queue_full (not tried at once: it goes out from the store), unknown_session.",
                &["outcome"],
            )?,
            summaries: vec(
                "switchboard_gateway_record_summaries_total",
                "Session summaries by outcome: written, empty (nothing said, or an empty reply), failed (the model or the store), timeout, unknown_session.",
                &["outcome"],
            )?,
            analyses: vec(
                "switchboard_gateway_record_analyses_total",
                "Session analyses by outcome: written, empty (nothing said), no_model, model_error, timeout, malformed (the answer was not the declared fields), store_error, unknown_session. Every outcome but written and empty keeps its error in the record.",
                &["outcome"],
            )?,
            resolved: vec(
                "switchboard_gateway_analysis_resolved_total",
                "Analysed sessions by the agent they started at (namespace/name), its variant (empty: it runs none) and the analysis's resolved field (true, false): the resolution rate per agent and variant.",
                &["agent", "variant", "resolved"],
            )?,
        })
    }
}

impl RecordMetrics {
    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The gateway's side of the record: sessions push entries, the writer takes them.
#[derive(Debug)]
pub struct Recorder {
    tx: mpsc::Sender<Entry>,
    /// What is redacted.
    pub redactor: Redactor,
    /// What tokens cost.
    pub prices: Prices,
    /// Metrics.
    pub metrics: RecordMetrics,
    /// Where the record is kept (the API reads it).
    pub store: Store,
    /// Which Agents' sessions are analysed ([`analysis`]): the gateway sets it from its
    /// routing table.
    pub analyses: analysis::AnalysisBook,
    ord: AtomicU64,
    dropped: AtomicU64,
    state_ttl: Duration,
    /// Bytes of entries queued or in the writer's backlog ([`Entry::bytes`]), shared with
    /// the writer, which gives them back as they are written or dropped.
    pending: Arc<std::sync::atomic::AtomicUsize>,
    pending_limit: usize,
    session_bytes: usize,
    /// The base rules extended by Agents' own (`spec.record.redact`), compiled once per set.
    extended: Mutex<HashMap<Vec<RedactRule>, Arc<Redactor>>>,
}

/// Sets of Agent rules kept compiled; past this the cache starts again (each set is the
/// rules of the Agents one session reached, so there are few).
const EXTENDED_SETS: usize = 256;

impl Recorder {
    /// A recorder writing into `store`, and its writer (to be spawned).
    pub fn new(
        store: Store,
        config: RecordConfig,
        redactor: Redactor,
        prices: Prices,
        metrics: RecordMetrics,
    ) -> (Arc<Self>, writer::Writer) {
        let (tx, rx) = mpsc::channel(config.queue.max(1));
        let state_ttl = config.state_ttl;
        let (pending_limit, session_bytes) = (config.pending_bytes, config.session_bytes);
        let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writer = writer::Writer::new(store.clone(), config, rx, metrics.clone(), pending.clone());
        let recorder = Self {
            tx,
            redactor,
            prices,
            metrics,
            store,
            analyses: analysis::AnalysisBook::default(),
            ord: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            state_ttl,
            pending,
            pending_limit,
            session_bytes,
            extended: Mutex::default(),
        };
        (Arc::new(recorder), writer)
    }

    /// The redactor for a session that reached Agents with these rules (sorted, without
    /// repeats): the base rules when there are none. A rule that does not compile (the
    /// operator refuses such Agents, so only a hand-written routing table has one) is left
    /// out and logged; the others still apply.
    pub fn redactor_for(&self, rules: &[RedactRule]) -> Arc<Redactor> {
        let mut cache = self.extended.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(found) = cache.get(rules) {
            return found.clone();
        }
        let usable =
            rules.iter().filter(|rule| match self.redactor.extended([(rule.name.as_str(), rule.pattern.as_str())]) {
                Ok(_) => true,
                Err(error) => {
                    tracing::warn!("an Agent's redaction rule is left out: {error}");
                    false
                }
            });
        let extended = self
            .redactor
            .extended(usable.map(|rule| (rule.name.as_str(), rule.pattern.as_str())))
            .unwrap_or_else(|_| self.redactor.clone());
        let extended = Arc::new(extended);
        if cache.len() >= EXTENDED_SETS {
            cache.clear();
        }
        cache.insert(rules.to_vec(), extended.clone());
        extended
    }

    /// How long a session's state is kept for continuing it.
    pub fn state_ttl(&self) -> Duration {
        self.state_ttl
    }

    /// The bytes of entries waiting for the store, as they change: the gateway counts them
    /// in its memory budget (the gateway's `budget::MemoryBudget::counting`).
    pub fn pending(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        self.pending.clone()
    }

    /// The most a session's record keeps of what was said and done
    /// ([`RecordConfig::session_bytes`]).
    pub fn session_bytes(&self) -> usize {
        self.session_bytes
    }

    /// Queues `entry` without waiting; a full queue, or one whose entries with the
    /// writer's backlog hold [`RecordConfig::pending_bytes`], drops it (counted, and logged
    /// at the first drop and every 1,000th).
    pub fn push(&self, mut entry: Entry) {
        entry.ord = i64::try_from(self.ord.fetch_add(1, Ordering::Relaxed)).unwrap_or(i64::MAX);
        let bytes = entry.bytes();
        // A session's start and end (small) are never dropped for bytes: without them its
        // row would stay live for ever.
        let essential = matches!(entry.update, Some(Update::Start { .. } | Update::End { .. }));
        let admitted = self
            .pending
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                (essential || held.saturating_add(bytes) <= self.pending_limit).then_some(held.saturating_add(bytes))
            })
            .is_ok();
        let why = if !admitted {
            "bytes_full"
        } else if self.tx.try_send(entry).is_err() {
            self.pending.fetch_sub(bytes, Ordering::Relaxed);
            "queue_full"
        } else {
            return;
        };
        self.metrics.dropped.with_label_values(&[why]).inc();
        let n = self.dropped.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(1000) {
            tracing::warn!(
                dropped = n + 1,
                why,
                "the conversation record's queue is full: entries are dropped (the writer cannot keep up with the store)"
            );
        }
    }
}

/// Now, in unix µs.
pub fn now_us() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}
