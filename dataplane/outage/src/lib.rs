//! Outage mode: when an Agent's model service fails beyond its threshold, or a person
//! switches it on (`spec.outage.active`), new sessions of that Agent go to its fallback — a
//! person to put the caller through to and/or a message — instead of a runtime that cannot
//! answer them; traffic ramps back when the service is healthy again.
//!
//! - **Where it comes from.** The Agent's `spec.outage`, as the operator publishes it in
//!   the routing table (`RoutingTable::outages`; the switch and the breaker's settings live
//!   there alone, so flipping the switch rolls no pod), and its namespace's switch
//!   (`RoutingTable::namespace_outages`, from the `switchboard-outage` ConfigMap): while
//!   that is on, every Agent of the namespace is switched on, one without `spec.outage`
//!   with the namespace's message (`RoutingTable::outage_in_effect`). An Agent with
//!   neither has no outage mode and costs nothing here.
//! - **The breaker** ([`breaker`]) is this gateway's, per Agent: each replica judges from
//!   the turns it relays ([`turns`]: model errors from the runtimes, and the time from the
//!   caller's turn ending to the reply's first audio). With a shared store (`--redis-url`)
//!   a replica's trip reaches the others within a poll ([`shared`]), which open theirs for
//!   the time left; each ramps back on its own.
//! - **A session that falls back** gets `bidi_session_fallback` (the Agent, the cause —
//!   `switch` or `breaker` — the message, the person, and when a new session may be served)
//!   before any `bidi_connection_start`, then close 4513: never an accepted, silent socket.
//!   Sessions under way, resumed or continued go on; handoffs are not diverted.
//! - **A text-only reply** (`spec.outage.fallback.text`, voice and hybrid Agents): a new
//!   session whose client reads text is served instead of sent away, in text through the
//!   Agent's text model ([`serves_text`]; the session machine drops its `audio` modality and
//!   its audio frames, and tells the client `bidi_session_outage` with `text_only`). Its
//!   turns are not the breaker's: they say nothing of the voice model.
//! - **Sessions under way** go on when a switch flips or the breaker trips, and are told
//!   ([`notice`]: `bidi_session_outage`, on, and off again when the switch goes off or the
//!   breaker recovers), once each.
//! - **Told**: every change of a breaker (tripped, ramping, reopened, recovered) is a log
//!   line, a metric and — on a cluster — a Kubernetes Event on the Agent ([`Outages::events`]);
//!   the switch's Events are the operator's.
//!
//! This crate knows no socket, no cluster client and no gateway: the gateway performs a
//! diverted session's fallback on its client's socket and publishes the [`OutageEvent`]s as
//! Kubernetes Events (`switchboard_gateway::outage`), and hands [`shared::spawn`] its routing
//! view and Redis connection.

pub mod breaker;
pub mod metrics;
pub mod notice;
pub mod shared;
pub mod turns;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use breaker::{Breaker, Change, Mode, Verdict};
use switchboard_crds::routing::{Route, RouteOutage};
use switchboard_protocol::{FallbackPerson, ServerMessage};
use tokio::sync::mpsc;

pub use metrics::OutageMetrics;
pub use turns::{Turn, Turns};

pub use notice::DEFAULT_MESSAGE;
/// How many changes wait for the Event publisher; more are dropped (and logged).
pub const EVENT_QUEUE: usize = 256;

/// A change of an Agent's breaker, for a Kubernetes Event on the Agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutageEvent {
    /// The Agent's namespace.
    pub namespace: String,
    /// Its name.
    pub agent: String,
    /// `OutageTripped`, `OutageReopened`, `OutageRamping` or `OutageRecovered`.
    pub reason: &'static str,
    /// Whether it is a warning (a trip) or normal (the way back).
    pub warning: bool,
    /// What happened, for people.
    pub note: String,
}

/// The outage side of a gateway: a breaker per Agent with outage mode, and its metrics.
#[derive(Debug)]
pub struct Outages {
    breakers: Mutex<HashMap<String, Breaker>>,
    events: OnceLock<mpsc::Sender<OutageEvent>>,
    /// This replica's trips, for the other replicas ([`shared`]).
    shared: OnceLock<mpsc::Sender<shared::Tripped>>,
    /// This process among the replicas (a random id).
    replica: String,
    /// Which Agents are switched on, for the sessions under way ([`notice`]).
    pub switches: notice::Switches,
    /// Outage metrics.
    pub metrics: OutageMetrics,
}

impl Outages {
    /// No breaker yet.
    pub fn new() -> Result<Self, prometheus::Error> {
        Ok(Self {
            breakers: Mutex::default(),
            events: OnceLock::new(),
            shared: OnceLock::new(),
            replica: uuid::Uuid::new_v4().simple().to_string(),
            switches: notice::Switches::default(),
            metrics: OutageMetrics::new()?,
        })
    }

    /// Sends every trip from now on to the returned receiver ([`shared::spawn`]'s).
    pub fn share(&self) -> mpsc::Receiver<shared::Tripped> {
        let (tx, rx) = mpsc::channel(shared::QUEUE);
        let _ = self.shared.set(tx);
        rx
    }

    /// This process among the replicas.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Another replica's `trip` of `agent`'s breaker, holding for `remaining`: this
    /// replica's opens too (see [`Breaker::learn`]). Whether it opened.
    pub fn learn(
        &self,
        agent: &str,
        rules: &switchboard_crds::agent::Breaker,
        trip: &shared::Trip,
        remaining: Duration,
        now: Instant,
    ) -> bool {
        let opened = {
            let mut breakers = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
            breakers.entry(agent.to_owned()).or_default().learn(rules, now, remaining)
        };
        if opened {
            self.metrics.learned.with_label_values(&[agent]).inc();
            self.switches.breaker(agent, true);
            tracing::warn!(
                %agent, cause = %trip.cause, remaining_ms = remaining.as_millis() as u64,
                "outage mode on: another gateway replica's breaker tripped; new sessions go to the fallback"
            );
        }
        opened
    }

    /// Sends every change from now on to `events` (a cluster's Event publisher); the
    /// receiver is the gateway's publisher (`switchboard_gateway::outage::publish_events`).
    pub fn events(&self) -> mpsc::Receiver<OutageEvent> {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        let _ = self.events.set(tx);
        rx
    }

    /// The verdict for a new session of `route` whose Agent has `outage`.
    pub fn admit(&self, route: &Route, outage: &RouteOutage, now: Instant) -> Result<(), Diverted> {
        let key = format!("{}/{}", route.namespace, route.name);
        if outage.active {
            self.metrics.fallbacks.with_label_values(&[&key, "switch"]).inc();
            return Err(Diverted { cause: "switch", retry_after: None });
        }
        if !outage.breaker.enabled {
            return Ok(());
        }
        let roll = u32::from(uuid::Uuid::new_v4().as_bytes()[0]) * 100 / 256;
        let (verdict, change) = {
            let mut breakers = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
            let breaker = breakers.entry(key.clone()).or_default();
            breaker.admit(&outage.breaker, now, roll)
        };
        if let Some(change) = change {
            self.changed(route, change, &outage.breaker);
        }
        match verdict {
            Verdict::Serve => Ok(()),
            Verdict::Fallback(after) => {
                self.metrics.fallbacks.with_label_values(&[&key, "breaker"]).inc();
                Err(Diverted { cause: "breaker", retry_after: Some(after) })
            }
        }
    }

    /// A turn of a session of `route`'s Agent went as `turn`.
    pub fn record(&self, route: &Route, outage: &RouteOutage, turn: Turn, now: Instant) {
        let key = format!("{}/{}", route.namespace, route.name);
        let label = match turn {
            Turn::Good => "good",
            Turn::Error => "error",
            Turn::Slow => "slow",
        };
        self.metrics.turns.with_label_values(&[&key, label]).inc();
        if !outage.breaker.enabled {
            return;
        }
        let change = {
            let mut breakers = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
            breakers.entry(key).or_default().record(&outage.breaker, now, turn)
        };
        if let Some(change) = change {
            self.changed(route, change, &outage.breaker);
        }
    }

    /// Sets the state gauge of every Agent in `outages` (at scrape): 0 closed, 1 ramping
    /// back, 2 open, 3 switched on. Agents without outage mode have no series.
    pub fn observe<'a>(&self, outages: impl IntoIterator<Item = (&'a String, &'a RouteOutage)>) {
        self.metrics.state.reset();
        let breakers = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, outage) in outages {
            let state = if outage.active {
                3.0
            } else {
                match breakers.get(key).map(Breaker::mode) {
                    None | Some(Mode::Closed) => 0.0,
                    Some(Mode::Ramping { .. }) => 1.0,
                    Some(Mode::Open { .. }) => 2.0,
                }
            };
            self.metrics.state.with_label_values(&[key]).set(state);
        }
    }

    fn changed(&self, route: &Route, change: Change, rules: &switchboard_crds::agent::Breaker) {
        let key = format!("{}/{}", route.namespace, route.name);
        let cause = match &change {
            Change::Tripped { cause, .. } => Some(*cause),
            Change::Reopened => Some("probe_failed"),
            _ => None,
        };
        if let (Some(cause), Some(shared)) = (cause, self.shared.get()) {
            let trip = shared::Trip {
                id: uuid::Uuid::new_v4().simple().to_string(),
                replica: self.replica.clone(),
                cause: cause.to_owned(),
            };
            let holds = Duration::from_secs(u64::from(rules.open_seconds));
            if shared.try_send((key.clone(), trip, holds)).is_err() {
                tracing::warn!(agent = %key, "the shared outage queue is full: the other replicas will not learn this trip");
            }
        }
        match &change {
            Change::Tripped { .. } | Change::Reopened => self.switches.breaker(&key, true),
            Change::Recovered => self.switches.breaker(&key, false),
            Change::Ramped(_) => {}
        }
        let (reason, warning, note) = match &change {
            Change::Tripped { cause, failed, total } => {
                self.metrics.trips.with_label_values(&[key.as_str(), cause]).inc();
                let what = if *cause == "errors" { "model errors" } else { "slow first audio" };
                let note = format!(
                    "outage mode on: {failed} of the last {total} turns failed ({what}); new sessions go to the fallback"
                );
                ("OutageTripped", true, note)
            }
            Change::Reopened => {
                self.metrics.trips.with_label_values(&[&key, "probe_failed"]).inc();
                ("OutageReopened", true, "a turn failed while traffic ramped back: outage mode on again".to_owned())
            }
            Change::Ramped(percent) => {
                ("OutageRamping", false, format!("ramping back: {percent} % of new sessions are served"))
            }
            Change::Recovered => {
                self.metrics.recoveries.with_label_values(&[&key]).inc();
                ("OutageRecovered", false, "recovered: every new session is served again".to_owned())
            }
        };
        if warning {
            tracing::warn!(agent = %key, reason, "{note}");
        } else {
            tracing::info!(agent = %key, reason, "{note}");
        }
        if let Some(events) = self.events.get() {
            let event =
                OutageEvent { namespace: route.namespace.clone(), agent: route.name.clone(), reason, warning, note };
            if events.try_send(event).is_err() {
                tracing::warn!(agent = %key, reason, "the outage Event queue is full; this change has no Event");
            }
        }
    }
}

/// A new session goes to the fallback instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Diverted {
    /// `switch` or `breaker`.
    pub cause: &'static str,
    /// When a new session may be served (none while the switch is on).
    pub retry_after: Option<Duration>,
}

/// Whether a diverted new session of `route`'s Agent is served in text: the Agent's
/// fallback says so, the Agent speaks (a text Agent's text model is what fails), and the
/// client reads text — `text` among its `modalities`, or no `audio` (a session without it
/// is a text session); a phone call's session asks for `audio` alone.
pub fn serves_text(route: &Route, outage: &RouteOutage, modalities: &[String]) -> bool {
    let has = |name: &str| modalities.iter().any(|m| m.eq_ignore_ascii_case(name));
    outage.text && route.mode.has_audio() && (has("text") || !has("audio"))
}

/// The `bidi_session_fallback` of a diverted session.
pub fn fallback(route: &Route, outage: &RouteOutage, diverted: Diverted) -> ServerMessage {
    ServerMessage::BidiSessionFallback {
        agent: format!("{}/{}", route.namespace, route.name),
        cause: diverted.cause.to_owned(),
        message: outage.message.clone().unwrap_or_else(|| DEFAULT_MESSAGE.to_owned()),
        person: outage.person.as_ref().map(|p| FallbackPerson { name: p.name.clone(), address: p.address.clone() }),
        retry_after_seconds: diverted.retry_after.map(|d| d.as_secs().max(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(mode: &str) -> Route {
        serde_json::from_value(serde_json::json!({
            "namespace": "bank", "name": "triage", "mode": mode, "service": "triage.bank.svc",
            "port": 8080, "path": "/v1/session", "handoffs": [], "expose": true, "default": true,
            "ready": true, "readyReplicas": 1
        }))
        .expect("a route")
    }

    #[test]
    fn only_clients_that_read_text_of_agents_that_speak_are_served_in_text() {
        let outage = RouteOutage {
            active: true,
            person: None,
            message: Some("Sorry.".into()),
            breaker: switchboard_crds::agent::Breaker::default(),
            text: true,
        };
        let of = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let voice = route("voice");
        assert!(serves_text(&voice, &outage, &of(&["audio", "text"])), "a web client");
        assert!(serves_text(&voice, &outage, &of(&["text"])));
        assert!(serves_text(&voice, &outage, &of(&[])), "no audio: a text session");
        assert!(!serves_text(&voice, &outage, &of(&["audio"])), "a phone call");
        assert!(serves_text(&route("hybrid"), &outage, &of(&["audio", "text"])));
        assert!(!serves_text(&route("text"), &outage, &of(&["text"])), "a text Agent's text model is what fails");
        let without = RouteOutage { text: false, ..outage };
        assert!(!serves_text(&voice, &without, &of(&["audio", "text"])));
    }
}
