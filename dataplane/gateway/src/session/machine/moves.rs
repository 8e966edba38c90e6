//! Moving a session between pods of its Agent: off a lost pod (its connection broke), off
//! a draining pod (at the next turn boundary, once another pod is ready), or back onto its
//! Agent after a failed handoff. Each move reopens the session with its memory and history
//! and tells the client (`bidi_connection_restart`); after [`MAX_RECOVERIES`] failed
//! attempts in a row the session ends (1011). A session whose Agent left the routing table
//! ends with 4404.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard_core::protocol::{ErrorCode, ServerMessage, SessionState, close_code};

use super::state::{Drain, Retry};
use super::{Cx, Effect, Machine, Note, OpenError, Purpose};

/// Failed reconnections in a row after which a session gives up.
pub const MAX_RECOVERIES: u32 = 3;
/// The pause between two attempts.
pub const RETRY_PAUSE: Duration = Duration::from_millis(200);

impl Machine {
    pub(super) fn note(&mut self, note: Note) {
        self.push(Effect::Note(note));
    }

    /// On a draining pod: moves the session to another ready pod of its Agent unless a
    /// turn is under way or typed inputs wait (then the end of the turn moves it). With no
    /// other ready pod yet (one replica, whose replacement is still starting), the session
    /// stays on the draining pod, which still serves it, and moves when the directory
    /// shows another ready pod.
    pub(super) fn move_if_between_turns(&mut self, cx: &Cx<'_>) {
        // A handoff under way ends this pod's part anyway: the runtime closes with it next.
        let handing_off = self.kept.handoff_expected || self.kept.pending_handoff.is_some();
        if self.kept.turn_open || !self.kept.in_flight.is_empty() || handing_off {
            return;
        }
        let (namespace, name) = (&self.target.route.namespace, &self.target.route.name);
        let Some(fresh) = cx.directory.lookup(namespace, name, self.settings.reach()) else {
            // The Agent was deleted (its pods drain with it): the session ends here.
            return self.end_removed();
        };
        if !fresh.ready.iter().any(|addr| Some(*addr) != self.runtime.pod()) {
            if self.state.drain() == Some(Drain::Draining) {
                self.state.set_drain(Drain::WaitingForPod);
                self.note(Note::WaitingForPod);
            }
            return;
        }
        self.recover("runtime_draining", cx);
    }

    /// Reopens the session on another pod of the same Agent: its runtime was lost, or its
    /// pod drains.
    pub(super) fn recover(&mut self, reason: &str, cx: &Cx<'_>) {
        let lost = self.runtime.detach();
        if lost.is_some() {
            // A polite close to a draining pod; a lost one fails at once.
            self.push(Effect::CloseRuntime);
        }
        self.note(Note::Migrated { reason: reason.to_owned(), from: lost });
        self.reopen(reason, lost, cx);
    }

    /// Opens the session again on its Agent (not on `avoid` if another pod is ready). The
    /// client is told the session is `reconnecting` at once; the runtime that takes it over
    /// says its own state once it has it (`ready`, or what it is doing).
    pub(super) fn reopen(&mut self, reason: &str, avoid: Option<SocketAddr>, cx: &Cx<'_>) {
        self.deliver(ServerMessage::BidiSessionState { state: SessionState::Reconnecting }.into());
        self.attempt(reason.to_owned(), MAX_RECOVERIES - 1, avoid, cx);
    }

    fn attempt(&mut self, reason: String, attempts_left: u32, avoid: Option<SocketAddr>, cx: &Cx<'_>) {
        match cx.directory.lookup(&self.target.route.namespace, &self.target.route.name, self.settings.reach()) {
            Some(current) => self.target = current,
            None => return self.end_removed(),
        }
        self.open(Purpose::Reopen(Retry { reason, attempts_left }), avoid, None);
    }

    /// An attempt failed: another after a pause, or the session ends.
    pub(super) fn reopen_failed(&mut self, Retry { reason, attempts_left }: Retry, error: OpenError, _cx: &Cx<'_>) {
        self.note(Note::OpenFailed(error));
        if attempts_left == 0 {
            let message = format!(
                "the agent {} has no pod that can take this session now; reconnect shortly",
                self.target.route.name
            );
            self.deliver(ServerMessage::error(ErrorCode::NoRuntime, message, false).into());
            return self.end((close_code::INTERNAL, "no runtime pod could take the session".into()));
        }
        self.state.back_off(RETRY_PAUSE, Retry { reason, attempts_left: attempts_left - 1 });
    }

    /// The pause is over: the next attempt.
    pub(super) fn retry(&mut self, cx: &Cx<'_>) {
        if let Some(Retry { reason, attempts_left }) = self.state.retry_due() {
            self.attempt(reason, attempts_left, None, cx);
        }
    }

    /// Every ping interval: a side that answered nothing for the ping timeout is gone — a
    /// client's session parks for resume, a runtime's moves to another pod — otherwise
    /// both are pinged (their pongs are what the next check sees).
    pub(super) fn ping(&mut self, cx: &Cx<'_>) {
        if !self.state.is_live() {
            return;
        }
        let timeout = self.limits.ping_timeout;
        let client_silent = self.client.silent_for(cx.now);
        let runtime_silent = self.runtime.silent_for(cx.now);
        if client_silent >= timeout {
            self.note(Note::ClientSilent(client_silent));
            return self.client_gone(cx);
        }
        if self.runtime.is_open() && runtime_silent >= timeout {
            self.note(Note::RuntimeSilent(runtime_silent));
            return self.recover("runtime_unresponsive", cx);
        }
        self.push(Effect::PingClient);
        if self.runtime.is_open() {
            self.push(Effect::PingRuntime);
        }
    }

    /// Ends a session whose Agent is no longer in the routing table (deleted, or no longer
    /// accepted): the client is told why and closed with 4404.
    fn end_removed(&mut self) {
        self.note(Note::AgentRemoved);
        let message =
            format!("the agent {} was removed from this cluster; start a new session", self.target.route.name);
        self.deliver(ServerMessage::error(ErrorCode::AgentRemoved, message, false).into());
        self.end((close_code::UNKNOWN_AGENT, "the agent was removed".into()));
    }
}
