//! The tool calls of the turn in progress, with what they plan beyond it — a handoff, the
//! end of the session — and the cache of tool results. [`Calls`] owns them and returns its
//! effects; it sees the rest of the session only through a [`Cx`] (the shared state, the
//! conversation, the drive), never the session itself. Whether a round is over
//! ([`Calls::all_answered`]) is for the session to ask: what follows is its move.
//!
//! The pipeline of one call (`plan`): handoff or workflow move, or one of the agent's tools:
//! authorised (its required memory is set, no bound input given by the model; bound inputs
//! filled from memory, see [`crate::authority`]) -> allowed here (policy, moving along the
//! workflow when the tool belongs to a reachable step) -> input valid against the schema ->
//! consent (a `consent: required` tool waits for the user's approval, see `consent`) ->
//! (`transfer_to_person`: a request to the client, answered by its `transfer_result`, see
//! `transfer`; `send_digits`: likewise with `digits_result`, see `digits`) ->
//! cached result, execution, or — a client tool — the client's answer (see `client`) ->
//! truncation -> memory (`remember`, identity keys only from
//! identity providers) -> result to the model. Every failure becomes an error result; the
//! session goes on.

mod client;
mod consent;
mod digits;
mod keypad;
mod plan;
mod transfer;

pub(crate) use digits::no_digits_pending;
pub(crate) use transfer::{Reported, no_transfer_pending};

use std::time::Instant;

use crate::events::Effect;
use crate::handoff::HandoffRequest;
use crate::model::{ToolResult, ToolUse};
use crate::protocol::{ErrorCode, ServerMessage};
use crate::tools::{FailureKind, ToolCache, ToolFailure};

use super::common::Common;
use super::conversation::Conversation;
use super::drive::Drive;

/// What the calls see of the session around them (the shape of rustls's `Context`).
#[derive(Debug)]
pub(crate) struct Cx<'a> {
    /// The shared state: the agent, memory, workflow, prompt.
    pub(crate) common: &'a mut Common,
    /// The conversation (a handoff carries it).
    pub(crate) conversation: &'a Conversation,
    /// What drives the session (a voice session is asked for consent in words).
    pub(crate) drive: &'a mut Drive,
}

/// One tool call of the current round.
#[derive(Clone, Debug)]
struct Call {
    id: String,
    name: String,
    input: serde_json::Value,
    awaiting_consent: bool,
    /// A client tool's call waits for the client's answer (see `client`).
    awaiting_client: bool,
    /// When an unanswered consent request, or a client's answer, is given up (see
    /// `consent` and `client`).
    deadline: Option<Instant>,
    running: bool,
    /// A transfer to this person waits for the client's `transfer_result` (until
    /// `deadline`); see [`crate::transfer`].
    transfer: Option<String>,
    /// That transfer is warm: the agent briefs the person before the caller is put through.
    warm: bool,
    /// Keys this call asked the client to press: it waits for the client's `digits_result`
    /// (until `deadline`); see [`crate::digits`].
    digits: Option<String>,
    /// When the tool started running (for `tool_complete.duration_ms`).
    started: Option<Instant>,
    /// A keypad input being typed (see `keypad`); the caller's keys come here.
    keypad: Option<keypad::Collecting>,
    result: Option<ToolResult>,
}

impl From<ToolUse> for Call {
    fn from(u: ToolUse) -> Self {
        Self {
            id: u.id,
            name: u.name,
            input: u.input,
            awaiting_consent: false,
            awaiting_client: false,
            deadline: None,
            running: false,
            transfer: None,
            warm: false,
            digits: None,
            started: None,
            keypad: None,
            result: None,
        }
    }
}

/// The tool calls of the turn, the handoff or end they planned, and the result cache.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    calls: Vec<Call>,
    /// A handoff a call of this round asked for: performed when the round is answered.
    pending_handoff: Option<HandoffRequest>,
    /// A call asked to end the session after the turn.
    ending: bool,
    /// A warm transfer's person answered: the agent briefs them, and the session ends when
    /// that reply is over (see `transfer`).
    briefing: Option<transfer::Briefing>,
    cache: ToolCache,
    /// Until when a `#` ends the keypad entry that just ended at its `maxDigits` (see
    /// `keypad`).
    trailing_hash: Option<Instant>,
}

impl Calls {
    /// The calls of a model reply: each planned in order.
    pub(crate) fn start(&mut self, uses: Vec<ToolUse>, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        self.calls = uses.into_iter().map(Call::from).collect();
        let mut effects = Vec::new();
        for index in 0..self.calls.len() {
            effects.extend(self.start_call(index, cx, now));
        }
        effects
    }

    /// Whether a call with this id is known (a voice model may repeat one).
    pub(crate) fn has(&self, id: &str) -> bool {
        self.calls.iter().any(|c| c.id == id)
    }

    /// A voice model's call, which arrives on its own inside the stream: it joins the calls
    /// under way and goes through the same pipeline.
    pub(crate) fn join(&mut self, tool_use: ToolUse, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        self.calls.push(Call::from(tool_use));
        self.start_call(self.calls.len() - 1, cx, now)
    }

    /// A tool finished; `None` when no running call has that id.
    pub(crate) fn finished(
        &mut self,
        id: &str,
        outcome: Result<serde_json::Value, ToolFailure>,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Option<Vec<Effect>> {
        let index = self.calls.iter().position(|c| c.id == id && c.running && c.result.is_none())?;
        Some(self.finish_call(index, outcome, cx, now))
    }

    /// The user answered the consent request of call `id`: it runs, or ends declined. A
    /// call that waits for no consent gets an error for the user.
    pub(crate) fn consent(&mut self, id: &str, approved: bool, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let Some(index) = self.calls.iter().position(|c| c.id == id && c.awaiting_consent) else {
            return vec![Effect::Send(ServerMessage::error(
                ErrorCode::NoConsentPending,
                format!("no tool is waiting for consent with tool_use_id {id:?}"),
                true,
            ))];
        };
        self.calls[index].awaiting_consent = false;
        if approved {
            return self.run(index, cx, now);
        }
        let failure = ToolFailure::new(FailureKind::ConsentDeclined, "the user did not allow this tool to run");
        self.finish_call(index, Err(failure), cx, now)
    }

    /// The user cancelled: the handoff or end planned is dropped, and every unfinished call
    /// ends with a `cancelled` result.
    pub(crate) fn cancel(&mut self, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        self.pending_handoff = None;
        self.ending = false;
        let mut effects = Vec::new();
        for index in 0..self.calls.len() {
            if self.calls[index].result.is_none() {
                self.calls[index].awaiting_consent = false;
                self.calls[index].awaiting_client = false;
                let failure =
                    ToolFailure::new(FailureKind::Cancelled, "the user cancelled this call; it did not finish");
                effects.extend(self.finish_call(index, Err(failure), cx, now));
            }
        }
        effects
    }

    /// Call `index` runs with its (authorised, valid) input: the adapter executes it, or —
    /// a client tool — the client is asked for its result.
    fn run(&mut self, index: usize, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let tool = cx.common.core().tool(&self.calls[index].name);
        let (client, keypad) = (tool.and_then(|t| t.client.clone()), tool.and_then(|t| t.keypad.clone()));
        let call = &mut self.calls[index];
        call.running = true;
        call.started = Some(now);
        if let Some(keypad) = keypad {
            return self.collect_keys(index, &keypad, cx, now);
        }
        match client {
            Some(client) => self.ask_client(index, &client, now),
            None => vec![Effect::ExecuteTool {
                tool_use_id: call.id.clone(),
                tool: call.name.clone(),
                input: call.input.clone(),
            }],
        }
    }

    /// The earliest moment something is due: the deadline of the consent request, the
    /// client's answer, or the transfer or keys that expire first.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let keypad = self.calls.iter().filter_map(|c| c.keypad.as_ref().map(keypad::Collecting::deadline));
        self.calls
            .iter()
            .filter(|c| {
                c.awaiting_consent
                    || c.awaiting_client
                    || ((c.transfer.is_some() || c.digits.is_some()) && c.result.is_none())
            })
            .filter_map(|c| c.deadline)
            .chain(keypad)
            .min()
    }

    /// Time passed: consent requests, client calls, transfers and keys past their deadline
    /// end.
    pub(crate) fn tick(&mut self, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let mut effects = self.expire_consents(cx, now);
        effects.extend(self.expire_client_calls(cx, now));
        effects.extend(self.expire_keypad(cx, now));
        effects.extend(self.expire_digits(cx, now));
        effects
    }

    /// The calls past their deadline at `now` among those `waiting` picks, by index.
    fn overdue(&self, now: Instant, waiting: impl Fn(&Call) -> bool) -> Vec<usize> {
        (0..self.calls.len())
            .filter(|&i| waiting(&self.calls[i]) && self.calls[i].deadline.is_some_and(|d| d <= now))
            .collect()
    }

    /// Call `index` starts running and waits for the client's answer (consent aside) until
    /// `patience` from `now`.
    fn wait_for_client(&mut self, index: usize, patience: std::time::Duration, now: Instant) -> &mut Call {
        let call = &mut self.calls[index];
        call.running = true;
        call.started = Some(now);
        call.deadline = Some(now + patience);
        call
    }

    /// Whether the round is answered: there are calls and each has its result.
    pub(crate) fn all_answered(&self) -> bool {
        self.calls.iter().all(|c| c.result.is_some())
    }

    /// Whether the round has calls.
    pub(crate) fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Whether a call has no result yet.
    pub(crate) fn any_open(&self) -> bool {
        self.calls.iter().any(|c| c.result.is_none())
    }

    /// Whether a tool runs.
    pub(crate) fn running(&self) -> bool {
        self.calls.iter().any(|c| c.running)
    }

    /// Whether a call waits for the user's consent.
    pub(crate) fn awaits_consent(&self) -> bool {
        self.calls.iter().any(|c| c.awaiting_consent)
    }

    /// The round's results, in order; the round is over.
    pub(crate) fn take_results(&mut self) -> Vec<ToolResult> {
        self.calls.drain(..).filter_map(|c| c.result).collect()
    }

    /// The handoff the round planned, once.
    pub(crate) fn take_handoff(&mut self) -> Option<HandoffRequest> {
        self.pending_handoff.take()
    }

    /// Whether a call asked to end the session after the turn.
    pub(crate) fn ending(&self) -> bool {
        self.ending
    }

    /// The person a warm transfer's agent is briefing now, if one is.
    pub(crate) fn briefing(&self) -> Option<&str> {
        self.briefing.as_ref().map(|b| b.person.as_str())
    }

    /// The session ends: no call goes on, no result is cached.
    pub(crate) fn end(&mut self) {
        self.cache = ToolCache::default();
        self.calls.clear();
        self.briefing = None;
    }
}

#[cfg(test)]
mod tests;
