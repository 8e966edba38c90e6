//! Which way a call's media goes: the remote address ICE nominated and what kind of
//! candidate the client offered there — its host, a server-reflexive address a STUN server
//! told it, its TURN server's relay, or an address the edge only learnt from the client's
//! checks (peer-reflexive: a NAT between them). The edge is ICE-lite and str0m reports no
//! pair, so the path is read from what the call sends: DTLS and SRTP go only to the
//! nominated address (STUN responses go to whichever address asked), and the address is
//! looked up among the candidates the offer and its `PATCH`es named.

use std::collections::VecDeque;
use std::net::SocketAddr;

use str0m::net::Protocol;
use str0m::{Candidate, CandidateKind};

/// The most remote candidates kept (a client's host, reflexive and relay candidates, and
/// those trickled or restarted later; the oldest go first).
const MOST_CANDIDATES: usize = 64;

/// The way a call's media goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path {
    /// UDP, or TCP (ICE-TCP).
    pub protocol: Protocol,
    /// The client's address the call sends to.
    pub remote: SocketAddr,
    /// What kind of candidate the client offered at that address.
    pub candidate: CandidateKind,
}

impl Path {
    /// The candidate kind as metrics label it: `host`, `srflx`, `prflx`, `relay`.
    pub fn candidate_label(&self) -> &'static str {
        match self.candidate {
            CandidateKind::Host => "host",
            CandidateKind::ServerReflexive => "srflx",
            CandidateKind::PeerReflexive => "prflx",
            CandidateKind::Relayed => "relay",
        }
    }

    /// The transport as metrics label it: `udp` or `tcp`.
    pub fn transport_label(&self) -> &'static str {
        match self.protocol {
            Protocol::Udp => "udp",
            _ => "tcp",
        }
    }
}

/// The client's candidates and the path in use.
#[derive(Debug, Default)]
pub(super) struct Paths {
    known: VecDeque<(SocketAddr, Protocol, CandidateKind)>,
    current: Option<Path>,
}

impl Paths {
    /// The candidates of an SDP text (an offer's `a=candidate:` lines; unparsable ones are
    /// str0m's business, not this one's).
    pub(super) fn learn_sdp(&mut self, sdp: &str) {
        for line in sdp.lines().map(|l| l.trim_end_matches('\r')) {
            if let Some(attribute) = line.strip_prefix("a=")
                && attribute.starts_with("candidate:")
                && let Ok(candidate) = Candidate::from_sdp_string(attribute)
            {
                self.learn(&candidate);
            }
        }
    }

    /// One more candidate of the client's.
    pub(super) fn learn(&mut self, candidate: &Candidate) {
        let entry = (candidate.addr(), candidate.proto(), candidate.kind());
        if self.known.contains(&entry) {
            return;
        }
        if self.known.len() == MOST_CANDIDATES {
            self.known.pop_front();
        }
        self.known.push_back(entry);
    }

    /// A datagram the call sends: the path, when it is a new one.
    pub(super) fn sent(&mut self, protocol: Protocol, destination: SocketAddr, contents: &[u8]) -> Option<Path> {
        // RFC 7983: 0-3 is STUN, which answers any address that checks; the rest (DTLS,
        // SRTP) goes the nominated way.
        if contents.first().is_none_or(|b| *b < 4) {
            return None;
        }
        if self.current.is_some_and(|p| p.remote == destination && p.protocol == protocol) {
            return None;
        }
        let candidate = self
            .known
            .iter()
            .rev()
            .find(|(address, proto, _)| *address == destination && *proto == protocol)
            .map_or(CandidateKind::PeerReflexive, |(_, _, kind)| *kind);
        let path = Path { protocol, remote: destination, candidate };
        self.current = Some(path);
        Some(path)
    }

    /// The path in use, if any yet.
    pub(super) fn current(&self) -> Option<Path> {
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &str = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n\
        a=candidate:1 1 udp 2130706431 192.0.2.1 5000 typ host\r\n\
        a=candidate:2 1 udp 1694498815 203.0.113.7 6000 typ srflx raddr 192.0.2.1 rport 5000\r\n\
        a=candidate:3 1 udp 16777215 198.51.100.9 7000 typ relay raddr 0.0.0.0 rport 0\r\n\
        a=candidate:nonsense\r\n";

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn the_path_is_where_dtls_and_srtp_go_and_its_kind_the_offers() {
        let mut paths = Paths::default();
        paths.learn_sdp(OFFER);
        let stun = [0u8, 1, 0, 0];
        let dtls = [22u8, 254, 253];
        let rtp = [128u8, 111];
        assert_eq!(paths.sent(Protocol::Udp, addr("192.0.2.1:5000"), &stun), None, "STUN answers any check");
        assert_eq!(paths.current(), None);
        let relay = paths.sent(Protocol::Udp, addr("198.51.100.9:7000"), &dtls).expect("a path");
        assert_eq!((relay.candidate_label(), relay.transport_label()), ("relay", "udp"));
        assert_eq!(paths.sent(Protocol::Udp, addr("198.51.100.9:7000"), &rtp), None, "the same path");
        let srflx = paths.sent(Protocol::Udp, addr("203.0.113.7:6000"), &rtp).expect("moved");
        assert_eq!(srflx.candidate_label(), "srflx");
        let unknown = paths.sent(Protocol::Udp, addr("203.0.113.8:6001"), &rtp).expect("moved");
        assert_eq!(unknown.candidate_label(), "prflx", "an address no candidate named");
        let tcp = paths.sent(Protocol::Tcp, addr("192.0.2.1:5000"), &rtp).expect("moved");
        assert_eq!((tcp.candidate_label(), tcp.transport_label()), ("prflx", "tcp"), "host was UDP");
        assert_eq!(paths.current(), Some(tcp));
    }

    #[test]
    fn the_candidates_kept_are_bounded() {
        let mut paths = Paths::default();
        for port in 0..200u16 {
            let line = format!("candidate:1 1 udp 1 192.0.2.1 {} typ host", 1000 + port);
            paths.learn(&Candidate::from_sdp_string(&line).expect("a candidate"));
        }
        assert_eq!(paths.known.len(), MOST_CANDIDATES);
        let newest = paths.sent(Protocol::Udp, addr("192.0.2.1:1199"), &[22]).expect("a path");
        assert_eq!(newest.candidate_label(), "host");
        let forgotten = paths.sent(Protocol::Udp, addr("192.0.2.1:1000"), &[22]).expect("a path");
        assert_eq!(forgotten.candidate_label(), "prflx");
    }
}
