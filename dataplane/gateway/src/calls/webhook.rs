//! Outbound calls' status callbacks: a call placed with a `statusCallback` URL
//! ([`super::PlaceRequest::status_callback`]) has each step POSTed there as JSON
//! ([`CallEvent`]: the event, its number in the call, its time and the call's status then —
//! reason, SIP status, who answered, and at the end the duration and who hung up), signed
//! as the end-of-call report is ([`switchboard_record::webhook::post_signed`]: the same
//! `X-Switchboard-Signature`, with this gateway's `--calls-webhook-secret-file`), with
//! `X-Switchboard-Delivery: <call id>:<sequence>` so a receiver can drop repeats.
//!
//! Bounded: one task per call delivers its events in order, one at a time; each attempt
//! has [`CallWebhookConfig::attempt_timeout`], and a connection failure, a timeout, 408,
//! 429 or a 5xx is tried again [`CallWebhookConfig::retries`] times, pausing
//! [`CallWebhookConfig::first_pause`] doubling (another 4xx is final); then the event is
//! given up and the next one tried. A call queues at most [`EVENTS_PER_CALL`] events (more
//! are dropped) and at most [`MAX_DELIVERING`] calls deliver at once (a call placed past it
//! gets none): a receiver that never answers holds neither memory nor the call, which goes
//! on as if it had no callback. Each attempt's outcome is counted
//! (`switchboard_gateway_call_webhook_deliveries_total`).

use std::sync::Arc;
use std::time::Duration;

use axum::http::Uri;
use serde::Serialize;
use switchboard_record::webhook::{Client, post_signed, retryable};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::{CallError, CallStatus};

mod receivers;
pub use receivers::Receivers;

/// The longest `statusCallback` URL, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// Events queued for one call's receiver at most (a call has about eight).
pub const EVENTS_PER_CALL: usize = 16;
/// Calls whose events are being delivered at once at most.
pub const MAX_DELIVERING: usize = 1024;

/// How status callbacks are signed and bounded, and where they may go.
#[derive(Clone)]
pub struct CallWebhookConfig {
    /// The HMAC key (as the end-of-call report's: at least 16 bytes).
    pub secret: Vec<u8>,
    /// The receivers a callback may name (`--calls-webhook-allow`); none: no callback.
    pub receivers: Receivers,
    /// The HTTP client (`http://` and `https://`, trusting the gateway's CAs).
    pub client: Client,
    /// How long one attempt may take (5 s).
    pub attempt_timeout: Duration,
    /// Attempts after the first for one event (3).
    pub retries: u32,
    /// The pause after the first failed attempt, doubling after each (500 ms).
    pub first_pause: Duration,
}

impl std::fmt::Debug for CallWebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the key.
        f.debug_struct("CallWebhookConfig")
            .field("receivers", &self.receivers)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("retries", &self.retries)
            .field("first_pause", &self.first_pause)
            .finish_non_exhaustive()
    }
}

impl CallWebhookConfig {
    /// Signs with `secret`, sends with `client` to `receivers`, with the default bounds.
    pub fn new(secret: Vec<u8>, client: Client, receivers: Receivers) -> Self {
        Self {
            secret,
            receivers,
            client,
            attempt_timeout: Duration::from_secs(5),
            retries: 3,
            first_pause: Duration::from_millis(500),
        }
    }
}

/// What one delivery POSTs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallEvent {
    /// What happened: a state the call entered (`queued`, `dialing`, `ringing`, `answered`,
    /// `completed`, `busy`, `no_answer`, `failed`) or `answered_by` (answering-machine
    /// detection decided).
    pub event: &'static str,
    /// Its number in the call, from 1: the receiver gets them in this order.
    pub sequence: u32,
    /// When it happened, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Whether it is the call's last (a final state).
    #[serde(rename = "final")]
    pub last: bool,
    /// The call as `GET /v1/calls/{id}` shows it then.
    #[serde(flatten)]
    pub call: CallStatus,
}

/// Checks a `statusCallback`: an `http://` or `https://` URL with a host and no user info,
/// at most [`MAX_URL_BYTES`], under one of the receivers `config` names ([`Receivers`]);
/// `config` is `None` when this gateway has no key to sign deliveries with.
pub fn check_url(url: &str, config: Option<&CallWebhookConfig>) -> Result<Uri, CallError> {
    let refuse = |why: &str| CallError::Invalid(format!("statusCallback: {why}"));
    if url.len() > MAX_URL_BYTES {
        return Err(refuse(&format!("the URL has {} bytes; at most {MAX_URL_BYTES}", url.len())));
    }
    let shown: String = url.chars().take(80).collect();
    let uri: Uri = url.parse().map_err(|e| refuse(&format!("{shown:?} is not a URL: {e}")))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none_or(str::is_empty) {
        return Err(refuse(&format!("{shown:?} is not an http:// or https:// URL with a host")));
    }
    let Some(config) = config else {
        return Err(refuse(
            "this gateway has no key to sign status callbacks with (start it with --calls-webhook-secret-file)",
        ));
    };
    match config.receivers.allow(&uri) {
        Ok(true) => Ok(uri),
        Ok(false) => Err(refuse(&format!(
            "{shown:?} is not under a receiver this gateway may call (its --calls-webhook-allow prefixes)"
        ))),
        Err(why) => Err(refuse(&format!("{shown:?}: {why}"))),
    }
}

/// The senders of every call's callback.
#[derive(Debug)]
pub(crate) struct Callbacks {
    config: Option<Arc<CallWebhookConfig>>,
    delivering: Arc<Semaphore>,
    deliveries: prometheus::CounterVec,
}

/// One call's side of its callback: the queue to its delivery task.
#[derive(Debug)]
pub(crate) struct Callback {
    queue: mpsc::Sender<CallEvent>,
    sequence: u32,
}

impl Callbacks {
    /// Senders by `config` (`None`: calls may not name a callback), counting into
    /// `deliveries` (by `outcome`).
    pub(crate) fn new(config: Option<CallWebhookConfig>, deliveries: prometheus::CounterVec) -> Self {
        Self { config: config.map(Arc::new), delivering: Arc::new(Semaphore::new(MAX_DELIVERING)), deliveries }
    }

    /// How deliveries are signed and where they may go; `None`: calls may not name a callback.
    pub(crate) fn config(&self) -> Option<&CallWebhookConfig> {
        self.config.as_deref()
    }

    fn count(&self, outcome: &str) {
        self.deliveries.with_label_values(&[outcome]).inc();
    }

    /// Starts the delivery task of a call to `url`; `None` (counted `dropped`) past
    /// [`MAX_DELIVERING`] or outside a runtime.
    pub(crate) fn start(&self, url: Uri) -> Option<Callback> {
        let config = self.config.clone()?;
        let handle = tokio::runtime::Handle::try_current().ok();
        let permit = self.delivering.clone().try_acquire_owned().ok();
        let (Some(handle), Some(permit)) = (handle, permit) else {
            tracing::warn!(limit = MAX_DELIVERING, "a call's status callback is not started: too many deliver at once");
            self.count("dropped");
            return None;
        };
        let (queue, events) = mpsc::channel(EVENTS_PER_CALL);
        let task = Delivery { config, url, deliveries: self.deliveries.clone(), _permit: permit };
        handle.spawn(task.run(events));
        Some(Callback { queue, sequence: 0 })
    }

    /// Queues `event` of a call (as its status is now) for its receiver; dropped and counted
    /// when its queue is full.
    pub(crate) fn emit(&self, callback: &mut Callback, event: &'static str, status: &CallStatus, last: bool) {
        callback.sequence += 1;
        let at_ms = status.updated_at_ms;
        let event = CallEvent { event, sequence: callback.sequence, at_ms, last, call: status.clone() };
        if callback.queue.try_send(event).is_err() {
            tracing::warn!(call = %status.id, "a status callback's event is dropped: its receiver is behind");
            self.count("dropped");
        }
    }
}

/// One call's delivery task: its events in order, each tried within the bounds.
struct Delivery {
    config: Arc<CallWebhookConfig>,
    url: Uri,
    deliveries: prometheus::CounterVec,
    _permit: OwnedSemaphorePermit,
}

impl Delivery {
    async fn run(self, mut events: mpsc::Receiver<CallEvent>) {
        while let Some(event) = events.recv().await {
            let last = event.last;
            self.deliver(&event).await;
            if last {
                break;
            }
        }
    }

    /// Tries `event` until delivered, refused, or out of retries.
    async fn deliver(&self, event: &CallEvent) {
        let Ok(body) = serde_json::to_vec(event) else { return };
        let delivery = format!("{}:{}", event.call.id, event.sequence);
        let config = &self.config;
        let mut pause = config.first_pause;
        for attempt in 0..=config.retries {
            let posted =
                post_signed(&config.client, &self.url, &config.secret, &delivery, &body, config.attempt_timeout).await;
            let failed = match posted {
                Ok(status) if (200..300).contains(&status) => return self.count("delivered"),
                Ok(status) if !retryable(status) => {
                    tracing::info!(call = %event.call.id, event = event.event, status, "the status callback refused an event; not retried");
                    return self.count("refused");
                }
                Ok(status) => format!("answered {status}"),
                Err(error) => error,
            };
            if attempt == config.retries {
                tracing::warn!(call = %event.call.id, event = event.event, attempts = attempt + 1, "the status callback failed: {failed}; the event is given up");
                return self.count("failed");
            }
            tracing::info!(call = %event.call.id, event = event.event, "the status callback failed: {failed}; trying again in {pause:?}");
            self.count("retried");
            tokio::time::sleep(pause).await;
            pause = pause.saturating_mul(2);
        }
    }

    fn count(&self, outcome: &str) {
        self.deliveries.with_label_values(&[outcome]).inc();
    }
}

#[cfg(test)]
mod tests;
