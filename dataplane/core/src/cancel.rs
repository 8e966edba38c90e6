//! `bidi_cancel`: the user stops the current turn — the model's answer in progress, the
//! tool calls of the turn (running ones and those waiting for consent) — and the session
//! goes on. Every unfinished call ends with a `cancelled` result, so the conversation stays
//! well formed (each tool call answered) and the model knows; a handoff or end the turn had
//! planned is dropped. Text: the model call in flight is dropped and the turn ends with
//! `stop_reason: cancelled` (a typed input waiting behind it starts next). Voice: the
//! client is told to stop playback, the results go to the model, and what the model still
//! says is dropped until the user's next words (spoken or typed) reach it. With nothing under way the user is
//! told so (`nothing_to_cancel`).

use std::time::Instant;

use super::session::{Effect, Phase, Session};
use super::tools::{FailureKind, ToolFailure};
use crate::model::{ContentBlock, Message, Role, ToolResult};
use crate::protocol::{ErrorCode, ServerMessage, StopReason};

impl Session {
    pub(super) fn cancel(&mut self, now: Instant) -> Vec<Effect> {
        let calls_open = self.calls.iter().any(|c| c.result.is_none());
        let under_way = match self.voice {
            true => self.turn_open || self.live.reply_audio || calls_open,
            false => matches!(self.phase, Phase::Model | Phase::Tools),
        };
        if !under_way {
            return vec![Effect::Send(ServerMessage::error(
                ErrorCode::NothingToCancel,
                "nothing to cancel: no reply, tool call or consent request is under way",
                true,
            ))];
        }
        let mut effects = vec![Effect::Cancel, self.transcript("cancel", serde_json::json!({}))];
        self.pending_handoff = None;
        self.end_after_turn = false;
        for index in 0..self.calls.len() {
            if self.calls[index].result.is_none() {
                self.calls[index].awaiting_consent = false;
                let failure =
                    ToolFailure::new(FailureKind::Cancelled, "the user cancelled this call; it did not finish");
                effects.extend(self.finish_call(index, Err(failure), now));
            }
        }
        if self.voice {
            effects.push(Effect::Send(ServerMessage::BidiInterruption {}));
            self.live.muted = true;
            self.live.reply_audio = false;
            self.live.heard = false;
            if !self.calls.is_empty() {
                // The results go into the stream (the model must not wait for them).
                effects.extend(self.maybe_done());
            }
            if std::mem::take(&mut self.turn_open) {
                effects.extend(self.finish_turn(StopReason::Cancelled));
            }
            return effects;
        }
        let results: Vec<ToolResult> = self.calls.drain(..).filter_map(|c| c.result).collect();
        if !results.is_empty() {
            self.messages.push(Message {
                role: Role::User,
                content: results.into_iter().map(ContentBlock::ToolResult).collect(),
            });
        }
        effects.extend(self.finish_turn(StopReason::Cancelled));
        effects
    }
}
