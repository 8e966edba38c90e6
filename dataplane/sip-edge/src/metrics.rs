//! The edge's Prometheus metrics: one registry per edge ([`Metrics`]), served by `switchboard
//! sip --metrics-listen` on `/metrics`, and in local mode after the gateway's and the
//! runtime's on local mode's `/metrics`. METRICS.md's "SIP edge" table lists them.
//!
//! What is counted where: each inbound call once, at how its INVITE was settled
//! (`answered`, `refused` with a reason, `cancelled`, `diverted`), and each outbound call at
//! its outcome (one answered and over during answering-machine detection, with no session,
//! too: [`OverInDetection`]); each answered call again when it ends, by who or what ended it; the calls
//! under way; the agents' transfers and outage fallbacks by outcome; the RTP the edge
//! received (packets, losses, jitter from the RTCP statistics of
//! [`switchboard_sip::media::rtcp::ReceiverStats`]); and SIP messages dropped unanswered
//! (the flood guard's among them). Every label value is one of a fixed set: no numbers, no
//! agents, no call ids.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
// The types the recording methods take.
pub use switchboard_core::outbound::CallState;
pub use switchboard_core::protocol::TransferOutcome;
use switchboard_sip::call::EndReason;
pub use switchboard_sip::endpoint::{Dropped, Refusal};
use switchboard_sip::media::rtcp::ReceiverStats;
pub use switchboard_sip::media::srtp::SrtpCounts;

use crate::end::End;
use crate::gateway::Refused;

mod connections;
pub use connections::{TlsConnection, TrunkConnection};

/// Which way a call goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// A phone or trunk called the edge.
    Inbound,
    /// The edge placed it (`POST /v1/calls`).
    Outbound,
}

impl Direction {
    fn label(self) -> &'static str {
        match self {
            Self::Inbound => "inbound",
            Self::Outbound => "outbound",
        }
    }
}

/// How an answered outbound call ended before its session opened, while answering-machine
/// detection listened (`switchboard_sip_calls_total{direction="outbound"}`'s outcomes for
/// calls answered with no session).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverInDetection {
    /// A machine answered and the Agent's `onMachine: hangUp` had the edge hang up.
    MachineHungUp,
    /// The callee hung up, or sent no RTP for the media timeout, before detection decided
    /// (or, for a machine to be left a message, before its beep).
    CalleeLeft,
}

impl OverInDetection {
    fn label(self) -> &'static str {
        match self {
            Self::MachineHungUp => "machine_hung_up",
            Self::CalleeLeft => "left_in_detection",
        }
    }
}

/// The jitter histogram's buckets, in seconds: 1 ms to 320 ms (a packet is 20 ms of
/// audio; the jitter buffer holds 60 ms).
const JITTER_BUCKETS: [f64; 9] = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32];

/// The edge's registry and its families (see the module docs).
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    calls: IntCounterVec,
    refused: IntCounterVec,
    ended: IntCounterVec,
    active: IntGaugeVec,
    transfers: IntCounterVec,
    fallbacks: IntCounterVec,
    announcements: IntCounterVec,
    rtp_received: IntCounter,
    rtp_lost: IntCounter,
    jitter: Histogram,
    dropped: IntCounterVec,
    tls: IntCounterVec,
    trunk_connections: IntCounterVec,
    srtp: IntCounterVec,
    resumes: IntCounterVec,
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
    let family = IntCounterVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(family.clone()))?;
    Ok(family)
}

impl Metrics {
    /// A fresh registry with every family.
    pub fn new() -> prometheus::Result<Self> {
        let registry = Registry::new();
        let calls = counter_vec(
            &registry,
            "switchboard_sip_calls_total",
            "SIP calls by direction and outcome: inbound answered, refused, cancelled, diverted, announced (outage mode: answered to hear the outage announcement); outbound answered, busy, no_answer, failed, and with answering-machine detection machine_hung_up, left_in_detection.",
            &["direction", "outcome"],
        )?;
        let refused = counter_vec(
            &registry,
            "switchboard_sip_calls_refused_total",
            "Inbound SIP calls refused, by reason (not_found, not_exposed, forbidden, not_acceptable, bad_request, at_capacity, busy, capacity_full, outage, gateway_unreachable, edge_unauthorized, shutdown, other).",
            &["reason"],
        )?;
        let ended = counter_vec(
            &registry,
            "switchboard_sip_calls_ended_total",
            "Answered SIP calls ended, by direction and outcome (phone_hung_up, agent_hung_up, rtp_timeout, no_ack, shutdown, bridged, outage, failed).",
            &["direction", "outcome"],
        )?;
        let active = IntGaugeVec::new(
            Opts::new("switchboard_sip_calls_active", "Answered SIP calls under way, by direction."),
            &["direction"],
        )?;
        registry.register(Box::new(active.clone()))?;
        let transfers = counter_vec(
            &registry,
            "switchboard_sip_transfers_total",
            "Transfers of callers to a person (REFER) the agents asked for, by outcome (transferred, busy, no_answer, declined, unreachable, rejected, failed).",
            &["outcome"],
        )?;
        let fallbacks = counter_vec(
            &registry,
            "switchboard_sip_outage_fallbacks_total",
            "Calls to Agents in outage mode, by outcome: message (refused 503 with the Agent's message), announced (the outage announcement played, then hung up), the transfer to the fallback person's outcome, caller_left, no_ack, shutdown.",
            &["outcome"],
        )?;
        let announcements = counter_vec(
            &registry,
            "switchboard_sip_announcements_total",
            "Recorded announcements the edge played to callers, by purpose: hold (a call waiting in the capacity queue, counted once a call), outage (a call turned away or interrupted by outage mode, also before it is put through to the fallback person).",
            &["purpose"],
        )?;
        let rtp_received =
            IntCounter::new("switchboard_sip_rtp_packets_received_total", "RTP packets received from phones.")?;
        registry.register(Box::new(rtp_received.clone()))?;
        let rtp_lost = IntCounter::new(
            "switchboard_sip_rtp_packets_lost_total",
            "RTP packets from phones that never came (gaps in their sequence numbers).",
        )?;
        registry.register(Box::new(rtp_lost.clone()))?;
        let jitter = Histogram::with_opts(
            HistogramOpts::new(
                "switchboard_sip_rtp_jitter_seconds",
                "Interarrival jitter of the phones' RTP (RFC 3550), every 5 s of a call and at its end.",
            )
            .buckets(JITTER_BUCKETS.to_vec()),
        )?;
        registry.register(Box::new(jitter.clone()))?;
        let dropped = counter_vec(
            &registry,
            "switchboard_sip_messages_dropped_total",
            "SIP messages dropped unanswered, by reason (rate_limited: the flood guard; unreadable; stray).",
            &["reason"],
        )?;
        let tls = counter_vec(
            &registry,
            "switchboard_sip_tls_connections_total",
            "Connections to the SIP TLS listener, by outcome (established; handshake_failed; handshake_timeout; \
             too_many and too_many_from_address: closed at once).",
            &["outcome"],
        )?;
        let trunk_connections = counter_vec(
            &registry,
            "switchboard_sip_outbound_connections_total",
            "Connections the edge opened to outbound trunks over TCP or TLS, by transport and outcome (established; \
             connect_failed; handshake_failed: the trunk's certificate not trusted; timeout; too_many).",
            &["transport", "outcome"],
        )?;
        let srtp = counter_vec(
            &registry,
            "switchboard_sip_srtp_packets_total",
            "SRTP and SRTCP packets on calls that settled SRTP, by outcome (protected: sent; unprotected: received, \
             authentic and fresh; dropped: auth_failed, replayed, malformed; expired: the key's lifetime was spent).",
            &["outcome"],
        )?;
        let resumes = counter_vec(
            &registry,
            "switchboard_sip_gateway_resumes_total",
            "Answered calls whose connection to the gateway dropped mid-call (lost, or its replica going away), by \
             outcome of the resume of their session (resumed: the call went on; failed: not resumed in time, or \
             refused: the call was hung up).",
            &["outcome"],
        )?;
        Ok(Self {
            registry,
            calls,
            refused,
            ended,
            active,
            transfers,
            fallbacks,
            announcements,
            rtp_received,
            rtp_lost,
            jitter,
            dropped,
            tls,
            trunk_connections,
            srtp,
            resumes,
        })
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// An inbound call refused, for `reason` (one of [`REFUSALS`]).
    fn refused(&self, reason: &'static str) {
        self.calls.with_label_values(&["inbound", "refused"]).inc();
        self.refused.with_label_values(&[reason]).inc();
    }

    /// An INVITE the endpoint refused itself.
    pub fn refused_by_endpoint(&self, refusal: Refusal) {
        self.refused(endpoint_reason(refusal));
    }

    /// An INVITE refused by its call before it had a task (its offer, a precheck): by the
    /// status it was answered with.
    pub fn refused_with_status(&self, status: u16) {
        self.refused(status_reason(status));
    }

    /// An inbound call the gateway did not open a session for (an outage's message
    /// included, also counted as a fallback).
    pub fn refused_by_gateway(&self, refused: &Refused) {
        if let Refused::Outage(_) = refused {
            self.fallback("message");
        }
        self.refused(gateway_reason(refused));
    }

    /// An inbound call the edge refused: it named no agent.
    pub fn refused_not_found(&self) {
        self.refused("not_found");
    }

    /// An inbound call refused because the edge is shutting down.
    pub fn refused_shutdown(&self) {
        self.refused("shutdown");
    }

    /// An inbound call whose caller gave up before it was answered.
    pub fn cancelled(&self) {
        self.calls.with_label_values(&["inbound", "cancelled"]).inc();
    }

    /// An inbound call answered and put through to an Agent's fallback person.
    pub fn diverted(&self) {
        self.calls.with_label_values(&["inbound", "diverted"]).inc();
    }

    /// An inbound call answered by the edge to hear the outage announcement.
    pub fn announced_outage(&self) {
        self.calls.with_label_values(&["inbound", "announced"]).inc();
    }

    /// A recorded announcement played to a caller (a hold announcement once a call).
    pub fn announcement(&self, purpose: crate::announce::Purpose) {
        self.announcements.with_label_values(&[purpose.label()]).inc();
    }

    /// An outage fallback's outcome (`message`, a [`TransferOutcome`]'s, `caller_left`,
    /// `no_ack`, `shutdown`).
    pub(crate) fn fallback(&self, outcome: &'static str) {
        self.fallbacks.with_label_values(&[outcome]).inc();
    }

    /// An outbound call that ended without a session: `busy`, `no_answer` or `failed`.
    pub fn outbound(&self, state: CallState) {
        let outcome = match state {
            CallState::Busy => "busy",
            CallState::NoAnswer => "no_answer",
            _ => "failed",
        };
        self.calls.with_label_values(&["outbound", outcome]).inc();
    }

    /// An outbound call answered and over while answering-machine detection listened, with
    /// no session: hung up on a machine, or left by the callee.
    pub fn over_in_detection(&self, over: OverInDetection) {
        self.calls.with_label_values(&["outbound", over.label()]).inc();
    }

    /// A call answered with a session: counted, and under way until the guard is ended
    /// ([`Live::ended`]) or dropped.
    pub fn answered(&self, direction: Direction) -> Live {
        self.calls.with_label_values(&[direction.label(), "answered"]).inc();
        let active = self.active.with_label_values(&[direction.label()]);
        active.inc();
        Live { metrics: self.clone(), direction, active, ended: false }
    }

    /// A call's session resumed after its connection to the gateway dropped (`resumed`), or
    /// not (`failed`).
    pub fn gateway_resume(&self, outcome: &'static str) {
        self.resumes.with_label_values(&[outcome]).inc();
    }

    /// A transfer's outcome.
    pub fn transfer(&self, outcome: TransferOutcome) {
        self.transfers.with_label_values(&[outcome.as_str()]).inc();
    }

    /// A message dropped unanswered (keep-alives are not counted: they are no messages).
    pub fn dropped(&self, reason: &Dropped) {
        let label = match reason {
            Dropped::RateLimited => "rate_limited",
            Dropped::Unreadable(_) => "unreadable",
            Dropped::Stray => "stray",
            Dropped::KeepAlive => return,
        };
        self.dropped.with_label_values(&[label]).inc();
    }

    /// What came of a connection to the TLS listener.
    pub fn tls_connection(&self, outcome: TlsConnection) {
        self.tls.with_label_values(&[outcome.label()]).inc();
    }

    /// Counts a connection to an outbound trunk over `transport` (`tcp` or `tls`).
    pub fn trunk_connection(&self, transport: switchboard_sip::call::Transport, outcome: TrunkConnection) {
        let transport = transport.as_str().to_ascii_lowercase();
        self.trunk_connections.with_label_values(&[transport.as_str(), outcome.label()]).inc();
    }

    /// What a call's SRTP did since its counts were last taken.
    pub fn srtp(&self, counts: &SrtpCounts) {
        for (outcome, n) in counts.by_outcome() {
            if n > 0 {
                self.srtp.with_label_values(&[outcome]).inc_by(n);
            }
        }
    }
}

/// The reasons of `switchboard_sip_calls_refused_total`, each with its SIP status.
pub const REFUSALS: [(&str, u16); 13] = [
    ("not_found", 404),
    ("not_exposed", 403),
    ("forbidden", 403),
    ("not_acceptable", 488),
    ("bad_request", 400),
    ("at_capacity", 503),
    ("busy", 503),
    ("capacity_full", 503),
    ("outage", 503),
    ("gateway_unreachable", 503),
    ("edge_unauthorized", 503),
    ("shutdown", 503),
    ("other", 500),
];

fn endpoint_reason(refusal: Refusal) -> &'static str {
    match refusal {
        Refusal::Forbidden => "forbidden",
        Refusal::AtCapacity => "at_capacity",
        Refusal::Malformed => "bad_request",
    }
}

/// A call's own refusal before the edge asked the gateway: 488 for its offer, 400, 420
/// or 483 from the INVITE's checks.
fn status_reason(status: u16) -> &'static str {
    match status {
        488 => "not_acceptable",
        400 | 420 | 483 => "bad_request",
        _ => "other",
    }
}

fn gateway_reason(refused: &Refused) -> &'static str {
    match refused {
        Refused::UnknownAgent { .. } => "not_found",
        Refused::NotExposed { .. } => "not_exposed",
        Refused::TextOnly { .. } => "not_acceptable",
        Refused::Unauthorized(_) => "edge_unauthorized",
        Refused::Busy(_) => "busy",
        Refused::CapacityFull { .. } => "capacity_full",
        Refused::Unreachable { .. } => "gateway_unreachable",
        Refused::Outage(_) => "outage",
        Refused::Other { .. } => "other",
    }
}

/// How an answered call ended, as `switchboard_sip_calls_ended_total` names it.
fn end_outcome(end: &End) -> &'static str {
    match end {
        End::Caller(EndReason::RemoteHangUp) => "phone_hung_up",
        End::Caller(EndReason::NoAck) => "no_ack",
        End::Caller(_) => "failed",
        End::Session(_) => "agent_hung_up",
        End::MediaTimeout => "rtp_timeout",
        End::Shutdown => "shutdown",
        End::Bridged(_) => "bridged",
        End::Outage(_) => "outage",
    }
}

/// An answered call under way: `switchboard_sip_calls_active` counts it until
/// [`Live::ended`] (or the guard's drop, counted as `failed`: a task that ended early).
#[derive(Debug)]
pub struct Live {
    metrics: Metrics,
    direction: Direction,
    active: IntGauge,
    ended: bool,
}

impl Live {
    /// The call ended so.
    pub(crate) fn ended(mut self, end: &End) {
        self.count(end_outcome(end));
    }

    fn count(&mut self, outcome: &'static str) {
        if !self.ended {
            self.ended = true;
            self.active.dec();
            self.metrics.ended.with_label_values(&[self.direction.label(), outcome]).inc();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.count("failed");
    }
}

/// What one call's RTP statistics added since they were last read: each reading adds the
/// packets received and lost since the previous one and observes the jitter now. Losses
/// only add (a late packet that fills a gap lowers the stream's count, not the counter); a
/// new stream (the phone's SSRC changed, its statistics started again) starts from zero.
#[derive(Debug, Default)]
pub(crate) struct RtpReadings {
    /// The stream read last, and its received and lost packets counted so far.
    last: Option<(u32, u64, u64)>,
}

impl RtpReadings {
    /// Counts what `stats` added since the last reading.
    pub(crate) fn read(&mut self, metrics: &Metrics, stats: Option<&ReceiverStats>) {
        let Some(stats) = stats else { return };
        let (counted_received, counted_lost) = match self.last {
            Some((ssrc, received, lost)) if ssrc == stats.ssrc() => (received, lost),
            _ => (0, 0),
        };
        let received = stats.received();
        let lost = u64::try_from(stats.lost()).unwrap_or(0);
        metrics.rtp_received.inc_by(received.saturating_sub(counted_received));
        metrics.rtp_lost.inc_by(lost.saturating_sub(counted_lost));
        metrics.jitter.observe(stats.jitter_seconds(stats.clock_rate()));
        self.last = Some((stats.ssrc(), received.max(counted_received), lost.max(counted_lost)));
    }
}

#[cfg(test)]
mod tests;
