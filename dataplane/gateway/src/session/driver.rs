//! The relay task around a [`Machine`]: it reads the client's socket, the runtime
//! connection, timers and the gateway's signals, feeds the machine, and carries out its
//! effects — sends, opening and closing runtime sessions, the resume store, metrics and
//! logs. It decides nothing: what it waits on is the machine's [`Phase`].

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard_core::protocol::ClientMessage;
use switchboard_serve::frames;
use tokio_tungstenite::tungstenite::Message;
use tracing::Instrument;

use super::machine::{
    ClientFrame, Cx, Effect, Event, Machine, Note, OpenError, OpenRequest, Phase, Recorded, RuntimeFrame, SendFailure,
};
use super::{Client, close_client};
use crate::Gateway;
use crate::auth::Admission;
use crate::balancer::Lease;
use crate::budget::{Account, SESSION_OVERHEAD};
use crate::record::SessionLog;
use crate::resume::Parked;
use crate::upstream::{self, Opening, Socket};

mod ending;
mod gate;
pub(crate) mod keeper;
mod signals;
mod to_client;
mod to_runtime;

use ending::finish;
use gate::Gate;
use keeper::Keeper;
use signals::Signals;

/// A session's relay: the machine and everything it does I/O with.
pub(super) struct Relay {
    pub(super) gateway: Arc<Gateway>,
    pub(super) machine: Machine,
    /// A resumed session as it was taken out of the store, with its key: put back if it
    /// cannot be opened.
    pub(super) parked: Option<(String, Parked)>,
    pub(super) client: Client,
    pub(super) admission: Admission,
    /// The session's span. The relay enters it for what it logs or traces (opening a
    /// runtime session, notes, the store, the end), not for every frame it relays: entered
    /// at every poll it cost about 4 % of a voice relay's CPU (BENCHMARKS.md, `gateway`).
    pub(super) span: tracing::Span,
}

/// The runtime connection of a session, with its hold on the pod. One socket, not split
/// into halves: the relay is one task, and each half's lock cost a little on every frame.
struct Upstream {
    ws: Socket,
    /// Every read of `ws` goes through it.
    gate: Gate,
    _lease: Lease,
}

/// What the relay holds besides the machine.
struct State {
    upstream: Option<Upstream>,
    /// The Agent counted in the live-sessions gauge.
    live: Option<String>,
    /// The client's socket was closed (moved elsewhere) or failed: no more sends.
    client_done: bool,
    /// Messages for the client wait in its socket's buffer, to be written together with
    /// those of the runtime's frames already read ([`more_for_client`]). Not the same as
    /// the socket having bytes queued: the socket's own answers (pongs, a close echo) go
    /// out with its reads, and the relay does not wait on a client that reads nothing for
    /// them.
    client_queued: bool,
    admission: Option<Admission>,
    /// What the session holds, toward the gateway's memory budget (refreshed at every
    /// ping interval; cheap enough, but not for every frame).
    account: Account,
    /// The session's part of the conversation record, when kept.
    log: Option<SessionLog>,
    /// The client's credential (its key's name, `jwt:<subject>`; empty without checks).
    credential: String,
    /// The session's hold in the store (stopped before the session parks or ends).
    keeper: Option<Keeper>,
    /// The turns' clock for the Agent's outage breaker ([`crate::outage::turns`]).
    turns: crate::outage::Turns,
}

/// Runs the session until it ends or is parked.
pub(super) async fn run(relay: Relay) {
    let Relay { gateway, mut machine, parked, mut client, admission, span } = relay;
    let mut account = gateway.budget.account();
    account.set(SESSION_OVERHEAD + machine.held_bytes());
    let credential = admission.key.clone().unwrap_or_default();
    let log = gateway.record.as_ref().map(|recorder| {
        let mut log = SessionLog::new(recorder.clone(), machine.id());
        // Every rule of the namespace from the first line: what is said at triage is as
        // secret as what is said at the Agent that declares the rule.
        let namespace = &machine.target().route.namespace;
        log.reached(&gateway.directory.borrow().table().redact_rules(namespace));
        log.reached(&machine.target().route.redact);
        let agent = machine.target().key();
        log.started(&agent, &credential, parked.is_some(), machine.voice().as_deref(), machine.modalities());
        log
    });
    let mut state = State {
        upstream: None,
        live: None,
        client_done: false,
        client_queued: false,
        admission: Some(admission),
        account,
        log,
        credential,
        keeper: None,
        turns: crate::outage::Turns::default(),
    };
    let keeper = span.in_scope(|| Keeper::start(gateway.store.clone(), &gateway.config, machine.id()));
    let taken = keeper.taken.clone();
    state.keeper = Some(keeper);
    let superseded = tokio_util::sync::CancellationToken::new();
    let mut directory = gateway.directory.clone();
    directory.mark_unchanged();
    // One timer for the idle deadline and the ping interval, set to the nearer: it is
    // polled at every wake-up, and each timer polled costs (about 1 % of a voice relay's
    // CPU apiece, BENCHMARKS.md `gateway`).
    let every = gateway.config.ping_interval;
    let mut next_ping = Instant::now() + every;
    let timer = tokio::time::sleep_until(machine.idle_deadline().min(next_ping).into());
    tokio::pin!(timer);
    // Every read of the client's socket goes through it.
    let client_gate = Gate::new();
    let draining = gateway.store.is_shared().then(|| gateway.draining.clone());
    let mut signals = Signals::watch(draining, superseded.clone(), taken, gateway.shutdown.clone());
    loop {
        carry_out(&gateway, &mut machine, &mut state, &mut client, &superseded, &span).await;
        if state.client_queued && !more_for_client(&machine, &state, &client) {
            state.client_queued = false;
            if let Err(failure) = to_client::flush(&mut client).await {
                state.client_done = true;
                feed(&gateway, &mut machine, Event::ClientSendFailed(failure));
                continue;
            }
        }
        let event = match machine.phase() {
            Phase::Opening(request) => {
                let request = request.clone();
                Event::Opened(open(&gateway, &machine, request, &mut state).instrument(span.clone()).await)
            }
            Phase::Backoff(pause) => {
                tokio::time::sleep(pause).await;
                Event::RetryDue
            }
            Phase::Settling(deadline) => match state.upstream.as_mut() {
                None => Event::Runtime(RuntimeFrame::Lost),
                Some(up) => match tokio::time::timeout_at(deadline.into(), up.gate.next(&mut up.ws)).await {
                    Err(_) => Event::SettleDue,
                    Ok(frame) => runtime_event(runtime_frame(frame), &mut state),
                },
            },
            Phase::Live => {
                let Some(up) = state.upstream.as_mut() else {
                    feed(&gateway, &mut machine, Event::Runtime(RuntimeFrame::Lost));
                    continue;
                };
                tokio::select! {
                    biased;
                    event = signals.next() => event,
                    Ok(()) = directory.changed(), if machine.pod_draining() => Event::DirectoryChanged,
                    () = &mut timer => {
                        let now = Instant::now();
                        let event = if now >= next_ping {
                            // The next ping an interval from now, however late this one is.
                            next_ping = now + every;
                            if gateway.budget.over() {
                                machine.shed_replay();
                            }
                            state.account.set(SESSION_OVERHEAD + machine.held_bytes());
                            Event::PingDue
                        } else {
                            // The machine tells a deadline that moved on from one that passed.
                            Event::IdleDue
                        };
                        timer.as_mut().reset(machine.idle_deadline().min(next_ping).into());
                        event
                    }
                    frame = client_gate.next(&mut client) => {
                        let frame = client_frame(frame);
                        let counted = matches!(frame, ClientFrame::Text(_) | ClientFrame::Binary(_));
                        let budget = match &state.admission {
                            Some(admission) if counted => admission.allow_message(),
                            _ => Ok(()),
                        };
                        Event::Client(frame, budget)
                    }
                    frame = up.gate.next(&mut up.ws) => runtime_event(runtime_frame(frame), &mut state),
                }
            }
            Phase::Done(ending) => {
                let ending = ending.clone();
                drop(signals);
                finish(&gateway, &mut machine, ending, parked, state, &mut client).instrument(span).await;
                return;
            }
        };
        if state.turns.watching() {
            watch_turn(&gateway, &machine, &mut state, &event);
        }
        feed(&gateway, &mut machine, event);
    }
}

/// Shows the turns' clock what is relayed; a turn it settles goes to the Agent's breaker.
fn watch_turn(gateway: &Gateway, machine: &Machine, state: &mut State, event: &Event) {
    let now = Instant::now();
    let turn = match event {
        Event::Client(ClientFrame::Text(text), _) => {
            state.turns.client_text(text.as_str(), now);
            None
        }
        Event::Runtime(RuntimeFrame::Text(text)) => state.turns.runtime_text(text.as_str(), now),
        Event::Runtime(RuntimeFrame::Binary(_)) => state.turns.runtime_binary(now),
        Event::PingDue => state.turns.tick(now),
        _ => None,
    };
    let Some(turn) = turn else { return };
    let route = &machine.target().route;
    let outage = gateway.directory.borrow().table().outage(&route.namespace, &route.name).cloned();
    if let Some(outage) = outage {
        gateway.outages.record(route, &outage, turn, now);
    }
}

/// The turns' clock for the session's Agent now: its `firstAudioSeconds` when its breaker
/// is on.
fn watch_agent(gateway: &Gateway, machine: &Machine, state: &mut State) {
    let route = &machine.target().route;
    let limit = gateway.directory.borrow().table().outage(&route.namespace, &route.name).and_then(|outage| {
        outage.breaker.enabled.then(|| Duration::from_secs(u64::from(outage.breaker.first_audio_seconds)))
    });
    state.turns.agent(limit);
}

fn feed(gateway: &Gateway, machine: &mut Machine, event: Event) {
    let directory = gateway.directory.borrow();
    machine.handle(event, &Cx { now: Instant::now(), directory: &directory });
}

/// A runtime frame: the connection is gone once it closed or broke.
fn runtime_event(frame: RuntimeFrame, state: &mut State) -> Event {
    if matches!(frame, RuntimeFrame::Closed { .. } | RuntimeFrame::Lost) {
        state.upstream = None;
    }
    Event::Runtime(frame)
}

/// Carries out the machine's effects, feeding back what failed.
async fn carry_out(
    gateway: &Arc<Gateway>,
    machine: &mut Machine,
    state: &mut State,
    client: &mut Client,
    superseded: &tokio_util::sync::CancellationToken,
    span: &tracing::Span,
) {
    while let Some(effect) = machine.next_effect() {
        match effect {
            Effect::Client(frame) => {
                if state.client_done {
                    continue;
                }
                if client.feed(frame.into_message()).is_ok() {
                    state.client_queued = true;
                } else {
                    state.client_done = true;
                    feed(gateway, machine, Event::ClientSendFailed(SendFailure::Gone));
                }
            }
            Effect::CloseClient(close) => {
                // The key's session slot first, so a client that reconnects at once gets in.
                state.admission = None;
                state.client_done = true;
                close_client(client, close).instrument(span.clone()).await;
            }
            Effect::Runtime { message, keep } => {
                let Some(up) = state.upstream.as_mut() else {
                    if keep {
                        feed(gateway, machine, Event::RuntimeSendFailed(message));
                    }
                    continue;
                };
                let copy = keep.then(|| message.clone());
                let sent = to_runtime::send(up, message).await;
                if sent != to_runtime::Sent::Done
                    && let Some(copy) = copy
                {
                    feed(gateway, machine, Event::RuntimeSendFailed(copy));
                }
                if sent == to_runtime::Sent::Stuck {
                    to_runtime::given_up(gateway, machine, state);
                }
            }
            Effect::PingClient => {
                if !state.client_done
                    && let Err(failure) = to_client::send(client, Message::Ping(Bytes::new())).await
                {
                    state.client_done = true;
                    feed(gateway, machine, Event::ClientSendFailed(failure));
                }
            }
            Effect::PingRuntime => {
                // A failure shows on the read side.
                if let Some(up) = state.upstream.as_mut()
                    && to_runtime::send(up, Message::Ping(Bytes::new())).await == to_runtime::Sent::Stuck
                {
                    to_runtime::given_up(gateway, machine, state);
                }
            }
            Effect::CloseRuntime => {
                if let Some(mut up) = state.upstream.take() {
                    let _ = tokio::time::timeout(Duration::from_secs(1), up.ws.close(None)).await;
                }
            }
            Effect::AssertIdentity(caller) => {
                let Some(up) = state.upstream.as_mut() else { continue };
                let target = &machine.target().route;
                let assertion =
                    upstream::identity(&gateway.key, &caller, &target.namespace, &target.name, machine.id());
                let Some(assertion) = assertion else { continue };
                let message = ClientMessage::IdentityAssertion { assertion };
                // A failure shows on the read side; the next connection's grant carries one.
                if let Ok(text) = serde_json::to_string(&message)
                    && to_runtime::send(up, Message::text(text)).await == to_runtime::Sent::Stuck
                {
                    to_runtime::given_up(gateway, machine, state);
                }
            }
            Effect::Hold { key, previous } => {
                {
                    let mut attached = gateway.attached.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(old) = &previous {
                        attached.remove(old);
                    }
                    attached.insert(key.clone(), superseded.clone());
                }
                // What a resume through another replica takes, should this one die.
                let snapshot = gateway.store.is_shared().then(|| Box::new(machine.snapshot(None)));
                if let Some(keeper) = &state.keeper {
                    keeper.hold(key, previous, snapshot).instrument(span.clone()).await;
                }
            }
            Effect::Snapshot(snapshot) => {
                let Some(keeper) = &state.keeper else { continue };
                if snapshot.handoff.is_some() {
                    // Written before the target is opened: a replica taking over makes the
                    // handoff too.
                    keeper.snapshot_now(snapshot).instrument(span.clone()).await;
                } else {
                    keeper.snapshot(snapshot);
                }
            }
            Effect::Note(note) => span.in_scope(|| observe(gateway, machine, state, note)),
            Effect::Record(recorded) => {
                if let Some(log) = state.log.as_mut() {
                    let agent = machine.target().key();
                    span.in_scope(|| match recorded {
                        Recorded::Server(text) => log.server(&agent, text.as_str()),
                        Recorded::Client(text) => log.client(&agent, text.as_str()),
                    });
                }
            }
        }
    }
}

/// Opens the runtime session the machine asks for, on a ready pod of its target.
async fn open(
    gateway: &Gateway,
    machine: &Machine,
    request: OpenRequest,
    state: &mut State,
) -> Result<std::net::SocketAddr, OpenError> {
    state.upstream = None;
    let OpenRequest { target, avoid, carried, variant } = request;
    let Some(lease) = gateway.balancer.pick(&target.ready, avoid) else {
        return Err(OpenError::NoReadyPod { agent: target.route.name.clone() });
    };
    let mut opening = Opening {
        session_id: machine.id(),
        namespace: &target.route.namespace,
        agent: &target.route.name,
        path: &target.route.path,
        voice: machine.voice().clone(),
        modalities: machine.modalities().to_vec(),
        model: machine.model_for(&target.route.name),
        audio: machine.audio().cloned(),
        carried,
        variant,
        // The relay runs in the session's span (see `super::serve`): the runtime's joins it.
        traceparent: switchboard_telemetry::context::traceparent(&tracing::Span::current()),
    };
    if let Some(record) = &gateway.record
        && let Some(caller) = crate::record::callers::restore(record, &mut opening).await
        && let Some(log) = state.log.as_mut()
    {
        log.verified(&target.key(), caller);
    }
    let addr = lease.addr();
    let ws = upstream::open(addr, opening, &gateway.key, gateway.config.connect_timeout).await?;
    state.upstream = Some(Upstream { ws, gate: Gate::new(), _lease: lease });
    Ok(addr)
}

/// Counts and records the variant of `agent` the session runs, as it reaches the Agent.
fn reached_variant(machine: &Machine, state: &State, metrics: &crate::metrics::Metrics, agent: &str) {
    let Some(variant) = machine.variant() else { return };
    metrics.variant_sessions.with_label_values(&[agent, variant]).inc();
    tracing::info!(session_id = %machine.id(), %agent, variant, "variant");
    if let Some(log) = &state.log {
        log.variant(agent, variant);
    }
}

/// Metrics and logs for a note of the machine.
fn observe(gateway: &Gateway, machine: &Machine, state: &mut State, note: Note) {
    let metrics = &gateway.metrics;
    let (id, turn, agent) = (machine.id(), machine.turn(), machine.target().key());
    match note {
        Note::Routed => {
            metrics.routed.with_label_values(&[&agent]).inc();
            metrics.live.with_label_values(&[&agent]).inc();
            reached_variant(machine, state, metrics, &agent);
            state.live = Some(agent);
            watch_agent(gateway, machine, state);
        }
        Note::Resumed => {
            metrics.resumed.with_label_values(&[&agent]).inc();
            metrics.live.with_label_values(&[&agent]).inc();
            tracing::info!(session_id = %id, %agent, "resumed");
            state.live = Some(agent);
            watch_agent(gateway, machine, state);
        }
        Note::Handoff { from, to } => {
            if let Some(live) = state.live.replace(to.clone()) {
                metrics.live.with_label_values(&[&live]).dec();
            }
            metrics.live.with_label_values(&[&to]).inc();
            metrics.handoffs.with_label_values(&[&from, &to]).inc();
            reached_variant(machine, state, metrics, &to);
            watch_agent(gateway, machine, state);
            tracing::info!(session_id = %id, turn, %from, %to, "handoff");
            if let Some(log) = state.log.as_mut() {
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
            if let Some(log) = &state.log {
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

fn client_frame(frame: Option<Result<Message, frames::Error>>) -> ClientFrame {
    match frame {
        Some(Ok(Message::Text(text))) => ClientFrame::Text(text),
        Some(Ok(Message::Binary(data))) => ClientFrame::Binary(data),
        Some(Ok(Message::Ping(_) | Message::Pong(_))) => ClientFrame::Control,
        Some(Ok(Message::Close(_))) => ClientFrame::Close,
        Some(Ok(Message::Frame(_))) | None => ClientFrame::Gone,
        Some(Err(frames::Error::TooLong { .. })) => ClientFrame::Oversized,
        Some(Err(_)) => ClientFrame::Gone,
    }
}

/// A runtime frame for the machine: its messages as they came (their bytes move on without
/// a copy).
fn runtime_frame(frame: Option<Result<Message, frames::Error>>) -> RuntimeFrame {
    match frame {
        Some(Ok(Message::Text(text))) => RuntimeFrame::Text(text),
        Some(Ok(Message::Binary(data))) => RuntimeFrame::Binary(data),
        Some(Ok(Message::Ping(_) | Message::Pong(_))) => RuntimeFrame::Control,
        Some(Ok(Message::Close(frame))) => {
            let (code, reason) =
                frame.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((1005, String::new()));
            RuntimeFrame::Closed { code, reason }
        }
        Some(Ok(Message::Frame(_))) | None | Some(Err(_)) => RuntimeFrame::Lost,
    }
}

/// Most bytes held for the client while the runtime's frames already read are relayed.
const MOST_QUEUED: usize = 64 * 1024;

/// Whether the client's queued messages may wait for more: the runtime's next frame is
/// already read, so it is relayed first and both go out in one write (a voice reply's
/// frames often come several to a read). The wait is the time to relay what is in memory.
fn more_for_client(machine: &Machine, state: &State, client: &Client) -> bool {
    matches!(machine.phase(), Phase::Live)
        && client.queued() < MOST_QUEUED
        && state.upstream.as_ref().is_some_and(|up| up.ws.frame_buffered())
}
