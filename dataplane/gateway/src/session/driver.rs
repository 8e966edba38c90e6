//! The relay task around a [`Machine`]: it reads the client's socket, the runtime
//! connection, timers and the gateway's signals, feeds the machine, and carries out its
//! effects — sends, opening and closing runtime sessions, the resume store, metrics and
//! logs. It decides nothing: what it waits on is the machine's [`Phase`].

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard_core::protocol::ClientMessage;
use switchboard_serve::{Arrival, frames};
use tokio_tungstenite::tungstenite::Message;
use tracing::Instrument;

use super::machine::{
    ClientFrame, Cx, Effect, Event, Machine, OpenError, OpenRequest, Phase, Recorded, RuntimeFrame, SendFailure,
};
use super::{Client, close_client};
use crate::Gateway;
use crate::auth::Admission;
use crate::balancer::Lease;
use crate::resume::Parked;
use crate::upstream::{self, Opening, Socket};

mod books;
mod ending;
mod gate;
pub(crate) mod keeper;
mod signals;
mod to_client;
mod to_runtime;

use books::Books;
use ending::finish;
use gate::Gate;
use keeper::Keeper;
use signals::Signals;
use to_client::ClientSide;
use to_runtime::AudioBatch;

/// A session's relay: the machine and everything it does I/O with.
pub(super) struct Relay {
    gateway: Arc<Gateway>,
    machine: Machine,
    /// A resumed session as it was taken out of the store, with its key: put back if it
    /// cannot be opened.
    parked: Option<(String, Parked)>,
    client: Client,
    admission: Admission,
    /// The session's span. The relay enters it for what it logs or traces (opening a
    /// runtime session, notes, the store, the end), not for every frame it relays: entered
    /// at every poll it cost about 4 % of a voice relay's CPU (BENCHMARKS.md, `gateway`).
    span: tracing::Span,
}

impl Relay {
    /// The relay of `machine`'s session with `client`, admitted under `admission`; `parked`:
    /// the resumed session as it was taken out of the store, with its key.
    pub(super) fn new(
        gateway: Arc<Gateway>,
        machine: Machine,
        parked: Option<(String, Parked)>,
        client: Client,
        admission: Admission,
        span: tracing::Span,
    ) -> Self {
        Self { gateway, machine, parked, client, admission, span }
    }
}

/// The runtime connection of a session, with its hold on the pod. One socket, not split
/// into halves: the relay is one task, and each half's lock cost a little on every frame.
struct Upstream {
    ws: Socket,
    /// Every read of `ws` goes through it.
    gate: Gate,
    _lease: Lease,
    /// The caller's audio held to go in a larger frame.
    batch: AudioBatch,
}

/// What the relay holds besides the machine, each part owning its fields.
struct State {
    upstream: Option<Upstream>,
    client: ClientSide,
    books: Books,
    /// The session's hold in the store (stopped before the session parks or ends).
    keeper: Option<Keeper>,
}

/// Runs the session until it ends or is parked.
pub(super) async fn run(relay: Relay) {
    let Relay { gateway, mut machine, parked, mut client, admission, span } = relay;
    let credential = admission.key.clone().unwrap_or_default();
    let books = Books::open(&gateway, &machine, credential, parked.is_some());
    let mut state = State { upstream: None, client: ClientSide::new(admission), books, keeper: None };
    let keeper = span.in_scope(|| Keeper::start(gateway.store.clone(), &gateway.config, machine.id()));
    let taken = keeper.taken();
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
    // The timer is set for the caller's audio held for the runtime, not for the others.
    let mut batch_timer = false;
    // Every read of the client's socket goes through it.
    let client_gate = Gate::new();
    let draining = gateway.store.is_shared().then(|| gateway.draining.clone());
    let switches = gateway.outages.switches.subscribe();
    let mut signals = Signals::watch(draining, superseded.clone(), taken, gateway.shutdown.clone(), switches);
    loop {
        carry_out(&gateway, &mut machine, &mut state, &mut client, &superseded, &span).await;
        // Audio held for the runtime waits only while frames can come to fill it.
        if !matches!(machine.phase(), Phase::Live) {
            send_held(&gateway, &mut machine, &mut state).await;
        }
        if state.client.queued()
            && !more_for_client(&machine, &state, &client)
            && let Err(failure) = state.client.flush(&mut client).await
        {
            feed(&gateway, &mut machine, Event::ClientSendFailed(failure));
            continue;
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
                // The held audio's deadline, when it is the nearest: the timer goes back to
                // the others' when it goes off.
                if let Some(due) = up.batch.deadline()
                    && due < timer.deadline().into_std()
                {
                    timer.as_mut().reset(due.into());
                    batch_timer = true;
                }
                tokio::select! {
                    biased;
                    event = signals.next() => event,
                    Ok(()) = directory.changed(), if machine.pod_draining() => Event::DirectoryChanged,
                    frame = client_gate.next(&mut client) => {
                        if let Arrival::After(at) = client.arrival() {
                            machine.client_caught_up(at);
                        }
                        let frame = client_frame(frame);
                        let counted = matches!(frame, ClientFrame::Text(_) | ClientFrame::Binary(_));
                        Event::Client(frame, state.client.allow(counted))
                    }
                    frame = up.gate.next(&mut up.ws) => runtime_event(runtime_frame(frame), &mut state),
                    // Last: what waits on either socket is read before a deadline is judged,
                    // so a relay that fell behind (a slow handoff, a busy machine) does not
                    // take a client or runtime whose frames it has not read yet for silent.
                    () = &mut timer => {
                        let now = Instant::now();
                        if std::mem::take(&mut batch_timer) {
                            // Set for held audio (which may have gone in a full batch since).
                            if state.upstream.as_ref().and_then(|up| up.batch.deadline()).is_some_and(|due| due <= now) {
                                send_held(&gateway, &mut machine, &mut state).await;
                            }
                            timer.as_mut().reset(machine.idle_deadline().min(next_ping).into());
                            continue;
                        }
                        let event = if now >= next_ping {
                            // The next ping an interval from now, however late this one is.
                            next_ping = now + every;
                            if gateway.budget.over() {
                                machine.shed_replay();
                            }
                            state.books.held(&machine);
                            Event::PingDue
                        } else {
                            // The machine tells a deadline that moved on from one that passed.
                            Event::IdleDue
                        };
                        timer.as_mut().reset(machine.idle_deadline().min(next_ping).into());
                        event
                    }
                }
            }
            Phase::Done(ending) => {
                let ending = ending.clone();
                drop(signals);
                finish(&gateway, &mut machine, ending, parked, state, &mut client).instrument(span).await;
                return;
            }
        };
        state.books.watch(&gateway, &machine, &event);
        feed(&gateway, &mut machine, event);
    }
}

fn feed(gateway: &Gateway, machine: &mut Machine, event: Event) {
    let directory = gateway.directory.borrow();
    machine.handle(event, &Cx { now: Instant::now(), directory: &directory, outages: &gateway.outages.switches });
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
                if !state.client.done() && !state.client.feed(client, frame.into_message()) {
                    feed(gateway, machine, Event::ClientSendFailed(SendFailure::Gone));
                }
            }
            Effect::CloseClient(close) => {
                state.client.closing();
                close_client(client, close).instrument(span.clone()).await;
            }
            Effect::Runtime { message, keep } => {
                // The caller's audio joins the held batch; anything else goes after it.
                let (held, message) = match (state.upstream.as_mut(), message) {
                    (Some(up), Message::Binary(frame)) if up.batch.joins(&frame) => {
                        match up.batch.push(&frame, Instant::now()) {
                            Some(batch) => (None, Message::Binary(batch)),
                            None => continue,
                        }
                    }
                    (up, message) => (up.and_then(|up| up.batch.take()), message),
                };
                if let Some(held) = held {
                    relay_to_runtime(gateway, machine, state, Message::Binary(held), true).await;
                }
                relay_to_runtime(gateway, machine, state, message, keep).await;
            }
            Effect::PingClient => {
                if let Err(failure) = state.client.send(client, Message::Ping(Bytes::new())).await {
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
                // What the closing runtime was sent before goes to it, as it came.
                send_held(gateway, machine, state).await;
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
            Effect::Note(note) => span.in_scope(|| state.books.observe(gateway, machine, note)),
            Effect::Record(recorded) => {
                if let Some(log) = state.books.log_mut() {
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

/// Sends `message` to the runtime (`keep`: kept for the next connection if it cannot go):
/// one that does not take it in time is given up ([`to_runtime::given_up`]).
async fn relay_to_runtime(gateway: &Gateway, machine: &mut Machine, state: &mut State, message: Message, keep: bool) {
    let Some(up) = state.upstream.as_mut() else {
        if keep {
            feed(gateway, machine, Event::RuntimeSendFailed(message));
        }
        return;
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

/// Sends the caller's audio held for the runtime, if any.
async fn send_held(gateway: &Gateway, machine: &mut Machine, state: &mut State) {
    if let Some(held) = state.upstream.as_mut().and_then(|up| up.batch.take()) {
        relay_to_runtime(gateway, machine, state, Message::Binary(held), true).await;
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
    let OpenRequest { target, avoid, carried, variant, region } = request;
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
        region,
        // The relay runs in the session's span (see `super::serve`): the runtime's joins it.
        traceparent: switchboard_telemetry::context::traceparent(&tracing::Span::current()),
        audio_batch_ms: None,
    };
    let batch = AudioBatch::new(gateway.config.audio_batch, machine.audio());
    opening.audio_batch_ms = batch.hold_ms();
    if let Some(record) = &gateway.record
        && let Some(caller) = crate::record::callers::restore(record, &mut opening).await
        && let Some(log) = state.books.log_mut()
    {
        log.verified(&target.key(), caller);
    }
    let addr = lease.addr();
    let ws = upstream::open(addr, opening, &gateway.key, gateway.config.connect_timeout).await?;
    state.upstream = Some(Upstream { ws, gate: Gate::new(), _lease: lease, batch });
    Ok(addr)
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
