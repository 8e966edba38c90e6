//! The fair-share policy over one pool's state, without I/O: time is an input (ms), every
//! change is a method, and the same code runs on the in-process state and on the state
//! read from Redis ([`crate::store`]).
//!
//! A pool has a quota of live model streams. Each namespace (tenant) has a guaranteed
//! number of them (its share of the quota, [`Rules::guaranteed`]) and may burst beyond it
//! into slots nobody else is using. When a slot frees, the waiting sessions are served in
//! this order: first those whose namespace is under its guarantee, then the rest; within
//! each class, higher Agent priority first, then arrival. A live session is never cut to
//! give a guarantee back: a tenant over its share keeps what it holds and waits for more
//! while tenants under theirs are served.
//!
//! Leases and waiters belong to a gateway; a gateway that stops renewing its heartbeat
//! ([`Pool::heartbeat`]) is gone once its heartbeat expires, and everything it held goes
//! with it ([`Pool::expire`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The quota and shares that apply to one pool.
#[derive(Clone, Debug, PartialEq)]
pub struct Rules {
    /// Live streams the pool allows.
    pub quota: u32,
    /// Each namespace's guaranteed share of the quota, 0 to 1 (a namespace not listed: 0,
    /// it only bursts).
    pub shares: BTreeMap<String, f64>,
    /// Most sessions waiting in the pool.
    pub max_queue: u32,
    /// What a slot is assumed to be held for before any session ended (ms).
    pub initial_hold_ms: u64,
}

impl Rules {
    /// The streams `namespace` is guaranteed: its share of the quota, rounded down.
    pub fn guaranteed(&self, namespace: &str) -> u32 {
        let share = self.shares.get(namespace).copied().unwrap_or(0.0).clamp(0.0, 1.0);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let slots = (f64::from(self.quota) * share).floor() as u32;
        slots.min(self.quota)
    }
}

/// A live stream's slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The session's namespace.
    pub ns: String,
    /// The gateway holding it.
    pub gw: String,
    /// When it was granted (ms).
    pub since: u64,
}

/// A session waiting for a slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    /// The session's namespace.
    pub ns: String,
    /// Its Agent's priority.
    pub prio: i32,
    /// Its arrival number in the pool.
    pub seq: u64,
    /// The gateway it waits at.
    pub gw: String,
    /// When it arrived (ms).
    pub since: u64,
}

/// One pool's state: what every gateway sharing it sees.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    /// Live slots by ticket id.
    #[serde(default)]
    pub leases: BTreeMap<String, Lease>,
    /// Waiting sessions by ticket id.
    #[serde(default)]
    pub queue: BTreeMap<String, Waiter>,
    /// Each gateway's heartbeat: when it counts as gone (ms).
    #[serde(default)]
    pub gateways: BTreeMap<String, u64>,
    /// The last arrival number given.
    #[serde(default)]
    pub seq: u64,
    /// How long sessions have held their slots lately (ms; an exponentially weighted mean,
    /// 0 before the first ended).
    #[serde(default)]
    pub hold_ms: u64,
    /// When the pool's region failed sessions lately (ms; model failures the gateways
    /// relayed, at most [`Failover::failures`] of them, oldest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<u64>,
    /// Until when the pool's region counts as failing (ms; 0: it does not): new sessions of
    /// Agents with a fallback region go there meanwhile.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failing_until: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// When a pool's region counts as failing: `failures` model failures within `window_ms`
/// mark it so for `hold_ms` (and again, from then, while they go on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failover {
    /// Model failures that mark the region failing.
    pub failures: u32,
    /// Within this long (ms).
    pub window_ms: u64,
    /// For this long (ms).
    pub hold_ms: u64,
}

/// What a request for a slot got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A slot: the stream may open.
    Granted,
    /// A place in the queue.
    Queued(Place),
    /// No slot, and the session does not wait.
    Refused(Refusal),
}

/// A waiting session's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// 1: next.
    pub position: u32,
    /// The likely wait (ms).
    pub wait_ms: u64,
}

/// Why a session was refused, with when to try again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The queue was full (else: the Agent refuses rather than queues).
    pub queue_full: bool,
    /// When a slot is likely to free (ms from now).
    pub retry_after_ms: u64,
}

/// Where a ticket stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// It holds a slot.
    Granted,
    /// It waits.
    Queued(Place),
    /// The pool knows it no more (its gateway's heartbeat lapsed).
    Gone,
}

/// A ticket's request.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// The ticket's id (unique across gateways).
    pub id: &'a str,
    /// The session's namespace.
    pub ns: &'a str,
    /// The Agent's priority.
    pub prio: i32,
    /// The gateway asking.
    pub gw: &'a str,
    /// Whether the session waits when there is no slot.
    pub queue: bool,
}

/// How much the newest hold counts in the mean.
const HOLD_WEIGHT: f64 = 0.2;

impl Pool {
    /// Slots held per namespace.
    pub fn used_by(&self) -> BTreeMap<&str, u32> {
        let mut used = BTreeMap::new();
        for lease in self.leases.values() {
            *used.entry(lease.ns.as_str()).or_insert(0) += 1;
        }
        used
    }

    /// Slots held.
    pub fn used(&self) -> u32 {
        u32::try_from(self.leases.len()).unwrap_or(u32::MAX)
    }

    /// Whether nothing is held, queued or remembered of failures (a store may forget it).
    pub fn is_idle(&self) -> bool {
        self.leases.is_empty() && self.queue.is_empty() && self.failures.is_empty() && self.failing_until == 0
    }

    /// A session of the pool's region failed at `now` (a model failure a gateway relayed);
    /// true when that marks the region failing (it was not before).
    pub fn failed(&mut self, rules: &Failover, now: u64) -> bool {
        let threshold = rules.failures.max(1) as usize;
        self.failures.retain(|at| now.saturating_sub(*at) < rules.window_ms);
        self.failures.push(now);
        if self.failures.len() > threshold {
            let extra = self.failures.len() - threshold;
            self.failures.drain(..extra);
        }
        if self.failures.len() < threshold {
            return false;
        }
        let newly = !self.failing(now);
        self.failing_until = self.failing_until.max(now.saturating_add(rules.hold_ms));
        self.failures.clear();
        newly
    }

    /// Whether the pool's region counts as failing at `now` (a lapsed mark is forgotten).
    pub fn failing(&mut self, now: u64) -> bool {
        if self.failing_until != 0 && self.failing_until <= now {
            self.failing_until = 0;
        }
        self.failing_until > now
    }

    /// `gw` is alive until `now + ttl`.
    pub fn heartbeat(&mut self, gw: &str, now: u64, ttl_ms: u64) {
        self.gateways.insert(gw.to_owned(), now.saturating_add(ttl_ms));
    }

    /// Drops the gateways whose heartbeat lapsed and everything they held or queued, and
    /// leases and waiters of gateways the pool never heard from.
    pub fn expire(&mut self, now: u64) {
        self.gateways.retain(|_, until| *until > now);
        let gateways = &self.gateways;
        self.leases.retain(|_, l| gateways.contains_key(&l.gw));
        self.queue.retain(|_, w| gateways.contains_key(&w.gw));
    }

    /// Asks for a slot for `req` at `now` (its gateway's heartbeat must be current: the
    /// caller beats first). A session already known keeps what it has.
    pub fn request(&mut self, rules: &Rules, req: &Request<'_>, now: u64) -> Outcome {
        match self.status(rules, req.id) {
            Status::Granted => return Outcome::Granted,
            Status::Queued(place) => return Outcome::Queued(place),
            Status::Gone => {}
        }
        self.seq += 1;
        let waiter = Waiter { ns: req.ns.to_owned(), prio: req.prio, seq: self.seq, gw: req.gw.to_owned(), since: now };
        self.queue.insert(req.id.to_owned(), waiter);
        self.settle(rules, now);
        match self.status(rules, req.id) {
            Status::Granted => Outcome::Granted,
            Status::Queued(place) if req.queue && self.queue.len() <= rules.max_queue as usize => {
                Outcome::Queued(place)
            }
            Status::Queued(_) | Status::Gone => {
                self.queue.remove(req.id);
                Outcome::Refused(Refusal { queue_full: req.queue, retry_after_ms: self.wait_ms(rules, 1) })
            }
        }
    }

    /// A slot without waiting, over the quota if need be: for a session that was already
    /// under way (a resume, a continuation), never put on hold.
    pub fn force(&mut self, id: &str, ns: &str, gw: &str, now: u64) {
        self.queue.remove(id);
        self.leases.entry(id.to_owned()).or_insert_with(|| Lease { ns: ns.to_owned(), gw: gw.to_owned(), since: now });
    }

    /// The ticket `id` is done: its slot freed (the hold counted in the mean) or its place
    /// given up; waiting sessions take the slot.
    pub fn release(&mut self, rules: &Rules, id: &str, now: u64) {
        if let Some(lease) = self.leases.remove(id) {
            let held = now.saturating_sub(lease.since);
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
            let mean = if self.hold_ms == 0 {
                held
            } else {
                (self.hold_ms as f64 * (1.0 - HOLD_WEIGHT) + held as f64 * HOLD_WEIGHT) as u64
            };
            self.hold_ms = mean.max(1);
        }
        self.queue.remove(id);
        self.settle(rules, now);
    }

    /// Grants free slots to waiting sessions, in the policy's order.
    pub fn settle(&mut self, rules: &Rules, now: u64) {
        while self.used() < rules.quota {
            let Some(next) = self.order(rules).into_iter().next() else { break };
            if let Some(w) = self.queue.remove(&next) {
                self.leases.insert(next, Lease { ns: w.ns, gw: w.gw, since: now });
            }
        }
    }

    /// The waiting tickets, next first: namespaces under their guarantee before the rest,
    /// then higher priority, then arrival. A grant moves its namespace toward its
    /// guarantee, so the order is that of serving them one by one.
    pub fn order(&self, rules: &Rules) -> Vec<String> {
        let mut used: BTreeMap<&str, u32> = self.used_by();
        let mut rest: Vec<(&String, &Waiter)> = self.queue.iter().collect();
        let mut order = Vec::with_capacity(rest.len());
        while !rest.is_empty() {
            let pick = rest
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, w))| {
                    let under = used.get(w.ns.as_str()).copied().unwrap_or(0) < rules.guaranteed(&w.ns);
                    (!under, -i64::from(w.prio), w.seq)
                })
                .map_or(0, |(i, _)| i);
            let (id, waiter) = rest.swap_remove(pick);
            *used.entry(waiter.ns.as_str()).or_insert(0) += 1;
            order.push(id.clone());
        }
        order
    }

    /// Every waiting ticket's place.
    pub fn places(&self, rules: &Rules) -> BTreeMap<String, Place> {
        let order = self.order(rules);
        order
            .into_iter()
            .enumerate()
            .map(|(i, id)| {
                let position = u32::try_from(i + 1).unwrap_or(u32::MAX);
                (id, Place { position, wait_ms: self.wait_ms(rules, position) })
            })
            .collect()
    }

    /// Where ticket `id` stands.
    pub fn status(&self, rules: &Rules, id: &str) -> Status {
        if self.leases.contains_key(id) {
            return Status::Granted;
        }
        if !self.queue.contains_key(id) {
            return Status::Gone;
        }
        match self.places(rules).remove(id) {
            Some(place) => Status::Queued(place),
            None => Status::Gone,
        }
    }

    /// The likely wait of the `position`th in line: slots free at `used / hold` a ms, so the
    /// `position`th frees after `position * hold / used` (with an empty pool, one hold).
    pub fn wait_ms(&self, rules: &Rules, position: u32) -> u64 {
        let hold = if self.hold_ms == 0 { rules.initial_hold_ms } else { self.hold_ms };
        let used = u64::from(self.used().max(1));
        hold.saturating_mul(u64::from(position)).div_ceil(used)
    }
}

#[cfg(test)]
mod tests;
