//! The gateway's Prometheus metrics. Labels are bounded: Agents (`namespace/name`), their
//! variants (at most 8 each) and fixed reasons, never a session.

use prometheus::{CounterVec, Encoder, GaugeVec, HistogramOpts, HistogramVec, IntGauge, Opts, Registry, TextEncoder};

/// Every metric of one gateway process.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    /// Live sessions by the Agent serving them.
    pub live: GaugeVec,
    /// Sessions routed, by Agent.
    pub routed: CounterVec,
    /// Sessions that reached an Agent running variants, by Agent and variant.
    pub variant_sessions: CounterVec,
    /// Sessions refused (and handoffs that failed), by reason.
    pub refused: CounterVec,
    /// Handoffs across pods, by source and target Agent.
    pub handoffs: CounterVec,
    /// Client-observed handoff gap: the source's close to the target's first frame.
    pub handoff_gap: HistogramVec,
    /// Sessions moved to another pod of the same Agent, by Agent and reason.
    pub migrated: CounterVec,
    /// Sessions parked for resume (their client went away), by Agent.
    pub parked: CounterVec,
    /// Sessions resumed by their client, by Agent.
    pub resumed: CounterVec,
    /// Bytes the sessions hold, counted toward the memory budget.
    pub memory_held: IntGauge,
    /// The memory budget (0: none).
    pub memory_budget: IntGauge,
    /// Ready runtime pods of every routed Agent, as this gateway sees them (set at scrape).
    pub agent_ready_pods: GaugeVec,
    /// Outbound calls ended, by outcome.
    pub outbound_calls: CounterVec,
    /// Outbound calls by who answered them, as the edge's answering-machine detection found.
    pub outbound_answered_by: CounterVec,
    /// Outbound calls' status callback deliveries (attempts), by outcome.
    pub call_webhook_deliveries: CounterVec,
    /// Sessions started with context from the host app's backend, by Agent and what became
    /// of the caller it vouched for (`verified`, `not_trusted`, `none`).
    pub app_context: CounterVec,
}

impl Metrics {
    /// A fresh registry with every metric.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| -> Result<CounterVec, prometheus::Error> {
            let c = CounterVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let live =
            GaugeVec::new(Opts::new("switchboard_gateway_sessions_live", "Live sessions by agent."), &["agent"])?;
        registry.register(Box::new(live.clone()))?;
        let routed = counter("switchboard_gateway_sessions_routed_total", "Sessions routed to an agent.", &["agent"])?;
        let variant_sessions = counter(
            "switchboard_gateway_variant_sessions_total",
            "Sessions that reached an agent running variants, by agent and the variant they run.",
            &["agent", "variant"],
        )?;
        let refused =
            counter("switchboard_gateway_sessions_refused_total", "Sessions refused, by reason.", &["reason"])?;
        let handoffs =
            counter("switchboard_gateway_handoffs_total", "Handoffs performed across pods.", &["from", "to"])?;
        let migrated = counter(
            "switchboard_gateway_sessions_migrated_total",
            "Sessions moved to another pod of the same agent.",
            &["agent", "reason"],
        )?;
        let parked = counter(
            "switchboard_gateway_sessions_parked_total",
            "Sessions kept for resume after their client went away.",
            &["agent"],
        )?;
        let resumed =
            counter("switchboard_gateway_sessions_resumed_total", "Sessions resumed by their client.", &["agent"])?;
        let handoff_gap = HistogramVec::new(
            HistogramOpts::new(
                "switchboard_gateway_handoff_gap_seconds",
                "Client-observed handoff gap: the source agent's last frame to the target's first.",
            )
            .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.4, 0.6, 1.0, 2.5, 5.0]),
            &["from", "to"],
        )?;
        registry.register(Box::new(handoff_gap.clone()))?;
        let memory_held = IntGauge::new(
            "switchboard_gateway_memory_held_bytes",
            "Bytes live and parked sessions hold (replay buffers, history, memory, typed inputs, overhead).",
        )?;
        registry.register(Box::new(memory_held.clone()))?;
        let memory_budget = IntGauge::new(
            "switchboard_gateway_memory_budget_bytes",
            "The bytes sessions may hold before new ones are refused (0: no budget).",
        )?;
        registry.register(Box::new(memory_budget.clone()))?;
        let agent_ready_pods = GaugeVec::new(
            Opts::new(
                "switchboard_gateway_agent_ready_pods",
                "Ready runtime pods of each Agent in the routing table, as this gateway sees them (0: its sessions and handoffs to it are refused).",
            ),
            &["agent"],
        )?;
        registry.register(Box::new(agent_ready_pods.clone()))?;
        let outbound_calls = counter(
            "switchboard_gateway_outbound_calls_total",
            "Outbound calls (POST /v1/calls) ended, by outcome: completed, busy, no_answer, failed.",
            &["outcome"],
        )?;
        let outbound_answered_by = counter(
            "switchboard_gateway_outbound_answered_by_total",
            "Outbound calls of Agents with answering-machine detection, by who answered: human, machine, unknown.",
            &["answered_by"],
        )?;
        let call_webhook_deliveries = counter(
            "switchboard_gateway_call_webhook_deliveries_total",
            "Outbound calls' status callback attempts (statusCallback), by outcome: delivered (2xx), refused (another 4xx: not retried), retried (a connection failure, timeout, 408, 429 or 5xx, tried again), failed (the last retry failed: the event is given up), dropped (never sent: the call's queue full, or too many calls delivering).",
            &["outcome"],
        )?;
        let app_context = counter(
            "switchboard_gateway_app_context_sessions_total",
            "Sessions started with context from the host app's backend (session_start.app_context), by agent and what became of the caller it vouched for: verified (the Agent trusts the app for identity), not_trusted (left out: verified as usual), none (no caller in it).",
            &["agent", "caller"],
        )?;
        Ok(Self {
            outbound_calls,
            outbound_answered_by,
            call_webhook_deliveries,
            app_context,
            registry,
            live,
            routed,
            variant_sessions,
            refused,
            handoffs,
            handoff_gap,
            migrated,
            parked,
            resumed,
            memory_held,
            memory_budget,
            agent_ready_pods,
        })
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}
