//! What the model is offered of the agent's tools: at each workflow position (worked out
//! once per node, [`Offer`]), for the whole of a voice stream ([`AgentCore::all_tools`]),
//! and the definitions of the control tools the core adds (transfers, the return,
//! `workflow_goto`, and on phone calls `send_digits`).

use switchboard_crds::agent::USE_SKILL_TOOL;
use switchboard_crds::agent::{SEND_DIGITS_TOOL, TRANSFER_TO_PERSON_TOOL};
use switchboard_crds::runtime::{RETURN_PREFIX, return_tool_name};

use super::{AgentCore, GOTO_TOOL};
use crate::authority::{may_remember, missing_requirement};
use crate::memory::Memory;
use crate::model::ToolDefinition;
use crate::workflow::{WorkflowState, reachable};

/// The tools offered at one workflow node, but for the return (whose name and description
/// depend on the session's caller).
#[derive(Debug)]
pub(super) struct Offer {
    /// The tools of the nodes reachable from this one, then the reachable transfers.
    tools: Vec<ToolDefinition>,
    /// Whether a return to the caller is offered when the session has one.
    returns: bool,
    /// `workflow_goto`, when the node has a choosable move.
    goto: Option<ToolDefinition>,
}

impl AgentCore {
    /// The tools offered to the model at `state`: those of the current node and of the
    /// nodes the model can move to without a condition (but a tool whose required memory
    /// is not set in `memory`), the transfers and return reachable that way, and
    /// `workflow_goto` when the current node has a choosable move.
    pub fn offered_tools(
        &self,
        state: &WorkflowState,
        return_to: Option<&str>,
        memory: &Memory,
    ) -> Vec<ToolDefinition> {
        let worked_out;
        let offer = match self.offers.get(state.node()) {
            Some(offer) => offer,
            None => {
                worked_out = self.offer_at(state.node());
                &worked_out
            }
        };
        let mut offered = Vec::with_capacity(offer.tools.len() + 3);
        offered.extend(
            offer
                .tools
                .iter()
                .filter(|d| self.tool(&d.name).is_none_or(|t| missing_requirement(t, memory).is_none()))
                .filter(|d| self.skill_allows(state, &d.name))
                .cloned(),
        );
        offered.extend(self.use_skill_tool());
        offered.extend(crate::transfer::tool(&self.spec.telephony));
        offered.extend(self.digits_tool(memory));
        if let Some(caller) = return_to
            && offer.returns
        {
            offered.push(return_tool(caller));
        }
        offered.extend(offer.goto.clone());
        offered
    }

    /// Works out what is offered at `node`.
    pub(super) fn offer_at(&self, node: &str) -> Offer {
        let workflow = &self.spec.workflow.spec;
        let nodes = reachable(workflow, node);
        let mut tools: Vec<ToolDefinition> = self
            .spec
            .tools
            .iter()
            .filter(|t| nodes.iter().any(|n| self.tool_allowed_at(n, &t.name)))
            .map(ToolDefinition::from)
            .collect();
        for handoff in &self.spec.handoffs {
            if !self.governs_transfer(&handoff.agent) || nodes.iter().any(|n| self.is_transfer_node(n, &handoff.agent))
            {
                tools.push(handoff_tool(&handoff.tool, &handoff.description, false));
            }
        }
        Offer {
            tools,
            returns: !self.governs_return() || nodes.iter().any(|n| self.is_return_node(n)),
            goto: workflow.edges.iter().any(|e| e.from == node && e.when.is_none()).then(goto_tool),
        }
    }
}

impl AgentCore {
    /// Every tool the agent may use in a session that may return to `return_to`: its own
    /// tools, its transfers, the return, `workflow_goto` when the workflow has a choosable
    /// move, and `send_digits` on a phone call whose Agent allows it. For models whose tool list is fixed for a whole stream (Nova Sonic);
    /// the workflow still allows or refuses each call. A tool whose required memory is
    /// neither in `memory` nor written by one of the agent's own tools is left out (it could
    /// never run in this stream); one whose memory may come later is offered, and refused
    /// until then.
    pub fn all_tools(&self, return_to: Option<&str>, memory: &Memory) -> Vec<ToolDefinition> {
        let obtainable = |key: &str| {
            memory.get(key).is_some_and(|v| !v.is_null())
                || self.spec.tools.iter().any(|t| {
                    t.remember.as_ref().is_some_and(|r| r.key == key && may_remember(t, key, &self.spec.identity_keys))
                })
        };
        let mut tools: Vec<ToolDefinition> = self
            .spec
            .tools
            .iter()
            .filter(|t| t.required_memory().into_iter().all(obtainable) && !self.spec.tool_policy.denies(&t.name))
            .map(ToolDefinition::from)
            .collect();
        tools.extend(self.use_skill_tool());
        tools.extend(crate::transfer::tool(&self.spec.telephony));
        tools.extend(self.digits_tool(memory));
        for handoff in &self.spec.handoffs {
            tools.push(handoff_tool(&handoff.tool, &handoff.description, false));
        }
        if let Some(caller) = return_to {
            tools.push(return_tool(caller));
        }
        if self.spec.workflow.spec.edges.iter().any(|e| e.when.is_none()) {
            tools.push(goto_tool());
        }
        tools
    }

    /// A definition for a tool the conversation already used: Bedrock refuses requests
    /// whose history holds tool blocks but that offer no tools, so when nothing is offered
    /// at a step these are sent (calling them is still refused by the workflow).
    pub fn definition_of(&self, name: &str) -> ToolDefinition {
        if let Some(tool) = self.tool(name) {
            return ToolDefinition::from(tool);
        }
        if name == GOTO_TOOL {
            return goto_tool();
        }
        if name == USE_SKILL_TOOL
            && let Some(tool) = self.use_skill_tool()
        {
            return tool;
        }
        if name == TRANSFER_TO_PERSON_TOOL
            && let Some(tool) = crate::transfer::tool(&self.spec.telephony)
        {
            return tool;
        }
        if name == SEND_DIGITS_TOOL
            && let Some(tool) = crate::digits::tool(&self.spec.telephony)
        {
            return tool;
        }
        let is_return = name.starts_with(RETURN_PREFIX);
        handoff_tool(name, "Not available at this step.", is_return)
    }

    /// `send_digits`, where the Agent allows it (`spec.telephony.sendDigits`) and the
    /// session is a phone call (its `memory` has the call the gateway vouched for): keys
    /// can be pressed nowhere else.
    fn digits_tool(&self, memory: &Memory) -> Option<ToolDefinition> {
        crate::digits::tool(&self.spec.telephony).filter(|_| crate::digits::is_phone_call(memory))
    }
}

/// The tool that returns the session to `caller`.
fn return_tool(caller: &str) -> ToolDefinition {
    let description = format!("Return the customer to the {caller} agent when your part is done or cannot be done.");
    handoff_tool(&return_tool_name(caller), &description, true)
}

fn handoff_tool(name: &str, description: &str, is_return: bool) -> ToolDefinition {
    let input_schema = if is_return {
        serde_json::json!({
            "type": "object",
            "properties": {
                "status": { "type": "string", "enum": ["completed", "failed", "cancelled"], "description": "How your part ended." },
                "summary": { "type": "string", "description": "What was done, for the next agent." }
            },
            "required": ["summary"]
        })
    } else {
        serde_json::json!({
            "type": "object",
            "properties": {
                "reason": { "type": "string", "description": "Why the customer is transferred." },
                "intent": { "type": "string", "description": "What the customer wants, in a few words." }
            },
            "required": ["reason"]
        })
    };
    ToolDefinition { name: name.to_owned(), description: description.to_owned(), input_schema }
}

fn goto_tool() -> ToolDefinition {
    ToolDefinition {
        name: GOTO_TOOL.to_owned(),
        description: "Move the conversation to another workflow step that can be reached from the current one."
            .to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": { "step": { "type": "string", "description": "The id of the step to move to." } },
            "required": ["step"]
        }),
    }
}
