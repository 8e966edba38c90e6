//! Load tests anyone can run (`switchboard load <gateway-url>`): simulated callers that
//! play scenario files' turns ([`plan`]) through a gateway as clients do ([`caller`]) —
//! voice callers streaming 20 ms audio frames in real time, text callers typing — arriving
//! at a given rate under a cap on sessions at once, and a [`report`] of what they saw.
//!
//! Against local mode or a cluster whose models are the Bedrock simulator it costs nothing
//! (the simulator's Polly endpoint renders the callers' speech, and its Nova Sonic hears the
//! words); against real models every session is billed.
//!
//! The run is bounded whatever the gateway does: every caller has a session timeout (and
//! its connection and turns their own), callers start on schedule whether or not earlier
//! ones are done (up to the cap), and the run ends when the last caller has; a gateway that
//! is down, refuses or never answers gives a report with the codes, not a hang.

pub mod caller;
pub mod plan;
pub mod report;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

pub use caller::CallerSettings;
pub use plan::{Conversation, Mode};
pub use report::{CallerOutcome, Report, RunSettings};

/// Most callers one run may have.
pub const MAX_CALLERS: u64 = 100_000;
/// Most sessions at once.
pub const MAX_CONCURRENCY: u64 = 10_000;

/// How a run goes.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// How each caller connects and behaves.
    pub caller: CallerSettings,
    /// Callers in all.
    pub callers: u64,
    /// New callers a second.
    pub rate: f64,
    /// Most sessions at once: a caller due while this many are under way waits for one to end.
    pub concurrency: u64,
    /// The longest one caller's session may last, connection included.
    pub session_timeout: Duration,
}

/// The options cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A number is out of range.
    #[error("{0}")]
    Invalid(String),
}

impl LoadOptions {
    /// Checks the numbers and the URL.
    pub fn check(&self) -> Result<(), LoadError> {
        let invalid = |m: String| Err(LoadError::Invalid(m));
        if !(1..=MAX_CALLERS).contains(&self.callers) {
            return invalid(format!("--callers must be 1 to {MAX_CALLERS}"));
        }
        if !(self.rate.is_finite() && self.rate > 0.0 && self.rate <= 10_000.0) {
            return invalid("--rate must be above 0 and at most 10000 new sessions a second".into());
        }
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return invalid(format!("--concurrency must be 1 to {MAX_CONCURRENCY}"));
        }
        let url = &self.caller.url;
        if url.starts_with("wss://") {
            return invalid(format!(
                "{url}: wss:// is not supported by this client; load the gateway's ws:// address inside the cluster \
                 (e.g. through kubectl port-forward)"
            ));
        }
        if !url.starts_with("ws://") {
            return invalid(format!("{url}: the gateway URL must start with ws://"));
        }
        Ok(())
    }
}

/// Runs `options.callers` callers over `conversations` (caller `i` plays conversation
/// `i mod n`) and reports what they saw.
pub async fn run(options: &LoadOptions, conversations: Vec<Conversation>) -> Result<Report, LoadError> {
    options.check()?;
    if conversations.is_empty() {
        return Err(LoadError::Invalid("no conversations to play".into()));
    }
    let conversations: Arc<[Conversation]> = conversations.into();
    let settings = Arc::new(options.caller.clone());
    let slots = Arc::new(Semaphore::new(usize::try_from(options.concurrency).unwrap_or(usize::MAX)));
    let began = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / options.rate);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..options.callers {
        tokio::time::sleep_until(began + interval.mul_f64(i as f64)).await;
        let Ok(slot) = slots.clone().acquire_owned().await else { break };
        let (settings, conversations) = (settings.clone(), conversations.clone());
        let timeout = options.session_timeout;
        tasks.spawn(async move {
            let _slot = slot;
            let conversation = &conversations[(i % conversations.len() as u64) as usize];
            let mut outcome = CallerOutcome::default();
            if tokio::time::timeout(timeout, caller::call(&settings, conversation, &mut outcome)).await.is_err() {
                caller::fail(&mut outcome, "timeout session".into());
            }
            outcome
        });
    }
    let mut outcomes = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(outcome) => outcomes.push(outcome),
            Err(error) => {
                tracing::warn!(%error, "a caller's task failed");
                let mut outcome = CallerOutcome::default();
                caller::fail(&mut outcome, "caller panicked".into());
                outcomes.push(outcome);
            }
        }
    }
    let settings = RunSettings {
        target: options.caller.url.clone(),
        mode: options.caller.mode.as_str().into(),
        callers: options.callers,
        rate: options.rate,
        concurrency: options.concurrency,
    };
    Ok(Report::of(settings, began.elapsed(), outcomes))
}
