//! Which pod a session goes to: of an Agent's ready pods, the one with the fewest live
//! sessions through this gateway (ties: the first in the Endpoints' order). A kube-proxy
//! pick would be random and blind to drains; here every session holds a [`Lease`] on its
//! pod, so counts stay right however a session ends.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Live sessions per pod address.
#[derive(Clone, Debug, Default)]
pub struct Balancer {
    live: Arc<Mutex<HashMap<SocketAddr, usize>>>,
}

/// A session's hold on its pod; dropping it gives the slot back.
#[derive(Debug)]
pub struct Lease {
    addr: SocketAddr,
    live: Arc<Mutex<HashMap<SocketAddr, usize>>>,
}

impl Lease {
    /// The pod's session address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = live.get_mut(&self.addr) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                live.remove(&self.addr);
            }
        }
    }
}

impl Balancer {
    /// Leases the least-loaded of `ready`, skipping `avoid` (a pod that just failed) when
    /// another is there; `None` when `ready` is empty.
    pub fn pick(&self, ready: &[SocketAddr], avoid: Option<SocketAddr>) -> Option<Lease> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let candidates = ready.iter().filter(|a| Some(**a) != avoid || ready.len() == 1);
        let addr = *candidates.min_by_key(|a| live.get(a).copied().unwrap_or(0))?;
        *live.entry(addr).or_default() += 1;
        Some(Lease { addr, live: self.live.clone() })
    }

    /// Live sessions on `addr`.
    pub fn live(&self, addr: SocketAddr) -> usize {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).get(&addr).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_spread_by_live_count_and_leases_give_slots_back() {
        let a: SocketAddr = "10.0.0.1:8080".parse().expect("addr");
        let b: SocketAddr = "10.0.0.2:8080".parse().expect("addr");
        let balancer = Balancer::default();
        let first = balancer.pick(&[a, b], None).expect("a pod");
        let second = balancer.pick(&[a, b], None).expect("a pod");
        assert_ne!(first.addr(), second.addr());
        drop(first);
        let third = balancer.pick(&[a, b], None).expect("a pod");
        assert_ne!(third.addr(), second.addr(), "the freed pod is the least loaded");
        assert_eq!(balancer.pick(&[a, b], Some(b)).map(|l| l.addr()), Some(a));
        assert_eq!(balancer.pick(&[b], Some(b)).map(|l| l.addr()), Some(b), "the only pod is still a pod");
        assert!(balancer.pick(&[], None).is_none());
        assert_eq!(balancer.live(a) + balancer.live(b), 2, "the two held leases; the checks' leases were dropped");
        drop((second, third));
        assert_eq!(balancer.live(a) + balancer.live(b), 0);
    }
}
