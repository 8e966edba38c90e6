//! What a relayed session is counted and recorded as — its place in the live-sessions
//! gauge, its share of the memory budget, its part of the conversation record, the turns'
//! clock for its Agent's outage breaker — and the metrics and logs of the machine's notes.
//! The relay hands every note and relayed event here; nothing else touches these fields.

use std::time::{Duration, Instant};

use super::super::machine::{ClientFrame, Event, Machine, Note, RuntimeFrame};
use crate::Gateway;
use switchboard_core::protocol::{ErrorCode, ServerKind};

use crate::budget::{Account, SESSION_OVERHEAD};
use crate::record::SessionLog;
use switchboard_outage::Turns;

/// The session's books.
pub(super) struct Books {
    /// The Agent counted in the live-sessions gauge.
    live: Option<String>,
    /// What the session holds, toward the gateway's memory budget (refreshed at every
    /// ping interval; cheap enough, but not for every frame).
    account: Account,
    /// The session's part of the conversation record, when kept.
    log: Option<SessionLog>,
    /// The client's credential (its key's name, `jwt:<subject>`; empty without checks).
    credential: String,
    /// The turns' clock for the Agent's outage breaker ([`switchboard_outage::turns`]).
    turns: Turns,
}

impl Books {
    /// The books of `machine`'s session, for `credential` (`resumed`: taken from the store).
    pub(super) fn open(gateway: &Gateway, machine: &Machine, credential: String, resumed: bool) -> Self {
        let mut account = gateway.budget.account();
        account.set(SESSION_OVERHEAD + machine.held_bytes());
        let log = gateway.record.as_ref().map(|recorder| {
            let mut log = SessionLog::new(recorder.clone(), machine.id());
            // Every rule of the namespace from the first line: what is said at triage is as
            // secret as what is said at the Agent that declares the rule.
            let namespace = &machine.target().route.namespace;
            log.reached(&gateway.directory.borrow().table().redact_rules(namespace));
            log.reached(&machine.target().route.redact);
            let agent = machine.target().key();
            log.started(&agent, &credential, resumed, machine.voice().as_deref(), machine.modalities());
            if let Some(cause) = machine.text_only().filter(|_| !resumed) {
                log.text_only(&agent, cause);
            }
            log
        });
        Self { live: None, account, log, credential, turns: Turns::default() }
    }

    /// The client's credential.
    pub(super) fn credential(&self) -> &str {
        &self.credential
    }

    /// The session's part of the conversation record, when kept.
    pub(super) fn log(&self) -> Option<&SessionLog> {
        self.log.as_ref()
    }

    /// [`Self::log`], to write to.
    pub(super) fn log_mut(&mut self) -> Option<&mut SessionLog> {
        self.log.as_mut()
    }

    /// Counts what the session holds now.
    pub(super) fn held(&mut self, machine: &Machine) {
        self.account.set(SESSION_OVERHEAD + machine.held_bytes());
    }

    /// The session leaves the live-sessions gauge (it ends or parks).
    pub(super) fn leave(&mut self, gateway: &Gateway) {
        if let Some(live) = self.live.take() {
            gateway.metrics.live.with_label_values(&[&live]).dec();
        }
    }

    /// Shows the turns' clock `event` (when it watches one); a turn it settles goes to the
    /// Agent's breaker.
    pub(super) fn watch(&mut self, gateway: &Gateway, machine: &Machine, event: &Event) {
        if let Event::Runtime(RuntimeFrame::Text(text)) = event {
            region_failure(gateway, machine, text.as_str());
        }
        if !self.turns.watching() {
            return;
        }
        let now = Instant::now();
        let turn = match event {
            Event::Client(ClientFrame::Text(text), _) => {
                self.turns.client_text(text.as_str(), now);
                None
            }
            Event::Runtime(RuntimeFrame::Text(text)) => self.turns.runtime_text(text.as_str(), now),
            Event::Runtime(RuntimeFrame::Binary(_)) => self.turns.runtime_binary(now),
            Event::PingDue => self.turns.tick(now),
            _ => None,
        };
        let Some(turn) = turn else { return };
        let route = &machine.target().route;
        let outage = gateway.directory.borrow().table().outage_in_effect(&route.namespace, &route.name);
        if let Some(outage) = outage {
            gateway.outages.record(route, &outage, turn, now);
        }
    }

    /// The session was placed on its Agent's fallback region: the record says where and why.
    fn reached_region(&self, machine: &Machine, agent: &str) {
        let Some((region, cause)) = machine.placed() else { return };
        if let Some(log) = &self.log {
            log.region(agent, region, cause);
        }
    }

    /// The turns' clock for the session's Agent now: its `firstAudioSeconds` when its
    /// breaker is on. A session served in text because of an outage is not watched: its
    /// turns run on the text model and say nothing of the voice model the breaker judges.
    fn watch_agent(&mut self, gateway: &Gateway, machine: &Machine) {
        let route = &machine.target().route;
        let outage = match machine.text_only() {
            Some(_) => None,
            None => gateway.directory.borrow().table().outage_in_effect(&route.namespace, &route.name),
        };
        let limit = outage.and_then(|outage| {
            outage.breaker.enabled.then(|| Duration::from_secs(u64::from(outage.breaker.first_audio_seconds)))
        });
        self.turns.agent(limit);
    }

    /// Counts and records the variant of `agent` the session runs, as it reaches the Agent.
    fn reached_variant(&self, machine: &Machine, metrics: &crate::metrics::Metrics, agent: &str) {
        let Some(variant) = machine.variant() else { return };
        metrics.variant_sessions.with_label_values(&[agent, variant]).inc();
        tracing::info!(session_id = %machine.id(), %agent, variant, "variant");
        if let Some(log) = &self.log {
            log.variant(agent, variant);
        }
    }

    /// Metrics and logs for a note of the machine.
    pub(super) fn observe(&mut self, gateway: &Gateway, machine: &Machine, note: Note) {
        let metrics = &gateway.metrics;
        let (id, turn, agent) = (machine.id(), machine.turn(), machine.target().key());
        match note {
            Note::Routed => {
                metrics.routed.with_label_values(&[&agent]).inc();
                metrics.live.with_label_values(&[&agent]).inc();
                self.reached_variant(machine, metrics, &agent);
                self.reached_region(machine, &agent);
                self.live = Some(agent);
                self.watch_agent(gateway, machine);
            }
            Note::Resumed => {
                metrics.resumed.with_label_values(&[&agent]).inc();
                metrics.live.with_label_values(&[&agent]).inc();
                tracing::info!(session_id = %id, %agent, "resumed");
                self.live = Some(agent);
                self.watch_agent(gateway, machine);
            }
            Note::Handoff { from, to } => {
                if let Some(live) = self.live.replace(to.clone()) {
                    metrics.live.with_label_values(&[&live]).dec();
                }
                metrics.live.with_label_values(&[&to]).inc();
                metrics.handoffs.with_label_values(&[&from, &to]).inc();
                self.reached_variant(machine, metrics, &to);
                self.watch_agent(gateway, machine);
                tracing::info!(session_id = %id, turn, %from, %to, "handoff");
                if let Some(log) = self.log.as_mut() {
                    log.reached(&machine.target().route.redact);
                    log.handed_off(&from, &to);
                }
            }
            Note::HandoffGap { from, to, seconds } => {
                metrics.handoff_gap.with_label_values(&[&from, &to]).observe(seconds);
            }
            Note::HandoffFailed { from, to, error } => {
                tracing::warn!(session_id = %id, turn, %from, %to, %error, "handoff failed");
            }
            Note::Migrated { reason, from } => {
                metrics.migrated.with_label_values(&[&agent, &reason]).inc();
                if let Some(log) = &self.log {
                    log.moved(&agent, &reason);
                }
                if let Some(addr) = from {
                    tracing::info!(session_id = %id, turn, %agent, %addr, %reason, "moving the session to another pod");
                }
            }
            Note::Refused(reason) => metrics.refused.with_label_values(&[reason]).inc(),
            Note::OpenFailed(error) => tracing::warn!(session_id = %id, %agent, "{error}"),
            Note::AgentRemoved => {
                tracing::info!(session_id = %id, turn, %agent, "the agent was removed; ending the session");
            }
            Note::ClientSilent(silent) => {
                tracing::info!(session_id = %id, %agent, silent_ms = silent.as_millis() as u64, "the client answers nothing, not even pings: it counts as gone");
            }
            Note::RuntimeSilent(silent) => {
                tracing::warn!(session_id = %id, %agent, silent_ms = silent.as_millis() as u64, "the runtime answers nothing, not even pings: moving the session");
            }
            Note::WaitingForPod => {
                tracing::info!(session_id = %id, %agent, "the pod drains and no other is ready yet; the session stays until one is");
            }
        }
    }
}

/// The model failures that count against a region: its service throttled, unavailable,
/// unreachable or too slow (not a broken stream or a bad request).
const REGION_FAILURES: &[ErrorCode] = &[
    ErrorCode::ModelThrottled,
    ErrorCode::ModelServiceUnavailable,
    ErrorCode::ModelConnection,
    ErrorCode::ModelTimeout,
];

/// A runtime's `text` that says the model service of the session's region failed counts
/// towards marking that region's pool failing ([`crate::capacity`]), for Agents with a
/// fallback region to go to.
fn region_failure(gateway: &Gateway, machine: &Machine, text: &str) {
    if ServerKind::peek(text) != Some(ServerKind::Error) {
        return;
    }
    #[derive(serde::Deserialize)]
    struct Error {
        code: ErrorCode,
    }
    let Ok(error) = serde_json::from_str::<Error>(text) else { return };
    if !REGION_FAILURES.contains(&error.code) {
        return;
    }
    let route = &machine.target().route;
    let pool = match machine.placed() {
        Some(_) => route.capacity.fallback_pool(),
        None => Some(route.capacity.pool.clone()),
    };
    let Some(pool) = pool else { return };
    let capacity = gateway.capacity.clone();
    tokio::spawn(async move { capacity.model_failed(&pool).await });
}
