//! The edge's metrics, served on the gateway's `/metrics` after its own
//! ([`switchboard_gateway::channels::Channel::render_metrics`]); named as the gateway's, whose
//! WebRTC edge this is. Refused offers count in the gateway's
//! `switchboard_gateway_sessions_refused_total`, beside the WebSocket's refusals.

use prometheus::{CounterVec, Encoder, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

/// The edge's registry.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    /// WebRTC calls answered and ended, by how they ended.
    pub calls: CounterVec,
    /// WebRTC calls under way.
    pub live: IntGauge,
    /// ICE outcomes, by the kind of the client's candidate media went to and its transport:
    /// `connected` (a call's first path), `moved` (a later one: an ICE restart or a network
    /// change), `failed` (a call that never connected — candidate `none` — or lost its
    /// client past the grace).
    pub ice: CounterVec,
    /// ICE-TCP connections open ([`crate::tcp`]): accepted and holding their bytes of the
    /// gateway's memory budget, whether or not their first frame has found a call yet.
    pub tcp_connections: IntGauge,
    /// ICE-TCP connections refused, by reason: `slots` (every connection slot taken),
    /// `memory_budget` (its buffers would pass the gateway's memory budget), `no_call` (its
    /// first frame was no STUN check for a live call, or none came in time).
    pub tcp_refused: IntCounterVec,
    /// Bytes of the frames carried over ICE-TCP, by direction (`in`: from clients, `out`: to
    /// them); the 2-byte framing not counted.
    pub tcp_bytes: IntCounterVec,
}

impl Metrics {
    /// A fresh registry with every metric.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let calls = CounterVec::new(
            Opts::new(
                "switchboard_gateway_webrtc_calls_total",
                "WebRTC calls ended, by outcome (ended, client_closed, ice_failed, failed, too_large, no_session_start).",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(calls.clone()))?;
        let live = IntGauge::new("switchboard_gateway_webrtc_calls_live", "WebRTC calls under way.")?;
        registry.register(Box::new(live.clone()))?;
        let ice = CounterVec::new(
            Opts::new(
                "switchboard_gateway_webrtc_ice_total",
                "WebRTC ICE outcomes (connected, moved, failed) by the client's candidate kind (host, srflx, prflx, relay; none: never connected) and transport (udp, tcp).",
            ),
            &["outcome", "candidate", "transport"],
        )?;
        registry.register(Box::new(ice.clone()))?;
        let tcp_connections = IntGauge::new(
            "switchboard_gateway_webrtc_tcp_connections",
            "ICE-TCP connections open, each holding its buffers' bytes of the gateway's memory budget.",
        )?;
        registry.register(Box::new(tcp_connections.clone()))?;
        let tcp_refused = IntCounterVec::new(
            Opts::new(
                "switchboard_gateway_webrtc_tcp_refused_total",
                "ICE-TCP connections refused, by reason (slots, memory_budget, no_call).",
            ),
            &["reason"],
        )?;
        registry.register(Box::new(tcp_refused.clone()))?;
        let tcp_bytes = IntCounterVec::new(
            Opts::new(
                "switchboard_gateway_webrtc_tcp_bytes_total",
                "Bytes of frames carried over ICE-TCP connections, by direction (in, out).",
            ),
            &["direction"],
        )?;
        registry.register(Box::new(tcp_bytes.clone()))?;
        Ok(Self { registry, calls, live, ice, tcp_connections, tcp_refused, tcp_bytes })
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}
