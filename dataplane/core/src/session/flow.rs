//! The course of a turn, the same in both drives: tool outcomes and consent coming in, the
//! round answered (another model call, the results into the voice stream, or a handoff),
//! the end of the turn and of the session, compaction, and `bidi_cancel` — the user stops
//! the current turn (the model's answer in progress, the tool calls of the turn, running
//! or waiting for consent) and the session goes on.
//!
//! Cancel: every unfinished call ends with a `cancelled` result, so the conversation stays
//! well formed (each tool call answered) and the model knows; a handoff or end the turn
//! had planned is dropped. Text: the model call in flight is dropped and the turn ends
//! with `stop_reason: cancelled` (a typed input waiting behind it starts next). Voice: the
//! client is told to stop playback, the results go to the model, and what the model still
//! says is dropped until the user's next words (spoken or typed) reach it. With nothing
//! under way the user is told so (`nothing_to_cancel`).

use std::time::Instant;

use crate::events::{Effect, VoiceEffect};
use crate::protocol::{ErrorCode, ServerMessage, StopReason};
use crate::tools::ToolFailure;

use super::Session;
use super::turn::{Ending, MAX_TOOL_ROUNDS};

impl Session {
    pub(super) fn tool_finished(
        &mut self,
        id: &str,
        outcome: Result<serde_json::Value, ToolFailure>,
        now: Instant,
    ) -> Vec<Effect> {
        let (calls, mut cx) = self.cx();
        let Some(mut effects) = calls.finished(id, outcome, &mut cx, now) else { return Vec::new() };
        effects.extend(self.settle());
        effects
    }

    pub(super) fn consent(&mut self, id: &str, approved: bool, now: Instant) -> Vec<Effect> {
        let (calls, mut cx) = self.cx();
        let mut effects = calls.consent(id, approved, &mut cx, now);
        effects.extend(self.settle());
        effects
    }

    /// The client answered a client tool call: exactly one of a result and an error.
    pub(super) fn client_tool_result(
        &mut self,
        id: &str,
        result: Option<serde_json::Value>,
        error: Option<String>,
        now: Instant,
    ) -> Vec<Effect> {
        let answer = match (result, error) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => Err(error),
            (result, _) => {
                let which = if result.is_some() { "both result and error" } else { "neither result nor error" };
                return vec![Effect::Send(ServerMessage::error(
                    ErrorCode::MalformedMessage,
                    format!(
                        "the client_tool_result for {id:?} has {which}; send exactly one (a null result counts as none); the call still waits"
                    ),
                    true,
                ))];
            }
        };
        let (calls, mut cx) = self.cx();
        let mut effects = calls.client_answered(id, answer, &mut cx, now);
        effects.extend(self.settle());
        effects
    }

    /// The client's answer to a `transfer_request`: the caller is with the person (the
    /// session ends, saying to whom), or the transfer failed and the model hears why.
    pub(super) fn transfer_result(
        &mut self,
        id: &str,
        outcome: crate::protocol::TransferOutcome,
        message: &str,
        now: Instant,
    ) -> Vec<Effect> {
        use super::calls::Reported;
        let (calls, mut cx) = self.cx();
        let Some((mut effects, reported)) = calls.transfer_result(id, outcome, message, &mut cx, now) else {
            return vec![super::calls::no_transfer_pending(id)];
        };
        match reported {
            Reported::Transferred(person) => effects.extend(self.end(&format!("transferred to {person}"))),
            Reported::Briefing | Reported::Failed => effects.extend(self.settle()),
            Reported::PersonLeft(told) => {
                let told = if self.drive.is_voice() {
                    self.voice_typed(told, None, now)
                } else {
                    self.user_text(told, None, now)
                };
                effects.extend(told);
            }
        }
        effects
    }

    /// The client's answer to a `digits_request`: the call ends with the keys sent, or with
    /// why not; the round goes on as after any tool.
    pub(super) fn digits_result(
        &mut self,
        id: &str,
        outcome: crate::protocol::DigitsOutcome,
        sent: u32,
        message: &str,
        now: Instant,
    ) -> Vec<Effect> {
        let (calls, mut cx) = self.cx();
        let Some(mut effects) = calls.digits_result(id, outcome, sent, message, &mut cx, now) else {
            return vec![super::calls::no_digits_pending(id)];
        };
        effects.extend(self.settle());
        effects
    }

    /// Time passed: consent requests, client tool calls and transfers past their deadline end.
    pub(super) fn tick(&mut self, now: Instant) -> Vec<Effect> {
        let (calls, mut cx) = self.cx();
        let mut effects = calls.tick(&mut cx, now);
        if !effects.is_empty() {
            effects.extend(self.settle());
        }
        effects
    }

    /// The caller pressed keys (`bidi_dtmf`): checked and gathered ([`super::Keys`]); the
    /// groups complete now are told to the agent as the caller's input, a refusal is a
    /// recoverable `bidi_error` and takes none of them. While a tool call collects a keypad
    /// input the keys go to it instead (`calls::keypad`), and the agent is told none.
    pub(super) fn dtmf(&mut self, digits: &str, now: Instant) -> Vec<Effect> {
        if self.calls.takes_keys(digits, now) {
            // A keypad input is being typed: the keys go to the tool call, never to the agent.
            if let Err(refused) = self.keys.take(digits, now) {
                return vec![Effect::Send(ServerMessage::error(refused.code(), refused.to_string(), true))];
            }
            let (calls, mut cx) = self.cx();
            let mut effects = calls.keypad_keys(digits, &mut cx, now);
            if !effects.is_empty() {
                effects.extend(self.settle());
            }
            return effects;
        }
        match self.keys.press(digits, now) {
            Ok(groups) => groups.into_iter().flat_map(|keys| self.tell_keys(&keys, now)).collect(),
            Err(refused) => vec![Effect::Send(ServerMessage::error(refused.code(), refused.to_string(), true))],
        }
    }

    /// Keys the caller paused after, told to the agent once the pause is over.
    pub(super) fn keys_paused(&mut self, now: Instant) -> Vec<Effect> {
        match self.keys.due(now) {
            Some(keys) => self.tell_keys(&keys, now),
            None => Vec::new(),
        }
    }

    /// Tells the agent keys pressed, as the caller's input ("The caller pressed 1 2 #"):
    /// into the voice stream as text, or as a typed input of a text session (queued
    /// behind a turn in progress).
    fn tell_keys(&mut self, keys: &str, now: Instant) -> Vec<Effect> {
        let text = crate::dtmf::told(keys);
        if self.drive.is_voice() { self.voice_typed(text, None, now) } else { self.user_text(text, None, now) }
    }

    /// When every tool call of the round has its result, the round is answered.
    pub(super) fn settle(&mut self) -> Vec<Effect> {
        if self.turn.in_tools() && self.calls.all_answered() {
            return self.tools_done();
        }
        Vec::new()
    }

    /// Every tool call of a round has a result: a planned handoff happens now; otherwise
    /// the results go to the model (voice: into the stream; text: another model call, up to
    /// [`MAX_TOOL_ROUNDS`]).
    fn tools_done(&mut self) -> Vec<Effect> {
        let results = self.calls.take_results();
        // Who answers the round: a voice stream is sent the results (the model goes on
        // speaking from them); a text model is called again.
        let streamed = self.drive.is_voice().then(|| results.clone());
        self.conversation.push_results(results);
        let mut effects = self.common.advance();
        if let Some(request) = self.calls.take_handoff() {
            self.turn.hand_off();
            effects.push(Effect::Send(ServerMessage::BidiResponseComplete {
                turn: self.turn.number(),
                stop_reason: StopReason::Handoff,
            }));
            effects.push(Effect::Send(ServerMessage::Handoff {
                from: self.common.core().name().to_owned(),
                to: request.target.clone(),
                kind: request.context.kind,
                context: Box::new(request.context.clone()),
            }));
            effects.push(
                self.common
                    .transcript("handoff", serde_json::json!({ "to": request.target, "kind": request.context.kind })),
            );
            effects.push(Effect::Handoff(request));
            self.common.forget();
            return effects;
        }
        if let Some(results) = streamed {
            self.turn.enter_idle();
            // The model answers the results: the turn is being worked on again.
            self.live.answer_due();
            effects.extend(results.into_iter().map(|result| Effect::Voice(VoiceEffect::SendToolResult(result))));
            return effects;
        }
        if self.turn.rounds() >= MAX_TOOL_ROUNDS {
            effects.push(Effect::Send(ServerMessage::error(
                ErrorCode::ToolRoundsExceeded,
                format!("the agent used tools {MAX_TOOL_ROUNDS} times in a row without answering; ask again"),
                true,
            )));
            effects.extend(self.finish_turn(StopReason::ToolRoundsExceeded));
            return effects;
        }
        effects.extend(self.call_model());
        effects
    }

    /// The turn ends with `stop`; voice compacts then. The session ends when a call asked
    /// for it or the workflow is at its end; otherwise a queued input starts the next turn.
    pub(super) fn finish_turn(&mut self, stop: StopReason) -> Vec<Effect> {
        self.turn.enter_idle();
        let spoken_over = stop == StopReason::Interrupted;
        let mut effects =
            vec![Effect::Send(ServerMessage::BidiResponseComplete { turn: self.turn.number(), stop_reason: stop })];
        // A voice stream's history is fixed while it speaks: it compacts between turns (a
        // text model before each call).
        if self.drive.is_voice() {
            effects.extend(self.compact(false));
        }
        // A warm transfer's brief is over once a reply to the person ended (not one the
        // person spoke over: the agent answers them, and that reply ends it).
        if let Some(person) = self.calls.briefing().filter(|_| !spoken_over) {
            let reason = format!("transferred to {person} (warm: the agent briefed them first)");
            effects.extend(self.end(&reason));
        } else if self.calls.ending() || self.common.at_end() {
            effects.extend(self.end("the conversation is finished"));
        } else if let Some((next, id)) = self.turn.next_queued() {
            effects.extend(self.begin_turn(next, id));
        }
        effects
    }

    /// The session ends: nothing of it is kept. A session handed off ends quietly.
    pub(super) fn end(&mut self, reason: &str) -> Vec<Effect> {
        let ending = self.turn.end();
        if ending == Ending::Over {
            return Vec::new();
        }
        self.common.forget();
        self.calls.end();
        if ending == Ending::HandedOff {
            return Vec::new();
        }
        vec![
            self.common.transcript("end", serde_json::json!({ "reason": reason })),
            Effect::Close { reason: reason.to_owned() },
        ]
    }

    /// Compacts when the conversation nears the budget (or, `hard`, whatever its size). The
    /// effects say so and ask for the model summary; a voice stream forgets what was cut.
    pub(super) fn compact(&mut self, hard: bool) -> Vec<Effect> {
        let budget = self.budget();
        let fixed = self.system_prompt_ref().len();
        let model_id = self.common.model_id().to_owned();
        let Some(compacted) = self.conversation.compact(hard, budget, fixed, &model_id) else { return Vec::new() };
        let cut = compacted.messages_cut();
        let forgotten = self.drive.forget(cut, compacted.spoken_bytes());
        self.common.invalidate_prompt();
        let (id, request) = compacted.into_summary_request();
        let mut effects = vec![
            self.common.transcript("compaction", serde_json::json!({ "messages": cut, "hard": hard })),
            Effect::Summarize { id, request },
        ];
        effects.extend(forgotten);
        effects
    }

    /// The tokens the conversation may take: the model's context, and for a voice stream
    /// at most what it replays.
    fn budget(&self) -> usize {
        self.common.budget(self.drive.is_voice())
    }

    /// The model summary of compaction `id` arrived (or did not).
    pub(super) fn summary_arrived(&mut self, id: u64, outcome: Result<String, String>) -> Vec<Effect> {
        let budget = self.budget();
        if !self.conversation.summary_arrived(id, outcome, budget) {
            return Vec::new();
        }
        self.common.invalidate_prompt();
        let chars = self.conversation.summary().chars().count();
        vec![self.common.transcript("summary", serde_json::json!({ "chars": chars }))]
    }

    /// `bidi_cancel`. Voice: see `voice_cancel`. Text: the model call in flight is dropped,
    /// the tool calls end with `cancelled` results and the turn ends.
    pub(super) fn cancel(&mut self, now: Instant) -> Vec<Effect> {
        if self.drive.is_voice() {
            return self.voice_cancel(now);
        }
        if !self.turn.is_busy() {
            return nothing_to_cancel();
        }
        let mut effects = self.cancel_calls(now);
        let results = self.calls.take_results();
        if !results.is_empty() {
            self.conversation.push_results(results);
        }
        effects.extend(self.finish_turn(StopReason::Cancelled));
        effects
    }

    /// Cancels what the turn has under way: the adapter stops it, every unfinished call
    /// gets a `cancelled` result, a planned handoff or end is dropped.
    pub(super) fn cancel_calls(&mut self, now: Instant) -> Vec<Effect> {
        let mut effects = vec![Effect::Cancel, self.common.transcript("cancel", serde_json::json!({}))];
        let (calls, mut cx) = self.cx();
        effects.extend(calls.cancel(&mut cx, now));
        effects
    }
}

/// The refusal of a `bidi_cancel` with nothing under way.
pub(super) fn nothing_to_cancel() -> Vec<Effect> {
    vec![Effect::Send(ServerMessage::error(
        ErrorCode::NothingToCancel,
        "nothing to cancel: no reply, tool call or consent request is under way",
        true,
    ))]
}
