//! A connection to a trunk that closed while its dialogues go on is opened again when the
//! edge next has something to send on it (RFC 3261 §18.1.1: "if a request is to be sent
//! over a connection-oriented transport and no connection is open, the client opens one").
//! The trunk, a proxy or the far end may close an idle connection, restart, or lose it in
//! a network change mid-call; without this the edge's BYE was dropped (the trunk kept
//! billing the call until its own timers ran out) and so was a re-INVITE or a REFER.
//!
//! Only connections the edge opened itself are reopened ([`Reopening::remember`]: an
//! outbound trunk, a person's trunk): a phone's connection to the edge is the phone's to
//! reopen. Messages for the trunk wait while the connection is opened
//! ([`MAX_PENDING`] at most; the oldest beyond it are dropped and the dialogue's own
//! retransmissions and timers take over), and are sent in order once it is open, or
//! dropped with a warning when it cannot be (the same [`crate::connect::connect`],
//! bounded in time, the certificate verified again). Responses to what is sent come back
//! on the new connection (RFC 3261 §18.2.2). Requests the trunk sends in the dialogue go
//! to the Contact the dialogue started with, the old connection's port, which the trunk
//! reaches only through a connection it keeps open: the edge's media timeout ends such a
//! call, and its BYE goes out on the reopened connection.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use switchboard_sip::call::Transport;

use crate::connect::TrunkTls;

/// Trunks remembered at most (configured trunks and the persons' addresses dialled over
/// TCP or TLS); past it the oldest is forgotten.
pub(super) const MAX_ROUTES: usize = 256;
/// Messages waiting for one connection being reopened, at most.
pub(super) const MAX_PENDING: usize = 32;

/// How to open a trunk's connection again: its name (a TLS certificate must be for it) and
/// TLS settings.
#[derive(Clone, Debug)]
pub(super) struct Route {
    pub(super) host: String,
    pub(super) tls: Option<TrunkTls>,
}

/// The SIP task's memory of the connections it opened, and the messages waiting for one
/// being opened again.
#[derive(Debug, Default)]
pub(super) struct Reopening {
    routes: HashMap<(Transport, SocketAddr), Route>,
    /// The order routes were remembered in, to forget the oldest.
    order: VecDeque<(Transport, SocketAddr)>,
    pending: HashMap<(Transport, SocketAddr), VecDeque<Vec<u8>>>,
}

/// What to do with a message that found no connection.
#[derive(Debug)]
#[cfg_attr(test, derive(PartialEq))]
pub(super) enum Held {
    /// Not a connection the edge opened: dropped.
    NotOurs,
    /// Held; no connection is being opened yet: open one along `Route`.
    Open(Route),
    /// Held behind a connection already being opened.
    Waiting,
}

#[cfg(test)]
impl PartialEq for Route {
    fn eq(&self, other: &Self) -> bool {
        self.host == other.host && self.tls.is_some() == other.tls.is_some()
    }
}

impl Reopening {
    /// Remembers a connection the edge opened to `peer`, for opening it again.
    pub(super) fn remember(&mut self, transport: Transport, peer: SocketAddr, route: Route) {
        let key = (transport, peer);
        if self.routes.insert(key, route).is_none() {
            self.order.push_back(key);
            while self.order.len() > MAX_ROUTES {
                if let Some(old) = self.order.pop_front() {
                    self.routes.remove(&old);
                }
            }
        }
    }

    /// Holds `bytes` for `peer`'s connection, which is not open.
    pub(super) fn hold(&mut self, transport: Transport, peer: SocketAddr, bytes: Vec<u8>) -> Held {
        let key = (transport, peer);
        let Some(route) = self.routes.get(&key) else { return Held::NotOurs };
        let queue = self.pending.entry(key).or_default();
        let first = queue.is_empty();
        if queue.len() == MAX_PENDING {
            queue.pop_front();
            tracing::warn!(%peer, "a SIP message waiting for its trunk's connection was dropped (too many waiting)");
        }
        queue.push_back(bytes);
        if first { Held::Open(route.clone()) } else { Held::Waiting }
    }

    /// The messages held for `peer`, in order (its connection is open again, or cannot be).
    pub(super) fn take(&mut self, transport: Transport, peer: SocketAddr) -> VecDeque<Vec<u8>> {
        self.pending.remove(&(transport, peer)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(host: &str) -> Route {
        Route { host: host.to_owned(), tls: None }
    }

    #[test]
    fn only_connections_the_edge_opened_are_opened_again_and_once_while_waiting() {
        let mut reopening = Reopening::default();
        let trunk: SocketAddr = "192.0.2.1:5060".parse().expect("addr");
        let phone: SocketAddr = "192.0.2.2:40000".parse().expect("addr");
        reopening.remember(Transport::Tcp, trunk, route("trunk.example"));
        assert_eq!(reopening.hold(Transport::Tcp, phone, b"BYE".to_vec()), Held::NotOurs);
        assert_eq!(reopening.hold(Transport::Tls, trunk, b"BYE".to_vec()), Held::NotOurs, "per transport");
        assert_eq!(reopening.hold(Transport::Tcp, trunk, b"one".to_vec()), Held::Open(route("trunk.example")));
        assert_eq!(reopening.hold(Transport::Tcp, trunk, b"two".to_vec()), Held::Waiting);
        let held: Vec<_> = reopening.take(Transport::Tcp, trunk).into_iter().collect();
        assert_eq!(held, [b"one".to_vec(), b"two".to_vec()], "in order");
        assert!(reopening.take(Transport::Tcp, trunk).is_empty());
        assert_eq!(reopening.hold(Transport::Tcp, trunk, b"three".to_vec()), Held::Open(route("trunk.example")));
    }

    #[test]
    fn what_waits_and_what_is_remembered_are_bounded() {
        let mut reopening = Reopening::default();
        let trunk: SocketAddr = "192.0.2.1:5060".parse().expect("addr");
        reopening.remember(Transport::Tcp, trunk, route("trunk.example"));
        for n in 0..MAX_PENDING + 5 {
            reopening.hold(Transport::Tcp, trunk, n.to_string().into_bytes());
        }
        let held = reopening.take(Transport::Tcp, trunk);
        assert_eq!(held.len(), MAX_PENDING);
        assert_eq!(held.front().map(Vec::as_slice), Some(b"5".as_slice()), "the oldest dropped");
        for port in 0..MAX_ROUTES as u16 + 1 {
            reopening.remember(Transport::Tcp, SocketAddr::from(([192, 0, 2, 9], 1000 + port)), route("p"));
        }
        assert_eq!(reopening.routes.len(), MAX_ROUTES);
        assert_eq!(reopening.hold(Transport::Tcp, trunk, b"x".to_vec()), Held::NotOurs, "the first forgotten");
    }
}
