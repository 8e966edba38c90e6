//! Capacity: the model provider's quota of live streams, shared fairly across the
//! gateways and the tenants (namespaces) of a cluster.
//!
//! Bedrock limits concurrent Nova Sonic streams per account and region; past the limit a
//! stream is throttled mid-call. So the gateways count every live session cluster-wide,
//! per **pool** — `<account>/<region>`: the Agent's `spec.capacity.account` (default
//! `default`) and its model region (`spec.model.region`, as the runtime resolves it) —
//! against the quota configured for that pool (`--capacity-quota`; a pool with none is not
//! counted). The count lives in the shared store the gateways already use (Redis,
//! `--redis-url`; [`store`]), or in this process without one (local mode, one gateway):
//! the same [`policy`] either way. A new session is admitted by [`Capacity::admit`]: a slot,
//! a place in the queue, or a refusal, which the gateway performs on the client's socket.
//! This crate knows no socket, no session protocol and no gateway.
//!
//! - **A slot per session, not per stream.** A new session takes a slot before its first
//!   runtime stream opens and holds it to its end: handoffs and moves to another pod keep
//!   it (a call is never put back in the queue), and a park (its client went away) gives
//!   it back. A resumed or continued session takes one without waiting, over the quota if
//!   need be — it was under way.
//! - **Fair shares.** Each namespace is guaranteed its share of the quota
//!   (`--capacity-share <namespace>=<fraction>`) and may burst into what others leave
//!   unused; when a slot frees, namespaces under their guarantee are served first, then
//!   by the Agent's priority, then in arrival order ([`policy`]).
//! - **Full.** A new session past the quota waits in a bounded queue, told its position,
//!   an estimate and a hold message (`bidi_session_queued`, again whenever its position
//!   changes; the message is the Agent's `spec.capacity.holdMessage` or the gateway's), or — if
//!   its Agent says `whenFull: refuse`, or the queue is full — is refused with
//!   `capacity_full` (close 1013) and `retry_after_seconds`. Never accepted and left
//!   silent. A client that leaves the queue frees its place.
//! - **Leases.** Every slot and place belongs to a gateway, which renews its heartbeat in
//!   each pool where it holds any (every third of `--capacity-lease-seconds`); a gateway
//!   that dies stops renewing, and once its heartbeat lapses, what it held goes to those
//!   waiting.
//! - **Store down.** A session is admitted uncounted (and the failure logged and counted):
//!   an unreachable Redis must not stop calls.
//! - **Region fallback.** An Agent with a fallback region (a voice or hybrid Agent's
//!   `spec.model.voiceFallback.region`) sends a new session there — to the pool
//!   `<account>/<fallbackRegion>`, its Nova Sonic streams opened in that region — when its
//!   own pool has no free slot but the fallback's has (cause `full`), or when its own region
//!   is failing (cause `failing`): `--capacity-region-failures` model failures
//!   (`model_throttled`, `model_service_unavailable`, ...) relayed from its sessions within
//!   `--capacity-region-failure-window-seconds` mark it so for
//!   `--capacity-region-failover-seconds`, for every gateway (the mark is in the pool's
//!   shared state). With neither free, the session waits in its own pool's queue as before.
//!   The placement is a metric (`switchboard_gateway_capacity_region_fallbacks_total`) and
//!   a `region` entry in the session's record.

mod admission;
pub mod metrics;
pub mod policy;
pub mod store;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use policy::{Failover, Outcome, Place, Refusal, Request, Rules, Status};
use store::Backend;
use tokio::sync::watch;

pub use admission::{Admission, Placed, Slot, Waiting, hold_message};

/// The capacity side could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    /// The Redis URL or CA is unusable.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// A metric could not be registered.
    #[error("capacity metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// The capacity settings of a gateway.
#[derive(Clone, Debug)]
pub struct CapacityConfig {
    /// Live streams each pool (`<account>/<region>`) allows; pools not listed are not
    /// counted.
    pub quotas: BTreeMap<String, u32>,
    /// Each namespace's guaranteed share of every pool's quota, 0 to 1.
    pub shares: BTreeMap<String, f64>,
    /// Most sessions waiting in one pool, across the gateways.
    pub max_queue: u32,
    /// How long a gateway's slots outlive its last heartbeat.
    pub lease: Duration,
    /// How often a gateway with waiting sessions looks for their turn.
    pub poll: Duration,
    /// How long a slot is assumed held before any session has ended (for estimates).
    pub initial_hold: Duration,
    /// Redis shared by the replicas (`url`, optional CA); none: this process only.
    pub redis: Option<(String, Option<Vec<u8>>)>,
    /// When a pool's region counts as failing (new sessions go to their fallback region).
    pub failover: Failover,
}

impl Default for CapacityConfig {
    fn default() -> Self {
        Self {
            quotas: BTreeMap::new(),
            shares: BTreeMap::new(),
            max_queue: 100,
            lease: Duration::from_secs(15),
            poll: Duration::from_millis(250),
            initial_hold: Duration::from_secs(180),
            redis: None,
            failover: Failover { failures: 3, window_ms: 30_000, hold_ms: 60_000 },
        }
    }
}

impl CapacityConfig {
    /// The rules of `pool`, if it has a quota.
    pub fn rules(&self, pool: &str) -> Option<Rules> {
        let quota = *self.quotas.get(pool)?;
        Some(Rules {
            quota,
            shares: self.shares.clone(),
            max_queue: self.max_queue,
            initial_hold_ms: millis(self.initial_hold),
        })
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A live ticket of this gateway: its pool and namespace, and where its status goes.
#[derive(Debug)]
struct Local {
    pool: String,
    status: watch::Sender<Status>,
}

/// One gateway's side of the shared capacity.
#[derive(Debug)]
pub struct Capacity {
    config: CapacityConfig,
    backend: Backend,
    /// This gateway's id in the pools.
    id: String,
    /// This gateway's tickets, by id.
    local: Mutex<BTreeMap<String, Local>>,
    /// Whether the heartbeat task runs.
    beating: Mutex<bool>,
    /// Capacity metrics.
    pub metrics: metrics::CapacityMetrics,
}

/// What asking for a slot got.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// The Agent's pool has no quota (or the store failed): nothing counted.
    Uncounted,
    /// A slot, held while the ticket lives.
    Granted(Ticket),
    /// A place in the queue: the ticket's status says when the slot comes.
    Queued(Ticket, watch::Receiver<Status>, Place),
    /// Refused, with when to try again.
    Refused(Refusal),
}

/// A slot or a place in a pool, given back when dropped.
#[derive(Debug)]
pub struct Ticket {
    id: String,
    capacity: Weak<Capacity>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(capacity) = self.capacity.upgrade() else { return };
        let Some(local) = capacity.local.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id) else {
            return;
        };
        let id = std::mem::take(&mut self.id);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { capacity.release(&local.pool, &id).await });
        }
    }
}

impl Capacity {
    /// The capacity side of a gateway with `config`.
    pub fn new(config: CapacityConfig) -> Result<Arc<Self>, CapacityError> {
        let backend = match &config.redis {
            Some((url, ca)) => Backend::redis(url, ca.clone())?,
            None => Backend::Memory(Mutex::default()),
        };
        let metrics = metrics::CapacityMetrics::new()?;
        Ok(Arc::new(Self {
            config,
            backend,
            id: format!("gw-{}", uuid::Uuid::new_v4().simple()),
            local: Mutex::default(),
            beating: Mutex::new(false),
            metrics,
        }))
    }

    /// The settings.
    pub fn config(&self) -> &CapacityConfig {
        &self.config
    }

    /// Asks for a slot in `pool` for a new session of `namespace` (its Agent's `priority`;
    /// `queue`: it waits when full, else it is refused).
    pub(crate) async fn request(self: &Arc<Self>, pool: &str, namespace: &str, priority: i32, queue: bool) -> Admitted {
        let Some(rules) = self.config.rules(pool) else { return Admitted::Uncounted };
        self.start_beating();
        let id = format!("{}-{}", self.id, uuid::Uuid::new_v4().simple());
        let ttl = millis(self.config.lease);
        let req = Request { id: &id, ns: namespace, prio: priority, gw: &self.id, queue };
        let outcome = self
            .backend
            .update(pool, |p, now| {
                p.heartbeat(&self.id, now, ttl);
                p.expire(now);
                p.settle(&rules, now);
                (p.request(&rules, &req, now), p.clone())
            })
            .await;
        let (outcome, seen) = match outcome {
            Ok(done) => done,
            Err(error) => {
                tracing::warn!(%pool, "{error}; the session is admitted without counting it");
                self.metrics.store_errors.inc();
                return Admitted::Uncounted;
            }
        };
        self.metrics.observe(pool, &rules, &seen);
        let status = match &outcome {
            Outcome::Granted => Status::Granted,
            Outcome::Queued(place) => Status::Queued(*place),
            Outcome::Refused(refusal) => {
                let reason = if refusal.queue_full { "queue_full" } else { "agent_refuses" };
                self.metrics.refused.with_label_values(&[namespace, reason]).inc();
                return Admitted::Refused(*refusal);
            }
        };
        let (tx, rx) = watch::channel(status);
        let local = Local { pool: pool.to_owned(), status: tx };
        self.local.lock().unwrap_or_else(PoisonError::into_inner).insert(id.clone(), local);
        let ticket = Ticket { id, capacity: Arc::downgrade(self) };
        match outcome {
            Outcome::Queued(place) => Admitted::Queued(ticket, rx, place),
            _ => Admitted::Granted(ticket),
        }
    }

    /// A slot in `pool` without waiting, for a session already under way (a resume, a
    /// continuation); none when the pool has no quota or the store failed.
    pub(crate) async fn force(self: &Arc<Self>, pool: &str, namespace: &str) -> Option<Ticket> {
        let rules = self.config.rules(pool)?;
        self.start_beating();
        let id = format!("{}-{}", self.id, uuid::Uuid::new_v4().simple());
        let ttl = millis(self.config.lease);
        let done = self
            .backend
            .update(pool, |p, now| {
                p.heartbeat(&self.id, now, ttl);
                p.expire(now);
                p.force(&id, namespace, &self.id, now);
                p.clone()
            })
            .await;
        match done {
            Ok(seen) => self.metrics.observe(pool, &rules, &seen),
            Err(error) => {
                tracing::warn!(%pool, "{error}; the resumed session goes on without counting it");
                self.metrics.store_errors.inc();
                return None;
            }
        }
        let (tx, _) = watch::channel(Status::Granted);
        let local = Local { pool: pool.to_owned(), status: tx };
        self.local.lock().unwrap_or_else(PoisonError::into_inner).insert(id.clone(), local);
        Some(Ticket { id, capacity: Arc::downgrade(self) })
    }

    /// Whether the region of `pool` counts as failing now (any gateway's sessions there
    /// failed often enough lately); false when the store cannot tell.
    pub async fn failing(&self, pool: &str) -> bool {
        match self.backend.update(pool, |p, now| p.failing(now)).await {
            Ok(failing) => failing,
            Err(error) => {
                tracing::warn!(%pool, "{error}; the region is taken as healthy");
                self.metrics.store_errors.inc();
                false
            }
        }
    }

    /// A session in `pool` met a model failure of its region (a throttled or unavailable
    /// service): counted towards marking the region failing, for every gateway.
    pub async fn model_failed(&self, pool: &str) {
        let rules = self.config.failover;
        match self.backend.update(pool, |p, now| p.failed(&rules, now)).await {
            Ok(true) => {
                self.metrics.region_failing.with_label_values(&[pool]).inc();
                tracing::warn!(
                    %pool,
                    failures = rules.failures,
                    hold_seconds = rules.hold_ms / 1000,
                    "the region of this pool is failing: new sessions of Agents with a fallback region go there"
                );
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%pool, "{error}; a model failure of the region was not counted");
                self.metrics.store_errors.inc();
            }
        }
    }

    async fn release(&self, pool: &str, id: &str) {
        let Some(rules) = self.config.rules(pool) else { return };
        let done = self
            .backend
            .update(pool, |p, now| {
                p.expire(now);
                p.release(&rules, id, now);
                p.clone()
            })
            .await;
        match done {
            Ok(seen) => self.metrics.observe(pool, &rules, &seen),
            Err(error) => {
                // The slot lapses with this gateway's heartbeat only if it stops; until
                // the next release succeeds it stays counted. Logged to be seen.
                tracing::warn!(%pool, "{error}; a freed slot could not be given back");
                self.metrics.store_errors.inc();
            }
        }
    }

    /// Starts the heartbeat task once (it ends with the gateway).
    fn start_beating(self: &Arc<Self>) {
        let mut beating = self.beating.lock().unwrap_or_else(PoisonError::into_inner);
        if *beating {
            return;
        }
        *beating = true;
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(capacity) = weak.upgrade() else { return };
                let waiting = capacity.beat().await;
                let every = if waiting { capacity.config.poll } else { capacity.config.lease / 3 };
                drop(capacity);
                tokio::time::sleep(every.max(Duration::from_millis(10))).await;
            }
        });
    }

    /// Renews this gateway's heartbeat in every pool where it holds a ticket, lets waiting
    /// sessions take freed slots, and tells this gateway's tickets where they stand.
    /// Returns whether any of them still waits.
    async fn beat(&self) -> bool {
        let pools: BTreeMap<String, Vec<String>> = {
            let local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
            let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (id, l) in local.iter() {
                pools.entry(l.pool.clone()).or_default().push(id.clone());
            }
            pools
        };
        let ttl = millis(self.config.lease);
        let mut waiting = false;
        for (pool, ids) in pools {
            let Some(rules) = self.config.rules(&pool) else { continue };
            let done = self
                .backend
                .update(&pool, |p, now| {
                    p.heartbeat(&self.id, now, ttl);
                    p.expire(now);
                    p.settle(&rules, now);
                    p.clone()
                })
                .await;
            let seen = match done {
                Ok(seen) => seen,
                Err(error) => {
                    tracing::warn!(%pool, "{error}; this gateway's slots are renewed at the next beat");
                    self.metrics.store_errors.inc();
                    continue;
                }
            };
            self.metrics.observe(&pool, &rules, &seen);
            let places = seen.places(&rules);
            let local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
            for id in ids {
                let Some(l) = local.get(&id) else { continue };
                let status = if seen.leases.contains_key(&id) {
                    Status::Granted
                } else if let Some(place) = places.get(&id) {
                    waiting = true;
                    Status::Queued(*place)
                } else {
                    Status::Gone
                };
                l.status.send_if_modified(|old| {
                    let changed = *old != status;
                    *old = status;
                    changed
                });
            }
        }
        waiting
    }

    /// Reads every pool with a quota into the metrics (at scrape: pools where this gateway
    /// holds nothing are shown as the store has them).
    pub async fn observe(&self) {
        for pool in self.config.quotas.keys() {
            let Some(rules) = self.config.rules(pool) else { continue };
            let seen = self.backend.update(pool, |p, now| {
                let mut seen = p.clone();
                seen.expire(now);
                seen
            });
            if let Ok(seen) = seen.await {
                self.metrics.observe(pool, &rules, &seen);
            }
        }
    }
}
