//! The SIP task: the one owner of the UDP SIP socket, the TCP listener (its connections'
//! tasks are in [`crate::tcp`]), the TLS listener ([`crate::tls`]) and the sans-I/O
//! [`Endpoint`]. It feeds the endpoint every datagram
//! and every message cut from a TCP stream with its source and the time, runs its timers, performs what comes out (datagrams to
//! send; a call's events to that call's task, a new task for each admitted INVITE) and
//! takes the call tasks' commands (the answer to an INVITE, a hang-up). A new INVITE gets
//! its RTP port pair here, before it is answered, so the SDP answer can name it; a range
//! with no pair left is 503. Bad datagrams are the endpoint's to answer or drop: nothing
//! here parses them.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use switchboard_sip::call::refer::{TransferEnd, TransferProgress};
use switchboard_sip::call::{CallConfig, CallEvent, EndReason, Timers, Transport};
use switchboard_sip::endpoint::{Endpoint, Output, Source};
use switchboard_sip::sdp::{Codec, LocalMedia, LocalSrtp};
use switchboard_sip::sip::Limits;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::call::{Call, Command, MediaSettings};
use crate::gateway::GatewayConfig;
use crate::outbound::{Outbound, Placement};
use crate::ports::{PortPair, Ports};
use crate::tcp::{Connections, FromConnection, Streams};

mod placing;
mod reopen;
use placing::{Connected, Waiting, next_placement};
use reopen::Reopening;
use switchboard_core::outbound::FromEdge;

/// Events queued for one call's task at most; past it the call is hung up (its task is
/// stuck, and the endpoint must not wait for it).
pub(crate) const CALL_QUEUE: usize = 16;
/// The largest datagram read; a longer one is cut and the endpoint answers it as malformed.
const MAX_DATAGRAM: usize = 65_535;
/// The RFC 4733 payload type the edge offers.
const TELEPHONE_EVENT: u8 = 101;

/// What the SIP task works with.
#[derive(Debug)]
pub(crate) struct Signalling {
    /// The edge's metrics, handed to each call.
    pub metrics: crate::metrics::Metrics,
    /// Placing the calls the gateway asks for, when the edge places calls.
    pub placing: Option<Placing>,
    pub socket: UdpSocket,
    /// SIP over TCP on the same address, when listening.
    pub tcp: Option<TcpListener>,
    /// SIP over TLS, on its own address, when listening.
    pub tls: Option<crate::tls::Listener>,
    /// The limits on each message (the endpoint's).
    pub limits: Limits,
    pub endpoint: Endpoint,
    pub advertise: IpAddr,
    pub ports: Ports,
    pub gateway: Arc<GatewayConfig>,
    pub settings: Arc<MediaSettings>,
    /// How calls are transferred to a person.
    pub dialling: Arc<crate::dialling::Dialling>,
    /// SRTP for calls over TLS.
    pub srtp: crate::srtp::SrtpPolicy,
    pub tasks: TaskTracker,
    pub shutdown: CancellationToken,
}

/// What placing calls takes: the calls to place (from [`crate::dispatch`]), where their
/// reports go, and the outbound trunk.
#[derive(Debug)]
pub(crate) struct Placing {
    pub placements: mpsc::Receiver<Placement>,
    pub reports: mpsc::Sender<FromEdge>,
    pub outbound: Outbound,
}

/// A call in progress, as the SIP task sees it.
pub(crate) struct Live {
    pub(crate) events: mpsc::Sender<CallEvent>,
}

impl Signalling {
    /// Runs until `shutdown`, then hangs up every call and waits (a few seconds at most)
    /// for their BYEs to be answered.
    pub(crate) async fn run(mut self) {
        let local = match self.socket.local_addr() {
            Ok(addr) => SocketAddr::new(self.advertise, addr.port()),
            Err(error) => return tracing::error!(%error, "the SIP socket has no address"),
        };
        // The address the dialogues over TLS name (Via, Contact): the TLS listener's port.
        let tls_local = match self.tls.as_ref().map(|tls| tls.listener.local_addr()) {
            Some(Ok(addr)) => SocketAddr::new(self.advertise, addr.port()),
            Some(Err(error)) => return tracing::error!(%error, "the SIP TLS listener has no address"),
            None => local,
        };
        let (commands_tx, mut commands) = mpsc::channel::<Command>(256);
        let mut calls: HashMap<String, Live> = HashMap::new();
        // The port pair and tag of the INVITE being handled, until its Incoming event.
        let mut fresh: Option<(PortPair, String)> = None;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut draining: Option<tokio::time::Instant> = None;
        let per_address = self.tls.as_ref().map_or(crate::tls::MAX_PER_ADDRESS, |tls| tls.config.max_per_address);
        let mut connections = Streams { tcp: Connections::default(), tls: Connections::per_address(per_address) };
        let (inbound_tx, mut inbound) = mpsc::channel::<FromConnection>(1024);
        // Calls waiting for their connection to a TCP or TLS trunk ([`crate::connect`]).
        let (connected_tx, mut connected) = mpsc::channel::<Connected>(64);
        // Connections the edge opened, to open again when they close mid-dialogue.
        let mut reopening = Reopening::default();
        loop {
            let timer = self.endpoint.poll_timeout().map(tokio::time::Instant::from_std);
            tokio::select! {
                received = self.socket.recv_from(&mut buf) => match received {
                    Ok((n, from)) => {
                        let source = Source { address: from, transport: Transport::Udp, trusted: false };
                        let (ports, advertise, open) = (&self.ports, self.advertise, draining.is_none());
                        let srtp = self.srtp;
                        let new_call = || new_call(ports, (local, advertise), srtp.for_call(Transport::Udp), open, &mut fresh);
                        self.endpoint.handle_datagram(Instant::now(), source, &buf[..n], new_call);
                    }
                    // ICMP port unreachable from an earlier send surfaces here on some
                    // systems: nothing to do but read on.
                    Err(error) => tracing::debug!(%error, "reading the SIP socket"),
                },
                accepted = accept(self.tcp.as_ref()), if draining.is_none() => match accepted {
                    Ok((stream, peer)) => connections.tcp.accept(
                        stream, peer, self.limits, inbound_tx.clone(), &self.tasks, self.shutdown.clone(),
                    ),
                    Err(error) => tracing::debug!(%error, "accepting a SIP connection"),
                },
                accepted = accept(self.tls.as_ref().map(|tls| &tls.listener)), if draining.is_none() => match accepted {
                    Ok((stream, peer)) => if let Some(tls) = &self.tls {
                        let serving = crate::tls::Serving {
                            limits: self.limits,
                            inbound: &inbound_tx,
                            tasks: &self.tasks,
                            shutdown: &self.shutdown,
                            metrics: &self.metrics,
                        };
                        crate::tls::accept(&mut connections.tls, &tls.config, stream, peer, serving);
                    },
                    Err(error) => tracing::debug!(%error, "accepting a SIP TLS connection"),
                },
                Some(from) = inbound.recv() => match from {
                    FromConnection::Message(transport, peer, parsed) => {
                        let source = Source { address: peer, transport, trusted: false };
                        let local = if transport == Transport::Tls { tls_local } else { local };
                        let (ports, advertise, open) = (&self.ports, self.advertise, draining.is_none());
                        let srtp = self.srtp;
                        let new_call = || new_call(ports, (local, advertise), srtp.for_call(transport), open, &mut fresh);
                        self.endpoint.handle_message(Instant::now(), source, parsed, new_call);
                    }
                    FromConnection::Closed(transport, peer) => connections.of(transport).closed(peer),
                },
                Some(placement) = next_placement(self.placing.as_mut()), if draining.is_none() => {
                    let waiting = Waiting::Place(placement);
                    self.route(waiting, local, &mut connections, &connected_tx, &mut calls, &commands_tx);
                }
                Some(done) = connected.recv() => {
                    self.connected(done, &mut connections, &mut reopening, &inbound_tx, &mut calls, &commands_tx);
                }
                Some(command) = commands.recv() => match command {
                    Command::Admit { call_id, admission } => self.endpoint.admit(Instant::now(), &call_id, admission),
                    Command::Queued { call_id, reason } => self.endpoint.queued(Instant::now(), &call_id, &reason),
                    Command::EarlyMedia { call_id, reason } => {
                        self.endpoint.early_media(Instant::now(), &call_id, &reason);
                    }
                    Command::HangUp { call_id } => self.endpoint.hang_up(Instant::now(), &call_id),
                    Command::Dial(request) => {
                        let waiting = Waiting::Dial(request);
                        self.route(waiting, local, &mut connections, &connected_tx, &mut calls, &commands_tx);
                    }
                    Command::Transfer { call_id, target, timeout } => {
                        if let Err(error) = self.endpoint.transfer(Instant::now(), &call_id, &target, timeout)
                            && let Some(live) = calls.get(&call_id)
                        {
                            let end = TransferEnd::NotStarted(error.to_string());
                            let _ = live.events.try_send(CallEvent::Transfer(TransferProgress::Ended(end)));
                        }
                    }
                },
                () = sleep_until(timer) => self.endpoint.handle_timeout(Instant::now()),
                () = self.shutdown.cancelled(), if draining.is_none() => {
                    tracing::info!(calls = calls.len(), "SIP edge shutting down: hanging up every call");
                    draining = Some(tokio::time::Instant::now() + std::time::Duration::from_secs(5));
                    let ids: Vec<String> = calls.keys().cloned().collect();
                    for id in ids {
                        self.endpoint.hang_up(Instant::now(), &id);
                    }
                }
                () = sleep_until(draining), if draining.is_some() => break,
            }
            let streams = (&mut connections, &mut reopening, &connected_tx);
            self.perform(&mut calls, &mut fresh, streams, &commands_tx).await;
            if draining.is_some() && self.endpoint.calls() == 0 {
                break;
            }
        }
    }

    /// Sends what the endpoint wants sent and hands call events to their tasks.
    async fn perform(
        &mut self,
        calls: &mut HashMap<String, Live>,
        fresh: &mut Option<(PortPair, String)>,
        (connections, reopening, connected): (&mut Streams, &mut Reopening, &mpsc::Sender<Connected>),
        commands: &mpsc::Sender<Command>,
    ) {
        while let Some(output) = self.endpoint.poll() {
            match output {
                Output::Transmit(transmit) if transmit.transport == Transport::Udp => {
                    if let Err(error) = self.socket.send_to(&transmit.bytes, transmit.to).await {
                        tracing::debug!(to = %transmit.to, %error, "sending a SIP datagram");
                    }
                }
                Output::Transmit(transmit) => {
                    let open = connections.of(transmit.transport);
                    if !open.is_open(transmit.to) {
                        let to = (transmit.transport, transmit.to);
                        self.unsent(to, transmit.bytes, reopening, connected);
                    } else if !open.send(transmit.to, transmit.bytes) {
                        let transport = transmit.transport.as_str();
                        tracing::debug!(to = %transmit.to, transport, "a SIP connection stopped reading: message dropped");
                    }
                }
                Output::Event { call_id, event: CallEvent::Incoming(incoming) } => {
                    let Some((ports, _tag)) = fresh.take() else {
                        tracing::warn!(call = %call_id, "an INVITE without its port pair; refusing it");
                        let refusal = switchboard_sip::call::Admission::Refuse(500, "No media port".into());
                        self.endpoint.admit(Instant::now(), &call_id, refusal);
                        continue;
                    };
                    let (events, receiver) = mpsc::channel(CALL_QUEUE);
                    calls.insert(call_id.clone(), Live { events });
                    let call = Call {
                        metrics: self.metrics.clone(),
                        call_id,
                        incoming,
                        ports,
                        gateway: Arc::clone(&self.gateway),
                        settings: Arc::clone(&self.settings),
                        events: receiver,
                        commands: commands.clone(),
                        shutdown: self.shutdown.clone(),
                        dialling: Arc::clone(&self.dialling),
                        direction: crate::metrics::Direction::Inbound,
                    };
                    self.tasks.spawn(call.run());
                }
                Output::Event { call_id, event } => {
                    tracing::trace!(call = %call_id, ?event, known = calls.contains_key(&call_id), "call event");
                    let ended = matches!(event, CallEvent::Ended(_));
                    let refused = match &event {
                        CallEvent::Ended(EndReason::Refused(status)) => Some(*status),
                        _ => None,
                    };
                    // A task that is gone (its call refused, or its session over and
                    // hanging up) needs no more events; one that is full is stuck.
                    if let Some(live) = calls.get(&call_id)
                        && let Err(mpsc::error::TrySendError::Full(_)) = live.events.try_send(event)
                        && !ended
                    {
                        tracing::warn!(call = %call_id, "the call's task is not keeping up; hanging up");
                        self.endpoint.hang_up(Instant::now(), &call_id);
                    }
                    if ended {
                        // A call refused before it had a task (its offer, the INVITE's
                        // checks) is counted here; a task counts its own call.
                        if calls.remove(&call_id).is_none()
                            && let Some(status) = refused
                        {
                            self.metrics.refused_with_status(status);
                        }
                    }
                }
                Output::Dropped { source, reason } => {
                    self.metrics.dropped(&reason);
                    tracing::debug!(%source, ?reason, "SIP message dropped");
                }
                Output::Refused { source, refusal } => {
                    self.metrics.refused_by_endpoint(refusal);
                    tracing::info!(%source, ?refusal, "call refused");
                }
            }
        }
        // An INVITE that was refused before its task started (a 488 for its codecs, a 400)
        // gives its port pair back.
        fresh.take();
    }
}

/// The configuration of a call a new INVITE starts (the edge's SIP and advertised
/// addresses; its SRTP stance for the transport the INVITE came on), with its port pair kept
/// in `fresh` until the call's task takes it; `None` (503) while draining or with no pair
/// left.
fn new_call(
    ports: &Ports,
    (local, advertise): (SocketAddr, IpAddr),
    srtp: LocalSrtp,
    open: bool,
    fresh: &mut Option<(PortPair, String)>,
) -> Option<CallConfig> {
    if !open {
        return None;
    }
    let pair = ports.take()?;
    let mut config = call_config(local, advertise, pair.port);
    config.media.srtp = srtp;
    *fresh = Some((pair, config.local_tag.clone()));
    Some(config)
}

async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// The codecs the edge takes and offers, most wanted first: Opus, then G.722 (both heard
/// at 16 kHz; Opus conceals loss from in-band FEC), then G.711 μ-law and A-law (an answer
/// keeps the offerer's order among those): `switchboard_sip::sdp::negotiate`'s rule.
pub(crate) const CODECS: [Codec; 4] = [Codec::Opus, Codec::G722, Codec::Pcmu, Codec::Pcma];

/// The call's configuration: the edge's SIP address, its media on `port`, and a fresh tag.
pub(crate) fn call_config(local: SocketAddr, advertise: IpAddr, port: u16) -> CallConfig {
    CallConfig {
        local,
        media: LocalMedia {
            address: advertise,
            port,
            session_id: fastrand::u64(..u64::MAX / 2),
            version: 1,
            codecs: CODECS.to_vec(),
            telephone_event: TELEPHONE_EVENT,
            srtp: LocalSrtp::default(),
        },
        local_tag: uuid::Uuid::new_v4().simple().to_string(),
        timers: Timers::default(),
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
