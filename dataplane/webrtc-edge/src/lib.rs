//! The gateway's WebRTC edge (issue 47): browsers and apps call an agent with an Opus track
//! each way and the session protocol's JSON on a data channel. It is a *client* of the
//! gateway's session machine, not a second one: each call opens one ordinary session
//! through [`switchboard_gateway::session::serve`], over an in-process pipe instead of a
//! socket ([`switchboard_gateway::session::ClientIo::Edge`]), so routing, handoffs, resume,
//! scopes, the record, traces and metrics are the WebSocket's. The gateway serves it as a
//! [`Channel`] (`Server::with_channel`); the gateway's crate does not depend on this one.
//!
//! - [`http`]: signalling, WHIP-style — `POST /v1/webrtc` (an SDP offer, admitted by the
//!   gateway's own admission code: credentials, Origin, session slots; then checked),
//!   `PATCH` (trickle ICE, ICE restart), `DELETE`;
//! - [`cors`]: preflights and CORS headers for pages of the origins the gateway allows;
//! - [`demux`]: which call a datagram on the one UDP port is for;
//! - [`tcp`]: ICE-TCP, the fallback where UDP is blocked: one TCP port, RFC 4571 framing;
//! - [`call`]: one task per call, around the sans-I/O [`switchboard_webrtc::Call`]: it
//!   moves datagrams, timers and the session's frames, and decides nothing the crate does;
//! - [`metrics`]: calls by outcome, calls live;
//! - [`turn`]: the TURN servers each caller is told of, with a credential of its own.
//!
//! The socket: one UDP port per gateway, every call on it (`--webrtc-udp`), and optionally
//! one TCP port beside it for ICE-TCP (`--webrtc-tcp`); the address in the answers'
//! candidates is `--webrtc-advertise` where clients reach the pod through a NAT or a load
//! balancer (the TCP candidate: its IP, and the TCP port). Off unless configured.

pub mod call;
pub mod cors;
pub mod demux;
pub mod http;
pub mod metrics;
pub mod tcp;
pub mod turn;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use switchboard_gateway::Gateway;
use switchboard_gateway::channels::Channel;
use switchboard_webrtc::CallConfig;
use tokio::net::UdpSocket;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use demux::Demux;
pub use metrics::Metrics;

/// The WebRTC path: `POST` here, `PATCH` and `DELETE` on `/v1/webrtc/<id>`.
pub const WEBRTC_PATH: &str = "/v1/webrtc";

/// How the edge is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebrtcConfig {
    /// The UDP address the edge's one socket binds (`0.0.0.0:3478`; port 0: any).
    pub listen: SocketAddr,
    /// The address clients reach that socket at, put in the answers' candidates; port 0:
    /// the bound port. None: the bound address, which then must be a specific IP.
    pub advertise: Option<SocketAddr>,
    /// The TCP address of the ICE-TCP listener (port 0: any); None: no ICE-TCP. Its candidate
    /// in the answers is the advertised IP (or the bound one) with this port as bound.
    pub tcp: Option<SocketAddr>,
    /// Most calls at once; more offers are answered 503.
    pub max_calls: usize,
    /// How long a call whose client stopped answering ICE (15 s without a consent check)
    /// waits for it (an ICE restart within it keeps the call) before it ends and its
    /// session parks for resume.
    pub disconnect_grace: std::time::Duration,
    /// TURN servers handed to callers ([`turn`]); none by default.
    pub turn: turn::Turn,
    /// The reply encoder's complexity, 0-10: libopus's work per 20 ms frame, most of what a
    /// call costs the gateway ([`DEFAULT_OPUS_COMPLEXITY`]: 5).
    pub opus_complexity: u8,
}

impl WebrtcConfig {
    /// The edge on `ip`, any free port, as local mode runs it. On every address (`0.0.0.0`)
    /// it advertises the loopback one: calls from this machine.
    pub fn on(ip: IpAddr) -> Self {
        let advertise = match ip {
            IpAddr::V4(v4) if v4.is_unspecified() => Some(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0))),
            IpAddr::V6(v6) if v6.is_unspecified() => Some(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0))),
            _ => None,
        };
        Self { listen: SocketAddr::new(ip, 0), advertise, ..Self::default() }
    }
}

impl Default for WebrtcConfig {
    /// Every address, UDP port 3478, no ICE-TCP, 1000 calls, the call's default grace (15 s),
    /// Opus complexity 5.
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 3478)),
            advertise: None,
            tcp: None,
            max_calls: DEFAULT_MAX_CALLS,
            disconnect_grace: CallConfig::default().disconnect_grace,
            turn: turn::Turn::default(),
            opus_complexity: DEFAULT_OPUS_COMPLEXITY,
        }
    }
}

/// The default of [`WebrtcConfig::opus_complexity`] (libwebrtc's on phones): see
/// [`switchboard_webrtc::audio::DEFAULT_COMPLEXITY`].
pub const DEFAULT_OPUS_COMPLEXITY: u8 = switchboard_webrtc::audio::DEFAULT_COMPLEXITY;

/// The default of [`WebrtcConfig::max_calls`].
pub const DEFAULT_MAX_CALLS: usize = 1000;

/// The kernel receive buffer asked for the edge's one UDP socket. Every call's datagrams queue
/// there while the socket task is not running; the kernel's default (208 KiB on Linux, some
/// 200 small datagrams) is a few tens of milliseconds of 10 calls' traffic, so any pause of
/// the gateway longer than that dropped whole bursts of every call's packets (the `webrtc`
/// benchmark's stall at 10 calls, with the kernel's UDP "receive buffer errors" rising). The
/// kernel caps it at `net.core.rmem_max`; the edge warns when it got less.
pub const UDP_RECEIVE_BUFFER: usize = 4 << 20;
/// The kernel send buffer asked for the edge's UDP socket (replies to every call leave by it).
pub const UDP_SEND_BUFFER: usize = 1 << 20;

/// ICE-TCP connections the edge holds at most, per call slot.
pub const TCP_CONNECTIONS_PER_CALL: usize = 2;

/// Why the edge could not start.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    /// The socket.
    #[error("the WebRTC UDP socket cannot bind {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The ICE-TCP listener.
    #[error("the WebRTC ICE-TCP listener cannot bind {address}: {source}")]
    BindTcp {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Bound to every address, with none to advertise.
    #[error(
        "the WebRTC socket binds {0}, which clients cannot be told to reach: give --webrtc-advertise the address they reach this pod at"
    )]
    NoAddress(SocketAddr),
    /// Its TURN servers.
    #[error("the WebRTC edge's TURN servers: {0}")]
    Turn(#[from] turn::TurnError),
    /// Its metrics.
    #[error("the WebRTC edge's metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// What a call's task is asked from the HTTP side.
#[derive(Debug)]
pub enum Command {
    /// A `PATCH`: trickled candidates or an ICE restart, with its `If-Match` if any; the
    /// answer fragment, if any, or why not.
    Patch(
        switchboard_webrtc::Fragment,
        Option<String>,
        tokio::sync::oneshot::Sender<Result<Option<String>, switchboard_webrtc::CallError>>,
    ),
    /// A `DELETE`: the call and its session end.
    End,
}

/// The edge of one gateway: its socket and calls.
#[derive(Debug)]
pub struct Edge {
    socket: UdpSocket,
    /// Where the socket is bound.
    bound: SocketAddr,
    /// Where clients reach the socket.
    advertised: SocketAddr,
    /// Every call's setup (the advertised address, a DTLS certificate made once).
    call_config: CallConfig,
    demux: Arc<Demux>,
    /// The ICE-TCP port, if any.
    tcp: Option<Arc<tcp::TcpSide>>,
    /// The live calls' command queues, by resource id.
    calls: Mutex<HashMap<String, mpsc::Sender<Command>>>,
    /// Call slots.
    slots: Arc<Semaphore>,
    max_calls: usize,
    next_call: std::sync::atomic::AtomicU64,
    /// TURN servers handed to callers.
    turn: turn::Turn,
    /// Its metrics.
    pub metrics: Metrics,
}

impl Edge {
    /// Binds the socket. `max_message_bytes`: the data channel's limit, the WebSocket's (the
    /// gateway's `config.max_message_bytes`).
    pub async fn bind(config: &WebrtcConfig, max_message_bytes: usize) -> Result<Arc<Self>, EdgeError> {
        config.turn.validate()?;
        let metrics = Metrics::new()?;
        let socket = UdpSocket::bind(config.listen)
            .await
            .map_err(|source| EdgeError::Bind { address: config.listen, source })?;
        let bound = socket.local_addr().map_err(|source| EdgeError::Bind { address: config.listen, source })?;
        size_buffers(&socket);
        let advertised = match config.advertise {
            Some(a) if a.port() == 0 => SocketAddr::new(a.ip(), bound.port()),
            Some(a) => a,
            None if bound.ip().is_unspecified() => return Err(EdgeError::NoAddress(bound)),
            None => bound,
        };
        let tcp = match config.tcp {
            Some(address) => {
                let bind_error = |source| EdgeError::BindTcp { address, source };
                let listener = tcp::listen(address).map_err(bind_error)?;
                let bound = listener.local_addr().map_err(bind_error)?;
                let advertised = SocketAddr::new(advertised.ip(), bound.port());
                // A client may hold a few connections (an ICE restart, a second interface).
                let slots = config.max_calls.saturating_mul(TCP_CONNECTIONS_PER_CALL);
                tracing::info!(%bound, %advertised, "WebRTC edge on TCP (ICE-TCP)");
                Some(Arc::new(tcp::TcpSide::new(listener, bound, advertised, slots, metrics.clone())))
            }
            None => None,
        };
        let call_config = CallConfig {
            udp: vec![advertised],
            tcp: tcp.iter().map(|t| t.advertised).collect(),
            max_message_bytes,
            disconnect_grace: config.disconnect_grace,
            dtls_cert: switchboard_webrtc::generate_dtls_cert(),
            opus_complexity: config.opus_complexity,
            ..CallConfig::default()
        };
        tracing::info!(%bound, %advertised, "WebRTC edge on UDP");
        Ok(Arc::new(Self {
            socket,
            bound,
            advertised,
            call_config,
            demux: Arc::default(),
            tcp,
            calls: Mutex::default(),
            slots: Arc::new(Semaphore::new(config.max_calls)),
            max_calls: config.max_calls,
            next_call: std::sync::atomic::AtomicU64::new(1),
            turn: config.turn.clone(),
            metrics,
        }))
    }

    /// The address clients reach the edge at.
    pub fn advertised(&self) -> SocketAddr {
        self.advertised
    }

    /// The address the edge's socket is bound to.
    pub fn bound(&self) -> SocketAddr {
        self.bound
    }

    /// Where the ICE-TCP listener is bound and where clients reach it, if there is one.
    pub fn tcp(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.tcp.as_ref().map(|t| (t.bound, t.advertised))
    }

    /// The address a call's datagrams of `proto` arrive at, as its candidates name it.
    fn local(&self, proto: switchboard_webrtc::Protocol) -> Option<SocketAddr> {
        match proto {
            switchboard_webrtc::Protocol::Udp => Some(self.advertised),
            switchboard_webrtc::Protocol::Tcp => self.tcp.as_ref().map(|t| t.advertised),
            _ => None,
        }
    }

    /// Reads the socket and takes ICE-TCP connections (their buffers counted in the
    /// `gateway`'s memory budget) until the gateway shuts down.
    pub async fn serve(self: Arc<Self>, gateway: Arc<Gateway>) {
        let tcp = self.tcp.clone().map(|tcp| tcp.accept(self.demux.clone(), gateway.clone()));
        let udp = self.receive(gateway.shutdown.clone());
        match tcp {
            Some(tcp) => {
                tokio::join!(udp, tcp);
            }
            None => udp.await,
        }
    }

    /// Reads the socket until `stop`, handing each datagram to its call's queue (dropped
    /// when the queue is full, as a network drops it; or when no call is its).
    pub async fn receive(self: Arc<Self>, stop: CancellationToken) {
        // A datagram larger than this is no WebRTC packet (they are kept under the MTU).
        let mut buffer = vec![0; 2048];
        loop {
            let received = tokio::select! {
                () = stop.cancelled() => return,
                received = self.socket.recv_from(&mut buffer) => received,
            };
            let (size, source) = match received {
                Ok(received) => received,
                // An ICMP error of an earlier send (a client gone), reported on this socket.
                Err(error) => {
                    tracing::debug!(%error, "WebRTC socket");
                    continue;
                }
            };
            let contents = &buffer[..size];
            if let Some(queue) = self.demux.route(source, contents) {
                let incoming =
                    demux::Incoming { proto: switchboard_webrtc::Protocol::Udp, source, contents: contents.to_vec() };
                let _ = queue.try_send(incoming);
            }
        }
    }

    /// Sends a datagram, on the UDP socket or (TCP) its connection; one that cannot go now
    /// is dropped (the peer's retransmissions and loss concealment cover it).
    fn send(&self, datagram: &switchboard_webrtc::Datagram) {
        let (destination, contents) = (datagram.destination, &datagram.contents);
        if datagram.proto != switchboard_webrtc::Protocol::Udp {
            if let Some(tcp) = &self.tcp {
                tcp.send(destination, contents);
            }
            return;
        }
        if let Err(error) = self.socket.try_send_to(contents, destination) {
            tracing::debug!(%error, %destination, "a WebRTC datagram was not sent");
        }
    }

    fn register(&self, id: String, commands: mpsc::Sender<Command>) {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).insert(id, commands);
    }

    fn forget(&self, id: &str) {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
    }

    fn commands(&self, id: &str) -> Option<mpsc::Sender<Command>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).get(id).cloned()
    }

    /// The call's commands, taken out of the table: a `DELETE` ends the call, and from then
    /// on its resource is gone (a second `DELETE` or a `PATCH` gets 404 at once, not only
    /// once the call's task has wound down).
    fn take_commands(&self, id: &str) -> Option<mpsc::Sender<Command>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(id)
    }

    /// Live calls.
    pub fn live(&self) -> usize {
        self.max_calls - self.slots.available_permits()
    }
}

/// Asks the kernel for [`UDP_RECEIVE_BUFFER`] and [`UDP_SEND_BUFFER`] on `socket`; warns when
/// it gives less (Linux reports twice what it grants).
fn size_buffers(socket: &UdpSocket) {
    let socket = socket2::SockRef::from(socket);
    let _ = socket.set_recv_buffer_size(UDP_RECEIVE_BUFFER);
    let _ = socket.set_send_buffer_size(UDP_SEND_BUFFER);
    let granted = socket.recv_buffer_size().unwrap_or(0);
    if granted < UDP_RECEIVE_BUFFER {
        tracing::warn!(
            asked = UDP_RECEIVE_BUFFER,
            granted,
            "the WebRTC UDP socket's receive buffer is smaller than asked: raise net.core.rmem_max, or bursts of datagrams are dropped under load"
        );
    }
}

/// The gateway serves the edge: its signalling routes, its socket's reader (until the
/// gateway's shutdown), its metrics.
impl Channel for Edge {
    fn routes(self: Arc<Self>, gateway: Arc<Gateway>) -> Router {
        http::routes(gateway, self)
    }

    fn run(self: Arc<Self>, gateway: Arc<Gateway>) -> BoxFuture<'static, ()> {
        self.serve(gateway).boxed()
    }

    fn render_metrics(&self) -> String {
        self.metrics.render()
    }
}

/// The routes of a gateway without the edge: each answers 404 saying how to turn it on.
pub fn off_routes(gateway: Arc<Gateway>) -> Router {
    http::off(gateway)
}
