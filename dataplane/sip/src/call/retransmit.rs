//! One message sent again and again until answered (RFC 3261 §17: Timers A/E/G and
//! the 2xx schedule of §13.3.1.4): first after T1, the interval doubling up to T2
//! (without that cap for an INVITE, Timer A), until the answer comes or 64*T1 passes.
//! Over a reliable transport it is sent once and only the give-up time runs.

use std::time::{Duration, Instant};

use super::{Timers, Transmit};

/// What a due retransmission timer asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Due {
    /// Send it again.
    Resend(Transmit),
    /// No answer in 64*T1.
    GiveUp,
    /// Not yet.
    Nothing,
}

/// The schedule of one message.
#[derive(Clone, Debug)]
pub(super) struct Retransmit {
    transmit: Transmit,
    next: Option<Instant>,
    interval: Duration,
    cap: Duration,
    give_up: Instant,
}

impl Retransmit {
    /// A message just sent at `now`.
    pub(super) fn new(now: Instant, transmit: Transmit, timers: &Timers) -> Self {
        let next = (!transmit.transport.is_reliable()).then(|| now + timers.t1);
        Self { transmit, next, interval: timers.t1, cap: timers.t2, give_up: now + timers.t1 * 64 }
    }

    /// An INVITE the edge sends (Timer A, §17.1.1.2): its interval doubles without the
    /// T2 cap, so it is resent at 0.5, 1.5, 3.5, 7.5, 15.5 and 31.5 s.
    pub(super) fn invite(now: Instant, transmit: Transmit, timers: &Timers) -> Self {
        Self { cap: timers.t1 * 64, ..Self::new(now, transmit, timers) }
    }

    /// When it is next due.
    pub(super) fn deadline(&self) -> Instant {
        self.next.map_or(self.give_up, |next| next.min(self.give_up))
    }

    /// Called at `now`: resend, give up, or nothing yet.
    pub(super) fn on_timeout(&mut self, now: Instant) -> Due {
        if now >= self.give_up {
            return Due::GiveUp;
        }
        match self.next {
            Some(next) if now >= next => {
                self.interval = (self.interval * 2).min(self.cap);
                self.next = Some(now + self.interval);
                Due::Resend(self.transmit.clone())
            }
            _ => Due::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Transport;

    fn transmit(transport: Transport) -> Transmit {
        Transmit { to: "192.0.2.9:5060".parse().unwrap(), transport, bytes: b"x".to_vec() }
    }

    #[test]
    fn intervals_double_to_t2_and_it_gives_up_at_64_t1() {
        let t0 = Instant::now();
        let timers = Timers::default();
        let mut r = Retransmit::new(t0, transmit(Transport::Udp), &timers);
        let mut sent = Vec::new();
        let mut now;
        loop {
            now = r.deadline();
            match r.on_timeout(now) {
                Due::Resend(_) => sent.push((now - t0).as_millis()),
                Due::GiveUp => break,
                Due::Nothing => unreachable!("a deadline is always due"),
            }
        }
        assert_eq!(&sent[..6], [500, 1500, 3500, 7500, 11500, 15500]);
        assert_eq!((now - t0).as_secs(), 32);
    }

    #[test]
    fn a_reliable_transport_is_never_resent() {
        let t0 = Instant::now();
        let mut r = Retransmit::new(t0, transmit(Transport::Tcp), &Timers::default());
        assert_eq!(r.deadline(), t0 + Duration::from_secs(32));
        assert_eq!(r.on_timeout(t0 + Duration::from_secs(1)), Due::Nothing);
        assert_eq!(r.on_timeout(t0 + Duration::from_secs(32)), Due::GiveUp);
    }
}
