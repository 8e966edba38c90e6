//! A token bucket: the message rate limits of runtime sessions, gateway sessions and API
//! keys.

use std::time::Instant;

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
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Whether the bucket is full again at `now` (nothing spent is still owed).
    pub fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= self.burst
    }

    /// The rate, tokens a second.
    pub fn per_second(&self) -> f64 {
        self.rate
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        }
        self.last = Some(now);
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
}
