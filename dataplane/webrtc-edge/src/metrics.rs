//! The edge's metrics, served on the gateway's `/metrics` after its own
//! ([`switchboard_gateway::channels::Channel::render_metrics`]); named as the gateway's, whose
//! WebRTC edge this is. Refused offers count in the gateway's
//! `switchboard_gateway_sessions_refused_total`, beside the WebSocket's refusals.

use std::time::{Duration, Instant};

use prometheus::{CounterVec, Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};
use switchboard_webrtc::audio::InboundStats;

/// How often a call adds its audio statistics to the metrics (and at its end).
const AUDIO_REPORT_EVERY: Duration = Duration::from_secs(5);

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
    /// The callers' audio packets, by outcome: `decoded`, `lost` (missing from the sequence:
    /// concealed), `late` (behind one already played, repeated, or not decodable: dropped),
    /// `stale` (reached the decoder past the lateness bound: dropped undecoded).
    pub audio_packets: IntCounterVec,
    /// Each call's interarrival jitter (RFC 3550), observed every 5 s while its audio comes.
    pub jitter: Histogram,
    /// Seconds spent transcoding, by direction: `in` (the caller's Opus decoded, concealed
    /// and resampled), `out` (the reply resampled and encoded).
    pub transcoding: CounterVec,
}

/// What of one call's audio statistics the metrics have counted so far.
#[derive(Debug, Default)]
pub struct AudioReport {
    counted: InboundStats,
    out: Duration,
    at: Option<Instant>,
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
        let audio_packets = IntCounterVec::new(
            Opts::new(
                "switchboard_gateway_webrtc_audio_packets_total",
                "WebRTC callers' audio packets, by outcome (decoded, lost, late, stale).",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(audio_packets.clone()))?;
        let jitter = Histogram::with_opts(
            HistogramOpts::new(
                "switchboard_gateway_webrtc_jitter_seconds",
                "WebRTC callers' interarrival jitter (RFC 3550), each call observed every 5 s while its audio comes.",
            )
            .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32]),
        )?;
        registry.register(Box::new(jitter.clone()))?;
        let transcoding = CounterVec::new(
            Opts::new(
                "switchboard_gateway_webrtc_transcoding_seconds_total",
                "Seconds the WebRTC edge spent transcoding, by direction (in: callers' Opus to PCM; out: replies' PCM to Opus).",
            ),
            &["direction"],
        )?;
        registry.register(Box::new(transcoding.clone()))?;
        Ok(Self {
            registry,
            calls,
            live,
            ice,
            tcp_connections,
            tcp_refused,
            tcp_bytes,
            audio_packets,
            jitter,
            transcoding,
        })
    }

    /// Adds what a call's audio statistics gained since `report` last counted them, at most
    /// every 5 s unless `last` (the call's end).
    pub fn report_audio(&self, report: &mut AudioReport, stats: InboundStats, out: Duration, last: bool) {
        let now = Instant::now();
        if !last && report.at.is_some_and(|at| now.duration_since(at) < AUDIO_REPORT_EVERY) {
            return;
        }
        let before = report.counted;
        for (outcome, gained) in [
            ("decoded", stats.packets.saturating_sub(before.packets)),
            ("lost", stats.lost.saturating_sub(before.lost)),
            ("late", stats.dropped.saturating_sub(before.dropped)),
            ("stale", stats.stale.saturating_sub(before.stale)),
        ] {
            if gained > 0 {
                self.audio_packets.with_label_values(&[outcome]).inc_by(gained);
            }
        }
        if stats.packets + stats.stale > before.packets + before.stale {
            self.jitter.observe(stats.jitter as f64 / f64::from(switchboard_webrtc::audio::OPUS_RATE));
        }
        let decoding = stats.transcoding.saturating_sub(before.transcoding);
        self.transcoding.with_label_values(&["in"]).inc_by(decoding.as_secs_f64());
        self.transcoding.with_label_values(&["out"]).inc_by(out.saturating_sub(report.out).as_secs_f64());
        *report = AudioReport { counted: stats, out, at: Some(now) };
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}
