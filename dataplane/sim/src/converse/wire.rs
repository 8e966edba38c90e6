//! The Converse request body as Bedrock receives it, parsed and validated the way the
//! service does, then reduced to what the rule engine needs ([`Turn`]).

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;

use crate::engine::{ToolResultView, Trigger, Turn};
use crate::script::ResultStatus;
use crate::service_error::ServiceError;
use crate::tokens::{estimate_json_tokens, estimate_tokens};

/// A parsed, valid Converse request.
#[derive(Debug, PartialEq)]
pub struct ParsedRequest {
    /// What the rule engine looks at.
    pub turn: Turn,
    /// Estimated input tokens.
    pub input_tokens: u64,
    /// `inferenceConfig.maxTokens`, when given.
    pub max_tokens: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    #[serde(default)]
    messages: Vec<WireMessage>,
    #[serde(default)]
    system: Vec<TextOrOther>,
    #[serde(default)]
    inference_config: Option<Inference>,
    #[serde(default)]
    tool_config: Option<ToolConfig>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    content: Vec<Block>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Block {
    text: Option<String>,
    tool_use: Option<WireToolUse>,
    tool_result: Option<WireToolResult>,
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct TextOrOther {
    text: Option<String>,
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireToolUse {
    tool_use_id: String,
    name: String,
    input: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireToolResult {
    tool_use_id: String,
    content: Vec<ResultContent>,
    status: Option<String>,
}

#[derive(Deserialize)]
struct ResultContent {
    text: Option<String>,
    json: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inference {
    max_tokens: Option<i64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
}

#[derive(Deserialize)]
struct ToolConfig {
    tools: Vec<WireTool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireTool {
    tool_spec: Option<ToolSpec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolSpec {
    name: String,
    #[serde(default)]
    description: String,
    input_schema: serde_json::Value,
}

/// Parses and validates the body of a Converse or ConverseStream request.
pub fn parse(model_id: &str, body: &[u8]) -> Result<ParsedRequest, ServiceError> {
    let request: Request = serde_json::from_slice(body).map_err(|e| {
        ServiceError::validation(format!("Malformed input request: {e}, please reformat your input and try again."))
    })?;
    let max_tokens = check_inference(request.inference_config.as_ref())?;
    let (offered_tools, tool_tokens) = check_tools(request.tool_config.as_ref())?;
    check_roles(&request.messages)?;
    let mut input_tokens = tool_tokens;
    let system: Vec<&str> = request.system.iter().filter_map(|b| b.text.as_deref()).collect();
    let system = system.join("\n");
    input_tokens += estimate_tokens(&system);
    input_tokens += request.system.iter().map(|b| other_tokens(&b.other)).sum::<u64>();

    let mut tool_names: HashMap<&str, &str> = HashMap::new();
    let mut latest_user_text = String::new();
    let mut trigger = Trigger::Nothing;
    for (index, message) in request.messages.iter().enumerate() {
        let mut texts = Vec::new();
        let mut results = Vec::new();
        for block in &message.content {
            input_tokens += block_tokens(block);
            if let Some(text) = &block.text {
                texts.push(text.as_str());
            }
            if let Some(tool_use) = &block.tool_use {
                if request.tool_config.is_none() {
                    return Err(ServiceError::validation(
                        "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
                    ));
                }
                tool_names.insert(&tool_use.tool_use_id, &tool_use.name);
            }
            if let Some(result) = &block.tool_result {
                results.push(result_view(index, result, &tool_names, request.tool_config.is_some())?);
            }
        }
        if message.role == "user" {
            if !texts.is_empty() {
                latest_user_text = texts.join("\n");
            }
            trigger = match (results.is_empty(), texts.is_empty()) {
                (false, _) => Trigger::ToolResults(results),
                (true, false) => Trigger::UserText(texts.join("\n")),
                (true, true) => Trigger::Nothing,
            };
        } else {
            trigger = Trigger::Nothing;
        }
    }
    let turn = Turn { model_id: model_id.to_owned(), system, latest_user_text, trigger, offered_tools };
    Ok(ParsedRequest { turn, input_tokens, max_tokens })
}

fn check_inference(inference: Option<&Inference>) -> Result<Option<u32>, ServiceError> {
    let Some(inference) = inference else {
        return Ok(None);
    };
    for (name, value) in [("temperature", inference.temperature), ("topP", inference.top_p)] {
        if value.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
            return Err(ServiceError::validation(format!(
                "The value of inferenceConfig.{name} must be between 0 and 1; adjust it and try again."
            )));
        }
    }
    match inference.max_tokens {
        None => Ok(None),
        Some(n) if n >= 1 => Ok(Some(u32::try_from(n).unwrap_or(u32::MAX))),
        Some(n) => Err(ServiceError::validation(format!(
            "The value of inferenceConfig.maxTokens must be at least 1, not {n}."
        ))),
    }
}

fn check_tools(config: Option<&ToolConfig>) -> Result<(BTreeSet<String>, u64), ServiceError> {
    let mut names = BTreeSet::new();
    let mut tokens = 0;
    let Some(config) = config else {
        return Ok((names, tokens));
    };
    if config.tools.is_empty() {
        return Err(ServiceError::validation("The toolConfig.tools list must contain at least one tool."));
    }
    for (i, tool) in config.tools.iter().enumerate() {
        let Some(spec) = &tool.tool_spec else {
            continue;
        };
        let valid_name = !spec.name.is_empty()
            && spec.name.len() <= 64
            && spec.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(ServiceError::validation(format!(
                "The tool name {:?} at toolConfig.tools.{i} is not valid: use 1 to 64 letters, digits, '_' or '-'.",
                spec.name
            )));
        }
        if !names.insert(spec.name.clone()) {
            return Err(ServiceError::validation(format!(
                "The toolConfig contains duplicate tool name {:?}; tool names must be unique.",
                spec.name
            )));
        }
        if spec.input_schema.get("json").is_none() {
            return Err(ServiceError::validation(format!(
                "The tool {:?} needs inputSchema.json with a JSON schema.",
                spec.name
            )));
        }
        tokens +=
            estimate_tokens(&spec.name) + estimate_tokens(&spec.description) + estimate_json_tokens(&spec.input_schema);
    }
    Ok((names, tokens))
}

fn check_roles(messages: &[WireMessage]) -> Result<(), ServiceError> {
    let Some(first) = messages.first() else {
        return Err(ServiceError::validation("The messages field must contain at least one message."));
    };
    if first.role != "user" {
        return Err(ServiceError::validation(
            "A conversation must start with a user message. Try again with a conversation that starts with a user message.",
        ));
    }
    for (i, message) in messages.iter().enumerate() {
        if message.role != "user" && message.role != "assistant" {
            return Err(ServiceError::validation(format!(
                "The role {:?} of messages.{i} is not valid: use user or assistant.",
                message.role
            )));
        }
        if message.content.is_empty() {
            return Err(ServiceError::validation(format!(
                "The content field in the Message object at messages.{i} is empty. Add a ContentBlock object to the content field and try again."
            )));
        }
        if i > 0 && messages[i - 1].role == message.role {
            return Err(ServiceError::validation(
                "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.",
            ));
        }
    }
    Ok(())
}

fn result_view(
    index: usize,
    result: &WireToolResult,
    tool_names: &HashMap<&str, &str>,
    has_tool_config: bool,
) -> Result<ToolResultView, ServiceError> {
    if !has_tool_config {
        return Err(ServiceError::validation(
            "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
        ));
    }
    let name = tool_names.get(result.tool_use_id.as_str()).ok_or_else(|| {
        ServiceError::validation(format!(
            "The toolResult at messages.{index} has toolUseId {:?}, which matches no toolUse of an earlier assistant message.",
            result.tool_use_id
        ))
    })?;
    let status = match result.status.as_deref() {
        None | Some("success") => ResultStatus::Success,
        Some("error") => ResultStatus::Error,
        Some(other) => {
            return Err(ServiceError::validation(format!(
                "The toolResult status {other:?} is not valid: use success or error."
            )));
        }
    };
    let content = result.content.iter().find_map(|c| c.json.clone()).unwrap_or_else(|| {
        let text: Vec<&str> = result.content.iter().filter_map(|c| c.text.as_deref()).collect();
        let text = text.join("\n");
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
    });
    Ok(ToolResultView { name: (*name).to_owned(), status, content })
}

fn block_tokens(block: &Block) -> u64 {
    let mut tokens = block.text.as_deref().map_or(0, estimate_tokens);
    if let Some(tool_use) = &block.tool_use {
        tokens += estimate_tokens(&tool_use.name) + estimate_json_tokens(&tool_use.input);
    }
    if let Some(result) = &block.tool_result {
        for content in &result.content {
            tokens += content.text.as_deref().map_or(0, estimate_tokens);
            tokens += content.json.as_ref().map_or(0, estimate_json_tokens);
        }
    }
    tokens + other_tokens(&block.other)
}

fn other_tokens(other: &serde_json::Map<String, serde_json::Value>) -> u64 {
    other.values().map(estimate_json_tokens).sum()
}
