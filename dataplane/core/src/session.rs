//! The session state machine: turns, model calls, the context guard, arrival by handoff,
//! and the end of a session. Tool calls are handled in `calls`, the prompt in `prompt`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::agent::AgentCore;
use super::carry::messages_from_history;
use super::context;
pub use super::events::{Effect, Input, ModelReply, SessionInit};
use super::handoff::{HandoffContext, HandoffKind, HandoffRequest};
use super::memory::Memory;
use super::tools::ToolCache;
use super::transcript::TranscriptEntry;
use super::workflow::{Transition, WorkflowState};
use crate::model::{ContentBlock, Message, Role, ToolResult};
use crate::protocol::{ErrorCode, ServerMessage, StopReason, TranscriptRole};

/// Most model calls with tool use in one user turn; then the turn ends with an error.
pub const MAX_TOOL_ROUNDS: u32 = 8;
/// Most user inputs waiting while a turn is in progress; more are refused.
pub const MAX_QUEUED_INPUTS: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Idle,
    Model,
    Tools,
    HandedOff,
    Ended,
}

/// One session of one agent. See the module docs of [`crate`].
#[derive(Debug)]
pub struct Session {
    pub(super) core: Arc<AgentCore>,
    pub(super) id: String,
    pub(super) today: String,
    pub(super) memory: Memory,
    pub(super) workflow: WorkflowState,
    pub(super) messages: Vec<Message>,
    pub(super) summary: String,
    pub(super) compaction: super::compaction::Compaction,
    pub(super) arrival: Option<HandoffContext>,
    pub(super) return_to: Option<String>,
    pub(super) cache: ToolCache,
    pub(super) phase: Phase,
    /// Typed inputs waiting for the turn in progress: text and id.
    queue: VecDeque<(String, Option<String>)>,
    pub(super) turn: u64,
    pub(super) turn_start: usize,
    pub(super) rounds: u32,
    pub(super) calls: Vec<super::calls::Call>,
    pub(super) pending_handoff: Option<HandoffRequest>,
    pub(super) end_after_turn: bool,
    pub(super) prompt: Option<String>,
    /// Driven by a streaming voice model (see `voice`) rather than a text model.
    pub(super) voice: bool,
    /// Voice: typed texts sent into the stream, in case the model echoes them.
    pub(super) typed_pending: Vec<String>,
    /// Voice: a reply cut off by a barge-in, until what was heard of it is recorded.
    pub(super) cut: Option<super::heard::Cut>,
    /// Voice: a user turn is open (its `bidi_response_complete` is still due).
    pub(super) turn_open: bool,
    /// Voice: how many of `messages` the voice stream replays as history.
    pub(super) replay_len: usize,
    /// What a client can show: the state last sent, the audible side (see `activity`).
    pub(super) live: super::activity::Live,
    /// The text model of this session: the Agent's `textModelId`, or the one the session
    /// chose from its `sessionModels`.
    pub(super) model_id: String,
}

impl Session {
    /// Starts a session of `core`'s agent, returning the first effects (connection start,
    /// greeting, or — after a handoff — the model call answering the carried request, after
    /// the greeting of a Persona that speaks first).
    pub fn start(core: Arc<AgentCore>, init: SessionInit) -> (Self, Vec<Effect>) {
        Self::begin(core, init, false)
    }

    /// Starts a session driven by a streaming voice model (Nova Sonic): the same agent
    /// logic, but the model is one long-lived stream the adapter owns. Instead of
    /// [`Effect::CallModel`] the session asks for [`Effect::SendToolResult`] and
    /// [`Effect::SendVoiceText`], and it learns what was said from the `Voice*` inputs.
    /// After a handoff, the carried request is sent into the stream as text (a voice
    /// model never answers replayed history by itself), and [`Session::voice_history`]
    /// is the history to replay before it.
    pub fn start_voice(core: Arc<AgentCore>, init: SessionInit) -> (Self, Vec<Effect>) {
        Self::begin(core, init, true)
    }

    fn begin(core: Arc<AgentCore>, init: SessionInit, voice: bool) -> (Self, Vec<Effect>) {
        let SessionInit {
            session_id,
            today,
            memory,
            history,
            handoff,
            return_to: resumed_return_to,
            workflow: position,
            model: chosen_model,
            summary,
        } = init;
        let mut values = memory;
        let turns = match &handoff {
            Some(context) => {
                values.extend(context.memory.clone());
                context.history.clone()
            }
            None => history,
        };
        let return_to = match &handoff {
            Some(context) => context.return_to.clone().filter(|_| context.kind == HandoffKind::Transfer),
            None => resumed_return_to,
        };
        let spec = &core.spec().workflow.spec;
        let workflow = match position.filter(|p| handoff.is_none() && p.agent == core.name()) {
            Some(position) => {
                // The skills in use before the session moved keep their place in the prompt.
                let mut state = WorkflowState::resume(spec, &position.node, &position.visited);
                position.skills.iter().filter(|s| core.skill(s).is_some()).for_each(|s| state.use_skill(s, true));
                state
            }
            None => WorkflowState::new(spec),
        };
        let model_id = chosen_model.unwrap_or_else(|| core.spec().model.text_model_id.clone());
        let mut session = Self {
            core,
            id: session_id,
            today,
            memory: Memory::from_map(values),
            workflow,
            messages: messages_from_history(&turns),
            summary,
            compaction: Default::default(),
            arrival: handoff,
            return_to,
            cache: ToolCache::default(),
            phase: Phase::Idle,
            queue: VecDeque::new(),
            turn: 0,
            turn_start: 0,
            rounds: 0,
            calls: Vec::new(),
            pending_handoff: None,
            end_after_turn: false,
            prompt: None,
            voice,
            typed_pending: Vec::new(),
            cut: None,
            turn_open: false,
            replay_len: 0,
            live: Default::default(),
            model_id,
        };
        let core = session.core.clone();
        let spec = core.spec();
        let mut effects = vec![Effect::Send(ServerMessage::BidiConnectionStart {
            session_id: session.id.clone(),
            agent: spec.agent.name.clone(),
            mode: spec.mode.as_str().to_owned(),
            model: if session.voice { spec.model.voice_model_id.clone() } else { session.model_id.clone() },
            resume_token: None,
            seq: None,
            candidate: false,
        })];
        let mut transitions = session.workflow.advance(&session.core.spec().workflow.spec, &session.memory);
        effects.extend(transitions.drain(..).flat_map(|t| session.transition_effects(&t)));
        session.replay_len = session.messages.len();
        if session.arrival.is_some() {
            effects.extend(session.greeting());
            if let Some(last_user) = session.messages.iter().rposition(context::is_turn_start) {
                session.messages.truncate(last_user + 1);
                session.turn += 1;
                session.turn_start = last_user;
                session.rounds = 0;
                effects.push(Effect::Send(ServerMessage::BidiResponseStart { turn: session.turn }));
                if session.voice {
                    effects.extend(session.voice_arrival(last_user));
                } else {
                    effects.extend(session.call_model());
                }
            } else {
                session.messages.clear();
                session.replay_len = 0;
            }
        } else if session.messages.is_empty() {
            effects.extend(session.greeting());
        }
        session.push_state(&mut effects);
        (session, effects)
    }

    /// Handles one input.
    pub fn handle(&mut self, input: Input, now: Instant) -> Vec<Effect> {
        if matches!(self.phase, Phase::Ended | Phase::HandedOff) && input != Input::End {
            return vec![Effect::Send(ServerMessage::error(
                ErrorCode::SessionOver,
                "this session has ended or moved to another agent; start a new session",
                false,
            ))];
        }
        let mut effects = match input {
            Input::UserText { text, id } if self.voice => self.voice_typed(text, id, now),
            Input::UserText { text, id } => self.user_text(text, id, now),
            Input::VoiceUserFinal(text) => self.voice_user_final(text, now),
            Input::VoiceAssistantFinal(text) => self.voice_assistant_final(text),
            Input::VoiceToolUse(tool_use) => self.start_voice_call(tool_use, now),
            Input::VoiceInterrupted => self.voice_interrupted(),
            Input::VoiceReplyCut { text, sent_ms, us_per_char } => self.voice_reply_cut(text, sent_ms, us_per_char),
            Input::AudioPlayed { ms } => self.audio_played(ms),
            Input::VoiceCompletionEnd { stop_reason } => self.voice_completion_end(stop_reason),
            Input::ModelReply(reply) => self.model_reply(reply, now),
            Input::ModelFailed { code, message } => self.model_failed(&code, &message),
            Input::ContextTooLong { message } => self.context_too_long(&message),
            Input::Summary { id, outcome } => self.summary_arrived(id, outcome),
            Input::ToolFinished { tool_use_id, outcome } => self.tool_finished(&tool_use_id, outcome, now),
            Input::Consent { tool_use_id, approved } => self.consent(&tool_use_id, approved, now),
            Input::VoiceActivity(activity) => self.voice_activity(activity),
            Input::Cancel => self.cancel(now),
            Input::Tick => self.tick(now),
            Input::End => self.end("the session was closed"),
        };
        self.push_state(&mut effects);
        effects
    }

    /// The agent.
    pub fn core(&self) -> &Arc<AgentCore> {
        &self.core
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session memory.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The workflow state.
    pub fn workflow(&self) -> &WorkflowState {
        &self.workflow
    }

    /// The conversation as sent to the model.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The text model this session calls (the Agent's, or the one it chose).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The agent this session may return to.
    pub fn return_to(&self) -> Option<&str> {
        self.return_to.as_deref()
    }

    /// Whether a turn is in progress.
    pub fn is_busy(&self) -> bool {
        matches!(self.phase, Phase::Model | Phase::Tools)
    }

    /// Whether the session is over (ended or handed off).
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Ended | Phase::HandedOff)
    }

    /// User inputs waiting for the current turn to finish.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    fn user_text(&mut self, text: String, id: Option<String>, now: Instant) -> Vec<Effect> {
        if let Some(effects) = self.typed_consent(&text, id.clone(), now) {
            return effects;
        }
        if self.phase != Phase::Idle {
            if self.queue.len() >= MAX_QUEUED_INPUTS {
                let message = format!(
                    "{MAX_QUEUED_INPUTS} messages are already waiting for the agent's reply; wait for it before sending more"
                );
                return vec![Effect::Send(refused_input(ErrorCode::Busy, message, id))];
            }
            self.queue.push_back((text, id));
            return Vec::new();
        }
        self.begin_turn(text, id)
    }

    fn begin_turn(&mut self, text: String, id: Option<String>) -> Vec<Effect> {
        self.turn += 1;
        self.rounds = 0;
        self.turn_start = self.messages.len();
        match self.messages.last_mut() {
            // A turn that ended after tool results (round limit) leaves a user message last.
            Some(last) if last.role == Role::User => last.content.push(ContentBlock::Text(text.clone())),
            _ => self.messages.push(Message::user_text(text.clone())),
        }
        let mut effects = vec![
            Effect::Send(final_text(TranscriptRole::User, &text, id)),
            self.transcript("user", serde_json::json!({ "text": text })),
            Effect::Send(ServerMessage::BidiResponseStart { turn: self.turn }),
        ];
        effects.extend(self.call_model());
        effects
    }

    fn model_reply(&mut self, reply: ModelReply, now: Instant) -> Vec<Effect> {
        if self.phase != Phase::Model {
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
            effects.push(self.transcript("assistant", serde_json::json!({ "text": reply.text })));
        }
        content.extend(reply.tool_uses.iter().cloned().map(ContentBlock::ToolUse));
        let stop = reply.stop_reason.as_ref().map_or(StopReason::EndTurn, StopReason::from);
        if content.is_empty() {
            self.messages.truncate(self.turn_start);
            effects.push(Effect::Send(ServerMessage::error(
                ErrorCode::EmptyReply,
                "the model returned an empty reply; say that again",
                true,
            )));
            effects.extend(self.finish_turn(StopReason::EmptyReply));
            return effects;
        }
        self.messages.push(Message { role: Role::Assistant, content });
        if reply.tool_uses.is_empty() {
            effects.extend(self.finish_turn(stop));
            return effects;
        }
        self.rounds += 1;
        self.phase = Phase::Tools;
        effects.extend(self.start_calls(reply.tool_uses, now));
        effects
    }

    pub(super) fn model_failed(&mut self, code: &str, message: &str) -> Vec<Effect> {
        if self.phase != Phase::Model {
            return Vec::new();
        }
        self.messages.truncate(self.turn_start);
        let mut effects = vec![Effect::Send(ServerMessage::error(
            ErrorCode::ModelError,
            format!("the agent could not answer ({code}): {message}"),
            true,
        ))];
        effects.extend(self.finish_turn(StopReason::Error));
        effects
    }

    /// Called when every tool call of a round has a result.
    pub(super) fn tools_done(&mut self) -> Vec<Effect> {
        let results: Vec<ToolResult> = self.calls.drain(..).filter_map(|c| c.result).collect();
        let for_voice = if self.voice { results.clone() } else { Vec::new() };
        self.messages
            .push(Message { role: Role::User, content: results.into_iter().map(ContentBlock::ToolResult).collect() });
        let mut transitions = self.workflow.advance(&self.core.spec().workflow.spec, &self.memory);
        let mut effects: Vec<Effect> = transitions.drain(..).flat_map(|t| self.transition_effects(&t)).collect();
        if let Some(request) = self.pending_handoff.take() {
            self.phase = Phase::HandedOff;
            effects.push(Effect::Send(ServerMessage::BidiResponseComplete {
                turn: self.turn,
                stop_reason: StopReason::Handoff,
            }));
            effects.push(Effect::Send(ServerMessage::Handoff {
                from: self.core.name().to_owned(),
                to: request.target.clone(),
                kind: request.context.kind,
                context: Box::new(request.context.clone()),
            }));
            effects.push(
                self.transcript("handoff", serde_json::json!({ "to": request.target, "kind": request.context.kind })),
            );
            effects.push(Effect::Handoff(request));
            self.memory.clear();
            return effects;
        }
        if self.voice {
            self.phase = Phase::Idle;
            // The model answers the results: the turn is being worked on again.
            self.live.replied = false;
            effects.extend(for_voice.into_iter().map(Effect::SendToolResult));
            return effects;
        }
        if self.rounds >= MAX_TOOL_ROUNDS {
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

    pub(super) fn transition_effects(&mut self, transition: &Transition) -> Vec<Effect> {
        self.invalidate_prompt();
        let by = if transition.by_condition { "condition" } else { "model" };
        vec![
            Effect::Send(ServerMessage::WorkflowTransition {
                from: transition.from.clone(),
                to: transition.to.clone(),
                by: by.into(),
            }),
            self.transcript(
                "transition",
                serde_json::json!({ "from": transition.from, "to": transition.to, "by": by }),
            ),
        ]
    }

    pub(super) fn finish_turn(&mut self, stop: StopReason) -> Vec<Effect> {
        self.phase = Phase::Idle;
        let mut effects =
            vec![Effect::Send(ServerMessage::BidiResponseComplete { turn: self.turn, stop_reason: stop })];
        if self.voice {
            effects.extend(self.compact(false));
        }
        if self.end_after_turn || self.workflow.at_end(&self.core.spec().workflow.spec) {
            effects.extend(self.end("the conversation is finished"));
        } else if let Some((next, id)) = self.queue.pop_front() {
            effects.extend(self.begin_turn(next, id));
        }
        effects
    }

    pub(super) fn end(&mut self, reason: &str) -> Vec<Effect> {
        if self.phase == Phase::Ended {
            return Vec::new();
        }
        let was_handed_off = self.phase == Phase::HandedOff;
        self.phase = Phase::Ended;
        self.memory.clear();
        self.cache = ToolCache::default();
        self.queue.clear();
        self.calls.clear();
        if was_handed_off {
            return Vec::new();
        }
        vec![
            self.transcript("end", serde_json::json!({ "reason": reason })),
            Effect::Close { reason: reason.to_owned() },
        ]
    }

    pub(super) fn transcript(&self, event: &str, data: serde_json::Value) -> Effect {
        Effect::Transcript(TranscriptEntry {
            session_id: self.id.clone(),
            agent: self.core.name().to_owned(),
            event: event.to_owned(),
            data,
        })
    }

    /// Adds a tool result for call `index` (helper for `calls`).
    pub(super) fn set_result(&mut self, index: usize, result: ToolResult) {
        if let Some(call) = self.calls.get_mut(index) {
            call.result = Some(result);
        }
    }
}

/// A final transcript line; the user's for a typed input taken up acknowledges it by `id`.
pub(super) fn final_text(role: TranscriptRole, text: &str, id: Option<String>) -> ServerMessage {
    ServerMessage::BidiTranscriptStream { role, text: text.to_owned(), delta: false, is_final: true, input_id: id }
}

/// A recoverable `bidi_error` refusing the typed input `id`.
pub(super) fn refused_input(code: ErrorCode, message: impl Into<String>, id: Option<String>) -> ServerMessage {
    ServerMessage::error_for_input(code, message, true, id)
}
