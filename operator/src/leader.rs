//! Leader election on a `coordination.k8s.io/v1` Lease, so several operator replicas can run
//! and only one writes. The Lease is taken and renewed with optimistic concurrency (a write
//! carries the `resourceVersion` it read; a conflict means another replica won), which is
//! the one place a read-modify-write is right: it is a compare-and-swap.
//!
//! A replica acquires the Lease when it is free, released, expired (not renewed for
//! `leaseDurationSeconds`) or already its own; it renews every third of the duration and
//! gives up leadership as soon as a renewal finds another holder or renewals fail for a
//! whole duration. On graceful shutdown it releases the Lease so a standby takes over at once.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

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
    name: String,
    identity: String,
    duration: Duration,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector").field("name", &self.name).field("identity", &self.identity).finish()
    }
}

impl LeaderElector {
    /// An elector for the Lease `namespace/name` as `identity`.
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str, duration: Duration) -> Self {
        Self { api: Api::namespaced(client, namespace), name: name.to_owned(), identity: identity.to_owned(), duration }
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Takes or renews the Lease; true when this replica holds it afterwards.
    pub async fn try_acquire(&self) -> Result<bool, LeaderError> {
        let now = Timestamp::now();
        let kube = |source| LeaderError::Kube { name: self.name.clone(), source };
        let Some(current) = self.api.get_opt(&self.name).await.map_err(kube)? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
                spec: Some(self.spec(now, now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(kube(e)),
            };
        };
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let mine = holder == self.identity;
        if !mine && !holder.is_empty() && !expired(&spec, now) {
            return Ok(false);
        }
        let acquired = if mine { spec.acquire_time.map(|t| t.0).unwrap_or(now) } else { now };
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!mine);
        let lease = Lease { metadata: current.metadata, spec: Some(self.spec(now, acquired, transitions)) };
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(kube(e)),
        }
    }

    /// Gives the Lease up if this replica holds it, so a standby can take it at once.
    pub async fn release(&self) -> Result<(), LeaderError> {
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
        let retry = self.duration / 3;
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

    /// Renews the Lease until `shutdown` is cancelled; returns early (having cancelled
    /// `lost`) when leadership is lost.
    pub async fn keep(&self, shutdown: CancellationToken, lost: CancellationToken) {
        let period = self.duration / 3;
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            match self.try_acquire().await {
                Ok(true) => last_renewal = tokio::time::Instant::now(),
                Ok(false) => {
                    tracing::error!(lease = %self.name, "another replica took the Lease; stopping");
                    lost.cancel();
                    return;
                }
                Err(e) => {
                    tracing::warn!("renewing the Lease: {e}");
                    if last_renewal.elapsed() >= self.duration {
                        tracing::error!(lease = %self.name, "could not renew the Lease in time; stopping");
                        lost.cancel();
                        return;
                    }
                }
            }
        }
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

fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let Some(renewed) = spec.renew_time.as_ref().map(|t| t.0) else { return true };
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    renewed.checked_add(duration).map_or(true, |until| until < now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(renewed_secs_ago: i64, duration: i32) -> LeaseSpec {
        let renewed = Timestamp::now() - SignedDuration::from_secs(renewed_secs_ago);
        LeaseSpec {
            holder_identity: Some("other".into()),
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(renewed)),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_expires_after_its_duration_without_renewal() {
        let now = Timestamp::now();
        assert!(!expired(&spec(5, 15), now), "renewed 5 s ago, valid 15 s");
        assert!(expired(&spec(20, 15), now), "renewed 20 s ago, valid 15 s");
        assert!(expired(&LeaseSpec::default(), now), "never renewed");
    }
}
