//! The SIP task's side of the calls the edge places: a call the gateway asked for
//! ([`Placement`]) and a person's leg for a transfer ([`DialRequest`]). Each gets an RTP port
//! pair and its INVITE from the endpoint. Over UDP that is at once; over TCP or TLS
//! (an outbound trunk's `;transport=tcp`, `;transport=tls`, `sips:`) it goes on the edge's
//! open connection to the trunk when there is one, else a task opens one
//! ([`crate::connect::connect`], bounded in time, the certificate verified) and the call
//! waits for it ([`Waiting`]); the connection, once open, is served as any other
//! ([`crate::tcp::serve`]) and kept for the next calls, and the call's Via and Contact name
//! its local address (so the trunk's requests in the dialogue come back on it). A
//! connection that cannot be opened fails the call with why (a certificate the edge does not
//! trust is named as such) and is counted
//! (`switchboard_sip_outbound_connections_total`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use switchboard_core::outbound::CallState;
use switchboard_sip::call::{Callee, ClientAuth, Transport};
use switchboard_sip::trunk::outbound::Destination;
use tokio::sync::mpsc;

use super::reopen::{Held, Reopening, Route};
use super::{CALL_QUEUE, Live, Placing, Signalling, call_config};
use crate::command::{Command, DialRequest, PersonLeg};
use crate::connect::{ConnectError, Stream};
use crate::metrics::TrunkConnection;
use crate::outbound::{PlacedCall, Placement};
use crate::tcp::{FromConnection, Streams};

/// A call to place, maybe waiting for its connection; or a trunk's connection to open
/// again for the messages waiting for it ([`super::reopen`]).
#[derive(Debug)]
pub(crate) enum Waiting {
    /// A call the gateway asked for.
    Place(Placement),
    /// A person's leg for a transfer.
    Dial(DialRequest),
    /// A connection the edge opened that closed while a dialogue had more to send on it.
    Reopen { transport: Transport, peer: SocketAddr, route: Route },
}

impl Waiting {
    fn route(&self) -> (Transport, SocketAddr) {
        match self {
            Self::Place(p) => (p.transport, p.peer),
            Self::Dial(d) => (d.transport, d.peer),
            Self::Reopen { transport, peer, .. } => (*transport, *peer),
        }
    }

    /// How to open its connection (again).
    fn how(&self) -> Route {
        match self {
            Self::Place(p) => Route { host: p.host.clone(), tls: p.tls.clone() },
            Self::Dial(d) => Route { host: d.host.clone(), tls: d.tls.clone() },
            Self::Reopen { route, .. } => route.clone(),
        }
    }
}

/// A connection a task opened for a waiting call (or why it could not).
#[derive(Debug)]
pub(crate) struct Connected {
    result: Result<(Stream, SocketAddr), ConnectError>,
    waiting: Waiting,
}

pub(super) async fn next_placement(placing: Option<&mut Placing>) -> Option<Placement> {
    match placing {
        Some(placing) => placing.placements.recv().await,
        None => std::future::pending().await,
    }
}

impl Signalling {
    /// Places `waiting` now (UDP, or a connection to its peer is open), or starts opening
    /// its connection.
    pub(super) fn route(
        &mut self,
        waiting: Waiting,
        local: SocketAddr,
        connections: &mut Streams,
        connected: &mpsc::Sender<Connected>,
        calls: &mut HashMap<String, Live>,
        commands: &mpsc::Sender<Command>,
    ) {
        let (transport, peer) = waiting.route();
        if !transport.is_reliable() {
            return self.go(waiting, local, calls, commands);
        }
        if let Some(from) = connections.of(transport).opened_to(peer) {
            return self.go(waiting, SocketAddr::new(self.advertise, from.port()), calls, commands);
        }
        self.open(waiting, connected);
    }

    /// Starts a task opening `waiting`'s connection; what it gets comes back as
    /// [`Connected`].
    fn open(&self, waiting: Waiting, connected: &mpsc::Sender<Connected>) {
        let (transport, peer) = waiting.route();
        let Route { host, tls } = waiting.how();
        let connected = connected.clone();
        self.tasks.spawn(async move {
            let result = crate::connect::connect(peer, transport, &host, tls.as_ref()).await;
            let _ = connected.send(Connected { result, waiting }).await;
        });
    }

    /// A message the endpoint sends over TCP or TLS to `peer`, whose connection is not
    /// open: held while a connection the edge opened is opened again, else dropped.
    pub(super) fn unsent(
        &self,
        (transport, peer): (Transport, SocketAddr),
        bytes: Vec<u8>,
        reopening: &mut Reopening,
        connected: &mpsc::Sender<Connected>,
    ) {
        match reopening.hold(transport, peer, bytes) {
            Held::NotOurs => {
                tracing::debug!(to = %peer, transport = transport.as_str(), "no SIP connection to send on")
            }
            Held::Waiting => {}
            Held::Open(route) => {
                tracing::info!(%peer, transport = transport.as_str(), "the connection to the trunk closed: opening it again");
                self.open(Waiting::Reopen { transport, peer, route }, connected);
            }
        }
    }

    /// A connection a waiting call asked for opened (served from now on, unless another
    /// to the same trunk opened first), or not (the call fails).
    pub(super) fn connected(
        &mut self,
        done: Connected,
        connections: &mut Streams,
        reopening: &mut Reopening,
        inbound: &mpsc::Sender<FromConnection>,
        calls: &mut HashMap<String, Live>,
        commands: &mpsc::Sender<Command>,
    ) {
        let Connected { result, waiting } = done;
        let (transport, peer) = waiting.route();
        let (stream, from) = match result {
            Ok(opened) => opened,
            Err(error) => {
                let outcome = match &error {
                    ConnectError::Connect(_) | ConnectError::NoTls => TrunkConnection::ConnectFailed,
                    ConnectError::Handshake(_) | ConnectError::Name(_) => TrunkConnection::HandshakeFailed,
                    ConnectError::Timeout => TrunkConnection::Timeout,
                };
                self.metrics.trunk_connection(transport, outcome);
                let why = format!("{}: {error}", trunk_named(&waiting));
                return self.fail(waiting, why, reopening);
            }
        };
        let open = connections.of(transport);
        let from = match open.opened_to(peer) {
            // Another call's connection to the trunk opened first: this one is not needed.
            Some(first) => first,
            None => match open.open_to(peer, from) {
                Ok(writes) => {
                    self.metrics.trunk_connection(transport, TrunkConnection::Established);
                    tracing::info!(%peer, %from, transport = transport.as_str(), "connected to the outbound trunk");
                    let (limits, inbound, shutdown) = (self.limits, inbound.clone(), self.shutdown.clone());
                    match stream {
                        Stream::Tcp(tcp) => {
                            self.tasks.spawn(crate::tcp::serve(tcp, transport, peer, limits, inbound, writes, shutdown))
                        }
                        Stream::Tls(tls) => self
                            .tasks
                            .spawn(crate::tcp::serve(*tls, transport, peer, limits, inbound, writes, shutdown)),
                    };
                    from
                }
                Err(_) => {
                    self.metrics.trunk_connection(transport, TrunkConnection::TooMany);
                    let why = format!("{}: the edge holds as many SIP connections as it may", trunk_named(&waiting));
                    return self.fail(waiting, why, reopening);
                }
            },
        };
        reopening.remember(transport, peer, waiting.how());
        if let Waiting::Reopen { .. } = waiting {
            let held = reopening.take(transport, peer);
            tracing::info!(%peer, %from, held = held.len(), "the connection to the trunk is open again");
            let open = connections.of(transport);
            for bytes in held {
                open.send(peer, bytes);
            }
            return;
        }
        self.go(waiting, SocketAddr::new(self.advertise, from.port()), calls, commands);
    }

    /// Fails a call whose connection could not be opened (or drops what waited for a
    /// connection opened again).
    fn fail(&self, waiting: Waiting, why: String, reopening: &mut Reopening) {
        match waiting {
            Waiting::Place(placement) => {
                tracing::warn!(call = %placement.id, "outbound call failed: {why}");
                self.metrics.outbound(CallState::Failed);
                if let Some(placing) = &self.placing {
                    crate::outbound::report(&placing.reports, &placement.id, CallState::Failed, None, Some(why));
                }
            }
            Waiting::Dial(request) => {
                tracing::warn!(person_leg = %request.call_id, "cannot dial the person: {why}");
                let _ = request.reply.send(Err(why));
            }
            Waiting::Reopen { transport, peer, .. } => {
                let dropped = reopening.take(transport, peer).len();
                tracing::warn!(dropped, "cannot open the connection to the trunk again: {why}");
            }
        }
    }

    /// Places `waiting` with `local` as the edge's SIP address in its dialogue.
    fn go(
        &mut self,
        waiting: Waiting,
        local: SocketAddr,
        calls: &mut HashMap<String, Live>,
        commands: &mpsc::Sender<Command>,
    ) {
        match waiting {
            Waiting::Place(placement) => self.place(placement, local, calls, commands),
            Waiting::Dial(request) => self.dial(request, local, calls),
            // Routed only by `open`, and sent by `connected`.
            Waiting::Reopen { .. } => {}
        }
    }

    /// Places a call the gateway asked for: a port pair, the INVITE through the trunk, and
    /// the call's task; or the report of why not.
    fn place(
        &mut self,
        placement: Placement,
        local: SocketAddr,
        calls: &mut HashMap<String, Live>,
        commands: &mpsc::Sender<Command>,
    ) {
        let Some(placing) = &self.placing else { return };
        let failed = |why: &str, status| {
            crate::outbound::report(&placing.reports, &placement.id, CallState::Failed, status, Some(why.to_owned()));
        };
        let Ok(to) = Destination::parse(&placement.to) else {
            return failed("not a number or SIP URI to call", None);
        };
        let Some(ports) = self.ports.take() else {
            return failed("no RTP port pair is free on the SIP edge", Some(503));
        };
        let trunk = &placement.trunk;
        let config = call_config(local, self.advertise, ports.port);
        let call_id = format!("{}@switchboard", uuid::Uuid::new_v4().simple());
        let auth = trunk.credentials.as_ref().map(|c| ClientAuth {
            username: c.username.clone(),
            password: c.password.clone(),
            cnonce: uuid::Uuid::new_v4().simple().to_string(),
        });
        let callee = Callee {
            call_id: call_id.clone(),
            uri: trunk.request_uri(&to),
            from: trunk.from_uri(local),
            peer: placement.peer,
            transport: placement.transport,
            ring_timeout: placing.outbound.ring_timeout,
            auth,
        };
        if let Err(error) = self.endpoint.place(Instant::now(), config, callee) {
            return failed(&error.to_string(), Some(503));
        }
        let transport = placement.transport.as_str();
        tracing::info!(call = %placement.id, sip_call = %call_id, to = %placement.to, transport, "placing an outbound call");
        let (events, receiver) = mpsc::channel(CALL_QUEUE);
        calls.insert(call_id.clone(), Live { events });
        let task = PlacedCall {
            metrics: self.metrics.clone(),
            placement,
            call_id,
            ports,
            gateway: Arc::clone(&self.gateway),
            settings: Arc::clone(&self.settings),
            events: receiver,
            commands: commands.clone(),
            reports: placing.reports.clone(),
            shutdown: self.shutdown.clone(),
            dialling: Arc::clone(&self.dialling),
        };
        self.tasks.spawn(task.run());
    }

    /// Places a person's leg: a port pair and the INVITE; the leg (or why not) goes back to
    /// the caller's task.
    fn dial(&mut self, request: DialRequest, local: SocketAddr, calls: &mut HashMap<String, Live>) {
        let DialRequest { call_id, uri, peer, caller_id, auth, ring_timeout, transport, reply, .. } = request;
        let Some(ports) = self.ports.take() else {
            let _ = reply.send(Err("no RTP port pair is free on the SIP edge".to_owned()));
            return;
        };
        let config = call_config(local, self.advertise, ports.port);
        let from = format!("sip:{}@{local}", caller_id.as_deref().unwrap_or("switchboard"));
        let callee = Callee { call_id: call_id.clone(), uri, from, peer, transport, ring_timeout, auth };
        if let Err(error) = self.endpoint.place(Instant::now(), config, callee) {
            let _ = reply.send(Err(error.to_string()));
            return;
        }
        let (events, receiver) = mpsc::channel(CALL_QUEUE);
        calls.insert(call_id.clone(), Live { events });
        let leg = PersonLeg { call_id: call_id.clone(), ports: Arc::new(ports), events: Some(receiver), peer };
        if reply.send(Ok(leg)).is_err() {
            // The caller's task is gone: the leg goes too.
            self.endpoint.hang_up(Instant::now(), &call_id);
        }
    }
}

/// The trunk a waiting call goes to, for an error: its host, address and transport.
fn trunk_named(waiting: &Waiting) -> String {
    let (host, peer, transport) = match waiting {
        Waiting::Place(p) => (&p.host, p.peer, p.transport),
        Waiting::Dial(d) => (&d.host, d.peer, d.transport),
        Waiting::Reopen { transport, peer, route } => (&route.host, *peer, *transport),
    };
    format!("the outbound trunk {host} ({peer} over {})", transport.as_str())
}
