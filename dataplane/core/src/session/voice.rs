//! The voice drive's handlers: the core's side of a streaming voice model (Nova Sonic).
//! The model is one long-lived stream that hears the user and speaks by itself, so the
//! session does not ask for model calls: it is told what happened — the FINAL transcript of
//! the user's words, the FINAL text of what the assistant said, tool calls from inside the
//! stream, barge-ins, a reply cut off (see `heard`), the end of a completion — and asks the
//! adapter to send tool results (and typed text) into the stream.
//!
//! Only FINAL text enters the conversation: SPECULATIVE text and interrupted replies never
//! do (but for the part of a cut reply the caller heard). Tool calls go through the very
//! pipeline text turns use (`calls`), and a round answered ends with
//! [`Effect::SendToolResult`] instead of another model call.
//!
//! A voice turn opens at a final user text (spoken or typed) with `bidi_response_start`
//! and closes at the end of the completion that answered it with `bidi_response_complete`.
//! Coordination only: the voice state is [`Voice`](super::drive::Voice)'s, what the client
//! is shown [`Live`](super::live::Live)'s.

use std::time::Instant;

use crate::events::Effect;
use crate::model::{ContentBlock, ToolUse};
use crate::protocol::{ErrorCode, ServerMessage, StopReason, TranscriptRole};

use super::Session;
use super::heard::Cut;
use super::say::{final_text, refused_input};

impl Session {
    /// Arrival by handoff: the carried request (user message `last_user`) is sent into the
    /// stream as text, after the history before it.
    pub(super) fn voice_arrival(&mut self, last_user: usize) -> Vec<Effect> {
        let text = self.conversation.text_of(last_user);
        if let Some(voice) = self.drive.voice_mut() {
            voice.set_replay_len(last_user);
            voice.set_turn_open(true);
            voice.remember_typed(&text);
        }
        vec![Effect::SendVoiceText(text)]
    }

    /// The user typed into a voice session (hybrid): it is recorded now and sent into the
    /// stream; the model answers it like speech.
    pub(super) fn voice_typed(&mut self, text: String, id: Option<String>, now: Instant) -> Vec<Effect> {
        if text.trim().is_empty() {
            return vec![Effect::Send(refused_input(ErrorCode::EmptyText, "the text is empty; type something", id))];
        }
        self.live.unmute();
        self.drive.remember_typed(&text);
        let mut effects = self.record_cut(None);
        effects.extend(self.open_voice_turn(text.clone(), id));
        effects.push(Effect::SendVoiceText(text.clone()));
        effects.extend(self.spoken_consent(&text, now));
        effects
    }

    /// The voice model's FINAL transcript of the user's words.
    pub(super) fn voice_user_final(&mut self, text: String, now: Instant) -> Vec<Effect> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        if self.drive.voice_mut().is_some_and(|v| v.take_echo(trimmed)) {
            // The model's echo of typed text: already recorded.
            return Vec::new();
        }
        // The model heard the caller out (normally `SpeechStopped` came first).
        let mut effects = self.live.caller_stopped();
        effects.extend(self.record_cut(None));
        self.live.heard_out();
        effects.extend(self.open_voice_turn(text.clone(), None));
        effects.extend(self.spoken_consent(&text, now));
        effects
    }

    /// The user's words answer a consent request waiting for them, if one does.
    fn spoken_consent(&mut self, text: &str, now: Instant) -> Vec<Effect> {
        let (calls, mut cx) = self.cx();
        let mut effects = calls.spoken_consent(text, &mut cx, now);
        effects.extend(self.settle());
        effects
    }

    /// Records a user message (typed input `id`, or spoken) and opens a turn (closing one
    /// the user spoke over).
    fn open_voice_turn(&mut self, text: String, id: Option<String>) -> Vec<Effect> {
        let mut effects = Vec::new();
        let turn_open = self.drive.turn_open();
        // Said while a tool call of the open turn runs: part of that turn.
        let same_turn = turn_open && self.turn.in_tools();
        if turn_open && !same_turn {
            if let Some(voice) = self.drive.voice_mut() {
                voice.set_turn_open(false);
            }
            effects.extend(self.finish_turn(StopReason::Interrupted));
            if self.is_over() {
                return effects;
            }
        }
        self.conversation.add_user_words(text.clone(), !same_turn);
        effects.push(Effect::Send(final_text(TranscriptRole::User, &text, id)));
        effects.push(self.common.transcript("user", serde_json::json!({ "text": text })));
        if !same_turn {
            let turn = self.turn.open();
            if let Some(voice) = self.drive.voice_mut() {
                voice.set_turn_open(true);
            }
            self.live.answer_due();
            effects.push(Effect::Send(ServerMessage::BidiResponseStart { turn }));
        }
        effects
    }

    /// The assistant's FINAL, uninterrupted text.
    pub(super) fn voice_assistant_final(&mut self, text: String) -> Vec<Effect> {
        // A cancelled reply's words were not heard: they do not enter the conversation.
        if text.trim().is_empty() || self.live.muted() {
            return Vec::new();
        }
        self.conversation.add_assistant(ContentBlock::Text(text.clone()));
        vec![
            Effect::Send(final_text(TranscriptRole::Assistant, &text, None)),
            self.common.transcript("assistant", serde_json::json!({ "text": text })),
        ]
    }

    /// A voice model's tool call: it joins the assistant message that said what it does,
    /// and the calls under way.
    pub(super) fn start_voice_call(&mut self, tool_use: ToolUse, now: Instant) -> Vec<Effect> {
        if self.calls.has(&tool_use.id) {
            return Vec::new();
        }
        self.conversation.add_assistant(ContentBlock::ToolUse(tool_use.clone()));
        self.turn.enter_tools();
        let (calls, mut cx) = self.cx();
        let mut effects = calls.join(tool_use, &mut cx, now);
        effects.extend(self.settle());
        effects
    }

    /// Barge-in: the client must flush its playback now. The model heard the caller
    /// speak, so they are speaking (if that was not noticed yet).
    pub(super) fn voice_interrupted(&mut self) -> Vec<Effect> {
        self.live.barge_in();
        let mut effects = vec![
            Effect::Send(ServerMessage::BidiInterruption {}),
            self.common.transcript("interruption", serde_json::json!({})),
        ];
        effects.extend(self.live.caller_started());
        effects
    }

    /// The end of a completion closes the open turn, unless the model waits for a tool.
    pub(super) fn voice_completion_end(&mut self, stop_reason: StopReason) -> Vec<Effect> {
        let waits_for_tool = stop_reason == StopReason::ToolUse;
        self.live.completion_end(waits_for_tool);
        if !self.drive.turn_open() || waits_for_tool || self.turn.in_tools() {
            return Vec::new();
        }
        if let Some(voice) = self.drive.voice_mut() {
            voice.set_turn_open(false);
        }
        self.finish_turn(stop_reason)
    }

    /// A reply was cut off: remembered until what was heard of it is known.
    pub(super) fn voice_reply_cut(&mut self, text: String, sent_ms: u64, us_per_char: u64) -> Vec<Effect> {
        // A cancelled reply's audio was not passed on.
        if self.live.muted() || text.trim().is_empty() {
            return Vec::new();
        }
        let effects = self.record_cut(None);
        if let Some(voice) = self.drive.voice_mut() {
            voice.set_cut(Cut::new(text, sent_ms, us_per_char));
        }
        effects
    }

    /// Records what was heard of the cut reply, if there is one: `played_ms` of it (the
    /// client's report, at most what was sent), or all that was sent.
    pub(super) fn record_cut(&mut self, played_ms: Option<u64>) -> Vec<Effect> {
        let Some(cut) = self.drive.voice_mut().and_then(|v| v.take_cut()) else { return Vec::new() };
        let (heard, played) = cut.heard(played_ms);
        if heard.is_empty() {
            return Vec::new();
        }
        self.conversation.add_assistant(ContentBlock::Text(heard.to_owned()));
        let entry = serde_json::json!({ "text": heard, "interrupted": true, "audio_played_ms": played });
        vec![self.common.transcript("assistant", entry)]
    }
}
