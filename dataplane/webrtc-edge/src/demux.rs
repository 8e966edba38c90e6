//! Which call a datagram on the edge's one UDP port is for. A client's first datagrams
//! from an address are ICE connectivity checks (the edge is ICE-lite: only clients send
//! them): a STUN binding request whose `USERNAME` begins with the call's own ICE ufrag
//! (RFC 8445, 7.2.2: `<recipient's ufrag>:<sender's ufrag>`) names the call, and the
//! address it came from is then the call's. DTLS, SRTP and SCTP follow from that address.
//! The call's `str0m` checks the request's integrity with its password; here a datagram
//! only finds its queue. Bounded: a call keeps at most [`MAX_ADDRESSES`] addresses.
//!
//! ICE-TCP connections ([`crate::tcp`]) are found the same way, by their first frame's ufrag
//! ([`Demux::call_for`]), and then keep their call for as long as they last: they need no
//! address here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use switchboard_webrtc::Protocol;
use tokio::sync::mpsc;

/// The most client addresses one call is reached from (a client's host, reflexive and
/// relayed candidates, and those after network changes).
pub const MAX_ADDRESSES: usize = 16;

/// A datagram for a call.
#[derive(Debug)]
pub struct Incoming {
    /// UDP, or TCP (a frame of an ICE-TCP connection).
    pub proto: Protocol,
    /// Where it came from.
    pub source: SocketAddr,
    /// Its bytes.
    pub contents: Vec<u8>,
}

/// A call's queue of datagrams.
#[derive(Clone, Debug)]
struct Route {
    call: u64,
    tx: mpsc::Sender<Incoming>,
}

#[derive(Debug, Default)]
struct Maps {
    by_ufrag: HashMap<String, Route>,
    by_address: HashMap<SocketAddr, Route>,
    addresses: HashMap<u64, usize>,
}

/// The edge's calls by ICE ufrag and by client address.
#[derive(Debug, Default)]
pub struct Demux {
    maps: Mutex<Maps>,
}

impl Demux {
    /// Datagrams for the local ICE `ufrag` go to `tx`, call `call`'s queue.
    pub fn add(&self, call: u64, ufrag: String, tx: mpsc::Sender<Incoming>) {
        self.maps().by_ufrag.insert(ufrag, Route { call, tx });
    }

    /// After an ICE restart, the call's checks name its new `ufrag` (the old one is kept
    /// until the client's checks with it stop mattering: it ends with the call).
    pub fn rename(&self, call: u64, ufrag: String) {
        let mut maps = self.maps();
        let Some(route) = maps.by_ufrag.values().find(|r| r.call == call).cloned() else { return };
        maps.by_ufrag.insert(ufrag, route);
    }

    /// Forgets call `call`.
    pub fn remove(&self, call: u64) {
        let mut maps = self.maps();
        maps.by_ufrag.retain(|_, r| r.call != call);
        maps.by_address.retain(|_, r| r.call != call);
        maps.addresses.remove(&call);
    }

    /// The queue of the call whose ICE ufrag a STUN check names (an ICE-TCP connection's
    /// first frame), if any.
    pub fn call_for(&self, contents: &[u8]) -> Option<mpsc::Sender<Incoming>> {
        let ufrag = stun_recipient(contents)?;
        self.maps().by_ufrag.get(ufrag).map(|r| r.tx.clone())
    }

    /// The queue of the call `contents` from `source` is for, if any.
    pub fn route(&self, source: SocketAddr, contents: &[u8]) -> Option<mpsc::Sender<Incoming>> {
        let mut maps = self.maps();
        if let Some(ufrag) = stun_recipient(contents)
            && let Some(route) = maps.by_ufrag.get(ufrag).cloned()
        {
            if maps.by_address.get(&source).is_none_or(|r| r.call != route.call) {
                let count = maps.addresses.entry(route.call).or_default();
                if *count >= MAX_ADDRESSES {
                    return Some(route.tx);
                }
                *count += 1;
                if let Some(old) = maps.by_address.insert(source, route.clone())
                    && let Some(n) = maps.addresses.get_mut(&old.call)
                {
                    *n = n.saturating_sub(1);
                }
            }
            return Some(route.tx);
        }
        maps.by_address.get(&source).map(|r| r.tx.clone())
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The recipient's ufrag of a STUN message's `USERNAME` (the part before `:`); `None` for
/// anything else.
pub fn stun_recipient(packet: &[u8]) -> Option<&str> {
    const MAGIC: [u8; 4] = [0x21, 0x12, 0xa4, 0x42];
    const USERNAME: u16 = 0x0006;
    if packet.len() < 20 || packet[0] & 0xc0 != 0 || packet[4..8] != MAGIC {
        return None;
    }
    let length = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
    let mut attributes = packet.get(20..20 + length)?;
    while attributes.len() >= 4 {
        let kind = u16::from_be_bytes([attributes[0], attributes[1]]);
        let size = usize::from(u16::from_be_bytes([attributes[2], attributes[3]]));
        let value = attributes.get(4..4 + size)?;
        if kind == USERNAME {
            let username = std::str::from_utf8(value).ok()?;
            return username.split(':').next().filter(|u| !u.is_empty());
        }
        attributes = attributes.get(4 + size.div_ceil(4) * 4..).unwrap_or_default();
    }
    None
}

/// The first `a=ice-ufrag` of an SDP text or fragment.
pub fn ufrag_of(sdp: &str) -> Option<String> {
    sdp.lines().find_map(|l| l.trim_end_matches('\r').strip_prefix("a=ice-ufrag:")).map(|u| u.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding_request(username: &str) -> Vec<u8> {
        let mut attribute = vec![0x00, 0x06];
        attribute.extend_from_slice(&u16::try_from(username.len()).expect("short").to_be_bytes());
        attribute.extend_from_slice(username.as_bytes());
        while attribute.len() % 4 != 0 {
            attribute.push(0);
        }
        // A PRIORITY attribute before it, as browsers send.
        let mut attributes = vec![0x00, 0x24, 0x00, 0x04, 1, 2, 3, 4];
        attributes.extend(attribute);
        let mut packet = vec![0x00, 0x01];
        packet.extend_from_slice(&u16::try_from(attributes.len()).expect("short").to_be_bytes());
        packet.extend_from_slice(&[0x21, 0x12, 0xa4, 0x42]);
        packet.extend_from_slice(&[7; 12]);
        packet.extend(attributes);
        packet
    }

    #[test]
    fn a_binding_request_names_its_recipient() {
        assert_eq!(stun_recipient(&binding_request("abcd:wxyz")), Some("abcd"));
        assert_eq!(stun_recipient(&binding_request("abc:wxyz")), Some("abc"), "padding");
        assert_eq!(stun_recipient(&binding_request(":wxyz")), None);
        // DTLS, RTP, truncated and lying lengths: nothing.
        assert_eq!(stun_recipient(&[22, 254, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        let mut lying = binding_request("abcd:wxyz");
        lying[3] = 200;
        assert_eq!(stun_recipient(&lying), None);
        let request = binding_request("abcd:wxyz");
        for cut in 0..request.len() {
            let _ = stun_recipient(&request[..cut]);
        }
    }

    #[test]
    fn a_call_is_found_by_ufrag_then_by_address_and_forgotten() {
        let demux = Demux::default();
        let (tx, mut rx) = mpsc::channel(4);
        demux.add(1, "abcd".into(), tx);
        let client: SocketAddr = "192.0.2.10:40000".parse().expect("addr");
        assert!(demux.route(client, b"\x16\xfe\xfd dtls").is_none(), "an unknown address before its check");
        let route = demux.route(client, &binding_request("abcd:wxyz")).expect("the call");
        route.try_send(Incoming { proto: Protocol::Udp, source: client, contents: vec![] }).expect("queued");
        assert!(rx.try_recv().is_ok());
        assert!(demux.route(client, b"\x16\xfe\xfd dtls").is_some(), "the address is the call's now");
        assert!(demux.route(client, &binding_request("zzzz:wxyz")).is_some(), "by address still");
        demux.rename(1, "efgh".into());
        let moved: SocketAddr = "198.51.100.7:5000".parse().expect("addr");
        assert!(demux.route(moved, &binding_request("efgh:wxyz")).is_some(), "after a restart");
        assert!(demux.call_for(&binding_request("abcd:wxyz")).is_some(), "a TCP connection's first check");
        assert!(demux.call_for(b"\x16\xfe\xfd dtls").is_none(), "a first frame that is no check");
        assert!(demux.call_for(&binding_request("zzzz:wxyz")).is_none(), "a check for no call");
        demux.remove(1);
        assert!(demux.call_for(&binding_request("abcd:wxyz")).is_none(), "the call gone");
        assert!(demux.route(client, b"\x16\xfe\xfd dtls").is_none());
        assert!(demux.route(moved, &binding_request("efgh:wxyz")).is_none());
    }

    #[test]
    fn a_call_keeps_a_bounded_number_of_addresses() {
        let demux = Demux::default();
        let (tx, _rx) = mpsc::channel(4);
        demux.add(1, "abcd".into(), tx);
        for port in 0..100u16 {
            let source = SocketAddr::from(([192, 0, 2, 10], 1000 + port));
            assert!(demux.route(source, &binding_request("abcd:wxyz")).is_some());
        }
        let maps = demux.maps();
        assert_eq!(maps.by_address.len(), MAX_ADDRESSES);
    }
}
