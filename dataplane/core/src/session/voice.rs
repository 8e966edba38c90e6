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
//! [`VoiceEffect::SendToolResult`](crate::VoiceEffect::SendToolResult) instead of another model call.
//!
//! A voice turn opens at a final user text (spoken or typed) with `bidi_response_start`
//! and closes at the end of the completion that answered it with `bidi_response_complete`.
//! Coordination only: the voice state is [`Voice`](super::drive::Voice)'s, what the client
//! is shown [`Live`](super::live::Live)'s.

use std::time::Instant;

use crate::events::{Effect, VoiceInput};
use crate::model::{ContentBlock, ToolUse};
use crate::protocol::{ErrorCode, ServerMessage, StopReason, TranscriptRole};

use super::Session;
use super::flow::nothing_to_cancel;
use super::heard::Cut;
use super::say::{final_text, refused_input};

impl Session {
    /// What the voice model and the audio say. A text session has neither, and its adapter
    /// sends none of these: it ignores them.
    pub(super) fn voice_input(&mut self, input: VoiceInput, now: Instant) -> Vec<Effect> {
        if !self.drive.is_voice() {
            return Vec::new();
        }
        match input {
            VoiceInput::UserFinal(text) => self.voice_user_final(text, now),
            VoiceInput::AssistantFinal(text) => self.voice_assistant_final(text),
            VoiceInput::ToolUse(tool_use) => self.start_voice_call(tool_use, now),
            VoiceInput::Interrupted => self.voice_interrupted(),
            VoiceInput::ReplyCut { text, sent_ms, us_per_char } => self.voice_reply_cut(text, sent_ms, us_per_char),
            VoiceInput::AudioPlayed { ms } => self.record_cut(Some(ms)),
            VoiceInput::CompletionEnd { stop_reason } => self.voice_completion_end(stop_reason),
            VoiceInput::Activity(activity) => self.live.activity(activity),
        }
    }

    /// Arrival by handoff: the carried request (user message `last_user`) is sent into the
    /// stream as text, after the history before it.
    pub(super) fn voice_arrival(&mut self, last_user: usize) -> Vec<Effect> {
        let text = self.conversation.text_of(last_user);
        let Some(voice) = self.drive.voice_mut() else { return Vec::new() };
        voice.set_replay_len(last_user);
        voice.set_turn_open(true);
        vec![voice.send_text(text)]
    }

    /// The user typed into a voice session (hybrid): it is recorded now and sent into the
    /// stream; the model answers it like speech.
    pub(super) fn voice_typed(&mut self, text: String, id: Option<String>, now: Instant) -> Vec<Effect> {
        if text.trim().is_empty() {
            return vec![Effect::Send(refused_input(ErrorCode::EmptyText, "the text is empty; type something", id))];
        }
        self.live.unmute();
        let Some(send) = self.drive.voice_mut().map(|voice| voice.send_text(text.clone())) else { return Vec::new() };
        let mut effects = self.record_cut(None);
        effects.extend(self.open_voice_turn(text.clone(), id));
        effects.push(send);
        effects.extend(self.spoken_consent(&text, now));
        effects
    }

    /// The voice model's FINAL transcript of the user's words.
    fn voice_user_final(&mut self, text: String, now: Instant) -> Vec<Effect> {
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
    fn voice_assistant_final(&mut self, text: String) -> Vec<Effect> {
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
    fn start_voice_call(&mut self, tool_use: ToolUse, now: Instant) -> Vec<Effect> {
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
    fn voice_interrupted(&mut self) -> Vec<Effect> {
        self.live.barge_in();
        let mut effects = vec![
            Effect::Send(ServerMessage::BidiInterruption {}),
            self.common.transcript("interruption", serde_json::json!({})),
        ];
        effects.extend(self.live.caller_started());
        effects
    }

    /// The end of a completion closes the open turn, unless the model waits for a tool.
    fn voice_completion_end(&mut self, stop_reason: StopReason) -> Vec<Effect> {
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
    fn voice_reply_cut(&mut self, text: String, sent_ms: u64, us_per_char: u64) -> Vec<Effect> {
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
    fn record_cut(&mut self, played_ms: Option<u64>) -> Vec<Effect> {
        let Some(cut) = self.drive.voice_mut().and_then(|v| v.take_cut()) else { return Vec::new() };
        let (heard, played) = cut.heard(played_ms);
        if heard.is_empty() {
            return Vec::new();
        }
        self.conversation.add_assistant(ContentBlock::Text(heard.to_owned()));
        let entry = serde_json::json!({ "text": heard, "interrupted": true, "audio_played_ms": played });
        vec![self.common.transcript("assistant", entry)]
    }

    /// `bidi_cancel` in a voice session: when a reply, its audio or a tool call is under way,
    /// the client is told to stop playback, the calls' results go into the stream (the model
    /// must not wait for them), what the model still says is dropped until the user's next
    /// words, and the open turn ends.
    pub(super) fn voice_cancel(&mut self, now: Instant) -> Vec<Effect> {
        if !(self.drive.turn_open() || self.live.reply_audio() || self.calls.any_open()) {
            return nothing_to_cancel();
        }
        let mut effects = self.cancel_calls(now);
        effects.push(Effect::Send(ServerMessage::BidiInterruption {}));
        self.live.mute();
        if !self.calls.is_empty() {
            effects.extend(self.settle());
        }
        if self.drive.voice_mut().is_some_and(|v| v.set_turn_open(false)) {
            effects.extend(self.finish_turn(StopReason::Cancelled));
        }
        effects
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::events::{Activity, Input};
    use crate::session::test_agents::{core, init};

    fn every_voice_input() -> Vec<VoiceInput> {
        let tool_use = ToolUse { id: "t1".into(), name: "get_transactions".into(), input: serde_json::json!({}) };
        vec![
            VoiceInput::Activity(Activity::SpeechStarted),
            VoiceInput::Activity(Activity::SpeechStopped),
            VoiceInput::UserFinal("dispute payment tx-1003".into()),
            VoiceInput::ToolUse(tool_use),
            VoiceInput::Activity(Activity::ReplyAudioStarted),
            VoiceInput::ReplyCut { text: "Once upon a time".into(), sent_ms: 100, us_per_char: 10_000 },
            VoiceInput::Interrupted,
            VoiceInput::AudioPlayed { ms: 50 },
            VoiceInput::AssistantFinal("Here you are.".into()),
            VoiceInput::CompletionEnd { stop_reason: StopReason::EndTurn },
        ]
    }

    #[test]
    fn a_text_session_ignores_every_voice_input() {
        let now = Instant::now();
        let (mut session, _) = Session::start(core("disputes"), init());
        for input in every_voice_input() {
            assert_eq!(session.handle(Input::Voice(input.clone()), now), vec![], "{input:?}");
        }
        assert!(session.messages().is_empty(), "nothing entered the conversation");
        assert_eq!(session.state_now(), Some(crate::protocol::SessionState::Ready));
    }

    #[test]
    fn a_voice_session_takes_them() {
        let now = Instant::now();
        let (mut session, _) = Session::start_voice(core("disputes"), init());
        let heard = session.handle(Input::Voice(VoiceInput::UserFinal("hello".into())), now);
        assert!(heard.contains(&Effect::Send(ServerMessage::BidiResponseStart { turn: 1 })), "{heard:?}");
        assert_eq!(session.messages().len(), 1);
    }

    #[test]
    fn a_voice_cancel_with_nothing_under_way_is_refused_and_one_under_way_ends_the_turn() {
        let now = Instant::now();
        let (mut session, _) = Session::start_voice(core("disputes"), init());
        assert_eq!(session.handle(Input::Cancel, now), nothing_to_cancel());
        session.handle(Input::Voice(VoiceInput::UserFinal("hello".into())), now);
        let cancelled = session.handle(Input::Cancel, now);
        assert!(cancelled.contains(&Effect::Cancel));
        assert!(cancelled.contains(&Effect::Send(ServerMessage::BidiInterruption {})));
        assert!(cancelled.contains(&Effect::Send(ServerMessage::BidiResponseComplete {
            turn: 1,
            stop_reason: StopReason::Cancelled
        })));
        assert!(session.output_muted(), "what the model still says is dropped");
    }
}
