//! Leader election on a `coordination.k8s.io/v1` Lease, so several operator replicas can run
//! and only one writes. The Lease is taken and renewed with optimistic concurrency (a write
//! carries the `resourceVersion` it read; a conflict means another replica won), which is
//! the one place a read-modify-write is right: it is a compare-and-swap.
//!
//! Timing, for a Lease of `D` seconds (as client-go does it, with its proportions):
//!
//! - A standby takes the Lease when it is free, released, or when the record has not
//!   changed for `D` on the standby's *own* monotonic clock since it first saw that record
//!   (never by comparing the holder's `renewTime` with its own wall clock, so clock skew
//!   between nodes cannot make it take over early).
//! - The leader tries to renew every `D/5`. Each successful renewal opens its write
//!   [`Fence`] until `2D/3` after the renewal *started* (before the standby could have seen
//!   it, hence at least `D/3` before any standby may take over). Every attempt is cut off at
//!   that instant. When it passes without a renewal the fence is already closed — writes are
//!   refused by the API client itself, see `guard.rs` — and `keep` reports leadership lost,
//!   so the controllers stop and the process exits to restart clean.
//! - On graceful shutdown the leader releases the Lease so a standby takes over at once.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::guard::Fence;

/// Why a Lease operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The API server refused or failed a Lease request.
    #[error("lease {name}: {source}; check the operator's RBAC for coordination.k8s.io leases")]
    Kube {
        /// The Lease name.
        name: String,
        /// The cause.
        source: kube::Error,
    },
}

impl LeaderError {
    /// A short, bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        "lease"
    }
}

/// One replica's view of the leader Lease.
#[derive(Clone)]
pub struct LeaderElector {
    api: Api<Lease>,
    /// The same Lease through a client fenced by `fence`: renewals go this way, so a
    /// renewal that was under way when the fence closed (the process froze between reading
    /// and writing the Lease) is not sent.
    renewals: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    fence: Fence,
    /// The Lease record (its resourceVersion) as this replica last saw it held by another,
    /// and when it first saw that version.
    observed: std::sync::Arc<std::sync::Mutex<Option<(String, Instant)>>>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector").field("name", &self.name).field("identity", &self.identity).finish()
    }
}

impl LeaderElector {
    /// An elector for the Lease `namespace/name` as `identity`; it opens `fence` while it
    /// holds the Lease. Of the `(client, fenced)` pair, `client` must not be fenced by
    /// `fence` (the elector writes the Lease to become leader) and `fenced` must be; both
    /// should have request deadlines (see `guard.rs`).
    pub fn new(
        (client, fenced): (Client, Client),
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
        fence: Fence,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            renewals: Api::namespaced(fenced, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            duration,
            fence,
            observed: Default::default(),
        }
    }

    /// How often a standby polls and the leader renews: a fifth of the Lease.
    pub fn retry_period(&self) -> Duration {
        (self.duration / 5).max(Duration::from_millis(200))
    }

    /// How long after the start of its last successful renewal the leader may still write:
    /// two thirds of the Lease.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    /// Whether the Lease record `version`, held by another, has gone unchanged for `valid`
    /// since this replica first saw it.
    fn stale(&self, version: &str, valid: Duration) -> bool {
        let mut observed = self.observed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match observed.as_ref() {
            Some((seen, since)) if seen == version => since.elapsed() >= valid,
            _ => {
                *observed = Some((version.to_owned(), Instant::now()));
                false
            }
        }
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Takes or renews the Lease; true when this replica holds it afterwards (and then its
    /// fence is open until [`Self::renew_deadline`] after this call started).
    pub async fn try_acquire(&self) -> Result<bool, LeaderError> {
        self.attempt(false).await
    }

    /// [`Self::try_acquire`]; `renewing` (from [`Self::keep`]) writes through the fenced client.
    async fn attempt(&self, renewing: bool) -> Result<bool, LeaderError> {
        let started = Instant::now();
        let now = Timestamp::now();
        let kube = |source| LeaderError::Kube { name: self.name.clone(), source };
        let api = if renewing { &self.renewals } else { &self.api };
        let Some(current) = api.get_opt(&self.name).await.map_err(kube)? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
                spec: Some(self.spec(now, now, 0)),
            };
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(self.held(started)),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(kube(e)),
            };
        };
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let mine = holder == self.identity;
        if !mine && !holder.is_empty() {
            let version = current.metadata.resource_version.clone().unwrap_or_default();
            let valid = Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0));
            if !self.stale(&version, valid) {
                return Ok(false);
            }
        }
        let acquired = if mine { spec.acquire_time.map(|t| t.0).unwrap_or(now) } else { now };
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!mine);
        let lease = Lease { metadata: current.metadata, spec: Some(self.spec(now, acquired, transitions)) };
        match api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(self.held(started)),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(kube(e)),
        }
    }

    fn held(&self, started: Instant) -> bool {
        self.fence.open_until(started + self.renew_deadline());
        true
    }

    /// Gives the Lease up if this replica holds it, so a standby can take it at once.
    pub async fn release(&self) -> Result<(), LeaderError> {
        self.fence.close();
        let kube = |source| LeaderError::Kube { name: self.name.clone(), source };
        let Some(current) = self.api.get_opt(&self.name).await.map_err(kube)? else { return Ok(()) };
        let mut spec = current.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        let lease = Lease { metadata: current.metadata, spec: Some(spec) };
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(kube(e)),
        }
    }

    /// Waits until this replica holds the Lease (true) or `shutdown` is cancelled (false).
    /// API errors are logged and retried.
    pub async fn acquire(&self, shutdown: &CancellationToken) -> bool {
        let retry = self.retry_period();
        loop {
            match self.try_acquire().await {
                Ok(true) => return true,
                Ok(false) => tracing::debug!(lease = %self.name, "another replica leads; standing by"),
                Err(e) => tracing::warn!("{e}"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = tokio::time::sleep(retry) => {}
            }
        }
    }

    /// Renews the Lease until `shutdown` is cancelled; returns early (having closed the
    /// fence and cancelled `lost`) when another replica took the Lease or no renewal
    /// succeeded before the fence closed.
    pub async fn keep(&self, shutdown: CancellationToken, lost: CancellationToken) {
        loop {
            let Some(until) = self.fence.open() else {
                return self.lose(&lost, "could not renew the Lease before its renew deadline");
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(until.min(Instant::now() + self.retry_period())) => {}
            }
            if self.fence.open().is_none() {
                return self.lose(&lost, "could not renew the Lease before its renew deadline");
            }
            match tokio::time::timeout_at(until, self.attempt(true)).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return self.lose(&lost, "another replica took the Lease"),
                Ok(Err(e)) => tracing::warn!("renewing the Lease: {e}"),
                Err(_) => tracing::warn!(lease = %self.name, "renewing the Lease: no answer before the renew deadline"),
            }
        }
    }

    fn lose(&self, lost: &CancellationToken, why: &str) {
        self.fence.close();
        tracing::error!(lease = %self.name, "{why}; no more writes, stopping");
        lost.cancel();
    }

    fn spec(&self, now: Timestamp, acquired: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elector(duration: Duration) -> LeaderElector {
        // A client that is never used by these tests (no request is sent).
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("uri"));
        let client = Client::try_from(config).expect("client");
        LeaderElector::new((client.clone(), client), "ns", "lease", "me", duration, Fence::new())
    }

    #[tokio::test]
    async fn a_record_is_stale_only_after_it_went_unchanged_for_its_duration_here() {
        let e = elector(Duration::from_secs(15));
        let valid = Duration::from_millis(300);
        assert!(!e.stale("1", valid), "first sight starts the clock");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!e.stale("1", valid));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(e.stale("1", valid), "unchanged for the whole duration");
        assert!(!e.stale("2", valid), "a renewal (new version) restarts the clock");
    }
}
