//! The RTP port range: one pair of UDP sockets per call, RTP on an even port and RTCP on
//! the next (RFC 3550 §11), taken from the configured range and given back when the call's
//! [`PortPair`] is dropped. A port another process holds is skipped; a range with no pair
//! left is the edge at capacity (503).

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, PoisonError};

/// Why a port range cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PortsError {
    /// The range holds no even port with a port after it.
    #[error("the RTP port range {start}-{end} holds no pair of ports (an even port and the next); give at least two")]
    Empty {
        /// The first port.
        start: u16,
        /// The last port.
        end: u16,
    },
}

/// The range's free pairs, by their even (RTP) port.
#[derive(Debug, Clone)]
pub struct Ports {
    ip: IpAddr,
    free: Arc<Mutex<BTreeSet<u16>>>,
}

/// A call's RTP and RTCP sockets; their ports go back to the range on drop.
#[derive(Debug)]
pub struct PortPair {
    /// RTP (even port).
    pub rtp: tokio::net::UdpSocket,
    /// RTCP (the next port).
    pub rtcp: tokio::net::UdpSocket,
    /// The RTP port.
    pub port: u16,
    free: Arc<Mutex<BTreeSet<u16>>>,
}

impl Drop for PortPair {
    fn drop(&mut self) {
        self.free.lock().unwrap_or_else(PoisonError::into_inner).insert(self.port);
    }
}

impl Ports {
    /// The pairs of `range` on `ip` (the address the sockets bind).
    pub fn new(ip: IpAddr, range: RangeInclusive<u16>) -> Result<Self, PortsError> {
        let (start, end) = (*range.start(), *range.end());
        let free: BTreeSet<u16> =
            (start..end).filter(|p| p % 2 == 0).filter(|p| p.checked_add(1).is_some_and(|n| n <= end)).collect();
        if free.is_empty() {
            return Err(PortsError::Empty { start, end });
        }
        Ok(Self { ip, free: Arc::new(Mutex::new(free)) })
    }

    /// Pairs not in use.
    pub fn available(&self) -> usize {
        self.free.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Binds the next free pair; `None` when every pair is taken (or held by another
    /// process: such a pair is skipped now and tried again later). Must run inside a tokio
    /// runtime (the sockets register with its reactor).
    pub fn take(&self) -> Option<PortPair> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let candidates: Vec<u16> = free.iter().copied().collect();
        for port in candidates {
            match (self.bind(port), self.bind(port + 1)) {
                (Ok(rtp), Ok(rtcp)) => {
                    free.remove(&port);
                    return Some(PortPair { rtp, rtcp, port, free: Arc::clone(&self.free) });
                }
                (Err(error), _) | (_, Err(error)) => {
                    tracing::debug!(port, %error, "RTP port pair in use elsewhere; trying the next");
                }
            }
        }
        None
    }

    fn bind(&self, port: u16) -> std::io::Result<tokio::net::UdpSocket> {
        let socket = std::net::UdpSocket::bind(SocketAddr::new(self.ip, port))?;
        socket.set_nonblocking(true)?;
        tokio::net::UdpSocket::from_std(socket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pairs_are_even_ports_taken_once_and_given_back_on_drop() {
        // Four ports free and reserved for this test: no other process takes one meanwhile.
        let base = crate::test_ports::free_ports(4, crate::test_ports::UDP);
        let ports = Ports::new("127.0.0.1".parse().expect("ip"), base..=base + 3).expect("two pairs");
        assert_eq!(ports.available(), 2);
        let one = ports.take().expect("a pair");
        let two = ports.take().expect("another pair");
        assert_eq!((one.port % 2, two.port % 2), (0, 0));
        assert_ne!(one.port, two.port);
        assert_eq!(one.rtcp.local_addr().expect("addr").port(), one.port + 1);
        assert!(ports.take().is_none(), "the range is used up");
        drop(one);
        assert!(ports.take().is_some(), "a dropped pair is free again");
    }

    #[test]
    fn a_range_without_a_pair_is_refused() {
        let error = Ports::new("127.0.0.1".parse().expect("ip"), 5001..=5001).expect_err("no pair");
        assert!(error.to_string().contains("5001-5001"), "{error}");
    }
}
