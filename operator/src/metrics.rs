//! The operator's Prometheus metrics, one registry per operator instance (so two instances
//! in one test process count separately): reconciles, their duration and their failures
//! by reason, status writes, child applies (sent or skipped as unchanged), Events,
//! leadership, routing-table publications, trigger overflow and whether the gateway's
//! public key is known.

use std::time::Instant;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// Why the metrics could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A metric could not be created or registered.
    #[error("cannot register metric: {0}")]
    Register(#[from] prometheus::Error),
}

impl MetricsError {
    /// A short, bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        "metrics_register"
    }
}

/// Every metric the operator exports.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: IntCounterVec,
    failures: IntCounterVec,
    duration: HistogramVec,
    status_writes: IntCounterVec,
    child_applies: IntCounterVec,
    events: IntCounterVec,
    /// 1 while this instance holds the leader Lease.
    pub leader: IntGauge,
    /// Routing-table ConfigMap writes.
    pub routes_published: IntCounter,
    /// Routes in the last published table.
    pub routes: IntGauge,
    /// Re-reconcile triggers dropped because the queue was full.
    pub trigger_overflow: IntCounter,
    /// 1 while runtime pods get the gateway's public key.
    pub gateway_key: IntGauge,
}

impl Metrics {
    /// Creates and registers every metric in a fresh registry.
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let reconciles = IntCounterVec::new(
            Opts::new("switchboard_operator_reconciles_total", "Reconciles started, by kind."),
            &["kind"],
        )?;
        let failures = IntCounterVec::new(
            Opts::new("switchboard_operator_reconcile_errors_total", "Reconciles that failed, by kind and reason."),
            &["kind", "reason"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new("switchboard_operator_reconcile_duration_seconds", "Reconcile duration, by kind.")
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
            &["kind"],
        )?;
        let status_writes = IntCounterVec::new(
            Opts::new("switchboard_operator_status_writes_total", "Status subresource writes, by kind."),
            &["kind"],
        )?;
        let child_applies = IntCounterVec::new(
            Opts::new(
                "switchboard_operator_child_applies_total",
                "Children of Agents, by kind and result: `applied` (a server-side apply was sent) or \
                 `unchanged` (skipped: the operator applied the same object last and nobody changed it since).",
            ),
            &["kind", "result"],
        )?;
        let events = IntCounterVec::new(
            Opts::new("switchboard_operator_events_total", "Kubernetes Events published, by type."),
            &["type"],
        )?;
        let leader = IntGauge::new("switchboard_operator_leader", "1 while this replica holds the leader Lease.")?;
        let routes_published =
            IntCounter::new("switchboard_operator_routes_published_total", "Routing-table ConfigMap writes.")?;
        let routes = IntGauge::new("switchboard_operator_routes", "Routes in the last published routing table.")?;
        let trigger_overflow = IntCounter::new(
            "switchboard_operator_trigger_overflow_total",
            "Re-reconcile triggers dropped because the queue was full (a resync repairs them).",
        )?;
        registry.register(Box::new(reconciles.clone()))?;
        registry.register(Box::new(failures.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(status_writes.clone()))?;
        registry.register(Box::new(child_applies.clone()))?;
        registry.register(Box::new(events.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        registry.register(Box::new(routes_published.clone()))?;
        registry.register(Box::new(routes.clone()))?;
        let gateway_key = IntGauge::new(
            "switchboard_operator_gateway_key",
            "1 while runtime pods get the gateway's public key; 0 while Agents wait for it (GatewayKeyMissing) \
             or when none is configured.",
        )?;
        registry.register(Box::new(trigger_overflow.clone()))?;
        registry.register(Box::new(gateway_key.clone()))?;
        Ok(Self {
            registry,
            reconciles,
            failures,
            duration,
            status_writes,
            child_applies,
            events,
            leader,
            routes_published,
            routes,
            trigger_overflow,
            gateway_key,
        })
    }

    /// Counts a reconcile of `kind` and times it until the guard drops.
    pub fn reconcile(&self, kind: &'static str) -> ReconcileTimer {
        self.reconciles.with_label_values(&[kind]).inc();
        ReconcileTimer { histogram: self.duration.with_label_values(&[kind]), start: Instant::now() }
    }

    /// Counts a failed reconcile of `kind` for `reason` (an error's `metric_label`).
    pub fn failure(&self, kind: &str, reason: &str) {
        self.failures.with_label_values(&[kind, reason]).inc();
    }

    /// Counts a status write for `kind`.
    pub fn status_write(&self, kind: &str) {
        self.status_writes.with_label_values(&[kind]).inc();
    }

    /// Counts a child of `kind` applied (`applied` true) or skipped as unchanged.
    pub fn child_apply(&self, kind: &str, applied: bool) {
        let result = if applied { "applied" } else { "unchanged" };
        self.child_applies.with_label_values(&[kind, result]).inc();
    }

    /// Children of `kind` applied (`applied` true) or skipped as unchanged so far.
    pub fn child_applies(&self, kind: &str, applied: bool) -> u64 {
        let result = if applied { "applied" } else { "unchanged" };
        self.child_applies.with_label_values(&[kind, result]).get()
    }

    /// Counts an Event of `type_` (`Normal` or `Warning`).
    pub fn event(&self, type_: &str) {
        self.events.with_label_values(&[type_]).inc();
    }

    /// Reconciles of `kind` started so far.
    pub fn reconciles(&self, kind: &str) -> u64 {
        self.reconciles.with_label_values(&[kind]).get()
    }

    /// Status writes for `kind` so far.
    pub fn status_writes(&self, kind: &str) -> u64 {
        self.status_writes.with_label_values(&[kind]).get()
    }

    /// Failed reconciles of `kind` for `reason` so far.
    pub fn failures(&self, kind: &str, reason: &str) -> u64 {
        self.failures.with_label_values(&[kind, reason]).get()
    }

    /// Every metric in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for well-formed metric families.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            return format!("# encoding failed: {e}\n");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// Observes a reconcile's duration when dropped (so early returns and errors count too).
#[derive(Debug)]
pub struct ReconcileTimer {
    histogram: prometheus::Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}
