//! The outage metrics of one gateway, in a registry of their own: by Agent (`namespace/name`;
//! only Agents with outage mode) and bounded causes.

use prometheus::core::Collector;
use prometheus::{CounterVec, Encoder, GaugeVec, Opts, Registry, TextEncoder};

/// The outage metrics of one gateway, by Agent (`namespace/name`; only Agents with outage
/// mode) and bounded causes.
#[derive(Clone, Debug)]
pub struct OutageMetrics {
    registry: Registry,
    /// 0 closed, 1 ramping back, 2 open (tripped), 3 switched on.
    pub state: GaugeVec,
    /// Trips, by Agent and cause.
    pub trips: CounterVec,
    /// Recoveries, by Agent.
    pub recoveries: CounterVec,
    /// New sessions sent to the fallback, by Agent and cause.
    pub fallbacks: CounterVec,
    /// Turns judged, by Agent and outcome.
    pub turns: CounterVec,
    /// Trips learned from another replica, by Agent.
    pub learned: CounterVec,
    /// New sessions served in text because of an outage, by Agent and cause.
    pub text: CounterVec,
}

impl OutageMetrics {
    /// A registry of its own with every outage metric.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        fn register<C: Collector + Clone + 'static>(registry: &Registry, c: C) -> Result<C, prometheus::Error> {
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        }
        let state = register(
            &registry,
            GaugeVec::new(
                Opts::new(
                    "switchboard_gateway_outage_state",
                    "Outage mode of each Agent that has one: 0 serving, 1 ramping back, 2 tripped (every new session falls back), 3 switched on.",
                ),
                &["agent"],
            )?,
        )?;
        let counter = |name: &str, help: &str, labels: &[&str]| -> Result<CounterVec, prometheus::Error> {
            register(&registry, CounterVec::new(Opts::new(name, help), labels)?)
        };
        let trips = counter(
            "switchboard_gateway_outage_trips_total",
            "Times an Agent's breaker turned outage mode on, by cause (errors, slow_first_audio, probe_failed).",
            &["agent", "cause"],
        )?;
        let recoveries = counter(
            "switchboard_gateway_outage_recoveries_total",
            "Times an Agent's breaker ramped all the way back.",
            &["agent"],
        )?;
        let fallbacks = counter(
            "switchboard_gateway_outage_fallbacks_total",
            "New sessions sent to the Agent's fallback (a person, a message, or served in text), by cause (switch, breaker).",
            &["agent", "cause"],
        )?;
        let turns = counter(
            "switchboard_gateway_outage_turns_total",
            "Turns of Agents with outage mode as the breaker judged them (good, error, slow).",
            &["agent", "outcome"],
        )?;
        let learned = counter(
            "switchboard_gateway_outage_learned_total",
            "Times an Agent's breaker opened because another gateway replica's tripped (through the shared store).",
            &["agent"],
        )?;
        let text = counter(
            "switchboard_gateway_outage_text_sessions_total",
            "New sessions served in text through the Agent's text model instead of sent away, in outage mode (spec.outage.fallback.text), by cause (switch, breaker).",
            &["agent", "cause"],
        )?;
        Ok(Self { registry, state, trips, recoveries, fallbacks, turns, learned, text })
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}
