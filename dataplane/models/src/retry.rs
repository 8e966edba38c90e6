//! Bounded retries of a model call: a failed call is sent again only when the error is
//! retryable and nothing of the reply has been streamed yet (once text or a tool call has
//! reached the caller, replaying the call would duplicate it, so the error is surfaced).
//! Waits grow exponentially with jitter so that many sessions throttled together do not
//! retry in lockstep.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::{ModelRequest, ModelStream, TextModel};

/// How often and how patiently to retry a model call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Most attempts in total, the first included; 1 disables retries.
    pub max_attempts: u32,
    /// The wait before the first retry (before jitter).
    pub initial_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
    /// Seed of the jitter; `None` seeds from the system. Tests set it for determinism.
    pub jitter_seed: Option<u64>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            jitter_seed: None,
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1 for the first retry): exponential in
    /// `retry`, capped at `max_backoff`, with "equal jitter" — half of it fixed, the other
    /// half random — so it is never shorter than half the exponential step.
    pub fn backoff(&self, retry: u32, rng: &mut fastrand::Rng) -> Duration {
        let exponent = retry.saturating_sub(1).min(31);
        let step = self.initial_backoff.saturating_mul(1u32 << exponent).min(self.max_backoff);
        let half = step / 2;
        let jitter_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(rng.u64(0..=jitter_nanos))
    }
}

/// Streams `request` from `model`, retrying as `policy` allows.
pub fn stream_with_retry(model: Arc<dyn TextModel>, request: ModelRequest, policy: RetryPolicy) -> ModelStream {
    retrying(policy, move || model.stream(&request))
}

/// Runs `start` to open a model stream and re-runs it, as `policy` allows, when the
/// stream fails with a retryable error before yielding any output.
pub fn retrying<F>(policy: RetryPolicy, mut start: F) -> ModelStream
where
    F: FnMut() -> ModelStream + Send + 'static,
{
    let rng = match policy.jitter_seed {
        Some(seed) => fastrand::Rng::with_seed(seed),
        None => fastrand::Rng::new(),
    };
    let current = start();
    let state = RetryState { start, policy, attempt: 1, current, output_seen: false, rng, done: false };
    Box::pin(futures_util::stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        loop {
            match state.current.next().await {
                Some(Ok(event)) => {
                    state.output_seen |= event.is_output();
                    return Some((Ok(event), state));
                }
                Some(Err(error)) => {
                    if state.output_seen || !error.is_retryable() || state.attempt >= state.policy.max_attempts {
                        state.done = true;
                        return Some((Err(error), state));
                    }
                    let delay = state.policy.backoff(state.attempt, &mut state.rng);
                    tracing::warn!(
                        attempt = state.attempt,
                        max_attempts = state.policy.max_attempts,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        error = %error,
                        "model call failed before any output; retrying"
                    );
                    tokio::time::sleep(delay).await;
                    state.attempt += 1;
                    state.current = (state.start)();
                }
                None => return None,
            }
        }
    }))
}

struct RetryState<F> {
    start: F,
    policy: RetryPolicy,
    attempt: u32,
    current: ModelStream,
    output_seen: bool,
    rng: fastrand::Rng,
    done: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ModelError, ModelEvent, StopReason};
    use std::sync::atomic::{AtomicU32, Ordering};

    fn policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
            jitter_seed: Some(7),
        }
    }

    fn scripted(items: Vec<Result<ModelEvent, ModelError>>) -> ModelStream {
        Box::pin(futures_util::stream::iter(items))
    }

    fn throttled() -> ModelError {
        ModelError::Throttled { message: "slow down".into() }
    }

    #[tokio::test]
    async fn retries_until_success_before_output() {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = calls.clone();
        let stream = retrying(policy(3), move || {
            if counter.fetch_add(1, Ordering::SeqCst) < 2 {
                scripted(vec![Err(throttled())])
            } else {
                scripted(vec![Ok(ModelEvent::TextDelta("hi".into())), Ok(ModelEvent::Stop(StopReason::EndTurn))])
            }
        });
        let events: Vec<_> = stream.collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert!(events.iter().all(Result::is_ok), "{events:?}");
        assert_eq!(events.len(), 2);
    }

    #[tokio::test]
    async fn gives_up_after_max_attempts() {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = calls.clone();
        let stream = retrying(policy(2), move || {
            counter.fetch_add(1, Ordering::SeqCst);
            scripted(vec![Err(throttled())])
        });
        let events: Vec<_> = stream.collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(matches!(events.as_slice(), [Err(ModelError::Throttled { .. })]));
    }

    #[tokio::test]
    async fn never_retries_after_output_or_on_permanent_errors() {
        for first in [
            vec![Ok(ModelEvent::TextDelta("a".into())), Err(throttled())],
            vec![Err(ModelError::AccessDenied { message: "no".into() })],
        ] {
            let calls = Arc::new(AtomicU32::new(0));
            let counter = calls.clone();
            let mut script = Some(first);
            let stream = retrying(policy(5), move || {
                counter.fetch_add(1, Ordering::SeqCst);
                scripted(script.take().unwrap_or_default())
            });
            let events: Vec<_> = stream.collect().await;
            assert_eq!(calls.load(Ordering::SeqCst), 1);
            assert!(events.last().is_some_and(Result::is_err), "{events:?}");
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            jitter_seed: Some(1),
        };
        let mut rng = fastrand::Rng::with_seed(1);
        for retry in 1..10 {
            let step = (100u64 << (retry - 1)).min(1000);
            let wait = policy.backoff(retry, &mut rng);
            assert!(wait >= Duration::from_millis(step / 2), "retry {retry}: {wait:?}");
            assert!(wait <= Duration::from_millis(step), "retry {retry}: {wait:?}");
        }
    }
}
