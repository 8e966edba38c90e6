//! One agent, prepared for running sessions: its RuntimeSpec checked for what the core
//! needs (missing configuration is an error here, never a crash later), tool input
//! schemas compiled, and the tools offered at each workflow position worked out.
//!
//! Tool policy: a tool may run at a workflow node when one of the node's `tools` entries
//! (a name or a glob such as `crm_*`) matches it, none of its `denyTools` does, and the
//! Agent's `toolPolicy.deny` does not refuse it. A tool that a skill lists is moreover held
//! back until the model uses that skill (the built-in `use_skill` tool).

use std::collections::HashMap;

use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::{
    BuiltinKind, MemoryPath, TRANSFER_TO_PERSON_TOOL, ToolSpec, USE_SKILL_TOOL, glob_match, is_pattern,
};
use switchboard_crds::runtime::{RETURN_PREFIX, TRANSFER_PREFIX, return_tool_name};
use switchboard_crds::workflow::NodeKind;

use super::authority::{may_remember, missing_requirement};
use super::memory::Memory;
use super::workflow::{WorkflowState, reachable};
use crate::model::ToolDefinition;

/// The name of the tool that moves the workflow to another step.
pub const GOTO_TOOL: &str = "workflow_goto";

/// A RuntimeSpec the core cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The workflow's entry node does not exist.
    #[error("agent {agent}: workflow entry node {entry:?} does not exist; add it to the workflow's nodes")]
    MissingEntry {
        /// The agent.
        agent: String,
        /// The entry id.
        entry: String,
    },
    /// A workflow node names a tool the agent does not define.
    #[error(
        "agent {agent}: workflow node {node:?} allows tool {tool:?}, which the agent does not define; add it to spec.tools"
    )]
    UnknownNodeTool {
        /// The agent.
        agent: String,
        /// The node.
        node: String,
        /// The tool.
        tool: String,
    },
    /// A handoff node targets an agent that is not among the agent's handoffs.
    #[error(
        "agent {agent}: handoff node {node:?} transfers to {target:?}, which is not in spec.handoffs; add it there"
    )]
    UnknownHandoffTarget {
        /// The agent.
        agent: String,
        /// The node.
        node: String,
        /// The target.
        target: String,
    },
    /// An edge refers to a node that does not exist.
    #[error("agent {agent}: workflow edge {from:?} -> {to:?} refers to a node that does not exist")]
    DanglingEdge {
        /// The agent.
        agent: String,
        /// The edge's start.
        from: String,
        /// The edge's end.
        to: String,
    },
    /// A tool has no way to run, or more than one.
    #[error("agent {agent}: tool {tool:?} must set exactly one of http, mcp, builtin or client")]
    ToolTarget {
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
    },
    /// A tool's input schema cannot be compiled.
    #[error("agent {agent}: tool {tool:?} has an unusable inputSchema: {message}")]
    ToolSchema {
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
    /// A client tool's output schema cannot be compiled.
    #[error("agent {agent}: client tool {tool:?} has an unusable outputSchema: {message}")]
    OutputSchema {
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
    /// A tool binds an input that is not in its schema, or to a memory path that cannot be read.
    #[error("agent {agent}: tool {tool:?} binds {field:?}: {message}")]
    ToolBinding {
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
        /// The bound input field.
        field: String,
        /// Why it cannot be used.
        message: String,
    },
    /// A skill names a tool or skill the agent does not have.
    #[error("agent {agent}: skill {skill:?} names {name:?}, which the agent does not define")]
    UnknownSkillReference {
        /// The agent.
        agent: String,
        /// The skill.
        skill: String,
        /// The missing tool or skill.
        name: String,
    },
    /// A tool name collides with a reserved name.
    #[error(
        "agent {agent}: tool name {tool:?} is reserved (transfer_to_*, return_to_*, workflow_goto, use_skill); rename it"
    )]
    ReservedName {
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
    },
}

/// An agent ready to run sessions. Shared by all its sessions (`Arc<AgentCore>`).
#[derive(Debug)]
pub struct AgentCore {
    spec: RuntimeSpec,
    validators: HashMap<String, jsonschema::Validator>,
    /// The output schemas of client tools that have one.
    outputs: HashMap<String, jsonschema::Validator>,
    /// The input schemas of tools with a keypad input, without it: what the model gives.
    before_keys: HashMap<String, jsonschema::Validator>,
    /// What [`AgentCore::offered_tools`] offers at each node, worked out once.
    offers: HashMap<String, Offer>,
}

/// The tools offered at one workflow node, but for the return (whose name and description
/// depend on the session's caller).
#[derive(Debug)]
struct Offer {
    /// The tools of the nodes reachable from this one, then the reachable transfers.
    tools: Vec<ToolDefinition>,
    /// Whether a return to the caller is offered when the session has one.
    returns: bool,
    /// `workflow_goto`, when the node has a choosable move.
    goto: Option<ToolDefinition>,
}

impl AgentCore {
    /// Checks `spec` and compiles its tool schemas.
    pub fn new(spec: RuntimeSpec) -> Result<Self, ConfigError> {
        let agent = spec.agent.name.clone();
        let workflow = &spec.workflow.spec;
        if workflow.node(&workflow.entry).is_none() {
            return Err(ConfigError::MissingEntry { agent, entry: workflow.entry.clone() });
        }
        for edge in &workflow.edges {
            if workflow.node(&edge.from).is_none() || workflow.node(&edge.to).is_none() {
                return Err(ConfigError::DanglingEdge { agent, from: edge.from.clone(), to: edge.to.clone() });
            }
        }
        let mut validators = HashMap::new();
        let mut outputs = HashMap::new();
        let mut before_keys = HashMap::new();
        for tool in &spec.tools {
            let name = tool.name.clone();
            if name.starts_with(TRANSFER_PREFIX)
                || name.starts_with(RETURN_PREFIX)
                || name == GOTO_TOOL
                || name == USE_SKILL_TOOL
            {
                return Err(ConfigError::ReservedName { agent, tool: name });
            }
            if tool.target().is_none() {
                return Err(ConfigError::ToolTarget { agent, tool: name });
            }
            // A showCard tool's input is the card, whatever the Agent says (see `authority`).
            let card = tool.builtin.as_ref().is_some_and(|b| b.kind == BuiltinKind::ShowCard);
            let schema = if card { crate::protocol::card_schema() } else { tool.input_schema.clone() };
            let validator = jsonschema::validator_for(&schema).map_err(|e| ConfigError::ToolSchema {
                agent: agent.clone(),
                tool: name.clone(),
                message: e.to_string(),
            })?;
            check_bindings(&agent, tool)?;
            if let Some(schema) = tool.client.as_ref().and_then(|c| c.output_schema.as_ref()) {
                let output = jsonschema::validator_for(schema).map_err(|e| ConfigError::OutputSchema {
                    agent: agent.clone(),
                    tool: name.clone(),
                    message: e.to_string(),
                })?;
                outputs.insert(name.clone(), output);
            }
            // The model's part of a keypad tool's input is checked before the keys are typed.
            if tool.keypad.is_some() {
                let schema = crate::authority::without_keypad(tool, tool.input_schema.clone());
                let partial = jsonschema::validator_for(&schema).map_err(|e| ConfigError::ToolSchema {
                    agent: agent.clone(),
                    tool: name.clone(),
                    message: e.to_string(),
                })?;
                before_keys.insert(name.clone(), partial);
            }
            validators.insert(name, validator);
        }
        for node in &workflow.nodes {
            let unknown = |entry: &&String| {
                if is_pattern(entry) {
                    !validators.keys().any(|t| glob_match(entry, t))
                } else {
                    !validators.contains_key(entry.as_str())
                }
            };
            if let Some(tool) = node.tools.iter().find(unknown) {
                return Err(ConfigError::UnknownNodeTool { agent, node: node.id.clone(), tool: tool.clone() });
            }
            if let Some(target) = &node.handoff_to
                && !spec.handoffs.iter().any(|h| &h.agent == target)
            {
                return Err(ConfigError::UnknownHandoffTarget { agent, node: node.id.clone(), target: target.clone() });
            }
        }
        for skill in &spec.skills {
            let missing = skill
                .tools
                .iter()
                .find(|t| !validators.contains_key(t.as_str()))
                .or_else(|| skill.delegates_to.iter().find(|d| !spec.skills.iter().any(|s| &s.name == *d)));
            if let Some(name) = missing {
                return Err(ConfigError::UnknownSkillReference {
                    agent,
                    skill: skill.name.clone(),
                    name: name.clone(),
                });
            }
        }
        let mut core = Self { spec, validators, outputs, before_keys, offers: HashMap::new() };
        let offers = core.spec.workflow.spec.nodes.iter().map(|n| (n.id.clone(), core.offer_at(&n.id))).collect();
        core.offers = offers;
        Ok(core)
    }

    /// The resolved spec.
    pub fn spec(&self) -> &RuntimeSpec {
        &self.spec
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.spec.agent.name
    }

    /// The agent's tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.spec.tools.iter().find(|t| t.name == name)
    }

    /// Checks `input` against tool `name`'s schema; the errors are for the model to read.
    pub fn validate_input(&self, name: &str, input: &serde_json::Value) -> Result<(), String> {
        schema_errors(self.validators.get(name), input)
    }

    /// Checks the input the model gave tool `name` (with bound inputs filled): against its
    /// schema, but for a keypad input (typed later, then checked by [`Self::validate_input`]).
    pub fn validate_model_input(&self, name: &str, input: &serde_json::Value) -> Result<(), String> {
        match self.before_keys.get(name) {
            Some(partial) => schema_errors(Some(partial), input),
            None => self.validate_input(name, input),
        }
    }

    /// Checks a client's `result` for client tool `name` against its `outputSchema` (any
    /// result passes when it has none); the errors are for the model to read.
    pub fn validate_output(&self, name: &str, result: &serde_json::Value) -> Result<(), String> {
        schema_errors(self.outputs.get(name), result)
    }

    /// Whether tool `name` may run at `node`: the node's lists allow it and the Agent's
    /// policy does not deny it (skills aside: see [`AgentCore::skill_allows`]).
    pub fn tool_allowed_at(&self, node: &str, name: &str) -> bool {
        !self.spec.tool_policy.denies(name) && self.spec.workflow.spec.node(node).is_some_and(|n| n.allows_tool(name))
    }

    /// Whether `node` is where a transfer to `target` happens.
    pub fn is_transfer_node(&self, node: &str, target: &str) -> bool {
        self.spec
            .workflow
            .spec
            .node(node)
            .is_some_and(|n| n.kind == NodeKind::Handoff && n.handoff_to.as_deref() == Some(target))
    }

    /// Whether `node` is where the session returns to its caller.
    pub fn is_return_node(&self, node: &str) -> bool {
        self.spec.workflow.spec.node(node).is_some_and(|n| n.kind == NodeKind::Handoff && n.handoff_to.is_none())
    }

    /// Whether the workflow has a handoff node for `target` (else transfers to it are
    /// allowed from anywhere).
    pub fn governs_transfer(&self, target: &str) -> bool {
        self.spec.workflow.spec.nodes.iter().any(|n| n.handoff_to.as_deref() == Some(target))
    }

    /// Whether the workflow has a return node (else returns are allowed from anywhere).
    pub fn governs_return(&self) -> bool {
        self.spec.workflow.spec.nodes.iter().any(|n| n.kind == NodeKind::Handoff && n.handoff_to.is_none())
    }

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
        if let Some(caller) = return_to
            && offer.returns
        {
            offered.push(return_tool(caller));
        }
        offered.extend(offer.goto.clone());
        offered
    }

    /// Works out what is offered at `node`.
    fn offer_at(&self, node: &str) -> Offer {
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
    /// tools, its transfers, the return, and `workflow_goto` when the workflow has a
    /// choosable move. For models whose tool list is fixed for a whole stream (Nova Sonic);
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
        let is_return = name.starts_with(RETURN_PREFIX);
        handoff_tool(name, "Not available at this step.", is_return)
    }
}

/// Every `bind` of `tool` names a property of its input schema and a readable memory path
/// (the API crate's validation says the same, earlier).
fn check_bindings(agent: &str, tool: &ToolSpec) -> Result<(), ConfigError> {
    let properties = tool.input_schema.get("properties").and_then(serde_json::Value::as_object);
    for (field, source) in &tool.bind {
        let problem = if !properties.is_some_and(|p| p.contains_key(field)) {
            Some("it is not a property of the tool's inputSchema; add it there or remove the binding".to_owned())
        } else {
            MemoryPath::parse(source).err().map(|e| e.to_string())
        };
        if let Some(message) = problem {
            return Err(ConfigError::ToolBinding {
                agent: agent.to_owned(),
                tool: tool.name.clone(),
                field: field.clone(),
                message,
            });
        }
    }
    Ok(())
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

/// The first five ways `value` breaks `validator`'s schema (none without a validator).
fn schema_errors(validator: Option<&jsonschema::Validator>, value: &serde_json::Value) -> Result<(), String> {
    let Some(validator) = validator else { return Ok(()) };
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() { e.to_string() } else { format!("at {path}: {e}") }
        })
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}
