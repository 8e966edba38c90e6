//! The end-of-call report: when a session ends, or its client went and never came back
//! (`abandoned`; not while it may still resume), the gateway POSTs a JSON report to a
//! configured URL — Agents visited, outcome, close code, duration, turns, tokens, cost, the
//! model's summary (when [`super::summary`] is on), the agents' own summaries (a return
//! handoff's `summary`) and the record's path — built from the record itself once its end is written, so a
//! session resumed through another replica is reported whole.
//!
//! Each POST is signed: `X-Switchboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
//! "<t>.<body>" with the shared secret>` (a receiver checks the MAC and refuses old `t`,
//! which stops replays), and carries `X-Switchboard-Delivery: <session id>` (a receiver
//! drops repeats).
//!
//! Delivery is at least once, from the store ([`super::store`]'s `delivery`): a session's
//! end makes its report due there, in the same write. The gateway that ended it tries at
//! once; a connection failure, a timeout, 408, 429 or a 5xx makes it due again with
//! backoff (1 s doubling to 5 minutes), and every replica takes due reports from the
//! store every few seconds, so a report outlives a receiver's outage and the gateway that
//! ended its session, for as long as the session is kept. Other answers are final. At most
//! [`IN_FLIGHT`] deliveries run at once, so one slow receiver does not hold the others up.
//! Every outcome is counted.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use prometheus::IntCounterVec;
use serde::Serialize;
use tokio::sync::mpsc;

use super::store::{SessionRecord, Store};

/// Sessions whose report waits to be tried at once; more wait for the store's poll.
const QUEUE: usize = 1024;
/// Deliveries at once.
pub const IN_FLIGHT: usize = 8;
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest pause between two attempts at one report.
const LONGEST_PAUSE: Duration = Duration::from_secs(300);
/// How long a claimed report is not due for anyone else: longer than an attempt (reading
/// the record and the POST).
const LEASE: Duration = Duration::from_secs(30);

/// The HTTP client the reports go out with (`http://` and `https://`).
pub type Client = switchboard_models::net::client::HttpClient;

/// Where reports go.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// The receiver.
    pub url: http::Uri,
    /// The HMAC key.
    pub secret: Vec<u8>,
    /// When a failed report is tried again.
    pub retry: Retry,
}

/// When a failed report is tried again: after `first_pause`, doubling with each failure up
/// to five minutes, taken from the store (by any replica) at its next `poll` once due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// The pause after the first failed attempt (1 s).
    pub first_pause: Duration,
    /// How often due reports are taken from the store (2 s).
    pub poll: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self { first_pause: Duration::from_secs(1), poll: Duration::from_secs(2) }
    }
}

/// The report.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Report {
    /// The session.
    pub session_id: String,
    /// `ended`.
    pub outcome: String,
    /// The close code it ended with, when one was sent.
    pub close_code: Option<i64>,
    /// Unix ms.
    pub started_at: i64,
    /// Unix ms.
    pub ended_at: Option<i64>,
    /// Milliseconds from start to end.
    pub duration_ms: Option<i64>,
    /// The credential that opened it.
    pub credential: String,
    /// The verified caller, redacted as the record is.
    pub caller: Option<String>,
    /// Every Agent it reached, in order (`namespace/name`).
    pub agents: Vec<String>,
    /// User turns answered.
    pub turns: i64,
    /// Tokens read.
    pub input_tokens: i64,
    /// Tokens generated.
    pub output_tokens: i64,
    /// USD, by the price table.
    pub cost_usd: f64,
    /// What happened, in a few sentences by a model (with `--record-summary-model`).
    pub summary: Option<String>,
    /// The variant of the Agent it started at, when that Agent runs variants.
    #[serde(default)]
    pub variant: Option<String>,
    /// The variant each Agent it reached ran, by Agent, for those that run variants.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub variants: std::collections::BTreeMap<String, String>,
    /// Whether the caller was put through to a person.
    #[serde(default)]
    pub transferred: bool,
    /// Who hung up, for a phone call's session (`caller`, `agent`, `transfer`,
    /// `media_timeout`, `edge`; an outbound call's `callee`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hung_up_by: Option<String>,
    /// The analysis (`spec.record.analysis`): `{"model", "fields"}`, or `{"model", "error"}`
    /// when it failed; with its tokens and cost. Absent when the Agent asks for none.
    #[serde(default)]
    pub analysis: Option<serde_json::Value>,
    /// The agents' own summaries of what they did (return handoffs), oldest first.
    pub summaries: Vec<String>,
    /// Tool calls made, and how many failed.
    pub tool_calls: usize,
    /// Tool calls that failed or were refused.
    pub tool_errors: usize,
    /// The record's path on the gateway (GET with a key marked records=read).
    pub record: String,
}

impl Report {
    /// The report of a recorded session.
    pub fn of(record: &SessionRecord) -> Self {
        let s = &record.summary;
        let count = |kind: &str| record.events.iter().filter(|e| e.kind == kind).count();
        let summaries = record
            .events
            .iter()
            .filter(|e| e.kind == "handoff")
            .filter_map(|e| e.data["summary"].as_str().map(str::to_owned))
            .collect();
        Self {
            session_id: s.id.clone(),
            outcome: s.outcome.clone(),
            close_code: s.close_code,
            started_at: s.started_at,
            ended_at: s.ended_at,
            duration_ms: s.ended_at.map(|end| end - s.started_at),
            credential: s.credential.clone(),
            caller: s.caller.clone(),
            agents: s.agents.clone(),
            turns: s.turns,
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            cost_usd: s.cost_usd,
            summary: s.summary.clone(),
            variant: s.variant.clone(),
            variants: s.variants.clone(),
            transferred: s.transferred,
            hung_up_by: s.hung_up_by.clone(),
            analysis: s.analysis.clone(),
            summaries,
            tool_calls: count("tool_start"),
            tool_errors: count("tool_error"),
            record: format!("{}/{}", crate::RECORD_PATH, s.id),
        }
    }
}

/// The signature header's value for `body` at unix time `t`.
pub fn signature(secret: &[u8], t: u64, body: &[u8]) -> String {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret);
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(body);
    let tag = aws_lc_rs::hmac::sign(&key, &signed);
    format!("t={t},v1={}", hex::encode(tag.as_ref()))
}

/// The pause after the `attempt`th failed attempt: `first` doubling, at most [`LONGEST_PAUSE`].
fn pause_after(first: Duration, attempt: i64) -> Duration {
    let doublings = u32::try_from(attempt.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
    first.saturating_mul(1u32 << doublings).min(LONGEST_PAUSE)
}

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// How one attempt went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    Delivered,
    /// A final answer (a 4xx other than 408 and 429).
    Refused,
    /// To be tried again.
    Failed,
    /// The session is no longer recorded.
    Unknown,
}

/// The sender: session ids in (to try at once), reports out; due reports from the store.
#[derive(Debug)]
pub struct Webhook {
    rx: mpsc::Receiver<String>,
    sender: std::sync::Arc<Sender>,
}

/// What one delivery needs.
#[derive(Debug)]
struct Sender {
    config: WebhookConfig,
    client: Client,
    store: Store,
    deliveries: IntCounterVec,
}

impl Webhook {
    /// A sender of reports on sessions read from `store`, and the queue the writer feeds
    /// with ended sessions' ids.
    pub fn new(
        config: WebhookConfig,
        client: Client,
        store: Store,
        deliveries: IntCounterVec,
    ) -> (Self, mpsc::Sender<String>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Self { rx, sender: std::sync::Arc::new(Sender { config, client, store, deliveries }) }, tx)
    }

    /// Sends reports until every sender is gone: those it is told of at once, the others
    /// due in the store as they come due.
    pub async fn run(mut self) {
        let mut tasks = tokio::task::JoinSet::new();
        let mut poll = tokio::time::interval(self.sender.config.retry.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                id = self.rx.recv(), if tasks.len() < IN_FLIGHT => match id {
                    Some(id) => {
                        let sender = self.sender.clone();
                        tasks.spawn(async move { sender.claim_and_deliver(&id).await });
                    }
                    None => break,
                },
                _ = poll.tick(), if tasks.len() < IN_FLIGHT => {
                    let room = IN_FLIGHT - tasks.len();
                    for (id, attempt) in self.sender.due(room).await {
                        let sender = self.sender.clone();
                        tasks.spawn(async move { sender.deliver(&id, attempt).await });
                    }
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        while tasks.join_next().await.is_some() {}
    }
}

impl Sender {
    /// Up to `room` reports due now, claimed.
    async fn due(&self, room: usize) -> Vec<(String, i64)> {
        let now = super::now_us() / 1000;
        let limit = i64::try_from(room).unwrap_or(1);
        match self.store.claim_due_reports(now, now + ms(LEASE), limit).await {
            Ok(due) => due,
            Err(error) => {
                tracing::debug!("cannot take due end-of-call reports from the record: {error}");
                Vec::new()
            }
        }
    }

    /// Delivers session `id`'s report if it is due at all (another replica may have).
    async fn claim_and_deliver(&self, id: &str) {
        let now = super::now_us() / 1000;
        match self.store.claim_report(id, now + ms(LEASE)).await {
            Ok(Some(attempt)) => self.deliver(id, attempt).await,
            Ok(None) => {}
            // Still due in the store: the poll takes it once the store answers.
            Err(error) => tracing::info!(session_id = %id, "the end-of-call report waits: {error}"),
        }
    }

    /// One attempt at session `id`'s report (its `attempt`th), and what follows it: done,
    /// or due again after a pause.
    async fn deliver(&self, id: &str, attempt: i64) {
        let outcome = self.attempt(id, attempt).await;
        let label = match outcome {
            Attempt::Delivered => "delivered",
            Attempt::Refused => "refused",
            Attempt::Failed => "retried",
            Attempt::Unknown => "unknown_session",
        };
        self.deliveries.with_label_values(&[label]).inc();
        let done = match outcome {
            Attempt::Delivered | Attempt::Refused | Attempt::Unknown => self.store.report_done(id).await,
            Attempt::Failed => {
                let at = super::now_us() / 1000 + ms(pause_after(self.config.retry.first_pause, attempt));
                self.store.report_again(id, at).await
            }
        };
        // Not written: the lease lapses and the report is due again (at least once).
        if let Err(error) = done {
            tracing::info!(session_id = %id, "cannot note the end-of-call report's delivery: {error}");
        }
    }

    async fn attempt(&self, id: &str, attempt: i64) -> Attempt {
        let record = match self.store.show(id).await {
            Ok(Some(record)) => record,
            Ok(None) => return Attempt::Unknown,
            Err(error) => {
                tracing::info!(session_id = %id, "the end-of-call report waits: cannot read the record: {error}");
                return Attempt::Failed;
            }
        };
        let Ok(body) = serde_json::to_vec(&Report::of(&record)) else { return Attempt::Refused };
        let failed = match self.post(id, &body).await {
            Ok(status) if (200..300).contains(&status) => return Attempt::Delivered,
            Ok(status) if !retryable(status) => {
                tracing::warn!(session_id = %id, status, "the end-of-call webhook refused the report; not retried");
                return Attempt::Refused;
            }
            Ok(status) => format!("answered {status}"),
            Err(error) => error,
        };
        let pause = pause_after(self.config.retry.first_pause, attempt).as_secs_f64();
        if attempt % 5 == 0 {
            tracing::warn!(session_id = %id, attempt, "the end-of-call webhook failed: {failed}; trying again in {pause} s");
        } else {
            tracing::info!(session_id = %id, attempt, "the end-of-call webhook failed: {failed}; trying again in {pause} s");
        }
        Attempt::Failed
    }

    async fn post(&self, id: &str, body: &[u8]) -> Result<u16, String> {
        post_signed(&self.client, &self.config.url, &self.config.secret, id, body, ATTEMPT_TIMEOUT).await
    }
}

/// Whether an answer with HTTP `status` is worth trying again: 408, 429 and 5xx (a
/// connection failure or a timeout is too); any other is final.
pub fn retryable(status: u16) -> bool {
    status == 408 || status == 429 || status >= 500
}

/// One signed delivery: POSTs the JSON `body` to `url` with the [`signature`] of `secret`
/// (`X-Switchboard-Signature`) and `delivery` as `X-Switchboard-Delivery`, within `timeout`
/// (the answer's headers, then its body, each); returns the HTTP status. The end-of-call
/// report and the outbound calls' status callbacks are both sent by it.
pub async fn post_signed(
    client: &Client,
    url: &http::Uri,
    secret: &[u8],
    delivery: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<u16, String> {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let request = http::Request::post(url.clone())
        .header("content-type", "application/json")
        .header("x-switchboard-signature", signature(secret, t, body))
        .header("x-switchboard-delivery", delivery)
        .body(Full::new(Bytes::copy_from_slice(body)))
        .map_err(|e| e.to_string())?;
    let response = tokio::time::timeout(timeout, client.request(request))
        .await
        .map_err(|_| format!("no answer in {} s", timeout.as_secs_f64()))?
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    // Read (and drop) the body so the connection can be reused.
    let _ = tokio::time::timeout(timeout, response.into_body().collect()).await;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_pause_one_second_doubling_to_five_minutes() {
        let first = Retry::default().first_pause;
        let pauses: Vec<u64> = (1..=11).map(|n| pause_after(first, n).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(pause_after(first, i64::MAX), LONGEST_PAUSE);
        assert_eq!(pause_after(first, 0).as_secs(), 1);
        let tenth = Duration::from_millis(100);
        let pauses: Vec<u128> = (1..=4).map(|n| pause_after(tenth, n).as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800], "a shorter first pause doubles the same way");
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_time_and_body() {
        // RFC 4231 test case 2 uses key "Jefe"; here the message is "<t>.<body>".
        let sig = signature(b"Jefe", 0, b"what do ya want for nothing?");
        assert!(sig.starts_with("t=0,v1="), "{sig}");
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, b"Jefe");
        let tag = hex::decode(&sig["t=0,v1=".len()..]).expect("hex");
        assert!(aws_lc_rs::hmac::verify(&key, b"0.what do ya want for nothing?", &tag).is_ok());
        assert_ne!(signature(b"Jefe", 1, b"x"), signature(b"Jefe", 2, b"x"), "the time is signed");
    }
}
