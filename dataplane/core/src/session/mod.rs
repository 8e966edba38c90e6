//! The session: a coordinator over sub-states that own their fields (the shape of
//! quinn-proto's `Connection`):
//!
//! - [`Common`] — the agent, memory, workflow, how the session arrived, its text model and
//!   the system prompt (rustls's `CommonState`);
//! - [`Conversation`] — the messages, the summary, compaction;
//! - [`Calls`] — the tool calls of the turn, the handoff or end they planned, the result
//!   cache; it returns its effects and sees the rest through a [`Cx`], never the session;
//! - [`Turn`] — the phase, moved only there, the turn's number and rounds, the typed inputs
//!   queued behind it;
//! - [`Drive`] — text, or voice with its own state (echoes, a cut reply, the open turn, the
//!   replay);
//! - [`Live`] — what a client is shown: the state, the caller's speech;
//! - [`Keys`] — keys the caller pressed (`bidi_dtmf`) that the agent has not been told.
//!
//! In a voice session, a state change (memory, workflow step) is also told to the live
//! stream the moment it happens ([`notice`]).
//!
//! The session's methods, by kind: getters (`id`, `memory`, `messages`, `state_now`, ...);
//! events in through [`Session::handle`], dispatched to the text handlers (`text`), the
//! voice handlers (`voice`) and the turn's course shared by both (`flow`) — coordination
//! only, each asking the sub-states and joining their effects; effects out as its return
//! value, with the state appended when it changed; timeouts through
//! [`Session::next_deadline`] and [`Input::Tick`]. Only this module tree holds
//! `impl Session`, and no sub-state imports the session.

mod calls;
mod carry;
mod common;
mod conversation;
mod drive;
mod flow;
mod heard;
mod keys;
mod live;
mod notice;
mod say;
#[cfg(test)]
mod test_agents;
mod text;
mod turn;
mod voice;

use std::sync::Arc;
use std::time::Instant;

use crate::agent::AgentCore;
pub use crate::events::{Effect, Input, ModelReply, SessionInit, VoiceEffect, VoiceInput};
use crate::handoff::HistoryTurn;
use crate::memory::Memory;
use crate::model::Message;
use crate::protocol::{ErrorCode, ServerMessage, SessionState};
use crate::workflow::WorkflowState;

use calls::{Calls, Cx};
pub use carry::messages_from_history;
use common::Common;
use conversation::Conversation;
use drive::Drive;
use keys::Keys;
use live::{Live, VoiceWork};
pub use notice::NOTICE_PREFIX;
use turn::Turn;
pub use turn::{MAX_QUEUED_INPUTS, MAX_TOOL_ROUNDS};

/// One session of one agent. See the module docs of [`crate`].
#[derive(Debug)]
pub struct Session {
    common: Common,
    conversation: Conversation,
    calls: Calls,
    turn: Turn,
    drive: Drive,
    live: Live,
    keys: Keys,
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
    /// [`Effect::CallModel`] the session asks for [`VoiceEffect::SendToolResult`] and
    /// [`VoiceEffect::SendText`], and it learns what was said from [`VoiceInput`]s.
    /// After a handoff, the carried request is sent into the stream as text (a voice
    /// model never answers replayed history by itself), and [`Session::voice_history`]
    /// is the history to replay before it.
    pub fn start_voice(core: Arc<AgentCore>, init: SessionInit) -> (Self, Vec<Effect>) {
        Self::begin(core, init, true)
    }

    fn begin(core: Arc<AgentCore>, init: SessionInit, voice: bool) -> (Self, Vec<Effect>) {
        let (common, conversation) = Common::new(core, init);
        let mut session = Self {
            common,
            conversation,
            calls: Calls::default(),
            turn: Turn::default(),
            drive: Drive::new(voice),
            live: Live::default(),
            keys: Keys::default(),
        };
        let core = session.common.core().clone();
        let spec = core.spec();
        let mut effects = vec![Effect::Send(ServerMessage::BidiConnectionStart {
            session_id: session.common.id().to_owned(),
            agent: spec.agent.name.clone(),
            mode: spec.mode.as_str().to_owned(),
            model: if voice { spec.model.voice_model_id.clone() } else { session.common.model_id().to_owned() },
            resume_token: None,
            seq: None,
            candidate: false,
        })];
        effects.extend(session.common.advance());
        let replay_len = session.conversation.messages().len();
        if let Some(voice) = session.drive.voice_mut() {
            voice.set_replay_len(replay_len);
        }
        if session.common.arrived() {
            effects.extend(session.common.greeting());
            match session.conversation.keep_request() {
                Some(last_user) => {
                    let turn = session.turn.open();
                    effects.push(Effect::Send(ServerMessage::BidiResponseStart { turn }));
                    if session.drive.is_voice() {
                        effects.extend(session.voice_arrival(last_user));
                    } else {
                        effects.extend(session.call_model());
                    }
                }
                None => {
                    if let Some(voice) = session.drive.voice_mut() {
                        voice.set_replay_len(0);
                    }
                }
            }
        } else if session.conversation.messages().is_empty() {
            effects.extend(session.common.greeting());
        }
        session.push_state(&mut effects);
        (session, effects)
    }

    /// Handles one input.
    pub fn handle(&mut self, input: Input, now: Instant) -> Vec<Effect> {
        if self.turn.is_over() && input != Input::End {
            return vec![Effect::Send(ServerMessage::error(
                ErrorCode::SessionOver,
                "this session has ended or moved to another agent; start a new session",
                false,
            ))];
        }
        let mut effects = match input {
            // Typed text in a voice session goes into the stream (hybrid), not to a model call.
            Input::UserText { text, id } if self.drive.is_voice() => self.voice_typed(text, id, now),
            Input::UserText { text, id } => self.user_text(text, id, now),
            Input::ModelReply(reply) => self.model_reply(reply, now),
            Input::ModelFailed { code, message } => self.model_failed(&code, &message),
            Input::ContextTooLong { message } => self.context_too_long(&message),
            Input::Summary { id, outcome } => self.summary_arrived(id, outcome),
            Input::ToolFinished { tool_use_id, outcome } => self.tool_finished(&tool_use_id, outcome, now),
            Input::Consent { tool_use_id, approved } => self.consent(&tool_use_id, approved, now),
            Input::ClientToolResult { tool_use_id, result, error } => {
                self.client_tool_result(&tool_use_id, result, error, now)
            }
            Input::TransferResult { tool_use_id, outcome, message } => {
                self.transfer_result(&tool_use_id, outcome, &message, now)
            }
            Input::DigitsResult { tool_use_id, outcome, sent, message } => {
                self.digits_result(&tool_use_id, outcome, sent, &message, now)
            }
            Input::Cancel => self.cancel(now),
            Input::Dtmf { digits } => self.dtmf(&digits, now),
            Input::Tick => {
                let mut effects = self.tick(now);
                effects.extend(self.keys_paused(now));
                effects
            }
            Input::End => self.end("the session was closed"),
            Input::Hangup { reason } => self.end(&reason),
            Input::Voice(input) => self.voice_input(input, now),
        };
        self.tell_stream(&mut effects);
        self.push_state(&mut effects);
        effects
    }

    /// The agent.
    pub fn core(&self) -> &Arc<AgentCore> {
        self.common.core()
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        self.common.id()
    }

    /// The session memory.
    pub fn memory(&self) -> &Memory {
        self.common.memory()
    }

    /// The workflow state.
    pub fn workflow(&self) -> &WorkflowState {
        self.common.workflow()
    }

    /// The conversation as sent to the model.
    pub fn messages(&self) -> &[Message] {
        self.conversation.messages()
    }

    /// The summary of compacted turns (empty when none were compacted).
    pub fn summary(&self) -> &str {
        self.conversation.summary()
    }

    /// The text model this session calls (the Agent's, or the one it chose).
    pub fn model_id(&self) -> &str {
        self.common.model_id()
    }

    /// The agent this session may return to.
    pub fn return_to(&self) -> Option<&str> {
        self.common.return_to()
    }

    /// When the call started, milliseconds since the Unix epoch, as the gateway carried it
    /// ([`crate::grant::Carried::call_started_at_ms`]; checked with the grant): the call's
    /// clock (`turnTaking.maxCall`) counts from here across handoffs and resumes. `None`: no
    /// gateway said (the clock starts with this session).
    pub fn call_started_at_ms(&self) -> Option<u64> {
        self.common.call_started_at_ms()
    }

    /// Whether a turn is in progress.
    pub fn is_busy(&self) -> bool {
        self.turn.is_busy()
    }

    /// Whether the session is over (ended or handed off).
    pub fn is_over(&self) -> bool {
        self.turn.is_over()
    }

    /// User inputs waiting for the current turn to finish.
    pub fn queued(&self) -> usize {
        self.turn.queued()
    }

    /// Whether this session is driven by a streaming voice model.
    pub fn is_voice(&self) -> bool {
        self.drive.is_voice()
    }

    /// The history a voice stream replays when it opens: the carried conversation before
    /// the request a handoff brought along (that request is sent as text instead). A text
    /// session has no stream: the whole conversation.
    pub fn voice_history(&self) -> Vec<HistoryTurn> {
        match self.drive.voice() {
            Some(voice) => self.conversation.turns_before(voice.replay_len()),
            None => self.conversation.turns(),
        }
    }

    /// The tools a voice stream offers. A stream's tool list is fixed for its life, so it
    /// offers every tool the agent may ever use here — its tools (but those whose required
    /// memory can never be set in this session), its handoffs, the return to its caller and
    /// `workflow_goto`; the workflow and the tools' requirements still decide at each call
    /// whether the call is allowed now (refused calls get an error result, as in text).
    pub fn voice_tools(&self) -> Vec<crate::model::ToolDefinition> {
        self.common.all_tools()
    }

    /// What the session is doing now; `None` once it moved to another agent (that agent's
    /// session says what it does).
    pub fn state_now(&self) -> Option<SessionState> {
        if self.turn.is_handed_off() {
            return None;
        }
        if self.turn.is_ended() {
            return Some(SessionState::Ended);
        }
        let running = self.calls.running();
        if self.drive.is_voice() {
            let work = VoiceWork::new(running, self.drive.turn_open(), self.calls.awaits_consent());
            return Some(self.live.voice_state(work));
        }
        Some(if self.turn.in_model() {
            SessionState::Processing
        } else if self.turn.in_tools() && running {
            SessionState::ExecutingTool
        } else {
            SessionState::Ready
        })
    }

    /// Voice: whether the model's output is held back (the user cancelled its reply and has
    /// not spoken or typed since).
    pub fn output_muted(&self) -> bool {
        self.live.muted()
    }

    /// Whether a tool call waits for the user's consent.
    pub fn awaits_consent(&self) -> bool {
        self.calls.awaits_consent()
    }

    /// Whether a client tool call waits for the client's answer.
    pub fn awaits_client(&self) -> bool {
        self.calls.awaits_client()
    }

    /// The earliest moment something is due ([`Input::Tick`] then): the deadline of
    /// the consent request or client tool call that expires first, or the end of the
    /// caller's pause after keys pressed.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.calls.next_deadline(), self.keys.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The system prompt as it stands (rebuilt if the state changed since).
    pub fn system_prompt(&mut self) -> String {
        self.system_prompt_ref().to_owned()
    }

    /// The line the voice model is to say as the session opens, before the caller speaks:
    /// the Persona's greeting when it speaks first, or the message an outbound call leaves on
    /// a machine (`spec.telephony.answeringMachine.message`). The opening effects hold its
    /// final line; the voice adapter holds that back until the model said it.
    pub fn spoken_opening(&self) -> Option<&str> {
        self.common.spoken_opening()
    }

    /// [`Session::system_prompt`], borrowed: rebuilt only after a state change.
    pub fn system_prompt_ref(&mut self) -> &str {
        self.common.prompt(self.conversation.summary())
    }

    /// Adds `bidi_session_state` to `effects` when the state changed.
    fn push_state(&mut self, effects: &mut Vec<Effect>) {
        if let Some(state) = self.state_now() {
            self.live.push_state(state, effects);
        }
    }

    /// Voice: tells the live stream of the state changes among `effects` at once (see
    /// [`notice`]); the model's echo of the notice, should it come, is not the caller's.
    fn tell_stream(&mut self, effects: &mut Vec<Effect>) {
        if self.turn.is_over() {
            return;
        }
        let Some(voice) = self.drive.voice_mut() else { return };
        let core = self.common.core().clone();
        if let Some(text) = notice::tell(effects, &core.spec().workflow.spec, self.common.workflow().node()) {
            voice.remember_typed(&text);
        }
    }

    /// What the calls see of the session.
    fn cx(&mut self) -> (&mut Calls, Cx<'_>) {
        let cx = Cx { common: &mut self.common, conversation: &self.conversation, drive: &mut self.drive };
        (&mut self.calls, cx)
    }
}

#[cfg(test)]
#[path = "digits_tests.rs"]
mod digits_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
#[path = "voicemail_tests.rs"]
mod voicemail_tests;
#[cfg(test)]
#[path = "warm_tests.rs"]
mod warm_tests;
