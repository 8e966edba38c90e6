//! The text drive's handlers: typed input (queued while a turn is in progress), the model
//! call of a round, its reply or failure, and a refusal as too long. Coordination only:
//! each step asks the sub-states and joins their effects.

use std::time::Instant;

use crate::events::{Effect, ModelReply};
use crate::model::ContentBlock;
use crate::protocol::{ErrorCode, ServerMessage, StopReason, TranscriptRole};

use super::Session;
use super::say::{final_text, refused_input};
use super::turn::MAX_QUEUED_INPUTS;

impl Session {
    pub(super) fn user_text(&mut self, text: String, id: Option<String>, now: Instant) -> Vec<Effect> {
        let (calls, mut cx) = self.cx();
        if let Some(mut effects) = calls.typed_consent(&text, id.clone(), &mut cx, now) {
            effects.extend(self.settle());
            return effects;
        }
        if !self.turn.is_idle() {
            if !self.turn.queue(text, id.clone()) {
                let message = format!(
                    "{MAX_QUEUED_INPUTS} messages are already waiting for the agent's reply; wait for it before sending more"
                );
                return vec![Effect::Send(refused_input(ErrorCode::Busy, message, id))];
            }
            return Vec::new();
        }
        self.begin_turn(text, id)
    }

    pub(super) fn begin_turn(&mut self, text: String, id: Option<String>) -> Vec<Effect> {
        let turn = self.turn.open();
        self.conversation.open_text_turn(text.clone());
        let mut effects = vec![
            Effect::Send(final_text(TranscriptRole::User, &text, id)),
            self.common.transcript("user", serde_json::json!({ "text": text })),
            Effect::Send(ServerMessage::BidiResponseStart { turn }),
        ];
        effects.extend(self.call_model());
        effects
    }

    /// Compacts if needed (see `conversation`), then asks for a model call with the current
    /// prompt and tools.
    pub(super) fn call_model(&mut self) -> Vec<Effect> {
        let mut effects = self.compact(false);
        let request = self.common.model_request(&self.conversation);
        self.turn.enter_model();
        effects.push(Effect::CallModel(request));
        effects
    }

    pub(super) fn model_reply(&mut self, reply: ModelReply, now: Instant) -> Vec<Effect> {
        if !self.turn.in_model() {
            return Vec::new();
        }
        let mut effects = Vec::new();
        if let Some(usage) = reply.usage {
            effects.push(Effect::Send(ServerMessage::BidiUsage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                total_tokens: usage.input_tokens + usage.output_tokens,
                modality: None,
                model: reply.model.clone(),
            }));
        }
        let mut content = Vec::new();
        if !reply.text.is_empty() {
            content.push(ContentBlock::Text(reply.text.clone()));
            effects.push(Effect::Send(final_text(TranscriptRole::Assistant, &reply.text, None)));
            effects.push(self.common.transcript("assistant", serde_json::json!({ "text": reply.text })));
        }
        content.extend(reply.tool_uses.iter().cloned().map(ContentBlock::ToolUse));
        let stop = reply.stop_reason.as_ref().map_or(StopReason::EndTurn, StopReason::from);
        if content.is_empty() {
            self.conversation.drop_turn();
            effects.push(Effect::Send(ServerMessage::error(
                ErrorCode::EmptyReply,
                "the model returned an empty reply; say that again",
                true,
            )));
            effects.extend(self.finish_turn(StopReason::EmptyReply));
            return effects;
        }
        self.conversation.push_reply(content);
        if reply.tool_uses.is_empty() {
            effects.extend(self.finish_turn(stop));
            return effects;
        }
        self.turn.enter_tools_after_reply();
        let (calls, mut cx) = self.cx();
        effects.extend(calls.start(reply.tool_uses, &mut cx, now));
        effects.extend(self.settle());
        effects
    }

    pub(super) fn model_failed(&mut self, code: &str, message: &str) -> Vec<Effect> {
        if !self.turn.in_model() {
            return Vec::new();
        }
        self.conversation.drop_turn();
        let mut effects = vec![Effect::Send(ServerMessage::error(
            ErrorCode::ModelError,
            format!("the agent could not answer ({code}): {message}"),
            true,
        ))];
        effects.extend(self.finish_turn(StopReason::Error));
        effects
    }

    /// The model refused the call's context as too long: compact harder and call again, once.
    pub(super) fn context_too_long(&mut self, message: &str) -> Vec<Effect> {
        if !self.turn.in_model() {
            return Vec::new();
        }
        if self.conversation.may_retry(self.turn.call()) {
            let mut effects = self.compact(true);
            if !effects.is_empty() {
                effects.extend(self.call_model());
                return effects;
            }
        }
        self.model_failed("context_too_long", &format!("the conversation is too long for the model: {message}"))
    }
}
