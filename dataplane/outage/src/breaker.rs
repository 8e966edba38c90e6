//! One Agent's circuit breaker, without I/O: turns in (good, a model error, a slow first
//! audio), a verdict per new session out, and the changes worth an Event.
//!
//! - **Closed**: every session is served; each turn is kept for the window. Once the
//!   window holds at least `minTurns` turns and `errorPercent` of them failed, it trips.
//! - **Open** for `openSeconds`: every new session goes to the fallback, told when to try
//!   again; turns of sessions still under way are not counted (they would only prolong it).
//! - **Ramping**: step by step, `rampPercent[step]` of new sessions are served and the rest
//!   fall back; `probeTurns` good turns in a row move to the next step, past the last it is
//!   closed again (recovered). One failed turn opens it again.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use switchboard_crds::agent::Breaker as Rules;

/// The most turns one window keeps (older ones are dropped first).
pub const MAX_WINDOW_TURNS: usize = 10_000;

/// How a turn went for the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// The reply's first audio (or text) came in time.
    Good,
    /// The model failed.
    Error,
    /// The reply's first audio came later than `firstAudioSeconds`, or not at all.
    Slow,
}

/// Where the breaker is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Serving every session.
    Closed,
    /// Every new session falls back until then.
    Open {
        /// When the ramp begins.
        until: Instant,
    },
    /// Serving a share of new sessions.
    Ramping {
        /// The step (an index of `rampPercent`).
        step: usize,
        /// Good turns in a row at this step.
        good: u32,
    },
}

/// What a new session gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The agent serves it.
    Serve,
    /// It goes to the fallback; a new one may be served after this long.
    Fallback(Duration),
}

/// A change worth telling (an Event, a log line, a metric).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Tripped from closed: `cause` is `errors` or `slow_first_audio` (whichever failed
    /// more), with the window's failed and total turns.
    Tripped {
        /// `errors` or `slow_first_audio`.
        cause: &'static str,
        /// Failed turns in the window.
        failed: usize,
        /// Turns in the window.
        total: usize,
    },
    /// A turn failed while ramping back: open again.
    Reopened,
    /// The ramp moved to serving this percent of new sessions.
    Ramped(u32),
    /// Past the last step: closed, every session served.
    Recovered,
}

/// One Agent's breaker.
#[derive(Debug)]
pub struct Breaker {
    mode: Mode,
    /// The window's turns, oldest first.
    turns: VecDeque<(Instant, Turn)>,
}

impl Default for Breaker {
    fn default() -> Self {
        Self { mode: Mode::Closed, turns: VecDeque::new() }
    }
}

impl Breaker {
    /// Where it is.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The verdict for a new session at `now`; `roll` is a number from 0 to 99 drawn for
    /// it (the share served while ramping). An open breaker whose time is up starts the
    /// ramp (the change says so).
    pub fn admit(&mut self, rules: &Rules, now: Instant, roll: u32) -> (Verdict, Option<Change>) {
        let mut change = None;
        if let Mode::Open { until } = self.mode {
            if now < until {
                return (Verdict::Fallback(until - now), None);
            }
            self.mode = Mode::Ramping { step: 0, good: 0 };
            change = Some(Change::Ramped(percent(rules, 0)));
        }
        let verdict = match self.mode {
            Mode::Ramping { step, .. } if roll >= percent(rules, step) => Verdict::Fallback(probe_pause(rules)),
            _ => Verdict::Serve,
        };
        (verdict, change)
    }

    /// A turn of one of the Agent's sessions ended as `turn` at `now`.
    pub fn record(&mut self, rules: &Rules, now: Instant, turn: Turn) -> Option<Change> {
        match self.mode {
            Mode::Open { .. } => None,
            Mode::Ramping { step, good } => {
                if turn != Turn::Good {
                    self.open(rules, now);
                    return Some(Change::Reopened);
                }
                let good = good + 1;
                if good < rules.probe_turns.max(1) {
                    self.mode = Mode::Ramping { step, good };
                    return None;
                }
                if step + 1 >= rules.ramp_percent.len() {
                    self.mode = Mode::Closed;
                    self.turns.clear();
                    return Some(Change::Recovered);
                }
                self.mode = Mode::Ramping { step: step + 1, good: 0 };
                Some(Change::Ramped(percent(rules, step + 1)))
            }
            Mode::Closed => {
                self.keep(rules, now, turn);
                let total = self.turns.len();
                let errors = self.turns.iter().filter(|(_, t)| *t == Turn::Error).count();
                let slow = self.turns.iter().filter(|(_, t)| *t == Turn::Slow).count();
                let failed = errors + slow;
                let min = usize::try_from(rules.min_turns.max(1)).unwrap_or(usize::MAX);
                let threshold = u64::from(rules.error_percent.clamp(1, 100));
                if total < min || (failed as u64) * 100 < threshold * total as u64 {
                    return None;
                }
                let cause = if errors >= slow { "errors" } else { "slow_first_audio" };
                self.open(rules, now);
                Some(Change::Tripped { cause, failed, total })
            }
        }
    }

    /// Another replica's breaker for this Agent tripped ([`super::shared`]): open here too
    /// for `remaining` (at most `openSeconds`: what the store says cannot hold it open
    /// longer), unless it is open for longer already. Whether it opened.
    pub fn learn(&mut self, rules: &Rules, now: Instant, remaining: Duration) -> bool {
        let until = now + remaining.min(Duration::from_secs(u64::from(rules.open_seconds)));
        if matches!(self.mode, Mode::Open { until: open } if open >= until) || remaining.is_zero() {
            return false;
        }
        self.mode = Mode::Open { until };
        self.turns.clear();
        true
    }

    fn keep(&mut self, rules: &Rules, now: Instant, turn: Turn) {
        let window = Duration::from_secs(u64::from(rules.window_seconds));
        while self.turns.front().is_some_and(|(at, _)| now.saturating_duration_since(*at) > window) {
            self.turns.pop_front();
        }
        if self.turns.len() >= MAX_WINDOW_TURNS {
            self.turns.pop_front();
        }
        self.turns.push_back((now, turn));
    }

    fn open(&mut self, rules: &Rules, now: Instant) {
        self.mode = Mode::Open { until: now + Duration::from_secs(u64::from(rules.open_seconds)) };
        self.turns.clear();
    }
}

/// The percent of new sessions served at ramp `step`.
fn percent(rules: &Rules, step: usize) -> u32 {
    rules.ramp_percent.get(step).copied().unwrap_or(100)
}

/// How long a session that fell back while ramping might wait before it is likely served:
/// a few seconds, as the ramp moves with the turns of those served.
fn probe_pause(rules: &Rules) -> Duration {
    Duration::from_secs(u64::from(rules.open_seconds).clamp(1, 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Rules {
        Rules {
            error_percent: 50,
            min_turns: 4,
            window_seconds: 60,
            open_seconds: 30,
            ramp_percent: vec![10, 50],
            probe_turns: 2,
            ..Rules::default()
        }
    }

    #[test]
    fn it_trips_once_enough_turns_failed_at_the_threshold() {
        let (rules, t0) = (rules(), Instant::now());
        let mut b = Breaker::default();
        assert_eq!(b.record(&rules, t0, Turn::Error), None);
        assert_eq!(b.record(&rules, t0, Turn::Good), None);
        assert_eq!(b.record(&rules, t0, Turn::Good), None, "1 of 3 failed, and fewer than minTurns");
        let change = b.record(&rules, t0, Turn::Slow);
        assert_eq!(change, Some(Change::Tripped { cause: "errors", failed: 2, total: 4 }));
        assert!(matches!(b.mode(), Mode::Open { .. }));
        let (verdict, _) = b.admit(&rules, t0 + Duration::from_secs(10), 0);
        assert_eq!(verdict, Verdict::Fallback(Duration::from_secs(20)), "told when to try again");
        assert_eq!(b.record(&rules, t0, Turn::Error), None, "turns while open are not counted");
    }

    #[test]
    fn slow_first_audio_trips_it_too_and_old_turns_leave_the_window() {
        let (rules, t0) = (rules(), Instant::now());
        let mut b = Breaker::default();
        for _ in 0..3 {
            b.record(&rules, t0, Turn::Slow);
        }
        // A minute later those three are gone: one more slow turn is not enough.
        let later = t0 + Duration::from_secs(61);
        assert_eq!(b.record(&rules, later, Turn::Slow), None);
        for _ in 0..2 {
            assert_eq!(b.record(&rules, later, Turn::Good), None);
        }
        let change = b.record(&rules, later, Turn::Slow);
        assert_eq!(change, Some(Change::Tripped { cause: "slow_first_audio", failed: 2, total: 4 }));
    }

    #[test]
    fn after_open_it_ramps_through_the_steps_and_recovers() {
        let (rules, t0) = (rules(), Instant::now());
        let mut b = Breaker::default();
        for _ in 0..4 {
            b.record(&rules, t0, Turn::Error);
        }
        let t1 = t0 + Duration::from_secs(30);
        // 10 %: a roll under 10 is served; the rest fall back.
        assert_eq!(b.admit(&rules, t1, 9), (Verdict::Serve, Some(Change::Ramped(10))));
        assert!(matches!(b.admit(&rules, t1, 10).0, Verdict::Fallback(_)));
        assert_eq!(b.record(&rules, t1, Turn::Good), None);
        assert_eq!(b.record(&rules, t1, Turn::Good), Some(Change::Ramped(50)));
        assert_eq!(b.admit(&rules, t1, 49).0, Verdict::Serve);
        assert!(matches!(b.admit(&rules, t1, 50).0, Verdict::Fallback(_)));
        b.record(&rules, t1, Turn::Good);
        assert_eq!(b.record(&rules, t1, Turn::Good), Some(Change::Recovered));
        assert_eq!(b.mode(), Mode::Closed);
        assert_eq!(b.admit(&rules, t1, 99).0, Verdict::Serve);
    }

    #[test]
    fn a_failed_turn_while_ramping_opens_it_again() {
        let (rules, t0) = (rules(), Instant::now());
        let mut b = Breaker::default();
        for _ in 0..4 {
            b.record(&rules, t0, Turn::Error);
        }
        let t1 = t0 + Duration::from_secs(31);
        b.admit(&rules, t1, 0);
        b.record(&rules, t1, Turn::Good);
        assert_eq!(b.record(&rules, t1, Turn::Slow), Some(Change::Reopened));
        assert_eq!(b.admit(&rules, t1, 0).0, Verdict::Fallback(Duration::from_secs(30)));
    }

    #[test]
    fn a_trip_learned_from_another_replica_opens_it_for_the_time_left_and_no_longer() {
        let (rules, t0) = (rules(), Instant::now());
        let mut b = Breaker::default();
        b.record(&rules, t0, Turn::Error);
        assert!(b.learn(&rules, t0, Duration::from_secs(12)), "closed: opens");
        assert_eq!(b.mode(), Mode::Open { until: t0 + Duration::from_secs(12) });
        assert_eq!(b.admit(&rules, t0, 0).0, Verdict::Fallback(Duration::from_secs(12)));
        assert!(!b.learn(&rules, t0, Duration::from_secs(5)), "open for longer already");
        assert!(b.learn(&rules, t0, Duration::from_secs(3600)), "a later trip extends it");
        assert_eq!(b.mode(), Mode::Open { until: t0 + Duration::from_secs(30) }, "but never past openSeconds");
        assert!(!b.learn(&rules, t0, Duration::ZERO), "an expired trip is nothing");
        // It ramps back on its own, and a learned trip while ramping opens it again.
        let t1 = t0 + Duration::from_secs(31);
        assert_eq!(b.admit(&rules, t1, 0), (Verdict::Serve, Some(Change::Ramped(10))));
        assert!(b.learn(&rules, t1, Duration::from_secs(10)));
        assert!(matches!(b.admit(&rules, t1, 0).0, Verdict::Fallback(_)));
        assert!(b.turns.is_empty(), "the window starts over");
    }

    #[test]
    fn random_turns_and_admissions_never_serve_while_open() {
        // A small deterministic generator: every sequence keeps the rule.
        let rules = rules();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut b = Breaker::default();
        let mut now = Instant::now();
        for _ in 0..20_000 {
            now += Duration::from_millis(next() % 3000);
            if next() % 2 == 0 {
                let turn = [Turn::Good, Turn::Error, Turn::Slow][(next() % 3) as usize];
                b.record(&rules, now, turn);
            } else {
                let before = b.mode();
                let (verdict, _) = b.admit(&rules, now, (next() % 100) as u32);
                if let Mode::Open { until } = before
                    && now < until
                {
                    assert!(matches!(verdict, Verdict::Fallback(_)));
                }
            }
            assert!(b.turns.len() <= MAX_WINDOW_TURNS);
        }
    }
}
