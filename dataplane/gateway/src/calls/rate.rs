//! A credential's rate of outbound calls ([`MinuteBucket`]).

use std::time::Instant;

/// A credential's calls: `per_minute` a minute, bursts of as many (the serve crate's token
/// bucket counts whole tokens a second, too coarse for a few calls a minute).
#[derive(Debug)]
pub(super) struct MinuteBucket {
    per_minute: f64,
    tokens: f64,
    last: Instant,
}

impl MinuteBucket {
    pub(super) fn new(per_minute: u32, now: Instant) -> Self {
        let per_minute = f64::from(per_minute.max(1));
        Self { per_minute, tokens: per_minute, last: now }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_minute / 60.0).min(self.per_minute);
        self.last = now;
    }

    pub(super) fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    pub(super) fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= self.per_minute
    }
}
