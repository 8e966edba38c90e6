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
//! drops repeats). A delivery is retried with backoff (1, 2, 4, 8 s) on a connection
//! failure, a timeout, 408, 429 or a 5xx; other answers are final. Reports wait in a
//! bounded queue; every outcome is counted.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use prometheus::IntCounterVec;
use serde::Serialize;
use tokio::sync::mpsc;

use super::store::{SessionRecord, Store};

/// Reports waiting to be sent; more are dropped (counted).
const QUEUE: usize = 1024;
/// Attempts per report.
const ATTEMPTS: u32 = 5;
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client the reports go out with (`http://` and `https://`).
pub type Client = switchboard_models::net::client::HttpClient;

/// Where reports go.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// The receiver.
    pub url: http::Uri,
    /// The HMAC key.
    pub secret: Vec<u8>,
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
            summaries,
            tool_calls: count("tool_start"),
            tool_errors: count("tool_error"),
            record: format!("{}/{}", crate::server::RECORD_PATH, s.id),
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

/// The sender: session ids in, reports out.
#[derive(Debug)]
pub struct Webhook {
    config: WebhookConfig,
    client: Client,
    store: Store,
    rx: mpsc::Receiver<String>,
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
        (Self { config, client, store, rx, deliveries }, tx)
    }

    /// Sends reports until every sender is gone.
    pub async fn run(mut self) {
        while let Some(id) = self.rx.recv().await {
            let outcome = self.deliver(&id).await;
            self.deliveries.with_label_values(&[outcome]).inc();
        }
    }

    async fn deliver(&self, id: &str) -> &'static str {
        let record = match self.store.show(id).await {
            Ok(Some(record)) => record,
            Ok(None) => return "unknown_session",
            Err(error) => {
                tracing::warn!(session_id = %id, "no end-of-call report: cannot read the record: {error}");
                return "failed";
            }
        };
        let Ok(body) = serde_json::to_vec(&Report::of(&record)) else { return "failed" };
        let mut pause = Duration::from_secs(1);
        for attempt in 1..=ATTEMPTS {
            match self.post(id, &body).await {
                Ok(status) if (200..300).contains(&status) => return "delivered",
                Ok(status) if !(status == 408 || status == 429 || status >= 500) => {
                    tracing::warn!(session_id = %id, status, "the end-of-call webhook refused the report; not retried");
                    return "refused";
                }
                Ok(status) => {
                    tracing::info!(session_id = %id, status, attempt, "the end-of-call webhook failed; retrying")
                }
                Err(error) => {
                    tracing::info!(session_id = %id, attempt, "the end-of-call webhook failed: {error}; retrying")
                }
            }
            if attempt < ATTEMPTS {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
        tracing::warn!(session_id = %id, "the end-of-call report was not delivered after {ATTEMPTS} attempts");
        "failed"
    }

    async fn post(&self, id: &str, body: &[u8]) -> Result<u16, String> {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
        let request = http::Request::post(self.config.url.clone())
            .header("content-type", "application/json")
            .header("x-switchboard-signature", signature(&self.config.secret, t, body))
            .header("x-switchboard-delivery", id)
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| e.to_string())?;
        let response = tokio::time::timeout(ATTEMPT_TIMEOUT, self.client.request(request))
            .await
            .map_err(|_| format!("no answer in {} s", ATTEMPT_TIMEOUT.as_secs()))?
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        // Read (and drop) the body so the connection can be reused.
        let _ = tokio::time::timeout(ATTEMPT_TIMEOUT, response.into_body().collect()).await;
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
