//! A token bucket: the message rate limits of runtime sessions, gateway sessions and API
//! keys, and the audio byte rate of runtime sessions.
//!
//! Two ways to judge. [`TokenBucket::take`] judges a message by the instant it is taken,
//! for what is counted as it happens (an API key's messages across its sessions). A reader
//! of one socket judges by when the peer could have sent: a reader that fell behind (its
//! task waited for a core, the session was opening a runtime session elsewhere) reads at
//! once what came over seconds, and those frames are no flood. The frame layer tells, for
//! each message, whether the reader had to wait for it ([`Arrival`]); at the instant it
//! last found its socket empty the bucket is capped at its burst ([`TokenBucket::caught_up`]),
//! and between two such instants it fills at its rate without a cap
//! ([`TokenBucket::take_read`]). A peer that sends within the rate and the burst, as seen on
//! its own clock, is never refused however late it is read; one that sends faster is, once
//! more than the burst plus the rate over the time since the reader last caught up was read
//! (and what it sends while not read waits in the kernel's socket buffer, bounded there).

use std::time::Instant;

/// When a message read from a socket could have arrived, as the frame layer saw it
/// ([`crate::frames::Conn::arrival`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The reader had found the socket empty at this instant and waited: the message came
    /// after it.
    After(Instant),
    /// It was already waiting when read (the reader was behind, or it came with others in
    /// one read): it came after the last instant the reader found the socket empty.
    Queued,
}

/// `rate` tokens a second, at most `burst` saved; starts full.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket of `rate` a second with room for `burst` (at least one).
    pub fn new(rate: u32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self { rate: f64::from(rate), burst, tokens: burst, last: None }
    }

    /// Takes one token at `now`; false when none is left.
    pub fn take(&mut self, now: Instant) -> bool {
        self.take_n(1.0, now)
    }

    /// Takes `amount` tokens (bytes of audio, say) at `now`; false when fewer are left.
    pub fn take_n(&mut self, amount: f64, now: Instant) -> bool {
        self.refill(now, true);
        self.spend(amount)
    }

    /// The reader of a socket found it empty at `at`: what it reads next came after `at`.
    /// What was saved is capped at the burst here (and only here, for [`TokenBucket::take_read`]).
    pub fn caught_up(&mut self, at: Instant) {
        self.refill(at, true);
    }

    /// Takes one token for a message read from a socket at `now` (after
    /// [`TokenBucket::caught_up`] if the reader waited for it): the time since the last
    /// message counts in full, however long, since the reader last caught up.
    pub fn take_read(&mut self, now: Instant) -> bool {
        self.take_read_n(1.0, now)
    }

    /// [`TokenBucket::take_read`] for `amount` tokens.
    pub fn take_read_n(&mut self, amount: f64, now: Instant) -> bool {
        self.refill(now, false);
        self.spend(amount)
    }

    /// Whether the bucket is full again at `now` (nothing spent is still owed).
    pub fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now, true);
        self.tokens >= self.burst
    }

    /// The rate, tokens a second.
    pub fn per_second(&self) -> f64 {
        self.rate
    }

    fn spend(&mut self, amount: f64) -> bool {
        if self.tokens >= amount {
            self.tokens -= amount;
            true
        } else {
            false
        }
    }

    /// Adds what the time since the last refill earned, capped at the burst if `cap`.
    /// Time never runs backwards: an earlier instant adds nothing and moves nothing.
    fn refill(&mut self, now: Instant, cap: bool) {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens += elapsed * self.rate;
        }
        if cap {
            self.tokens = self.tokens.min(self.burst);
        }
        self.last = Some(self.last.map_or(now, |last| last.max(now)));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let mut bucket = TokenBucket::new(10, 20);
        let start = Instant::now();
        assert_eq!((0..30).filter(|_| bucket.take(start)).count(), 20, "the burst");
        assert!(!bucket.is_full(start));
        assert!(bucket.take(start + Duration::from_millis(150)), "refills at the rate");
        assert!(!bucket.take(start + Duration::from_millis(150)));
        assert!(bucket.is_full(start + Duration::from_secs(3)), "full again, never over");
        assert_eq!((0..30).filter(|_| bucket.take(start + Duration::from_secs(3))).count(), 20);
        assert_eq!(bucket.per_second(), 10.0);
    }

    #[test]
    fn a_zero_burst_holds_one_token_and_time_never_runs_backwards() {
        let mut bucket = TokenBucket::new(1, 0);
        let start = Instant::now();
        assert!(bucket.take(start + Duration::from_secs(1)));
        assert!(!bucket.take(start), "an earlier instant adds nothing");
    }

    #[test]
    fn a_reader_behind_its_socket_is_judged_by_the_time_since_it_last_caught_up() {
        // 50 messages a second (a voice client's frames) against a limit of 200 (burst 400).
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut bucket = TokenBucket::new(200, 400);
        bucket.caught_up(start);
        // The reader stalls for 30 s (a slow handoff, a busy machine), then reads the 1,500
        // frames that came meanwhile, all at once: none is refused.
        for _ in 0..1500 {
            assert!(bucket.take_read(at(30_000)), "a backlog, not a flood");
        }
        // Caught up again: saving is capped at the burst from here.
        bucket.caught_up(at(30_001));
        bucket.caught_up(at(90_000));
        assert_eq!(
            (0..1000).filter(|_| bucket.take_read(at(90_000))).count(),
            400,
            "a minute idle saves the burst only"
        );
        // A flood while the reader keeps up: refused past the burst and the rate.
        let mut flood = TokenBucket::new(200, 400);
        let mut taken = 0;
        for i in 0..2000u64 {
            flood.caught_up(at(i));
            taken += u32::from(flood.take_read(at(i)));
        }
        assert!((790..=802).contains(&taken), "400 + 200/s over 2 s: {taken}");
        // ...and one the reader falls behind on: the same bound.
        let mut flood = TokenBucket::new(200, 400);
        flood.caught_up(start);
        let taken = (0..2000u64).filter(|i| flood.take_read(at(*i))).count();
        assert!((790..=802).contains(&taken), "{taken}");
    }

    #[test]
    fn amounts_and_instants_out_of_order() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(100, 300);
        assert!(bucket.take_n(250.0, start));
        assert!(!bucket.take_n(100.0, start), "50 left");
        assert!(bucket.take_read_n(100.0, start + Duration::from_millis(500)), "100 earned");
        bucket.caught_up(start);
        assert!(!bucket.take_read_n(1.0, start + Duration::from_millis(500)), "an earlier catch-up earns nothing");
    }
}
