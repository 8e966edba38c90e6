//! The session machine: every rule of a gateway session, with no I/O. The relay task
//! ([`super::driver`]) feeds it [`Event`]s — a client frame, a runtime frame or close, the
//! result of opening a runtime session, a timer, a directory change, a drain — and carries
//! out the [`Effect`]s it queues (send to the client or the runtime, close the runtime,
//! hold a resume key, count and log). What the task waits on next is the machine's
//! [`Phase`]: opening a runtime session, a pause before the next attempt, relaying, letting
//! the runtime finish its turn after the client went (settling), or done.
//!
//! [`Machine`] is a coordinator over sub-states that own their fields, each in its module
//! with the rules that touch it alone and their unit tests:
//! - [`state`]: the phase, with the data that belongs to one phase alone (why a runtime
//!   session is being opened, the attempt a pause waits for, whether the serving pod
//!   drains); every move between phases happens there;
//! - [`runtime`]: the runtime side — the open connection's pod and when it was heard, the
//!   messages waiting for the next connection, its held `bidi_connection_close`, the stream
//!   generation, the age of its identity assertion;
//! - [`client`]: the client side — when it was heard and the session was last active, its
//!   message rate, its resume key, a restored gap, the number of the last snapshot;
//! - [`hops`]: handoff tracking — the handoffs of the current turn, the gap of the last;
//! - [`settings`]: what its runtime sessions open with, as the client chose it (voice,
//!   modalities, model, audio) and which pods it reaches;
//! - [`super::kept`] (the conversation: memory, history, inputs in flight) and
//!   [`crate::resume::Replay`] (the messages kept for the client), types of their own.
//!
//! The rules that span them are `impl Machine` blocks by concept: the relay of frames here,
//! opening a runtime session and what each purpose does with it ([`open`]), handoffs
//! ([`handoff`]), moving between pods ([`moves`]), parking and resuming ([`park`]), the
//! verified caller's identity assertion ([`identity`]), telling the client of its Agent's
//! outage mode and serving it in text in one ([`outage`]), and what the driver reads
//! ([`accessors`]). Every field is private to this module tree; the session's tests read
//! and set what they need through `test_access` (compiled for tests only).

mod accessors;
mod client;
pub(super) mod handoff;
mod hops;
mod identity;
pub(super) mod moves;
mod open;
mod outage;
mod park;
mod runtime;
mod settings;
mod state;
#[cfg(test)]
mod test_access;

use std::collections::VecDeque;
use std::time::Instant;

use switchboard_core::protocol::{ErrorCode, ServerKind, ServerMessage, close_code, gateway_only, is_dtmf};
use tokio_tungstenite::tungstenite::Message as UpMessage;
use tokio_tungstenite::tungstenite::Utf8Bytes;

pub use super::events::{
    ClientFrame, Close, Cx, Effect, Ending, Event, HandoffError, Limits, Note, OpenError, OpenRequest, Phase, Recorded,
    RuntimeFrame, SendFailure,
};
use super::kept::Kept;
use crate::auth::Refusal;
use crate::directory::Target;
use crate::resume::{self, Frame, Replay};
use client::ClientSide;
use hops::Hops;
pub use runtime::MAX_UNSENT;
use runtime::RuntimeSide;
use settings::Settings;
use state::Purpose;

/// One session's state and rules. Its methods: constructors ([`Machine::start`],
/// [`Machine::resume`]); [`Machine::handle`], the one way events come in; then
/// [`Machine::next_effect`] until it gives none, and [`Machine::phase`] for what to wait
/// on; getters and the few settings the driver gives it ([`accessors`]); what the store
/// keeps of it ([`Machine::take_parked`], [`Machine::snapshot`]).
#[derive(Debug)]
pub struct Machine {
    /// The limits and timings it applies.
    limits: Limits,
    /// The session's id.
    id: String,
    /// The client's identity (its key's name): resume tokens are bound to it.
    identity: String,
    /// The Agent serving the session now.
    target: Target,
    /// What its runtime sessions open with: voice, modalities, model, audio, reach
    /// ([`settings`]).
    settings: Settings,
    /// Memory, history, return target, announced handoff, inputs in flight.
    kept: Kept,
    /// The messages sent to the client, numbered, for replay.
    replay: Replay,
    /// The runtime connection: its pod, when it was heard, what waits for it ([`runtime`]).
    runtime: RuntimeSide,
    /// The client: when it was heard, its rate, its resume key ([`client`]).
    client: ClientSide,
    /// The handoffs of the turn and the gap of the last ([`hops`]).
    hops: Hops,
    /// Where the session is, with what belongs to that phase alone ([`state`]).
    state: state::State,
    /// The effects to carry out, in order.
    out: VecDeque<Effect>,
    /// The W3C `traceparent` of the session's span (none when not traced).
    traceparent: Option<String>,
    /// What the client was told of its Agents' outage mode ([`outage`]).
    outage_told: outage::Told,
    /// Who hung up, for a phone call's session: as its SIP edge's `close` said
    /// ([`switchboard_core::phone::close_text`]), or the agent when its side ended it.
    hung_up_by: Option<switchboard_core::outbound::HungUpBy>,
}

impl Machine {
    /// A new session for `target`, opening on it at once; the call started at
    /// `call_started_at_ms` (ms since the Unix epoch: its clock counts from there in every
    /// runtime session it opens).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        limits: Limits,
        id: String,
        identity: String,
        target: Target,
        voice: Option<String>,
        modalities: Vec<String>,
        pending: Option<String>,
        now: Instant,
        call_started_at_ms: u64,
    ) -> Self {
        let mut machine = Self::blank(limits, id, identity, target, voice, modalities, now);
        machine.kept.call_started_at_ms = Some(call_started_at_ms);
        machine.open(Purpose::Start { pending }, None, None);
        machine
    }

    /// [`Machine::start`] with the memory the session starts with: context only the gateway
    /// vouches for (an outbound call and its variables, [`crate::calls`]; what the Agent
    /// takes of the app backend's checked context, [`crate::auth::AppContextKeys`]), carried
    /// into the first runtime session's signed grant like any memory.
    #[allow(clippy::too_many_arguments)]
    pub fn start_with_memory(
        limits: Limits,
        id: String,
        identity: String,
        target: Target,
        voice: Option<String>,
        modalities: Vec<String>,
        memory: std::collections::BTreeMap<String, serde_json::Value>,
        now: Instant,
        call_started_at_ms: u64,
    ) -> Self {
        let mut machine = Self::blank(limits, id, identity, target, voice, modalities, now);
        machine.kept.memory = std::sync::Arc::new(memory);
        machine.kept.call_started_at_ms = Some(call_started_at_ms);
        machine.open(Purpose::Start { pending: None }, None, None);
        machine
    }

    fn blank(
        limits: Limits,
        id: String,
        identity: String,
        target: Target,
        voice: Option<String>,
        modalities: Vec<String>,
        now: Instant,
    ) -> Self {
        Self {
            client: ClientSide::new(limits.session_rate, now),
            limits,
            id,
            identity,
            target,
            settings: Settings::new(voice, modalities),
            kept: Kept::default(),
            replay: Replay::default(),
            runtime: RuntimeSide::new(now, 0),
            hops: Hops::default(),
            state: state::State::default(),
            out: VecDeque::new(),
            traceparent: None,
            outage_told: outage::Told::default(),
            hung_up_by: None,
        }
    }

    /// The `traceparent` of the session's span, kept when it parks (a resume continues the
    /// trace).
    pub fn set_traceparent(&mut self, traceparent: Option<String>) {
        self.traceparent = traceparent;
    }

    /// The next effect to carry out.
    pub fn next_effect(&mut self) -> Option<Effect> {
        self.out.pop_front()
    }

    fn push(&mut self, effect: Effect) {
        self.out.push_back(effect);
    }

    /// Handles `event`; the effects wait in [`Machine::next_effect`].
    pub fn handle(&mut self, event: Event, cx: &Cx<'_>) {
        if self.state.is_done() {
            return;
        }
        match event {
            Event::Client(frame, budget) => self.client_frame(frame, budget, cx),
            Event::Runtime(frame) if self.state.is_settling() => self.settle_frame(frame),
            Event::Runtime(frame) => self.runtime_frame(frame, cx),
            Event::Opened(result) => self.opened(result, cx),
            Event::RetryDue => self.retry(cx),
            Event::DirectoryChanged => {
                if self.state.draining() {
                    self.move_if_between_turns(cx);
                }
            }
            Event::OutageSwitched => self.outage_check(cx),
            Event::Draining if self.limits.movable => {
                let close = (close_code::GOING_AWAY, "the gateway is restarting; resume with your token".into());
                self.push(Effect::CloseClient(close));
                self.client_gone(cx);
            }
            Event::Draining => {}
            Event::Superseded => self.client_gone(cx),
            Event::TakenOver => {
                let close = (close_code::GOING_AWAY, "this session was resumed on another connection".into());
                self.push(Effect::CloseClient(close));
                self.push(Effect::CloseRuntime);
                self.state.finish(Ending::TakenOver);
            }
            Event::Shutdown => {
                self.end((close_code::GOING_AWAY, "the gateway is shutting down; reconnect".into()));
            }
            Event::IdleDue => {
                if cx.now < self.idle_deadline() {
                    return;
                }
                let message = format!(
                    "nothing came from the client or the agent for {} s, so the session ended (it cannot be resumed); start a new one",
                    self.limits.idle_timeout.as_secs()
                );
                self.refuse(Refusal { code: close_code::IDLE_TIMEOUT, message, reason: ErrorCode::IdleTimeout });
            }
            Event::ClientSendFailed(SendFailure::Gone) => self.client_gone(cx),
            Event::ClientSendFailed(SendFailure::Slow) => {
                self.end((close_code::SLOW_CLIENT, "the client does not read its messages".into()));
            }
            Event::RuntimeSendFailed(message) => self.runtime.keep(message),
            Event::SettleDue => self.settled(false),
            Event::PingDue => {
                self.ping(cx);
                self.refresh_identity(cx);
                // Between turns, what was sent since the last snapshot (a state change, a
                // late line) is caught up with.
                let between_turns = !self.kept.turn_open && self.kept.in_flight.is_empty();
                if between_turns && self.client.snapshot_behind(self.replay.seq) && self.state.is_live() {
                    self.snapshot_now(None);
                }
            }
        }
    }

    fn client_frame(&mut self, frame: ClientFrame, budget: Result<(), Refusal>, cx: &Cx<'_>) {
        if self.state.is_settling() {
            return;
        }
        self.client.heard(cx.now);
        if matches!(frame, ClientFrame::Control) {
            return;
        }
        self.client.active(cx.now);
        if matches!(frame, ClientFrame::Text(_) | ClientFrame::Binary(_)) {
            // The session's own rate first, then the key's budget (shared by its sessions).
            if let Err(refusal) = self.client.take_message(cx.now).and(budget) {
                return self.refuse(refusal);
            }
        }
        match frame {
            // A session served in text because of an outage: its audio goes nowhere.
            ClientFrame::Binary(_) if self.text_only().is_some() => {}
            ClientFrame::Text(text) if self.dropped_audio(text.as_str()) => {}
            ClientFrame::Text(text) => {
                // Neither audio nor keys: keys may be collected for a tool (a PIN) and
                // never recorded; those the agent is told are its user line in the record.
                if self.limits.record && !unrecorded(text.as_str()) {
                    self.push(Effect::Record(Recorded::Client(text.clone())));
                }
                // A phone call's edge says who hung up as it ends the session (only its
                // edge holds a phone call's session: its memory is the edge's to set).
                if self.is_phone_call()
                    && let Some(by) = switchboard_core::phone::hung_up_by(text.as_str())
                {
                    self.hung_up_by.get_or_insert(by);
                }
                self.forward_text(text);
            }
            ClientFrame::Binary(data) => self.send_runtime(UpMessage::Binary(data)),
            ClientFrame::Control => {}
            ClientFrame::Close => self.end((close_code::NORMAL, String::new())),
            ClientFrame::Gone => self.client_gone(cx),
            ClientFrame::Oversized => {
                let limit = self.limits.max_message_bytes;
                self.end((close_code::TOO_BIG, format!("a message exceeded the limit of {limit} bytes")));
            }
        }
    }

    /// A client's text frame for the runtime. A typed input goes with the gateway's id
    /// for it, and is tracked until the runtime takes it up ([`Kept::track`]) rather than
    /// kept as unsent.
    fn forward_text(&mut self, text: Utf8Bytes) {
        if gateway_only(text.as_str()) {
            return self.refuse_gateway_only();
        }
        match self.kept.track(text.as_str()) {
            Some((frame, true)) => {
                if self.runtime.is_open() {
                    self.push(Effect::Runtime { message: UpMessage::text(frame), keep: false });
                }
                self.snapshot_now(None);
            }
            Some((frame, false)) => self.send_runtime(UpMessage::text(frame)),
            // As it came, without a copy (audio, most of what a client sends).
            None => self.send_runtime(UpMessage::Text(text)),
        }
    }

    /// To the runtime, or kept for the next connection while none is open.
    fn send_runtime(&mut self, message: UpMessage) {
        if let Some(message) = self.runtime.send(message) {
            self.push(Effect::Runtime { message, keep: true });
        }
    }

    fn runtime_frame(&mut self, frame: RuntimeFrame, cx: &Cx<'_>) {
        if !self.state.is_live() || !self.runtime.is_open() {
            return;
        }
        self.runtime.heard(cx.now);
        if matches!(frame, RuntimeFrame::Control) {
            return;
        }
        // An agent that is still answering keeps the session alive.
        self.client.active(cx.now);
        let mut turn_ended = false;
        let frame = match frame {
            RuntimeFrame::Text(text) => match ServerKind::peek(text.as_str()) {
                Some(ServerKind::ConnectionClose) => return self.runtime.hold_close(text),
                Some(ServerKind::ConnectionDraining) => {
                    // The pod shuts down: the session moves at its next turn boundary.
                    if self.state.drain() == Some(state::Drain::Serving) {
                        self.state.set_drain(state::Drain::Draining);
                    }
                    return self.move_if_between_turns(cx);
                }
                Some(ServerKind::ConnectionStart) if self.stamp_start(text.as_str(), cx) => {
                    // An Agent already switched into outage mode says so after its start.
                    return self.outage_check(cx);
                }
                kind => {
                    self.new_reply(kind);
                    // Only a memory update (or a text of no known kind) may change the caller.
                    let caller = matches!(kind, Some(ServerKind::MemoryUpdate) | None).then(|| self.caller());
                    let echo = self.kept.observe(text.as_str());
                    if let Some(before) = caller {
                        self.caller_observed(before, cx);
                    }
                    turn_ended = kind == Some(ServerKind::ResponseComplete);
                    if kind == Some(ServerKind::SessionUpdated) {
                        self.settings.updated(text.as_str());
                    }
                    echo.map_or(Frame::Text(text), Frame::from)
                }
            },
            RuntimeFrame::Binary(data) => Frame::Binary(data),
            RuntimeFrame::Closed { code, reason } => return self.runtime_closed(code, reason, cx),
            RuntimeFrame::Lost => return self.recover("runtime_lost", cx),
            RuntimeFrame::Control => return,
        };
        self.first_frame_after_handoff(cx);
        self.deliver(frame);
        if turn_ended {
            self.snapshot_now(None);
        }
        if self.state.draining() {
            self.move_if_between_turns(cx);
        }
    }

    /// A runtime's `bidi_connection_start`, sent with the session's number and a fresh
    /// resume token (the session is held under it). It is not kept for replay: a resumed
    /// client gets a new one. False when it does not parse (relayed as it is).
    fn stamp_start(&mut self, text: &str, cx: &Cx<'_>) -> bool {
        let Ok(ServerMessage::BidiConnectionStart { session_id, agent, mode, model, .. }) = serde_json::from_str(text)
        else {
            return false;
        };
        let token = resume::new_token();
        let key = resume::store_key(&self.identity, &token);
        let previous = self.client.new_key(key.clone());
        self.push(Effect::Hold { key, previous });
        let seq = self.replay.skip();
        let stamped = ServerMessage::BidiConnectionStart {
            session_id,
            agent,
            mode,
            model,
            resume_token: Some(token),
            seq: Some(seq),
            candidate: self.target.candidate,
        };
        self.first_frame_after_handoff(cx);
        if self.limits.record {
            self.push(Effect::Record(Recorded::Server(Utf8Bytes::from(text.to_owned()))));
        }
        self.push(Effect::Client(stamped.into()));
        true
    }

    /// A new reply, or the caller's barge-in: the audio of earlier replies is no longer
    /// kept for a resuming client.
    fn new_reply(&mut self, kind: Option<ServerKind>) {
        if matches!(kind, Some(ServerKind::ResponseStart | ServerKind::Interruption)) {
            self.replay.forget_audio();
        }
    }

    fn first_frame_after_handoff(&mut self, cx: &Cx<'_>) {
        if let Some(gap) = self.hops.first_frame(cx.now) {
            self.push(Effect::Note(gap));
        }
    }

    /// Numbers and keeps a message for the client, and sends it. A send that fails comes
    /// back as [`Event::ClientSendFailed`]; the message stays for replay.
    fn deliver(&mut self, frame: Frame) {
        self.record(&frame);
        self.replay.record(frame.clone(), self.limits.replay_messages, self.limits.replay_bytes);
        self.push(Effect::Client(frame));
    }

    /// Hands a text message (not reply audio) to the conversation record, when kept.
    fn record(&mut self, frame: &Frame) {
        if let (true, Frame::Text(text)) = (self.limits.record, frame)
            && !ServerKind::AudioStream.is(text.as_str())
        {
            self.push(Effect::Record(Recorded::Server(text.clone())));
        }
    }

    fn runtime_closed(&mut self, code: u16, reason: String, cx: &Cx<'_>) {
        let held_close = self.runtime.closed();
        match self.kept.pending_handoff.take() {
            Some((to, context)) if code == close_code::HANDOFF => {
                // Should this gateway die before the target is open, a resume elsewhere
                // performs the handoff.
                self.snapshot_now(Some((to.clone(), context.clone())));
                self.hand_off(to, context, None, cx);
            }
            // The pod is draining or full: the session moves to another pod.
            _ if code == close_code::GOING_AWAY || code == close_code::TRY_AGAIN_LATER => {
                self.recover("runtime_draining", cx);
            }
            _ => {
                if let Some(text) = held_close {
                    self.deliver(Frame::Text(text));
                }
                // The agent's side ended a phone call (its end tool, a transfer, a failure),
                // unless its edge said first who hung up.
                if self.is_phone_call() {
                    self.hung_up_by.get_or_insert(switchboard_core::outbound::HungUpBy::Agent);
                }
                self.end((if code == 1005 { close_code::NORMAL } else { code }, reason));
            }
        }
    }

    /// Ends the session for a limit the client broke: the `bidi_error` says which and what
    /// to do, the close has its code.
    fn refuse(&mut self, refusal: Refusal) {
        self.push(Effect::Note(Note::Refused(refusal.reason.metric_label())));
        let close = (refusal.code, refusal.reason.as_str().replace('_', " "));
        self.deliver(ServerMessage::error(refusal.reason, refusal.message, false).into());
        self.end(close);
    }

    /// The session ends with `close`.
    fn end(&mut self, close: Close) {
        self.state.finish(Ending::Close(close));
    }
}

/// Client frames the record never takes: audio (too large, and heard as the user's lines),
/// and keys (`bidi_dtmf`): keys collected for a tool (a PIN) must never be recorded, and
/// those the agent is told are in the record as its user line.
fn unrecorded(text: &str) -> bool {
    text.starts_with(r#"{"type":"bidi_audio_input""#) || is_dtmf(text)
}
