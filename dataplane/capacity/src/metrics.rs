//! Capacity metrics, by pool and namespace (both bounded: the pools are the configured
//! quotas', the namespaces those of routed Agents), rendered on the gateway's `/metrics`.
//! The gauges show the pool as this gateway last read it from the store (every beat while
//! it holds a ticket there, and at every scrape).

use prometheus::core::Collector;
use prometheus::{CounterVec, Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, Opts, Registry, TextEncoder};

use crate::policy::{Pool, Rules};

/// The capacity metrics of one gateway.
#[derive(Clone, Debug)]
pub struct CapacityMetrics {
    registry: Registry,
    /// Each pool's quota.
    pub quota: GaugeVec,
    /// Each namespace's guaranteed streams in each pool.
    pub guaranteed: GaugeVec,
    /// Streams held, by pool and namespace (cluster-wide).
    pub in_use: GaugeVec,
    /// Sessions waiting, by pool and namespace (cluster-wide).
    pub queued: GaugeVec,
    /// How long this gateway's sessions waited for a slot, by namespace and outcome.
    pub wait: HistogramVec,
    /// Sessions refused for capacity, by namespace and reason.
    pub refused: CounterVec,
    /// Capacity store failures (the session went on uncounted).
    pub store_errors: IntCounter,
    /// New sessions placed on their Agent's fallback region, by pool, fallback pool and
    /// cause (`full`, `failing`).
    pub region_fallbacks: CounterVec,
    /// Times a pool's region was marked failing (by this gateway).
    pub region_failing: CounterVec,
}

impl CapacityMetrics {
    /// A registry of its own with every capacity metric.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let gauge = |name: &str, help: &str, labels: &[&str]| -> Result<GaugeVec, prometheus::Error> {
            let g = GaugeVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let quota = gauge("switchboard_gateway_capacity_quota", "Live model streams a pool allows.", &["pool"])?;
        let guaranteed = gauge(
            "switchboard_gateway_capacity_guaranteed",
            "Streams a namespace is guaranteed in a pool (its share of the quota).",
            &["pool", "namespace"],
        )?;
        let in_use = gauge(
            "switchboard_gateway_capacity_in_use",
            "Live model streams held in a pool, by namespace, across the gateways.",
            &["pool", "namespace"],
        )?;
        let queued = gauge(
            "switchboard_gateway_capacity_queued",
            "Sessions waiting for a slot in a pool, by namespace, across the gateways.",
            &["pool", "namespace"],
        )?;
        let wait = HistogramVec::new(
            HistogramOpts::new(
                "switchboard_gateway_capacity_wait_seconds",
                "How long a queued session waited, by namespace and outcome (served, left).",
            )
            .buckets(vec![0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0]),
            &["namespace", "outcome"],
        )?;
        registry.register(Box::new(wait.clone()))?;
        let refused = CounterVec::new(
            Opts::new(
                "switchboard_gateway_capacity_refused_total",
                "Sessions refused for capacity, by namespace and reason (agent_refuses, queue_full).",
            ),
            &["namespace", "reason"],
        )?;
        registry.register(Box::new(refused.clone()))?;
        let store_errors = IntCounter::new(
            "switchboard_gateway_capacity_store_errors_total",
            "Capacity store failures; the session concerned went on uncounted.",
        )?;
        registry.register(Box::new(store_errors.clone()))?;
        let region_fallbacks = CounterVec::new(
            Opts::new(
                "switchboard_gateway_capacity_region_fallbacks_total",
                "New sessions placed on their Agent's fallback region, by pool, the fallback's pool and cause (full: no slot in the pool; failing: its region failed lately).",
            ),
            &["pool", "to", "cause"],
        )?;
        registry.register(Box::new(region_fallbacks.clone()))?;
        let region_failing = CounterVec::new(
            Opts::new(
                "switchboard_gateway_capacity_region_failing_total",
                "Times this gateway marked a pool's region failing (model failures of its sessions past --capacity-region-failures).",
            ),
            &["pool"],
        )?;
        registry.register(Box::new(region_failing.clone()))?;
        Ok(Self {
            registry,
            quota,
            guaranteed,
            in_use,
            queued,
            wait,
            refused,
            store_errors,
            region_fallbacks,
            region_failing,
        })
    }

    /// Shows `pool` as `seen`.
    pub fn observe(&self, pool: &str, rules: &Rules, seen: &Pool) {
        self.quota.with_label_values(&[pool]).set(f64::from(rules.quota));
        for namespace in rules.shares.keys() {
            self.guaranteed.with_label_values(&[pool, namespace]).set(f64::from(rules.guaranteed(namespace)));
        }
        // Namespaces seen before and idle now read 0, not their last count.
        for gauge in [&self.in_use, &self.queued] {
            for family in Collector::collect(gauge) {
                for metric in family.get_metric() {
                    let labels = metric.get_label();
                    let of = |name: &str| -> Option<String> {
                        labels.iter().find(|l| l.name() == name).map(|l| l.value().to_owned())
                    };
                    if of("pool").as_deref() == Some(pool)
                        && let Some(namespace) = of("namespace")
                    {
                        gauge.with_label_values(&[pool, &namespace]).set(0.0);
                    }
                }
            }
        }
        for (namespace, used) in seen.used_by() {
            self.in_use.with_label_values(&[pool, namespace]).set(f64::from(used));
        }
        let mut queued: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
        for waiter in seen.queue.values() {
            *queued.entry(waiter.ns.as_str()).or_insert(0) += 1;
        }
        for (namespace, waiting) in queued {
            self.queued.with_label_values(&[pool, namespace]).set(f64::from(waiting));
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}
