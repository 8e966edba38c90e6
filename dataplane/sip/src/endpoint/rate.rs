//! A flood guard: a token bucket per source address, with a bounded table of sources.
//! A source that sends faster than its rate (past its burst) has its messages dropped,
//! unanswered, so a flood gets nothing back to amplify. When the table is full, idle
//! sources (whose bucket has refilled) are forgotten; if none is idle, a new source is
//! refused until one is.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

/// How fast one source may send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateConfig {
    /// Messages a second, sustained.
    pub per_second: f64,
    /// Messages at once, after a quiet spell.
    pub burst: f64,
    /// Sources tracked at once.
    pub max_sources: usize,
}

impl Default for RateConfig {
    /// 20 messages a second with bursts of 60, per address, 10,000 addresses: a trunk
    /// carrying many calls sends more; list it with its own rate (see
    /// [`RateLimiter::set_rate`]).
    fn default() -> Self {
        Self { per_second: 20.0, burst: 60.0, max_sources: 10_000 }
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Token buckets per source address (see the module docs).
#[derive(Clone, Debug)]
pub struct RateLimiter {
    config: RateConfig,
    buckets: HashMap<IpAddr, Bucket>,
    /// Sources with their own rate (trunks): messages a second and burst.
    own: HashMap<IpAddr, (f64, f64)>,
}

impl RateLimiter {
    /// A limiter with this default rate.
    pub fn new(config: RateConfig) -> Self {
        Self { config, buckets: HashMap::new(), own: HashMap::new() }
    }

    /// Gives one source its own rate (a trunk that carries many calls).
    pub fn set_rate(&mut self, source: IpAddr, per_second: f64, burst: f64) {
        self.own.insert(source, (per_second, burst));
    }

    fn rate(&self, source: &IpAddr) -> (f64, f64) {
        self.own.get(source).copied().unwrap_or((self.config.per_second, self.config.burst))
    }

    /// Whether a message from `source` at `now` may be taken (and counts it if so).
    pub fn allow(&mut self, now: Instant, source: IpAddr) -> bool {
        let (per_second, burst) = self.rate(&source);
        if !self.buckets.contains_key(&source) && self.buckets.len() >= self.config.max_sources {
            self.forget_idle(now);
            if self.buckets.len() >= self.config.max_sources {
                return false;
            }
        }
        let bucket = self.buckets.entry(source).or_insert(Bucket { tokens: burst, last: now });
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(burst);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn forget_idle(&mut self, now: Instant) {
        let (config, own) = (&self.config, &self.own);
        self.buckets.retain(|source, bucket| {
            let (per_second, burst) = own.get(source).copied().unwrap_or((config.per_second, config.burst));
            bucket.tokens + now.saturating_duration_since(bucket.last).as_secs_f64() * per_second < burst
        });
    }

    /// Sources tracked now.
    pub fn sources(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, n])
    }

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let mut limiter = RateLimiter::new(RateConfig { per_second: 10.0, burst: 5.0, max_sources: 10 });
        let t0 = Instant::now();
        assert_eq!((0..8).filter(|_| limiter.allow(t0, ip(1))).count(), 5);
        assert!(limiter.allow(t0, ip(2)), "another source has its own bucket");
        assert!(!limiter.allow(t0 + Duration::from_millis(50), ip(1)));
        assert!(limiter.allow(t0 + Duration::from_millis(100), ip(1)));
    }

    #[test]
    fn a_trunk_gets_its_own_rate() {
        let mut limiter = RateLimiter::new(RateConfig { per_second: 1.0, burst: 1.0, max_sources: 10 });
        limiter.set_rate(ip(9), 1000.0, 500.0);
        let t0 = Instant::now();
        assert_eq!((0..600).filter(|_| limiter.allow(t0, ip(9))).count(), 500);
    }

    #[test]
    fn the_table_is_bounded_and_forgets_idle_sources() {
        let mut limiter = RateLimiter::new(RateConfig { per_second: 1.0, burst: 2.0, max_sources: 3 });
        let t0 = Instant::now();
        for n in 1..=3 {
            assert!(limiter.allow(t0, ip(n)));
        }
        assert!(!limiter.allow(t0, ip(4)), "full, and nobody idle");
        assert_eq!(limiter.sources(), 3);
        assert!(limiter.allow(t0 + Duration::from_secs(2), ip(4)), "the others refilled and were forgotten");
        assert!(limiter.sources() <= 3);
    }
}
