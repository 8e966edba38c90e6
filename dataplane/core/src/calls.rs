//! The tool pipeline inside a session: for each tool call of a model reply — handoff or
//! workflow move, or one of the agent's tools: authorised (its required memory is set, no
//! bound input given by the model; bound inputs filled from memory, see
//! [`crate::authority`]) -> allowed here (policy, moving along the workflow when the tool
//! belongs to a reachable step) -> input valid against the schema -> consent (a
//! `consent: required` tool waits for the user's approval) -> cached result or execution ->
//! truncation -> memory (`remember`, identity keys only from identity providers) -> result
//! to the model. Every failure becomes an error result; the session goes on.

use std::time::{Duration, Instant};

use switchboard_crds::agent::{BuiltinKind, Consent, ToolSpec};
use switchboard_crds::runtime::{RETURN_PREFIX, TRANSFER_PREFIX};

use super::agent::GOTO_TOOL;
use super::authority;
use super::handoff::HandoffKind;
use super::session::{Effect, Phase, Session};
use super::tools::{self, FailureKind, ToolFailure};
use crate::model::{ContentBlock, ToolResult, ToolResultStatus, ToolUse};
use crate::protocol::{ErrorCode, ServerMessage};

/// One tool call of the current round.
#[derive(Clone, Debug)]
pub(super) struct Call {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) input: serde_json::Value,
    pub(super) awaiting_consent: bool,
    /// When an unanswered consent request expires (see `consent`).
    pub(super) deadline: Option<Instant>,
    pub(super) running: bool,
    /// When the tool started running (for `tool_complete.duration_ms`).
    pub(super) started: Option<Instant>,
    pub(super) result: Option<ToolResult>,
}

/// What becomes of a call; a tool to run carries the input it runs with (the model's, with
/// the bound inputs filled in).
enum Step {
    Done(Result<serde_json::Value, ToolFailure>),
    AskConsent(serde_json::Value),
    Execute(serde_json::Value),
}

impl Session {
    pub(super) fn start_calls(&mut self, uses: Vec<ToolUse>, now: Instant) -> Vec<Effect> {
        self.calls = uses
            .into_iter()
            .map(|u| Call {
                id: u.id,
                name: u.name,
                input: u.input,
                awaiting_consent: false,
                deadline: None,
                running: false,
                started: None,
                result: None,
            })
            .collect();
        let mut effects = Vec::new();
        for index in 0..self.calls.len() {
            effects.extend(self.start_call(index, now));
        }
        effects.extend(self.maybe_done());
        effects
    }

    /// A voice model's tool call, which arrives on its own inside the stream: it joins the
    /// calls under way and goes through the same pipeline.
    pub(super) fn start_voice_call(&mut self, tool_use: ToolUse, now: Instant) -> Vec<Effect> {
        if self.calls.iter().any(|c| c.id == tool_use.id) {
            return Vec::new();
        }
        super::voice::record_voice_call(&mut self.messages, ContentBlock::ToolUse(tool_use.clone()));
        self.calls.push(Call {
            id: tool_use.id,
            name: tool_use.name,
            input: tool_use.input,
            awaiting_consent: false,
            deadline: None,
            running: false,
            started: None,
            result: None,
        });
        self.phase = Phase::Tools;
        let mut effects = self.start_call(self.calls.len() - 1, now);
        effects.extend(self.maybe_done());
        effects
    }

    /// Plans call `index`: tool events, then its result, a consent request or an execution.
    fn start_call(&mut self, index: usize, now: Instant) -> Vec<Effect> {
        let mut effects = Vec::new();
        let (id, name, input) = {
            let call = &self.calls[index];
            (call.id.clone(), call.name.clone(), call.input.clone())
        };
        effects.push(Effect::Send(ServerMessage::ToolStart {
            tool_use_id: id.clone(),
            name: name.clone(),
            input: input.clone(),
            description: self.describe(&name),
        }));
        effects.push(self.transcript("tool_call", serde_json::json!({ "id": id, "name": name, "input": input })));
        let step = self.plan_call(&name, &input, now, &mut effects);
        match step {
            Step::Done(outcome) => effects.extend(self.finish_call(index, outcome, now)),
            Step::AskConsent(input) => {
                self.calls[index].awaiting_consent = true;
                self.calls[index].input = input;
                effects.extend(self.ask_consent(index, now));
            }
            Step::Execute(input) => {
                self.calls[index].running = true;
                self.calls[index].started = Some(now);
                self.calls[index].input = input.clone();
                effects.push(Effect::ExecuteTool { tool_use_id: id, tool: name, input });
            }
        }
        effects
    }

    fn plan_call(&mut self, name: &str, input: &serde_json::Value, now: Instant, effects: &mut Vec<Effect>) -> Step {
        if let Some(target) = name.strip_prefix(TRANSFER_PREFIX) {
            return Step::Done(self.plan_handoff(target, HandoffKind::Transfer, input, effects));
        }
        if let Some(target) = name.strip_prefix(RETURN_PREFIX) {
            return Step::Done(self.plan_handoff(target, HandoffKind::Return, input, effects));
        }
        if name == GOTO_TOOL {
            let step = input.get("step").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
            let workflow = self.core.spec().workflow.spec.clone();
            return Step::Done(match self.workflow.goto(&workflow, &step) {
                Ok(transitions) => {
                    for t in &transitions {
                        effects.extend(self.transition_effects(t));
                    }
                    Ok(serde_json::json!({ "step": self.workflow.node() }))
                }
                Err(e) => Err(ToolFailure::new(FailureKind::NotAllowed, e.to_string())),
            });
        }
        if let Some(outcome) = self.skill_call(name, input) {
            return Step::Done(outcome);
        }
        let Some(tool) = self.core.tool(name).cloned() else {
            return Step::Done(Err(ToolFailure::new(
                FailureKind::UnknownTool,
                format!("there is no tool called {name:?}"),
            )));
        };
        let input = match authority::authorize(&tool, input, &self.memory) {
            Ok(input) => input,
            Err(refused) => return Step::Done(Err(refused)),
        };
        let input = &input;
        let core = self.core.clone();
        let Some(path) = self.workflow.path_to(&core.spec().workflow.spec, |n| core.tool_allowed_at(n, name)) else {
            let message = format!(
                "tool {name:?} is not available at workflow step {:?}; use the tools of the current step",
                self.workflow.node()
            );
            return Step::Done(Err(ToolFailure::new(FailureKind::NotAllowed, message)));
        };
        if let Err(message) = self.core.validate_input(name, input) {
            return Step::Done(Err(ToolFailure::new(
                FailureKind::InvalidInput,
                format!("the input does not match the schema: {message}"),
            )));
        }
        if !path.is_empty() {
            let workflow = self.core.spec().workflow.spec.clone();
            if let Some(target) = path.last()
                && let Ok(transitions) = self.workflow.goto(&workflow, target)
            {
                for t in &transitions {
                    effects.extend(self.transition_effects(t));
                }
            }
        }
        if let Some(builtin) = &tool.builtin
            && builtin.kind == BuiltinKind::EndSession
        {
            self.end_after_turn = true;
            return Step::Done(Ok(serde_json::json!({ "ending": true })));
        }
        let ttl = Duration::from_secs(u64::from(tool.cache_ttl_seconds));
        if tool.cache_ttl_seconds > 0
            && let Some(hit) = self.cache.get(name, input, ttl, now)
        {
            return Step::Done(Ok(hit.clone()));
        }
        if tool.consent == Consent::Required { Step::AskConsent(input.clone()) } else { Step::Execute(input.clone()) }
    }

    fn plan_handoff(
        &mut self,
        target: &str,
        kind: HandoffKind,
        input: &serde_json::Value,
        effects: &mut Vec<Effect>,
    ) -> Result<serde_json::Value, ToolFailure> {
        let refuse = |message: String| Err(ToolFailure::new(FailureKind::NotAllowed, message));
        if self.pending_handoff.is_some() {
            return refuse("a handoff is already under way in this reply".into());
        }
        let core = self.core.clone();
        let workflow = &core.spec().workflow.spec;
        let path = match kind {
            HandoffKind::Transfer => {
                if !core.spec().handoffs.iter().any(|h| h.agent == target) {
                    return refuse(format!("this agent cannot transfer to {target:?}"));
                }
                if core.governs_transfer(target) {
                    self.workflow.path_to(workflow, |n| core.is_transfer_node(n, target))
                } else {
                    Some(Vec::new())
                }
            }
            HandoffKind::Return => {
                if self.return_to.as_deref() != Some(target) {
                    return refuse(format!(
                        "this session was not handed over by {target:?}, so it cannot return there"
                    ));
                }
                if core.governs_return() {
                    self.workflow.path_to(workflow, |n| core.is_return_node(n))
                } else {
                    Some(Vec::new())
                }
            }
        };
        let Some(path) = path else {
            return refuse(format!(
                "the workflow does not allow this handoff from step {:?} yet; finish the current step first",
                self.workflow.node()
            ));
        };
        if let Some(node) = path.last()
            && let Ok(transitions) = self.workflow.goto(workflow, node)
        {
            for t in &transitions {
                effects.extend(self.transition_effects(t));
            }
        }
        let request = self.handoff_request(target, kind, input);
        self.pending_handoff = Some(request);
        Ok(serde_json::json!({ "status": "transferring", "to": target }))
    }

    /// Records a call's outcome: cache, truncation, memory, workflow facts, events.
    pub(super) fn finish_call(
        &mut self,
        index: usize,
        outcome: Result<serde_json::Value, ToolFailure>,
        now: Instant,
    ) -> Vec<Effect> {
        let Some(call) = self.calls.get(index).cloned() else { return Vec::new() };
        let tool = self.core.tool(&call.name).cloned();
        let mut effects = Vec::new();
        let (content, status) = match outcome {
            Ok(value) => {
                let mut cached = false;
                let mut value = value;
                if let Some(tool) = &tool {
                    let ttl = Duration::from_secs(u64::from(tool.cache_ttl_seconds));
                    cached = !call.running && tool.cache_ttl_seconds > 0 && tool.builtin.is_none();
                    if tool.cache_ttl_seconds > 0 && call.running {
                        self.cache.put(&call.name, &call.input, value.clone(), ttl, now);
                    }
                    effects.extend(self.remember(tool, &value));
                    self.workflow.record_tool(&call.name, true);
                    value = tools::truncate(value, tool.max_output_bytes as usize).0;
                }
                let ran = call.started.map(|started| now.saturating_duration_since(started));
                effects.push(Effect::Send(ServerMessage::ToolComplete {
                    tool_use_id: call.id.clone(),
                    name: call.name.clone(),
                    result: value.clone(),
                    cached,
                    duration_ms: ran.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                }));
                (value, ToolResultStatus::Success)
            }
            Err(failure) => {
                if tool.is_some() {
                    self.workflow.record_tool(&call.name, false);
                }
                let said = failure.kind.for_people();
                effects.push(Effect::Send(ServerMessage::ToolError {
                    tool_use_id: call.id.clone(),
                    name: call.name.clone(),
                    kind: failure.kind.as_str().to_owned(),
                    message: failure.message.clone(),
                    recoverable: said.recoverable,
                    user_message: said.message.to_owned(),
                    suggestion: said.suggestion.to_owned(),
                }));
                (failure.to_content(), ToolResultStatus::Error)
            }
        };
        effects.push(
            self.transcript("tool_result", serde_json::json!({ "id": call.id, "status": status, "content": content })),
        );
        self.set_result(index, ToolResult { tool_use_id: call.id, content, status });
        if let Some(call) = self.calls.get_mut(index) {
            call.running = false;
            call.awaiting_consent = false;
        }
        effects
    }

    /// Stores what `tool`'s `remember` takes from its successful `result`. An identity key
    /// is written only by an identity provider: the API crate refuses other Agents, and a
    /// spec that skipped it still cannot make a tool's result say who the caller is.
    fn remember(&mut self, tool: &ToolSpec, result: &serde_json::Value) -> Vec<Effect> {
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
        self.invalidate_prompt();
        vec![
            Effect::Send(ServerMessage::MemoryUpdate { key: rule.key.clone(), value: value.clone() }),
            self.transcript("memory", serde_json::json!({ "key": rule.key, "value": value })),
        ]
    }

    pub(super) fn tool_finished(
        &mut self,
        id: &str,
        outcome: Result<serde_json::Value, ToolFailure>,
        now: Instant,
    ) -> Vec<Effect> {
        let Some(index) = self.calls.iter().position(|c| c.id == id && c.running && c.result.is_none()) else {
            return Vec::new();
        };
        let mut effects = self.finish_call(index, outcome, now);
        effects.extend(self.maybe_done());
        effects
    }

    pub(super) fn consent(&mut self, id: &str, approved: bool, now: Instant) -> Vec<Effect> {
        let Some(index) = self.calls.iter().position(|c| c.id == id && c.awaiting_consent) else {
            return vec![Effect::Send(ServerMessage::error(
                ErrorCode::NoConsentPending,
                format!("no tool is waiting for consent with tool_use_id {id:?}"),
                true,
            ))];
        };
        self.calls[index].awaiting_consent = false;
        if approved {
            self.calls[index].running = true;
            self.calls[index].started = Some(now);
            let call = &self.calls[index];
            return vec![Effect::ExecuteTool {
                tool_use_id: call.id.clone(),
                tool: call.name.clone(),
                input: call.input.clone(),
            }];
        }
        let failure = ToolFailure::new(FailureKind::ConsentDeclined, "the user did not allow this tool to run");
        let mut effects = self.finish_call(index, Err(failure), now);
        effects.extend(self.maybe_done());
        effects
    }

    /// What tool `name` does, in the words of the Agent's tool spec (or of the handoff,
    /// return or workflow tool the agent offers under that name); `None` for a name the
    /// agent has no tool for.
    fn describe(&self, name: &str) -> Option<String> {
        if let Some(tool) = self.core.tool(name) {
            return Some(tool.description.clone());
        }
        let offered = self.core.all_tools(self.return_to.as_deref(), &self.memory);
        offered.into_iter().find(|t| t.name == name).map(|t| t.description)
    }

    pub(super) fn maybe_done(&mut self) -> Vec<Effect> {
        if self.phase == Phase::Tools && self.calls.iter().all(|c| c.result.is_some()) {
            return self.tools_done();
        }
        Vec::new()
    }
}
