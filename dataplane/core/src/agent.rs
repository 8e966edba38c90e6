//! One agent, prepared for running sessions: its RuntimeSpec checked for what the core
//! needs (missing configuration is an error here, never a crash later), tool input
//! schemas compiled, and the tools offered at each workflow position worked out
//! (module `offer`).
//!
//! Tool policy: a tool may run at a workflow node when one of the node's `tools` entries
//! (a name or a glob such as `crm_*`) matches it, none of its `denyTools` does, and the
//! Agent's `toolPolicy.deny` does not refuse it. A tool that a skill lists is moreover held
//! back until the model uses that skill (the built-in `use_skill` tool).

mod offer;

use std::collections::HashMap;

use switchboard_crds::RuntimeSpec;
use switchboard_crds::agent::{BuiltinKind, MemoryPath, ToolSpec, USE_SKILL_TOOL, glob_match, is_pattern};
use switchboard_crds::runtime::{RETURN_PREFIX, TRANSFER_PREFIX};
use switchboard_crds::workflow::NodeKind;

use offer::Offer;

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
