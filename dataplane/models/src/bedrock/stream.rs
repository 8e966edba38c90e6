//! Decoding of a ConverseStream reply: turns the SDK's stream events into
//! [`ModelEvent`]s, assembling each tool call's input from its streamed JSON pieces.

use std::collections::HashMap;

use aws_sdk_bedrockruntime::types as sdk;

use super::convert::stop_reason;
use crate::{ModelError, ModelEvent, ToolUse, Usage};

/// The state of one reply being decoded.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    tools: HashMap<i32, PendingTool>,
    stopped: bool,
}

#[derive(Debug)]
struct PendingTool {
    id: String,
    name: String,
    input: String,
}

impl StreamDecoder {
    /// Whether the reply's `messageStop` has arrived (the stream may end cleanly after it).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Decodes one event; `None` when it carries nothing for the caller.
    pub fn on_event(&mut self, event: sdk::ConverseStreamOutput) -> Result<Option<ModelEvent>, ModelError> {
        Ok(match event {
            sdk::ConverseStreamOutput::ContentBlockStart(start) => {
                if let Some(sdk::ContentBlockStart::ToolUse(tool)) = start.start {
                    self.tools.insert(
                        start.content_block_index,
                        PendingTool { id: tool.tool_use_id, name: tool.name, input: String::new() },
                    );
                }
                None
            }
            sdk::ConverseStreamOutput::ContentBlockDelta(delta) => match delta.delta {
                Some(sdk::ContentBlockDelta::Text(text)) if !text.is_empty() => Some(ModelEvent::TextDelta(text)),
                Some(sdk::ContentBlockDelta::ToolUse(piece)) => {
                    let index = delta.content_block_index;
                    let tool = self.tools.get_mut(&index).ok_or_else(|| ModelError::Protocol {
                        message: format!(
                            "tool input arrived for content block {index}, which did not start a tool call"
                        ),
                    })?;
                    tool.input.push_str(&piece.input);
                    None
                }
                _ => None,
            },
            sdk::ConverseStreamOutput::ContentBlockStop(stop) => match self.tools.remove(&stop.content_block_index) {
                Some(tool) => Some(ModelEvent::ToolUse(finish_tool(tool)?)),
                None => None,
            },
            sdk::ConverseStreamOutput::MessageStop(stop) => {
                self.stopped = true;
                Some(ModelEvent::Stop(stop_reason(&stop.stop_reason)))
            }
            sdk::ConverseStreamOutput::Metadata(metadata) => metadata.usage.map(|usage| {
                ModelEvent::Usage(Usage {
                    input_tokens: u64::try_from(usage.input_tokens).unwrap_or(0),
                    output_tokens: u64::try_from(usage.output_tokens).unwrap_or(0),
                })
            }),
            _ => None,
        })
    }
}

fn finish_tool(tool: PendingTool) -> Result<ToolUse, ModelError> {
    let input = if tool.input.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(&tool.input)
            .map_err(|e| ModelError::InvalidToolInput { tool: tool.name.clone(), message: e.to_string() })?
    };
    Ok(ToolUse { id: tool.id, name: tool.name, input })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StopReason;

    fn tool_start(index: i32) -> sdk::ConverseStreamOutput {
        let start = sdk::ToolUseBlockStart::builder().tool_use_id("t1").name("check_balance").build();
        sdk::ConverseStreamOutput::ContentBlockStart(
            sdk::ContentBlockStartEvent::builder()
                .content_block_index(index)
                .start(sdk::ContentBlockStart::ToolUse(start.expect("valid start")))
                .build()
                .expect("valid event"),
        )
    }

    fn tool_delta(index: i32, input: &str) -> sdk::ConverseStreamOutput {
        let delta = sdk::ToolUseBlockDelta::builder().input(input).build().expect("valid delta");
        sdk::ConverseStreamOutput::ContentBlockDelta(
            sdk::ContentBlockDeltaEvent::builder()
                .content_block_index(index)
                .delta(sdk::ContentBlockDelta::ToolUse(delta))
                .build()
                .expect("valid event"),
        )
    }

    fn block_stop(index: i32) -> sdk::ConverseStreamOutput {
        sdk::ConverseStreamOutput::ContentBlockStop(
            sdk::ContentBlockStopEvent::builder().content_block_index(index).build().expect("valid"),
        )
    }

    #[test]
    fn tool_input_is_assembled_from_pieces() {
        let mut decoder = StreamDecoder::default();
        assert_eq!(decoder.on_event(tool_start(1)).expect("ok"), None);
        assert_eq!(decoder.on_event(tool_delta(1, "{\"account\":")).expect("ok"), None);
        assert_eq!(decoder.on_event(tool_delta(1, " \"12345678\"}")).expect("ok"), None);
        let Some(ModelEvent::ToolUse(tool)) = decoder.on_event(block_stop(1)).expect("ok") else {
            panic!("expected a tool call");
        };
        assert_eq!(tool.input, serde_json::json!({"account": "12345678"}));
        assert!(!decoder.stopped());
        let stop = sdk::MessageStopEvent::builder().stop_reason(sdk::StopReason::ToolUse).build();
        let event = decoder.on_event(sdk::ConverseStreamOutput::MessageStop(stop.expect("valid")));
        assert_eq!(event.expect("ok"), Some(ModelEvent::Stop(StopReason::ToolUse)));
        assert!(decoder.stopped());
    }

    #[test]
    fn broken_tool_input_is_an_error() {
        let mut decoder = StreamDecoder::default();
        decoder.on_event(tool_start(0)).expect("ok");
        decoder.on_event(tool_delta(0, "{\"account\":")).expect("ok");
        let error = decoder.on_event(block_stop(0)).expect_err("must fail");
        assert!(matches!(error, ModelError::InvalidToolInput { .. }), "{error}");
        assert!(decoder.on_event(tool_delta(3, "{}")).is_err(), "delta without a start");
    }
}
