//! Conversions between the provider-neutral model types and the Bedrock SDK's Converse
//! types, including JSON <-> Smithy `Document`.

use std::collections::HashMap;

use aws_sdk_bedrockruntime::types as sdk;
use aws_smithy_types::{Document, Number};
use switchboard_crds::agent::{ReasoningEffort, ReasoningStyle, text_model};

use crate::{
    ContentBlock, Message, ModelError, ModelRequest, Role, StopReason, ToolDefinition, ToolResult, ToolResultStatus,
    ToolUse,
};

/// The Converse parts of a [`ModelRequest`], ready for the SDK's fluent builder.
#[derive(Debug)]
pub struct ConverseParts {
    pub system: Vec<sdk::SystemContentBlock>,
    pub messages: Vec<sdk::Message>,
    pub tool_config: Option<sdk::ToolConfiguration>,
    pub inference: sdk::InferenceConfiguration,
    /// `additionalModelRequestFields`: the reasoning settings, for a model that takes them.
    pub additional: Option<Document>,
}

/// Maps a request to the SDK's Converse types.
pub fn to_converse(request: &ModelRequest) -> Result<ConverseParts, ModelError> {
    let system = if request.system.is_empty() {
        Vec::new()
    } else {
        vec![sdk::SystemContentBlock::Text(request.system.clone())]
    };
    let messages = request.messages.iter().map(message).collect::<Result<Vec<_>, _>>()?;
    let tool_config = if request.tools.is_empty() {
        None
    } else {
        let tools = request.tools.iter().map(tool).collect::<Result<Vec<_>, _>>()?;
        Some(sdk::ToolConfiguration::builder().set_tools(Some(tools)).build().map_err(invalid)?)
    };
    let inference = sdk::InferenceConfiguration::builder()
        .max_tokens(i32::try_from(request.max_tokens).unwrap_or(i32::MAX))
        .temperature(request.temperature)
        .top_p(request.top_p)
        .build();
    let additional = request.reasoning.and_then(|effort| reasoning_fields(&request.model_id, effort));
    Ok(ConverseParts { system, messages, tool_config, inference, additional })
}

/// The `additionalModelRequestFields` that turn on reasoning with `effort` for `model_id`,
/// or `None` for a model that takes no reasoning settings (a fallback may not: it is then
/// called without them).
pub fn reasoning_fields(model_id: &str, effort: ReasoningEffort) -> Option<Document> {
    match text_model(model_id)?.reasoning {
        ReasoningStyle::NovaEffort => Some(json_to_document(&serde_json::json!({
            "reasoningConfig": { "type": "enabled", "maxReasoningEffort": effort.as_str() }
        }))),
        ReasoningStyle::None => None,
    }
}

fn message(message: &Message) -> Result<sdk::Message, ModelError> {
    let role = match message.role {
        Role::User => sdk::ConversationRole::User,
        Role::Assistant => sdk::ConversationRole::Assistant,
    };
    let content = message.content.iter().map(content_block).collect::<Result<Vec<_>, _>>()?;
    sdk::Message::builder().role(role).set_content(Some(content)).build().map_err(invalid)
}

fn content_block(block: &ContentBlock) -> Result<sdk::ContentBlock, ModelError> {
    Ok(match block {
        ContentBlock::Text(text) => sdk::ContentBlock::Text(text.clone()),
        ContentBlock::ToolUse(ToolUse { id, name, input }) => sdk::ContentBlock::ToolUse(
            sdk::ToolUseBlock::builder()
                .tool_use_id(id)
                .name(name)
                .input(json_to_document(input))
                .build()
                .map_err(invalid)?,
        ),
        ContentBlock::ToolResult(result) => sdk::ContentBlock::ToolResult(tool_result(result)?),
    })
}

/// A tool result: a JSON string becomes a text block, an object a JSON block, and any
/// other JSON value is wrapped as `{"result": value}` because Converse requires JSON
/// tool-result content to be an object.
fn tool_result(result: &ToolResult) -> Result<sdk::ToolResultBlock, ModelError> {
    let content = match &result.content {
        serde_json::Value::String(text) => sdk::ToolResultContentBlock::Text(text.clone()),
        value @ serde_json::Value::Object(_) => sdk::ToolResultContentBlock::Json(json_to_document(value)),
        other => sdk::ToolResultContentBlock::Json(json_to_document(&serde_json::json!({ "result": other }))),
    };
    let status = match result.status {
        ToolResultStatus::Success => sdk::ToolResultStatus::Success,
        ToolResultStatus::Error => sdk::ToolResultStatus::Error,
    };
    sdk::ToolResultBlock::builder()
        .tool_use_id(&result.tool_use_id)
        .content(content)
        .status(status)
        .build()
        .map_err(invalid)
}

fn tool(definition: &ToolDefinition) -> Result<sdk::Tool, ModelError> {
    let spec = sdk::ToolSpecification::builder()
        .name(&definition.name)
        .description(&definition.description)
        .input_schema(sdk::ToolInputSchema::Json(json_to_document(&definition.input_schema)))
        .build()
        .map_err(invalid)?;
    Ok(sdk::Tool::ToolSpec(spec))
}

fn invalid(error: aws_smithy_types::error::operation::BuildError) -> ModelError {
    ModelError::Validation { message: format!("the request cannot be expressed for Converse: {error}") }
}

/// Maps a Converse stop reason.
pub fn stop_reason(reason: &sdk::StopReason) -> StopReason {
    match reason {
        sdk::StopReason::EndTurn => StopReason::EndTurn,
        sdk::StopReason::ToolUse => StopReason::ToolUse,
        sdk::StopReason::MaxTokens => StopReason::MaxTokens,
        other => StopReason::Other(other.as_str().to_owned()),
    }
}

/// Converts JSON to a Smithy document.
pub fn json_to_document(value: &serde_json::Value) -> Document {
    match value {
        serde_json::Value::Null => Document::Null,
        serde_json::Value::Bool(b) => Document::Bool(*b),
        serde_json::Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or(f64::NAN))
        }),
        serde_json::Value::String(s) => Document::String(s.clone()),
        serde_json::Value::Array(items) => Document::Array(items.iter().map(json_to_document).collect()),
        serde_json::Value::Object(map) => {
            Document::Object(map.iter().map(|(k, v)| (k.clone(), json_to_document(v))).collect::<HashMap<_, _>>())
        }
    }
}

/// Converts a Smithy document to JSON (non-finite floats become `null`).
pub fn document_to_json(document: &Document) -> serde_json::Value {
    match document {
        Document::Null => serde_json::Value::Null,
        Document::Bool(b) => serde_json::Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => serde_json::Value::from(*u),
        Document::Number(Number::NegInt(i)) => serde_json::Value::from(*i),
        Document::Number(Number::Float(f)) => {
            serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, serde_json::Value::Number)
        }
        Document::String(s) => serde_json::Value::String(s.clone()),
        Document::Array(items) => serde_json::Value::Array(items.iter().map(document_to_json).collect()),
        Document::Object(map) => {
            serde_json::Value::Object(map.iter().map(|(k, v)| (k.clone(), document_to_json(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_goes_only_to_a_model_that_takes_it() {
        let mut request = ModelRequest::new("us.amazon.nova-2-lite-v1:0", vec![Message::user_text("hi")]);
        request.reasoning = Some(ReasoningEffort::High);
        let parts = to_converse(&request).expect("converts");
        let expected = serde_json::json!({ "reasoningConfig": { "type": "enabled", "maxReasoningEffort": "high" } });
        assert_eq!(parts.additional.as_ref().map(document_to_json), Some(expected));
        request.model_id = "amazon.nova-lite-v1:0".into();
        assert!(to_converse(&request).expect("converts").additional.is_none(), "Nova Lite takes no reasoning");
        request.reasoning = None;
        request.model_id = "amazon.nova-2-lite-v1:0".into();
        assert!(to_converse(&request).expect("converts").additional.is_none(), "off unless asked for");
    }

    #[test]
    fn json_survives_a_document_round_trip() {
        let value = serde_json::json!({
            "name": "Ada", "balance": -12.5, "count": 3, "neg": -4, "ok": true,
            "none": null, "list": [1, "two", {"three": 3}]
        });
        assert_eq!(document_to_json(&json_to_document(&value)), value);
    }

    #[test]
    fn requests_map_every_block_kind() {
        let mut request = ModelRequest::new(
            "m",
            vec![
                Message::user_text("hi"),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolUse(ToolUse {
                        id: "t1".into(),
                        name: "check_balance".into(),
                        input: serde_json::json!({}),
                    })],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResult {
                        tool_use_id: "t1".into(),
                        content: serde_json::json!([1, 2]),
                        status: ToolResultStatus::Error,
                    })],
                },
            ],
        );
        request.system = "be brief".into();
        request.tools.push(ToolDefinition {
            name: "check_balance".into(),
            description: "balance".into(),
            input_schema: serde_json::json!({"type": "object"}),
        });
        let parts = to_converse(&request).expect("maps");
        assert_eq!(parts.system.len(), 1);
        assert_eq!(parts.messages.len(), 3);
        assert!(parts.tool_config.is_some());
        let sdk::ContentBlock::ToolResult(result) = &parts.messages[2].content[0] else {
            panic!("expected a tool result: {:?}", parts.messages[2]);
        };
        assert_eq!(result.status, Some(sdk::ToolResultStatus::Error));
        let sdk::ToolResultContentBlock::Json(doc) = &result.content[0] else {
            panic!("expected JSON content");
        };
        assert_eq!(document_to_json(doc), serde_json::json!({"result": [1, 2]}));
    }
}
