//! What a session shares across its turns and modes (the shape of rustls's `CommonState`):
//! the agent, the session's id and date, its memory, its place in the workflow, how it
//! arrived (a handoff context) and where it may return, its text model, and the system
//! prompt built from them (cached until one of them changes). [`Common`] owns them; the
//! tool calls and the turn handlers change them only through its methods, which also say
//! so in effects (a workflow transition, a memory update, a transcript line).

use std::sync::Arc;

use switchboard_crds::agent::{Skill, ToolSpec};

use crate::agent::AgentCore;
use crate::authority;
use crate::events::{Effect, SessionInit};
use crate::grant::Carried;
use crate::handoff::{HandoffContext, HandoffKind, HandoffRequest, HistoryTurn, ReturnStatus, WorkflowSnapshot};
use crate::memory::Memory;
use crate::model::{ModelRequest, ToolDefinition};
use crate::protocol::{ServerMessage, TranscriptRole};
use crate::tools;
use crate::transcript::TranscriptEntry;
use crate::workflow::{Transition, TransitionError, WorkflowState};

use super::conversation::{Conversation, VOICE_REPLAY_TOKENS};
use super::say::final_text;

/// The state a session shares across turns.
#[derive(Debug)]
pub(crate) struct Common {
    core: Arc<AgentCore>,
    id: String,
    today: String,
    memory: Memory,
    workflow: WorkflowState,
    /// How the session arrived, when by handoff.
    arrival: Option<HandoffContext>,
    /// The agent it may return to.
    return_to: Option<String>,
    /// The Agent's `textModelId`, or the one the session chose from its `sessionModels`.
    model_id: String,
    /// The system prompt, until the state it is built from changes.
    prompt: Option<String>,
    /// When the call started (ms since the Unix epoch), as the gateway carried it.
    call_started_at_ms: Option<u64>,
}

impl Common {
    /// The shared state of a session of `core`'s agent starting with `init`, and the
    /// conversation it carries (the handoff's, or the one handed over).
    pub(crate) fn new(core: Arc<AgentCore>, init: SessionInit) -> (Self, Conversation) {
        let SessionInit { session_id, today, model: chosen_model, carried } = init;
        let Carried {
            memory,
            history,
            handoff,
            return_to: resumed_return_to,
            workflow: position,
            summary,
            call_started_at_ms,
        } = carried;
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
        let common = Self {
            core,
            id: session_id,
            today,
            memory: Memory::from_map(values),
            workflow,
            arrival: handoff,
            return_to,
            model_id,
            prompt: None,
            call_started_at_ms,
        };
        (common, Conversation::from_history(&turns, summary))
    }

    /// The agent.
    pub(crate) fn core(&self) -> &Arc<AgentCore> {
        &self.core
    }

    /// The session's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The session memory.
    pub(crate) fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The workflow state.
    pub(crate) fn workflow(&self) -> &WorkflowState {
        &self.workflow
    }

    /// The agent this session may return to.
    pub(crate) fn return_to(&self) -> Option<&str> {
        self.return_to.as_deref()
    }

    /// When the call started (ms since the Unix epoch), when a gateway said.
    pub(crate) fn call_started_at_ms(&self) -> Option<u64> {
        self.call_started_at_ms
    }

    /// The session's text model.
    pub(crate) fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Whether the session arrived by handoff.
    pub(crate) fn arrived(&self) -> bool {
        self.arrival.is_some()
    }

    /// A transcript line of this session.
    pub(crate) fn transcript(&self, event: &str, data: serde_json::Value) -> Effect {
        Effect::Transcript(TranscriptEntry {
            session_id: self.id.clone(),
            agent: self.core.name().to_owned(),
            event: event.to_owned(),
            data,
        })
    }

    /// The effects of workflow transitions made (the prompt changes with them).
    fn transitions(&mut self, transitions: &[Transition]) -> Vec<Effect> {
        let mut effects = Vec::new();
        for transition in transitions {
            self.prompt = None;
            let by = if transition.by_condition { "condition" } else { "model" };
            effects.push(Effect::Send(ServerMessage::WorkflowTransition {
                from: transition.from.clone(),
                to: transition.to.clone(),
                by: by.into(),
            }));
            effects.push(self.transcript(
                "transition",
                serde_json::json!({ "from": transition.from, "to": transition.to, "by": by }),
            ));
        }
        effects
    }

    /// Takes the transitions whose conditions hold now.
    pub(crate) fn advance(&mut self) -> Vec<Effect> {
        let transitions = self.workflow.advance(&self.core.spec().workflow.spec, &self.memory);
        self.transitions(&transitions)
    }

    /// The model moves the workflow to `node`.
    pub(crate) fn goto(&mut self, node: &str) -> Result<Vec<Effect>, TransitionError> {
        let core = self.core.clone();
        let transitions = self.workflow.goto(&core.spec().workflow.spec, node)?;
        Ok(self.transitions(&transitions))
    }

    /// The shortest move of the model's to a node `accept`s (empty: here).
    pub(crate) fn path_to(&self, accept: impl Fn(&str) -> bool) -> Option<Vec<String>> {
        self.workflow.path_to(&self.core.spec().workflow.spec, accept)
    }

    /// Whether the workflow is at an end node.
    pub(crate) fn at_end(&self) -> bool {
        self.workflow.at_end(&self.core.spec().workflow.spec)
    }

    /// A tool call of `name` succeeded or failed (a fact conditions read).
    pub(crate) fn record_tool(&mut self, name: &str, success: bool) {
        self.workflow.record_tool(name, success);
    }

    /// Puts skill `name` in use (see `skills`); the prompt changes with it.
    pub(crate) fn use_skill(&mut self, name: &str) -> Result<Skill, String> {
        let core = self.core.clone();
        let skill = core.use_skill(&mut self.workflow, name)?.clone();
        self.prompt = None;
        Ok(skill)
    }

    /// Every tool the agent may use in this session (a voice stream's fixed list).
    pub(crate) fn all_tools(&self) -> Vec<ToolDefinition> {
        self.core.all_tools(self.return_to.as_deref(), &self.memory)
    }

    /// `tool`'s input with its bound inputs filled from memory, or why it may not run.
    pub(crate) fn authorize(
        &self,
        tool: &ToolSpec,
        input: &serde_json::Value,
    ) -> Result<serde_json::Value, tools::ToolFailure> {
        authority::authorize(tool, input, &self.memory)
    }

    /// Stores what `tool`'s `remember` takes from its successful `result`. An identity key
    /// is written only by an identity provider: the API crate refuses other Agents, and a
    /// spec that skipped it still cannot make a tool's result say who the caller is.
    pub(crate) fn remember(&mut self, tool: &ToolSpec, result: &serde_json::Value) -> Vec<Effect> {
        let Some(rule) = &tool.remember else { return Vec::new() };
        let Some(value) = tools::remembered(rule, result) else { return Vec::new() };
        if !authority::may_remember(tool, &rule.key, &self.core.spec().identity_keys) {
            let reason = "only an identity provider may write an identity key";
            let refused = serde_json::json!({ "key": rule.key, "tool": tool.name, "reason": reason });
            return vec![self.transcript("memory_refused", refused)];
        }
        if !self.memory.set(&rule.key, value.clone()) {
            return Vec::new();
        }
        self.prompt = None;
        vec![
            Effect::Send(ServerMessage::MemoryUpdate { key: rule.key.clone(), value: value.clone() }),
            self.transcript("memory", serde_json::json!({ "key": rule.key, "value": value })),
        ]
    }

    /// The memory goes (the session ended or moved on).
    pub(crate) fn forget(&mut self) {
        self.memory.clear();
    }

    /// The token budget of the conversation: the model's, and — voice — at most what a
    /// stream replays.
    pub(crate) fn budget(&self, voice: bool) -> usize {
        let budget = self.core.spec().model.context_tokens_for(&self.model_id) as usize;
        if voice { budget.min(VOICE_REPLAY_TOKENS) } else { budget }
    }

    /// The system prompt as it stands, with `summary` (rebuilt if the state changed since).
    pub(crate) fn prompt(&mut self, summary: &str) -> &str {
        if self.prompt.is_none() {
            let spec = self.core.spec();
            let arrival = self.arrival.as_ref();
            self.prompt =
                Some(crate::prompt::session_prompt(spec, &self.memory, &self.workflow, &self.today, arrival, summary));
        }
        self.prompt.as_deref().unwrap_or_default()
    }

    /// Marks the prompt stale (the summary changed).
    pub(crate) fn invalidate_prompt(&mut self) {
        self.prompt = None;
    }

    /// The model call for `conversation`: its messages, the prompt, the tools offered at this
    /// workflow step (or, when none are, the ones the conversation used), and the session's
    /// text model with the Agent's sampling and reasoning settings.
    pub(crate) fn model_request(&mut self, conversation: &Conversation) -> ModelRequest {
        let core = self.core.clone();
        let model = &core.spec().model;
        let mut tools = core.offered_tools(&self.workflow, self.return_to.as_deref(), &self.memory);
        if tools.is_empty() {
            tools = conversation.tools_used().into_iter().map(|name| core.definition_of(name)).collect();
        }
        let mut request = ModelRequest::new(self.model_id.clone(), conversation.messages().to_vec());
        request.system = self.prompt(conversation.summary()).to_owned();
        request.tools = tools;
        request.max_tokens = model.max_tokens;
        request.temperature = model.temperature;
        request.top_p = model.top_p;
        request.reasoning = model.reasoning.as_ref().map(|r| r.effort);
        request
    }

    /// The greeting line a session opens with, and its record entry (empty when it does not
    /// greet): a new session's is the Persona's `greeting`; one that arrived by transfer
    /// greets only when the receiving Persona has `speakFirst` too — it speaks first, in its
    /// own voice, before it answers the carried request. A return is not greeted: the caller
    /// has met that agent already. The greeting is not part of the conversation sent to the
    /// model (the model answers the caller, not its own greeting).
    ///
    /// An outbound call a machine answered, on an Agent that declares the message to leave
    /// (`spec.telephony.answeringMachine.message`), opens with that message instead: its
    /// session starts after the beep ([`crate::outbound`]), so the machine records it.
    pub(crate) fn greeting(&self) -> Vec<Effect> {
        match self.opening_line().map(|(line, _)| line) {
            Some(greeting) => vec![
                Effect::Send(final_text(TranscriptRole::Assistant, greeting, None)),
                self.transcript("assistant", serde_json::json!({ "text": greeting })),
            ],
            None => Vec::new(),
        }
    }

    /// The line a session opens with (see [`Common::greeting`]), if any, and whether it is
    /// the message left on a machine.
    fn opening_line(&self) -> Option<(&str, bool)> {
        let spec = self.core.spec();
        let persona = &spec.persona.spec;
        let greets = match self.arrival.as_ref().map(|context| context.kind) {
            None => true,
            Some(HandoffKind::Transfer) => persona.speak_first,
            Some(HandoffKind::Return) => false,
        };
        if !greets {
            return None;
        }
        if self.arrival.is_none()
            && let Some(message) = spec.telephony.answering_machine.as_ref().and_then(|amd| amd.message_to_leave())
            && crate::outbound::answered_by_machine(&self.memory)
        {
            return Some((message, true));
        }
        persona.greeting.as_deref().filter(|g| !g.trim().is_empty()).map(|greeting| (greeting, false))
    }

    /// The line the voice model is asked to say before the caller speaks, if any: the
    /// message left on a machine (see [`Common::greeting`]) always; the greeting when the
    /// Persona speaks first.
    pub(crate) fn spoken_opening(&self) -> Option<&str> {
        let (line, message) = self.opening_line()?;
        (message || self.core.spec().persona.spec.speak_first).then_some(line)
    }

    /// The handoff request for a transfer to `target` or a return, built from this session
    /// and its conversation (`history`, the user's `last_user_message`).
    pub(crate) fn handoff_request(
        &self,
        target: &str,
        kind: HandoffKind,
        input: &serde_json::Value,
        history: Vec<HistoryTurn>,
        last_user_message: Option<String>,
    ) -> HandoffRequest {
        let text = |key: &str| input.get(key).and_then(serde_json::Value::as_str).map(str::to_owned);
        let reason = text("reason").or_else(|| text("summary")).unwrap_or_default();
        let (return_to, status, summary) = match kind {
            HandoffKind::Transfer => (self.return_to.clone().or_else(|| Some(self.core.name().to_owned())), None, None),
            HandoffKind::Return => {
                let status = input.get("status").and_then(|s| serde_json::from_value(s.clone()).ok());
                (None, Some(status.unwrap_or(ReturnStatus::Completed)), text("summary"))
            }
        };
        HandoffRequest {
            target: target.to_owned(),
            context: HandoffContext {
                from_agent: self.core.name().to_owned(),
                kind,
                intent: text("intent").or_else(|| self.memory.text_of("intent")).or_else(|| Some(reason.clone())),
                reason,
                last_user_message,
                verified_user: self.memory.get("verifiedUser").cloned(),
                workflow_state: WorkflowSnapshot {
                    agent: self.core.name().to_owned(),
                    node: self.workflow.node().to_owned(),
                    visited: self.workflow.visited().to_vec(),
                    skills: self.workflow.skills().to_vec(),
                },
                return_to,
                status,
                summary,
                memory: self.memory.as_map().clone(),
                history,
            },
        }
    }
}

#[cfg(test)]
mod tests;
