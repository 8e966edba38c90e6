//! Outbound calls (`POST /v1/calls`): the gateway's table of the calls it asked a SIP edge
//! to place, the edges connected to take them, and the bounds on both. The wire types and
//! the call's states are [`switchboard_core::outbound`]'s; the HTTP side is [`api`].
//!
//! A call is taken only within bounds: a credential's rate ([`CallsConfig::per_minute`],
//! a token bucket per credential), the calls under way at once ([`CallsConfig::max_live`]),
//! its destination (E.164 or a SIP URI, [`switchboard_sip::trunk::outbound::Destination`])
//! and its variables ([`MAX_VARIABLES`], [`MAX_VARIABLE_BYTES`]). It goes to a connected
//! edge (round robin) that has the trunk it names (each edge names its trunks as it
//! connects, [`FromEdge::Trunks`]; no name: an edge's default); with none connected it is
//! refused (503), and a trunk no connected edge has is `unknown_trunk` (404). Each step the edge reports
//! moves it forward ([`CallState::advance`]); a call whose edge goes away before it is
//! answered fails. The table keeps finished calls for [`KEEP_FINISHED`] (their status can
//! be read) and at most [`MAX_FINISHED`] of them.
//!
//! A call may name a URL its progress is POSTed to as it moves ([`webhook`]).
//!
//! The call's ticket is drawn here and told only to the edge; the session the edge opens
//! with it ([`Calls::redeem`], once) starts with the call in its memory.

pub mod api;
mod rate;
mod request;
pub mod webhook;

pub use request::{CallError, MAX_VARIABLE_BYTES, MAX_VARIABLES, PlaceRequest, check_variables};

use rate::MinuteBucket;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use switchboard_core::outbound::{AnsweredBy, AnsweringMachine, CallState, FromEdge, HungUpBy, ToEdge, is_trunk_name};
use switchboard_sip::trunk::outbound::Destination;
use tokio::sync::mpsc;

/// How long a finished call's status stays readable.
pub const KEEP_FINISHED: Duration = Duration::from_secs(3600);
/// Finished calls kept at most (the oldest forgotten first).
pub const MAX_FINISHED: usize = 10_000;
/// Messages queued for one edge at most; past it a call is refused (the edge is stuck).
const EDGE_QUEUE: usize = 64;

/// The bounds on outbound calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallsConfig {
    /// Calls under way at once on this gateway replica (not yet final).
    pub max_live: usize,
    /// Calls one credential may place a minute (bursts of that many).
    pub per_minute: u32,
}

impl Default for CallsConfig {
    fn default() -> Self {
        Self { max_live: 50, per_minute: 30 }
    }
}

/// A call as `GET /v1/calls/{id}` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallStatus {
    /// The call's id.
    pub id: String,
    /// Whom it calls.
    pub to: String,
    /// The agent (`namespace/name`).
    pub agent: String,
    /// The outbound trunk it was asked to go through (absent: the edge's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trunk: Option<String>,
    /// Where it is.
    pub state: CallState,
    /// The SIP status of its last step, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sip_status: Option<u16>,
    /// What happened, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The session the answered call opened (in the conversation record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Who answered, when the Agent detects answering machines: `human`, `machine` or
    /// `unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<AnsweredBy>,
    /// How long after the answer detection decided, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected_after_ms: Option<u64>,
    /// How long after the answer the callee first heard the agent, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_heard_after_ms: Option<u64>,
    /// When it was answered, milliseconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_at_ms: Option<u64>,
    /// How long it lasted from the answer to its end, in milliseconds (an answered call
    /// once over).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Who ended the answered call: `callee`, `agent`, `person` or `edge`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hung_up_by: Option<HungUpBy>,
    /// When it was placed, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When it last moved.
    pub updated_at_ms: u64,
}

struct Entry {
    status: CallStatus,
    owner: String,
    edge: u64,
    /// Until redeemed (the session opened) or the call is over.
    ticket: Option<String>,
    variables: BTreeMap<String, String>,
    finished: Option<Instant>,
    /// Where its progress goes, if anywhere.
    callback: Option<webhook::Callback>,
}

/// A connected edge: its id, what to send it, and its trunks' names (`None` until it names
/// them: its default only).
struct Edge {
    id: u64,
    sender: mpsc::Sender<ToEdge>,
    trunks: Option<Vec<String>>,
}

impl Edge {
    /// Whether it places calls through `trunk` (`None`: its default).
    fn has(&self, trunk: Option<&str>) -> bool {
        match (trunk, &self.trunks) {
            (None, _) => true,
            (Some(name), Some(names)) => names.iter().any(|n| n == name),
            (Some(_), None) => false,
        }
    }
}

#[derive(Default)]
struct Inner {
    calls: HashMap<String, Entry>,
    finished: VecDeque<String>,
    edges: Vec<Edge>,
    next_edge: u64,
    turn: usize,
    rates: HashMap<String, MinuteBucket>,
}

/// The outbound calls of one gateway (see the module docs).
pub struct Calls {
    config: CallsConfig,
    inner: Mutex<Inner>,
    /// Calls ended, by outcome (`switchboard_gateway_outbound_calls_total`).
    outcomes: prometheus::CounterVec,
    /// Who answered (`switchboard_gateway_outbound_answered_by_total`).
    answered_by: prometheus::CounterVec,
    /// The calls' status callbacks.
    callbacks: webhook::Callbacks,
}

impl std::fmt::Debug for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calls").field("config", &self.config).finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

impl Calls {
    /// No calls; `outcomes` counts the finished ones, `answered_by` who answered those the
    /// edge listened to.
    pub fn new(config: CallsConfig, outcomes: prometheus::CounterVec, answered_by: prometheus::CounterVec) -> Self {
        let unregistered = prometheus::CounterVec::new(prometheus::Opts::new("deliveries", "-"), &["outcome"]);
        let callbacks = webhook::Callbacks::new(None, unregistered.expect("a valid metric"));
        Self { config, inner: Mutex::default(), outcomes, answered_by, callbacks }
    }

    /// Calls may name a status callback, signed and bounded by `config`, its deliveries
    /// counted in `deliveries` (by `outcome`); `None`: they may not.
    #[must_use]
    pub fn with_webhooks(
        mut self,
        config: Option<webhook::CallWebhookConfig>,
        deliveries: prometheus::CounterVec,
    ) -> Self {
        self.callbacks = webhook::Callbacks::new(config, deliveries);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An edge connected: its id and what to send it.
    pub fn attach(&self) -> (u64, mpsc::Receiver<ToEdge>) {
        let (sender, receiver) = mpsc::channel(EDGE_QUEUE);
        let mut inner = self.lock();
        inner.next_edge += 1;
        let id = inner.next_edge;
        inner.edges.push(Edge { id, sender, trunks: None });
        (id, receiver)
    }

    /// The edge `id` went away: its calls not yet answered fail.
    pub fn detach(&self, id: u64, now: Instant) {
        let mut inner = self.lock();
        inner.edges.retain(|edge| edge.id != id);
        let orphans: Vec<String> = inner
            .calls
            .iter()
            .filter(|(_, e)| e.edge == id && e.status.state.rank_before_answer())
            .map(|(id, _)| id.clone())
            .collect();
        for call in orphans {
            let report = progress(&call, CallState::Failed, None, "the SIP edge placing it went away");
            self.apply(&mut inner, id, report, now);
        }
    }

    /// Takes a call of `owner` (a credential) for `agent` (`namespace/name`, checked by the
    /// caller) and hands it to an edge.
    pub fn place(
        &self,
        owner: &str,
        agent_route: (&str, &str),
        request: PlaceRequest,
        now: Instant,
    ) -> Result<CallStatus, CallError> {
        self.place_with(owner, agent_route, None, request, now)
    }

    /// [`Calls::place`] for an Agent with answering-machine detection
    /// (`spec.telephony.answeringMachine`), which the edge is told with the call.
    pub fn place_with(
        &self,
        owner: &str,
        agent_route: (&str, &str),
        answering_machine: Option<AnsweringMachine>,
        request: PlaceRequest,
        now: Instant,
    ) -> Result<CallStatus, CallError> {
        let destination = Destination::parse(request.to.trim()).map_err(|e| CallError::Invalid(e.to_string()))?;
        check_variables(&request.variables)?;
        if let Some(name) = request.trunk.as_deref().filter(|name| !is_trunk_name(name)) {
            let shown: String = name.chars().take(40).collect();
            return Err(CallError::Invalid(format!(
                "trunk {shown:?}: a trunk's name is 1-40 lower-case letters, digits and '-'"
            )));
        }
        let callback_url = match request.status_callback.as_deref() {
            Some(url) => Some(webhook::check_url(url.trim(), self.callbacks.config())?),
            None => None,
        };
        let mut inner = self.lock();
        self.sweep(&mut inner, now);
        let live = inner.calls.values().filter(|e| !e.status.state.is_final()).count();
        if live >= self.config.max_live {
            return Err(CallError::AtCapacity(self.config.max_live));
        }
        let per_minute = self.config.per_minute;
        let bucket = inner.rates.entry(owner.to_owned()).or_insert_with(|| MinuteBucket::new(per_minute, now));
        if !bucket.take(now) {
            return Err(CallError::Rate(per_minute));
        }
        if inner.edges.is_empty() {
            return Err(CallError::NoEdge);
        }
        let trunk = request.trunk.clone();
        if !inner.edges.iter().any(|edge| edge.has(trunk.as_deref())) {
            let mut known: Vec<String> = inner.edges.iter().flat_map(|e| e.trunks.iter().flatten().cloned()).collect();
            known.sort();
            known.dedup();
            return Err(CallError::UnknownTrunk { name: trunk.unwrap_or_default(), known });
        }
        let id = format!("call-{}", uuid::Uuid::new_v4());
        let ticket = uuid::Uuid::new_v4().simple().to_string();
        let place = ToEdge::Place {
            id: id.clone(),
            to: destination.to_string(),
            agent: format!("{}/{}", agent_route.0, agent_route.1),
            ticket: ticket.clone(),
            trunk: trunk.clone(),
            answering_machine,
        };
        // Round robin over the edges with the trunk; one whose queue is full (stuck) is
        // passed over.
        let count = inner.edges.len();
        let mut chosen = None;
        for step in 0..count {
            let edge = &inner.edges[(inner.turn + step) % count];
            if edge.has(trunk.as_deref()) && edge.sender.try_send(place.clone()).is_ok() {
                chosen = Some((edge.id, step));
                break;
            }
        }
        let Some((edge, step)) = chosen else { return Err(CallError::NoEdge) };
        inner.turn = (inner.turn + step + 1) % count;
        let at = now_ms();
        let status = CallStatus {
            id: id.clone(),
            to: destination.to_string(),
            agent: format!("{}/{}", agent_route.0, agent_route.1),
            trunk,
            state: CallState::Queued,
            sip_status: None,
            reason: None,
            session_id: None,
            answered_by: None,
            detected_after_ms: None,
            agent_heard_after_ms: None,
            answered_at_ms: None,
            duration_ms: None,
            hung_up_by: None,
            created_at_ms: at,
            updated_at_ms: at,
        };
        let mut callback = callback_url.and_then(|url| self.callbacks.start(url));
        if let Some(callback) = callback.as_mut() {
            self.callbacks.emit(callback, CallState::Queued.as_str(), &status, false);
        }
        let entry = Entry {
            status: status.clone(),
            owner: owner.to_owned(),
            edge,
            ticket: Some(ticket),
            variables: request.variables,
            finished: None,
            callback,
        };
        inner.calls.insert(id, entry);
        Ok(status)
    }

    /// The status of call `id`, if `owner` placed it.
    pub fn status(&self, owner: &str, id: &str) -> Option<CallStatus> {
        self.lock().calls.get(id).filter(|e| e.owner == owner).map(|e| e.status.clone())
    }

    /// A report of edge `edge`.
    pub fn report(&self, edge: u64, report: FromEdge, now: Instant) {
        let mut inner = self.lock();
        self.apply(&mut inner, edge, report, now);
    }

    fn apply(&self, inner: &mut Inner, edge: u64, report: FromEdge, now: Instant) {
        let (id, state, status, reason, session_id, hung_up_by) = match report {
            FromEdge::Progress { id, state, status, reason, session_id, hung_up_by } => {
                (id, state, status, reason, session_id, hung_up_by)
            }
            FromEdge::Trunks { names } => {
                let names: Vec<String> = names.into_iter().filter(|n| is_trunk_name(n)).take(64).collect();
                tracing::info!(edge, trunks = ?names, "a SIP edge's outbound trunks");
                if let Some(found) = inner.edges.iter_mut().find(|e| e.id == edge) {
                    found.trunks = Some(names);
                }
                return;
            }
            FromEdge::Detected { id, answered_by, after_ms } => {
                let Some(entry) = inner.calls.get_mut(&id).filter(|e| e.edge == edge) else { return };
                if entry.status.answered_by.is_none() {
                    self.answered_by.with_label_values(&[answered_by.as_str()]).inc();
                }
                entry.status.answered_by = Some(answered_by);
                entry.status.detected_after_ms = Some(after_ms);
                entry.status.updated_at_ms = now_ms();
                if let Some(callback) = entry.callback.as_mut() {
                    self.callbacks.emit(callback, "answered_by", &entry.status, false);
                }
                tracing::info!(call = %id, answered_by = answered_by.as_str(), after_ms, "outbound call: who answered");
                return;
            }
            FromEdge::Heard { id, after_ms } => {
                let Some(entry) = inner.calls.get_mut(&id).filter(|e| e.edge == edge) else { return };
                entry.status.agent_heard_after_ms.get_or_insert(after_ms);
                entry.status.updated_at_ms = now_ms();
                tracing::info!(call = %id, after_ms, "outbound call: the callee first heard the agent");
                return;
            }
        };
        let Some(entry) = inner.calls.get_mut(&id).filter(|e| e.edge == edge) else { return };
        let Some(next) = entry.status.state.advance(state) else { return };
        entry.status.state = next;
        entry.status.sip_status = status.or(entry.status.sip_status);
        entry.status.reason = reason.map(|r| r.chars().take(256).collect()).or(entry.status.reason.take());
        entry.status.session_id = session_id.or(entry.status.session_id.take());
        let at = now_ms();
        entry.status.updated_at_ms = at;
        if next == CallState::Answered {
            entry.status.answered_at_ms = Some(at);
        }
        if next.is_final() {
            entry.status.duration_ms = entry.status.answered_at_ms.map(|answered| at.saturating_sub(answered));
            entry.status.hung_up_by = hung_up_by.filter(|_| next == CallState::Completed);
        }
        tracing::info!(call = %id, state = next.as_str(), sip_status = ?entry.status.sip_status, "outbound call");
        if let Some(callback) = entry.callback.as_mut() {
            self.callbacks.emit(callback, next.as_str(), &entry.status, next.is_final());
        }
        if next.is_final() {
            entry.callback = None;
            entry.ticket = None;
            entry.finished = Some(now);
            inner.finished.push_back(id);
            self.outcomes.with_label_values(&[next.as_str()]).inc();
        }
    }

    /// The context of the call whose ticket is `ticket`, once: its agent (`namespace/name`) and the
    /// memory value its session starts with — with `answeredBy` when the edge that holds the
    /// ticket said who answered (answering-machine detection). `None`: no call under way has it.
    pub fn redeem(&self, ticket: &str, answered_by: Option<AnsweredBy>) -> Option<(String, serde_json::Value)> {
        let mut inner = self.lock();
        let entry = inner.calls.values_mut().find(|e| e.ticket.as_deref() == Some(ticket))?;
        entry.ticket = None;
        let mut value = serde_json::json!({
            "id": entry.status.id,
            "to": entry.status.to,
            "variables": entry.variables,
        });
        if let Some(by) = answered_by {
            value["answeredBy"] = serde_json::Value::from(by.as_str());
        }
        Some((entry.status.agent.clone(), value))
    }

    /// Forgets finished calls past [`KEEP_FINISHED`] or [`MAX_FINISHED`], and rate buckets
    /// that refilled.
    fn sweep(&self, inner: &mut Inner, now: Instant) {
        while let Some(id) = inner.finished.front() {
            let old =
                inner.calls.get(id).and_then(|e| e.finished).is_none_or(|at| now.duration_since(at) > KEEP_FINISHED);
            if !old && inner.finished.len() <= MAX_FINISHED {
                break;
            }
            if let Some(id) = inner.finished.pop_front() {
                inner.calls.remove(&id);
            }
        }
        if inner.rates.len() > 1024 {
            inner.rates.retain(|_, bucket| !bucket.is_full(now));
        }
    }
}

fn progress(id: &str, state: CallState, status: Option<u16>, reason: &str) -> FromEdge {
    FromEdge::Progress {
        id: id.to_owned(),
        state,
        status,
        reason: Some(reason.to_owned()),
        session_id: None,
        hung_up_by: None,
    }
}

trait BeforeAnswer {
    fn rank_before_answer(self) -> bool;
}

impl BeforeAnswer for CallState {
    fn rank_before_answer(self) -> bool {
        matches!(self, CallState::Queued | CallState::Dialing | CallState::Ringing)
    }
}

#[cfg(test)]
mod tests;
