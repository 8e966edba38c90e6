//! The core's side of a streaming voice model (Nova Sonic). The model is one long-lived
//! stream that hears the user and speaks by itself, so the session does not ask for model
//! calls: it is told what happened — the FINAL transcript of the user's words, the FINAL
//! text of what the assistant said, tool calls from inside the stream, barge-ins, the
//! end of a completion — and asks the adapter to send tool results (and typed text) into
//! the stream.
//!
//! Only FINAL text enters the conversation: SPECULATIVE text and interrupted replies never
//! do. Tool calls go through the very pipeline text turns use (`calls`: policy, schema,
//! consent, cache, truncation, memory, handoffs), and `tools_done` ends them with
//! [`Effect::SendToolResult`] instead of another model call.
//!
//! A voice turn opens at a final user text (spoken or typed) with `bidi_response_start`
//! and closes at the end of the completion that answered it with `bidi_response_complete`.

use std::time::Instant;

use super::carry::turns_of;
use super::context;
use super::handoff::HistoryTurn;
use super::session::{Effect, Phase, Session, final_text, refused_input};
use crate::model::{ContentBlock, Message, Role};
use crate::protocol::{ErrorCode, ServerMessage, StopReason, TranscriptRole};

/// Most typed texts remembered for recognising the voice model's echo of them.
const MAX_TYPED_PENDING: usize = 16;

impl Session {
    /// Whether this session is driven by a streaming voice model.
    pub fn is_voice(&self) -> bool {
        self.voice
    }

    /// The history a voice stream replays when it opens: the carried conversation before
    /// the request a handoff brought along (that request is sent as text instead).
    pub fn voice_history(&self) -> Vec<HistoryTurn> {
        turns_of(&self.messages[..self.replay_len.min(self.messages.len())])
    }

    /// The tools a voice stream offers. A stream's tool list is fixed for its life, so it
    /// offers every tool the agent may ever use here — its tools (but those whose required
    /// memory can never be set in this session), its handoffs, the return to its caller and
    /// `workflow_goto`; the workflow and the tools' requirements still decide at each call
    /// whether the call is allowed now (refused calls get an error result, as in text).
    pub fn voice_tools(&self) -> Vec<crate::model::ToolDefinition> {
        self.core.all_tools(self.return_to.as_deref(), &self.memory)
    }

    /// Arrival by handoff: the carried request (user message `last_user`) is sent into the
    /// stream as text, after the history before it.
    pub(super) fn voice_arrival(&mut self, last_user: usize) -> Vec<Effect> {
        self.replay_len = last_user;
        self.turn_open = true;
        let text: Vec<String> = self.messages[last_user]
            .content
            .iter()
            .filter_map(|b| if let ContentBlock::Text(t) = b { Some(t.clone()) } else { None })
            .collect();
        let text = text.join("\n");
        self.remember_typed(&text);
        vec![Effect::SendVoiceText(text)]
    }

    /// The user typed into a voice session (hybrid): it is recorded now and sent into the
    /// stream; the model answers it like speech.
    pub(super) fn voice_typed(&mut self, text: String, id: Option<String>, now: Instant) -> Vec<Effect> {
        if text.trim().is_empty() {
            return vec![Effect::Send(refused_input(ErrorCode::EmptyText, "the text is empty; type something", id))];
        }
        self.live.muted = false;
        self.remember_typed(&text);
        let mut effects = self.record_cut(None);
        effects.extend(self.open_voice_turn(text.clone(), id));
        effects.push(Effect::SendVoiceText(text.clone()));
        effects.extend(self.spoken_consent(&text, now));
        effects
    }

    /// Text sent into the stream that the model may echo as the user's: recognised then.
    pub(super) fn remember_typed(&mut self, text: &str) {
        if self.typed_pending.len() >= MAX_TYPED_PENDING {
            self.typed_pending.remove(0);
        }
        self.typed_pending.push(text.trim().to_owned());
    }

    /// The voice model's FINAL transcript of the user's words.
    pub(super) fn voice_user_final(&mut self, text: String, now: Instant) -> Vec<Effect> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        if let Some(index) = self.typed_pending.iter().position(|t| t == trimmed) {
            // The model's echo of typed text: already recorded.
            self.typed_pending.remove(index);
            return Vec::new();
        }
        // The model heard the caller out (normally `SpeechStopped` came first).
        let mut effects = self.caller_stopped();
        effects.extend(self.record_cut(None));
        self.live.muted = false;
        self.live.heard = false;
        effects.extend(self.open_voice_turn(text.clone(), None));
        effects.extend(self.spoken_consent(&text, now));
        effects
    }

    /// Records a user message (typed input `id`, or spoken) and opens a turn (closing one
    /// the user spoke over).
    fn open_voice_turn(&mut self, text: String, id: Option<String>) -> Vec<Effect> {
        let mut effects = Vec::new();
        // Said while a tool call of the open turn runs: part of that turn.
        let same_turn = self.turn_open && self.phase == Phase::Tools;
        if self.turn_open && !same_turn {
            self.turn_open = false;
            effects.extend(self.finish_turn(StopReason::Interrupted));
            if self.is_over() {
                return effects;
            }
        }
        match self.messages.last_mut() {
            Some(last) if context::is_turn_start(last) => last.content.push(ContentBlock::Text(text.clone())),
            _ => self.messages.push(Message::user_text(text.clone())),
        }
        effects.push(Effect::Send(final_text(TranscriptRole::User, &text, id)));
        effects.push(self.transcript("user", serde_json::json!({ "text": text })));
        if !same_turn {
            self.turn += 1;
            self.turn_open = true;
            self.live.replied = false;
            self.turn_start = self.messages.len() - 1;
            effects.push(Effect::Send(ServerMessage::BidiResponseStart { turn: self.turn }));
        }
        effects
    }

    /// The assistant's FINAL, uninterrupted text.
    pub(super) fn voice_assistant_final(&mut self, text: String) -> Vec<Effect> {
        // A cancelled reply's words were not heard: they do not enter the conversation.
        if text.trim().is_empty() || self.live.muted {
            return Vec::new();
        }
        match self.messages.last_mut() {
            Some(last) if last.role == Role::Assistant => last.content.push(ContentBlock::Text(text.clone())),
            _ => self.messages.push(Message { role: Role::Assistant, content: vec![ContentBlock::Text(text.clone())] }),
        }
        vec![
            Effect::Send(final_text(TranscriptRole::Assistant, &text, None)),
            self.transcript("assistant", serde_json::json!({ "text": text })),
        ]
    }

    /// Barge-in: the client must flush its playback now. The model heard the caller
    /// speak, so they are speaking (if that was not noticed yet).
    pub(super) fn voice_interrupted(&mut self) -> Vec<Effect> {
        self.live.reply_audio = false;
        let mut effects = vec![
            Effect::Send(ServerMessage::BidiInterruption {}),
            self.transcript("interruption", serde_json::json!({})),
        ];
        effects.extend(self.caller_started());
        effects
    }

    /// The end of a completion closes the open turn, unless the model waits for a tool.
    pub(super) fn voice_completion_end(&mut self, stop_reason: StopReason) -> Vec<Effect> {
        if stop_reason != StopReason::ToolUse {
            self.live.heard = false;
        }
        if !self.turn_open || stop_reason == StopReason::ToolUse || self.phase == Phase::Tools {
            return Vec::new();
        }
        self.turn_open = false;
        self.finish_turn(stop_reason)
    }
}

/// Tool calls as the assistant's part of the conversation: a voice call joins the
/// assistant message that said what it does.
pub(super) fn record_voice_call(messages: &mut Vec<Message>, block: ContentBlock) {
    match messages.last_mut() {
        Some(last) if last.role == Role::Assistant => last.content.push(block),
        _ => messages.push(Message { role: Role::Assistant, content: vec![block] }),
    }
}
