//! One call through the pipeline: what becomes of it ([`Step`]: a result at once, a
//! consent request, an execution), the handoff and workflow tools, skills, and the
//! recording of its outcome (cache, truncation, memory, workflow facts, events).

use std::time::{Duration, Instant};

use switchboard_crds::agent::{BuiltinKind, Consent, SEND_DIGITS_TOOL, TRANSFER_TO_PERSON_TOOL, USE_SKILL_TOOL};
use switchboard_crds::runtime::{RETURN_PREFIX, TRANSFER_PREFIX};

use crate::agent::GOTO_TOOL;
use crate::events::Effect;
use crate::handoff::HandoffKind;
use crate::model::{ToolResult, ToolResultStatus};
use crate::protocol::{Card, ServerMessage};
use crate::skills::skill_data;
use crate::tools::{self, FailureKind, ToolFailure};

use super::{Calls, Cx};

/// What becomes of a call; a tool to run carries the input it runs with (the model's, with
/// the bound inputs filled in). A tool that runs goes to the adapter, or — a client tool —
/// to the client.
pub(super) enum Step {
    Done(Result<serde_json::Value, ToolFailure>),
    /// A `showCard` call: the card goes to the client, the model is told it was shown.
    Show(Card),
    AskConsent(serde_json::Value),
    Execute(serde_json::Value),
    Transfer(crate::transfer::Planned),
    /// A `send_digits` call: the keys go to the client, which says how they went.
    Digits(crate::digits::Planned),
}

impl Calls {
    /// Plans call `index`: tool events, then its result, a consent request or an execution.
    pub(super) fn start_call(&mut self, index: usize, cx: &mut Cx<'_>, now: Instant) -> Vec<Effect> {
        let mut effects = Vec::new();
        let (id, name, input) = {
            let call = &self.calls[index];
            (call.id.clone(), call.name.clone(), call.input.clone())
        };
        effects.push(Effect::Send(ServerMessage::ToolStart {
            tool_use_id: id.clone(),
            name: name.clone(),
            input: input.clone(),
            description: describe(cx, &name),
        }));
        effects.push(cx.common.transcript("tool_call", serde_json::json!({ "id": id, "name": name, "input": input })));
        let step = self.plan_call(&name, &input, cx, now, &mut effects);
        match step {
            Step::Done(outcome) => effects.extend(self.finish_call(index, outcome, cx, now)),
            Step::Show(card) => {
                effects.push(Effect::Send(ServerMessage::DisplayCard { tool_use_id: id, card }));
                effects.extend(self.finish_call(index, Ok(serde_json::json!({ "shown": true })), cx, now));
            }
            Step::AskConsent(input) => {
                self.calls[index].awaiting_consent = true;
                self.calls[index].input = input;
                effects.extend(self.ask_consent(index, cx, now));
            }
            Step::Execute(input) => {
                self.calls[index].input = input;
                effects.extend(self.run(index, cx, now));
            }
            Step::Transfer(planned) => effects.extend(self.request_transfer(index, planned, cx, now)),
            Step::Digits(planned) => effects.extend(self.request_digits(index, planned, cx, now)),
        }
        effects
    }

    fn plan_call(
        &mut self,
        name: &str,
        input: &serde_json::Value,
        cx: &mut Cx<'_>,
        now: Instant,
        effects: &mut Vec<Effect>,
    ) -> Step {
        // Before the handoff prefix: `transfer_to_person` starts with it too.
        if name == TRANSFER_TO_PERSON_TOOL && !cx.common.core().spec().telephony.people.is_empty() {
            return self.plan_transfer(input, cx);
        }
        if name == SEND_DIGITS_TOOL && cx.common.core().spec().telephony.send_digits {
            return self.plan_digits(input, cx);
        }
        if let Some(target) = name.strip_prefix(TRANSFER_PREFIX) {
            return Step::Done(self.plan_handoff(target, HandoffKind::Transfer, input, cx, effects));
        }
        if let Some(target) = name.strip_prefix(RETURN_PREFIX) {
            return Step::Done(self.plan_handoff(target, HandoffKind::Return, input, cx, effects));
        }
        if name == GOTO_TOOL {
            let step = input.get("step").and_then(serde_json::Value::as_str).unwrap_or_default();
            return Step::Done(match cx.common.goto(step) {
                Ok(moved) => {
                    effects.extend(moved);
                    Ok(serde_json::json!({ "step": cx.common.workflow().node() }))
                }
                Err(e) => Err(ToolFailure::new(FailureKind::NotAllowed, e.to_string())),
            });
        }
        if let Some(outcome) = skill_call(cx, name, input) {
            return Step::Done(outcome);
        }
        let core = cx.common.core().clone();
        let Some(tool) = core.tool(name) else {
            return Step::Done(Err(ToolFailure::new(
                FailureKind::UnknownTool,
                format!("there is no tool called {name:?}"),
            )));
        };
        let input = match cx.common.authorize(tool, input) {
            Ok(input) => input,
            Err(refused) => return Step::Done(Err(refused)),
        };
        let Some(path) = cx.common.path_to(|n| core.tool_allowed_at(n, name)) else {
            let message = format!(
                "tool {name:?} is not available at workflow step {:?}; use the tools of the current step",
                cx.common.workflow().node()
            );
            return Step::Done(Err(ToolFailure::new(FailureKind::NotAllowed, message)));
        };
        if let Err(message) = core.validate_model_input(name, &input) {
            return Step::Done(Err(ToolFailure::new(
                FailureKind::InvalidInput,
                format!("the input does not match the schema: {message}"),
            )));
        }
        if let Some(target) = path.last()
            && let Ok(moved) = cx.common.goto(target)
        {
            effects.extend(moved);
        }
        if let Some(builtin) = &tool.builtin
            && builtin.kind == BuiltinKind::EndSession
        {
            self.ending = true;
            return Step::Done(Ok(serde_json::json!({ "ending": true })));
        }
        if let Some(builtin) = &tool.builtin
            && builtin.kind == BuiltinKind::ShowCard
        {
            return match Card::from_input(&input) {
                Ok(card) => Step::Show(card),
                Err(message) => Step::Done(Err(ToolFailure::new(FailureKind::InvalidInput, message))),
            };
        }
        let ttl = Duration::from_secs(u64::from(tool.cache_ttl_seconds));
        // A keypad input is typed after the call: no result is cached for what the model gave.
        if tool.cache_ttl_seconds > 0
            && tool.keypad.is_none()
            && let Some(hit) = self.cache.get(name, &input, ttl, now)
        {
            return Step::Done(Ok(hit.clone()));
        }
        if tool.consent == Consent::Required { Step::AskConsent(input) } else { Step::Execute(input) }
    }

    fn plan_handoff(
        &mut self,
        target: &str,
        kind: HandoffKind,
        input: &serde_json::Value,
        cx: &mut Cx<'_>,
        effects: &mut Vec<Effect>,
    ) -> Result<serde_json::Value, ToolFailure> {
        let refuse = |message: String| Err(ToolFailure::new(FailureKind::NotAllowed, message));
        if self.pending_handoff.is_some() {
            return refuse("a handoff is already under way in this reply".into());
        }
        let core = cx.common.core().clone();
        let path = match kind {
            HandoffKind::Transfer => {
                if !core.spec().handoffs.iter().any(|h| h.agent == target) {
                    return refuse(format!("this agent cannot transfer to {target:?}"));
                }
                if core.governs_transfer(target) {
                    cx.common.path_to(|n| core.is_transfer_node(n, target))
                } else {
                    Some(Vec::new())
                }
            }
            HandoffKind::Return => {
                if cx.common.return_to() != Some(target) {
                    return refuse(format!(
                        "this session was not handed over by {target:?}, so it cannot return there"
                    ));
                }
                if core.governs_return() { cx.common.path_to(|n| core.is_return_node(n)) } else { Some(Vec::new()) }
            }
        };
        let Some(path) = path else {
            return refuse(format!(
                "the workflow does not allow this handoff from step {:?} yet; finish the current step first",
                cx.common.workflow().node()
            ));
        };
        if let Some(node) = path.last()
            && let Ok(moved) = cx.common.goto(node)
        {
            effects.extend(moved);
        }
        let (history, last_user) = (cx.conversation.turns(), cx.conversation.last_user_text());
        self.pending_handoff = Some(cx.common.handoff_request(target, kind, input, history, last_user));
        Ok(serde_json::json!({ "status": "transferring", "to": target }))
    }

    /// Records a call's outcome: cache, truncation, memory, workflow facts, events.
    pub(super) fn finish_call(
        &mut self,
        index: usize,
        outcome: Result<serde_json::Value, ToolFailure>,
        cx: &mut Cx<'_>,
        now: Instant,
    ) -> Vec<Effect> {
        let Some(call) = self.calls.get(index).cloned() else { return Vec::new() };
        let core = cx.common.core().clone();
        let tool = core.tool(&call.name);
        let mut effects = Vec::new();
        let (content, status) = match outcome {
            Ok(value) => {
                let mut cached = false;
                let mut value = value;
                if let Some(tool) = tool {
                    let ttl = Duration::from_secs(u64::from(tool.cache_ttl_seconds));
                    cached = !call.running && tool.cache_ttl_seconds > 0 && tool.builtin.is_none();
                    // A client's answer is not trusted: never cached, never remembered
                    // (validation refuses such tools; this holds whatever the spec says).
                    let trusted = tool.client.is_none();
                    if trusted && tool.cache_ttl_seconds > 0 && call.running && tool.keypad.is_none() {
                        self.cache.put(&call.name, &call.input, value.clone(), ttl, now);
                    }
                    if trusted {
                        effects.extend(cx.common.remember(tool, &value));
                    }
                    cx.common.record_tool(&call.name, true);
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
                    cx.common.record_tool(&call.name, false);
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
            cx.common
                .transcript("tool_result", serde_json::json!({ "id": call.id, "status": status, "content": content })),
        );
        if let Some(call) = self.calls.get_mut(index) {
            call.result = Some(ToolResult { tool_use_id: call.id.clone(), content, status });
            call.running = false;
            call.awaiting_consent = false;
            call.awaiting_client = false;
            call.keypad = None;
        }
        effects
    }
}

/// What tool `name` does, in the words of the Agent's tool spec (or of the handoff,
/// return or workflow tool the agent offers under that name); `None` for a name the
/// agent has no tool for.
fn describe(cx: &Cx<'_>, name: &str) -> Option<String> {
    if let Some(tool) = cx.common.core().tool(name) {
        return Some(tool.description.clone());
    }
    cx.common.all_tools().into_iter().find(|t| t.name == name).map(|t| t.description)
}

/// The skills' part of a tool call (see `skills`): `use_skill` itself, or a tool held back
/// by a skill not in use. `None` for every other call, which goes on through the pipeline.
/// A voice model's prompt is fixed for its stream, so there `use_skill`'s result carries
/// the skill's instructions and data context.
fn skill_call(
    cx: &mut Cx<'_>,
    name: &str,
    input: &serde_json::Value,
) -> Option<Result<serde_json::Value, ToolFailure>> {
    let core = cx.common.core().clone();
    if name == USE_SKILL_TOOL && !core.spec().skills.is_empty() {
        let name = input.get("skill").and_then(serde_json::Value::as_str).unwrap_or_default();
        let used = cx.common.use_skill(name).map_err(|m| ToolFailure::new(FailureKind::InvalidInput, m));
        return Some(used.map(|skill| {
            let mut result = serde_json::json!({ "skill": skill.name, "inUse": cx.common.workflow().skills() });
            if cx.drive.is_voice() {
                result["instructions"] = skill.instructions.clone().into();
                result["dataContext"] = skill_data(&skill).into();
            } else {
                result["note"] = "The skill's instructions and data are now in your system prompt.".into();
            }
            result
        }));
    }
    if core.skill_allows(cx.common.workflow(), name) {
        return None;
    }
    let holders = core.skills_of(name).join(" or ");
    Some(Err(ToolFailure::new(
        FailureKind::NotAllowed,
        format!("tool {name:?} belongs to the skill {holders}; call {USE_SKILL_TOOL} with that skill first"),
    )))
}
