//! Switchboard's SIP edge with I/O: thin tokio tasks around the sans-I/O
//! [`switchboard_sip`]. Phones and trunks call `sip:<agent>@<edge>`; each call becomes one
//! ordinary session at the gateway (DESIGN.md, "Channels at the edge"), so routing,
//! handoffs, resume, the record and traces treat calls as they treat WebSocket clients.
//!
//! The tasks:
//!
//! - [`signalling`]: one task owns the UDP SIP socket and the
//!   [`Endpoint`] (flood guard per source, stateless
//!   answers, the call machines); it takes an RTP port pair for each new INVITE
//!   ([`ports`]), starts a call task when the INVITE can be answered, hands each call its
//!   events and performs its commands.
//! - [`call`]: one task per call. It opens the session at the gateway ([`gateway`]) for
//!   the agent the Request-URI names, with audio in the call's format both ways as
//!   binary frames (G.711 as it is; G.722 decoded to 16 kHz PCM16 and back), and answers the INVITE with what the gateway said:
//!   200, or 404 (no such agent), 403 (not open to the edge), 488 (a text-only agent), 503
//!   (the gateway busy or unreachable). Then it relays: RTP -> jitter buffer -> a binary
//!   frame to the gateway as each packet comes (a gap waits at most
//!   [`call::REORDER_WINDOW`], then is concealed); the agent's binary frames -> RTP to the
//!   phone as they come, never ahead of real time by more than a little (a burst goes out
//!   one packet every 20 ms), the queue dropped at once on `bidi_interruption`; RTCP reports
//!   every 5 s on the RTCP port. The caller's BYE closes the session (`close`); the session
//!   ending sends BYE; RTP silent past [`call::MediaSettings::timeout`] ends the call.
//!
//! Everything is bounded: calls ([`EdgeConfig::max_calls`], and the RTP port range: a
//! new INVITE past either gets 503), each source's SIP message rate (the endpoint's flood
//! guard: past it messages are dropped unanswered), each call's queue of events (a task
//! that falls behind is hung up), of reply audio (10 s, oldest dropped) and of frames to
//! the gateway (dropped when the gateway does not read). A datagram that does not parse
//! gets the endpoint's answer (400/413/505 with the reason) or nothing; RTP from an
//! address not in the dialogue, or not the settled codec, is ignored.
//!
//! SIP over TCP ([`tcp`]) is served on the same port as UDP when asked for
//! ([`EdgeConfig::tcp`]): one task per connection cuts its stream into messages for the same
//! endpoint, and what the endpoint sends to a TCP peer goes back on its connection.
//!
//! SIP over TLS ([`tls`]) is served on an address of its own when configured
//! ([`EdgeConfig::tls`], 5061 by custom): each connection's handshake is bounded in time and
//! the connections one address may hold at once are bounded, then it is served as TCP's;
//! its dialogues say TLS (`sips:` where the caller's URI did) in their Via and Contact.
//! Calls over TLS get SRTP ([`srtp`], [`EdgeConfig::srtp`]): SDES keys in their SDP, never
//! over plain UDP or TCP.
//!
//! Trunks ([`EdgeConfig::trunks`]): when configured, new INVITEs are taken only from a
//! trunk's source addresses and/or with its digest credentials (401 challenges), others get
//! 403; see [`switchboard_sip::trunk`].
//!
//! Keys pressed ([`keys`]): each RFC 4733 telephone event (once per press) and SIP INFO
//! digit goes to the gateway as one `bidi_dtmf`; the agent's core tells the model.
//!
//! Outbound calls ([`EdgeConfig::outbound`], [`outbound`]): the edge holds a dispatch
//! connection to the gateway ([`dispatch`], `/v1/calls/edge`) that brings the calls
//! `POST /v1/calls` placed; it places each through the outbound trunk and reports its
//! progress (dialing, ringing, answered, completed, busy, no answer, failed); an answered
//! call opens its session with the call's ticket and is relayed as an inbound one.
//!
//! Transfers (the `transfer` module): the agent's `transfer_request` becomes a REFER to the caller's
//! side; the NOTIFYs' final answer becomes the session's `transfer_result`. Where the
//! caller's side refuses the REFER (405, 501, ...), or with [`TransferMethod::Dial`], the
//! edge dials the person itself and, once they answer and the agent's session ends,
//! bridges the caller and the person (the call's `bridge` module).
//!
//! Outage mode: a call to an Agent whose session the gateway diverts (`bidi_session_fallback`,
//! close 4513) is answered and put through to the fallback's person with the same REFER
//! (after the outage announcement, when there is one; a caller who hangs up during it is
//! put through to nobody), or, with only a message, answered to hear the outage
//! announcement and hung up when there is one ([`announce`]), else refused 503 with the
//! message as the reason (and `Retry-After` when the gateway gives a hint). A call under way
//! told its Agent went into outage mode (`bidi_session_outage`) hears the outage
//! announcement at the next turn boundary and goes to the fallback (its person, or the
//! call's end); without an announcement it goes on.
//!
//! The capacity queue: a call whose session the gateway queues (`bidi_session_queued`) gets
//! `182 Queued` with the hold message, again at every new place and every half minute, and is
//! answered when its turn comes; with a hold announcement ([`announce`]) it gets `183
//! Session Progress` with the SDP answer instead and hears the recording, repeated, as early
//! media (the Agent's own when there is one: the gateway names the Agent waited for, also
//! when a number was dialled). A refusal for capacity (`capacity_full`) is 503 with
//! `Retry-After` from the gateway's hint ([`gateway`]).
//!
//! Metrics ([`metrics`]): calls by direction and outcome, refusals by reason, calls under
//! way, transfers, outage fallbacks, the phones' RTP (packets, losses, jitter) and messages
//! dropped (the flood guard's); [`Edge::metrics`] renders them for a `/metrics` endpoint.

pub mod announce;
pub mod call;
mod command;
pub mod connect;
mod dialling;
mod digits;
pub mod dispatch;
mod end;
pub mod gateway;
mod keys;
pub mod metrics;
pub mod outbound;
pub mod ports;
mod signalling;
pub mod srtp;
pub mod tcp;
pub mod tls;
mod transfer;

use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::Arc;

use switchboard_sip::endpoint::{Endpoint, EndpointConfig};
use tokio::net::{TcpListener, UdpSocket};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use announce::Announcements;
pub use call::MediaSettings;
pub use connect::TrunkTls;
pub use dialling::{OutboundSettingsError, Route, TransferMethod};
pub use gateway::GatewayConfig;
pub use metrics::Metrics;
pub use outbound::Outbound;
pub use srtp::SrtpPolicy;
pub use switchboard_sip::call::Transport;
pub use switchboard_sip::endpoint::rate::RateConfig;
pub use switchboard_sip::trunk;
use switchboard_sip::trunk::Trunks;
pub use tls::TlsConfig;

/// A random secret for [`Trunks::new`] to make its digest nonces from (a v4 UUID's 122
/// random bits).
pub fn nonce_secret() -> [u8; 16] {
    uuid::Uuid::new_v4().into_bytes()
}

/// How the edge runs.
#[derive(Clone, Debug)]
pub struct EdgeConfig {
    /// Where to listen for SIP over UDP (port 0: any free port, see [`Edge::local_addr`]).
    pub listen: SocketAddr,
    /// Listen for SIP over TCP too, on the same address and port.
    pub tcp: bool,
    /// Listen for SIP over TLS too, on its own address; `None`: no TLS.
    pub tls: Option<TlsConfig>,
    /// The address phones reach the edge at: SDP's `c=` line and the Contact header.
    pub advertise: IpAddr,
    /// The RTP ports: one even port (RTP) and the next (RTCP) per call.
    pub rtp_ports: RangeInclusive<u16>,
    /// The gateway each call opens its session at.
    pub gateway: GatewayConfig,
    /// Calls at once; a new INVITE past it gets 503.
    pub max_calls: usize,
    /// The flood guard: SIP messages one source address may send (past it they are
    /// dropped unanswered). A trunk or a benchmark that carries many calls from one
    /// address needs more than the default.
    pub rate: RateConfig,
    /// Media behaviour.
    pub media: MediaSettings,
    /// Who may call (none configured: anyone, untrusted).
    pub trunks: Trunks,
    /// Where the calls the gateway asks for are placed; `None`: the edge places no calls
    /// (and holds no dispatch connection). A person's number in a dialled transfer goes
    /// through it too.
    pub outbound: Option<Outbound>,
    /// How a caller is put through to a person: REFER (dialling the person and bridging
    /// where the caller's side refuses it), or always dialling.
    pub transfer: TransferMethod,
    /// SRTP for calls over TLS (keys never travel over plain UDP or TCP).
    pub srtp: SrtpPolicy,
}

/// Why the edge cannot start.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    /// The SIP address cannot be bound.
    #[error("cannot listen for SIP on {address} (UDP, or TCP on the same port): {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS address cannot be bound.
    #[error("cannot listen for SIP over TLS on {address}: {source}")]
    BindTls {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The RTP port range is unusable.
    #[error(transparent)]
    Ports(#[from] ports::PortsError),
    /// The metrics' registry refused a family (a bug: the names are fixed).
    #[error("cannot register the SIP edge's metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// A bound edge, ready to [`Edge::run`].
#[derive(Debug)]
pub struct Edge {
    signalling: signalling::Signalling,
    local: SocketAddr,
    tls_local: Option<SocketAddr>,
    /// The dispatch task's parts, when the edge places calls.
    dispatch: Option<Dispatch>,
}

#[derive(Debug)]
struct Dispatch {
    outbound: Outbound,
    placements: tokio::sync::mpsc::Sender<outbound::Placement>,
    reports: tokio::sync::mpsc::Receiver<switchboard_core::outbound::FromEdge>,
    report_tx: tokio::sync::mpsc::Sender<switchboard_core::outbound::FromEdge>,
}

/// How many port-0 picks [`bind_sip`] tries before giving up: the kernel picks a free UDP
/// port, and another process may hold TCP on that number.
const PORT_PICKS: usize = 16;

/// Binds UDP on `listen` and, when `tcp`, TCP on the same port. With port 0 the kernel picks
/// the UDP port, whose number may be taken for TCP by another process: then another pick,
/// up to [`PORT_PICKS`] times. A port asked for by number is tried once.
async fn bind_sip(listen: SocketAddr, tcp: bool) -> Result<(UdpSocket, SocketAddr, Option<TcpListener>), EdgeError> {
    let mut picks = 0;
    loop {
        picks += 1;
        let socket = UdpSocket::bind(listen).await.map_err(|source| EdgeError::Bind { address: listen, source })?;
        let local = socket.local_addr().map_err(|source| EdgeError::Bind { address: listen, source })?;
        if !tcp {
            return Ok((socket, local, None));
        }
        match TcpListener::bind(local).await {
            Ok(listener) => return Ok((socket, local, Some(listener))),
            Err(source)
                if listen.port() == 0 && source.kind() == std::io::ErrorKind::AddrInUse && picks < PORT_PICKS =>
            {
                tracing::debug!(port = local.port(), "TCP holds the port UDP was given; picking another");
            }
            Err(source) => return Err(EdgeError::Bind { address: local, source }),
        }
    }
}

impl Edge {
    /// Binds the SIP socket and prepares the port range (the RTP sockets bind on the
    /// listen address, per call).
    pub async fn bind(config: EdgeConfig) -> Result<Self, EdgeError> {
        let EdgeConfig {
            listen,
            tcp,
            tls,
            advertise,
            rtp_ports,
            gateway,
            max_calls,
            rate,
            media,
            trunks,
            outbound,
            transfer,
            srtp,
        } = config;
        let dialling = Arc::new(dialling::Dialling { method: transfer, outbound: outbound.clone() });
        let (socket, local, tcp) = bind_sip(listen, tcp).await?;
        let tls = match tls {
            Some(config) => {
                let address = config.listen;
                Some(tls::Listener::bind(config).await.map_err(|source| EdgeError::BindTls { address, source })?)
            }
            None => None,
        };
        let tls_local = match &tls {
            Some(tls) => Some(
                tls.listener
                    .local_addr()
                    .map_err(|source| EdgeError::BindTls { address: tls.config.listen, source })?,
            ),
            None => None,
        };
        let ports = ports::Ports::new(listen.ip(), rtp_ports)?;
        let endpoint_config = EndpointConfig { max_calls, rate, ..EndpointConfig::default() };
        let endpoint = Endpoint::new(endpoint_config).with_trunks(trunks);
        let (dispatch, placing) = match outbound {
            Some(outbound) => {
                let (placements, placement_rx) = tokio::sync::mpsc::channel(64);
                let (report_tx, reports) = tokio::sync::mpsc::channel(1024);
                let placing = signalling::Placing {
                    placements: placement_rx,
                    reports: report_tx.clone(),
                    outbound: outbound.clone(),
                };
                (Some(Dispatch { outbound, placements, reports, report_tx }), Some(placing))
            }
            None => (None, None),
        };
        let signalling = signalling::Signalling {
            metrics: Metrics::new()?,
            placing,
            socket,
            tcp,
            tls,
            limits: endpoint_config.limits,
            endpoint,
            advertise,
            ports,
            gateway: Arc::new(gateway),
            settings: Arc::new(media),
            dialling,
            srtp,
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
        };
        Ok(Self { signalling, local, tls_local, dispatch })
    }

    /// The bound SIP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The bound SIP over TLS address, when listening for TLS.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_local
    }

    /// The edge's metrics (a handle on its one registry: render it for `/metrics`).
    pub fn metrics(&self) -> Metrics {
        self.signalling.metrics.clone()
    }

    /// Serves calls until `shutdown` resolves; then every call is hung up, and this
    /// returns once their tasks are done (a few seconds at most).
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let token = self.signalling.shutdown.clone();
        let tasks = self.signalling.tasks.clone();
        if let Some(Dispatch { outbound, placements, reports, report_tx }) = self.dispatch {
            let gateway = Arc::clone(&self.signalling.gateway);
            tasks.spawn(dispatch::run(gateway, outbound, placements, reports, report_tx, token.clone()));
        }
        let mut signalling = tokio::spawn(self.signalling.run());
        tokio::select! {
            () = shutdown => {
                token.cancel();
                let _ = signalling.await;
            }
            ended = &mut signalling => {
                tracing::error!(?ended, "the SIP task ended by itself");
                token.cancel();
            }
        }
        tasks.close();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), tasks.wait()).await;
    }
}

// Ports for the unit tests, as every test harness picks them (the file all test crates
// share: below the kernel's ephemeral range, reserved for the test process).
#[cfg(test)]
#[path = "../../tests/support/ports.rs"]
#[allow(dead_code)]
mod test_ports;
#[cfg(test)]
mod tests;
