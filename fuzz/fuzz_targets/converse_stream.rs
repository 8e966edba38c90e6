//! Bedrock ConverseStream replies as the text client decodes them
//! (`switchboard_models::bedrock::StreamDecoder`). The SDK turns the wire frames into
//! `ConverseStreamOutput` values (its unmarshaller is private to the SDK); this target
//! builds arbitrary sequences of those values from the input — block starts, text and
//! tool-input deltas, block stops, message stops and usage on small block indexes, with
//! fuzzer-chosen strings — so the decoder's tool-call assembly and JSON parsing of tool
//! input see everything a server could send.
#![no_main]

use aws_sdk_bedrockruntime::types as sdk;
use libfuzzer_sys::fuzz_target;
use switchboard_models::bedrock::StreamDecoder;

/// Reads the input as operations: one byte of opcode and index, then a length-prefixed string.
struct Ops<'a>(&'a [u8]);

impl<'a> Ops<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn text(&mut self) -> String {
        let len = usize::from(self.byte().unwrap_or(0)).min(self.0.len());
        let (s, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8_lossy(s).into_owned()
    }
}

fn event(op: u8, index: i32, text: String) -> Option<sdk::ConverseStreamOutput> {
    Some(match op % 6 {
        0 => {
            let start = sdk::ToolUseBlockStart::builder().tool_use_id(format!("t{index}")).name(text).build().ok()?;
            sdk::ConverseStreamOutput::ContentBlockStart(
                sdk::ContentBlockStartEvent::builder()
                    .content_block_index(index)
                    .start(sdk::ContentBlockStart::ToolUse(start))
                    .build()
                    .ok()?,
            )
        }
        1 => sdk::ConverseStreamOutput::ContentBlockDelta(
            sdk::ContentBlockDeltaEvent::builder()
                .content_block_index(index)
                .delta(sdk::ContentBlockDelta::Text(text))
                .build()
                .ok()?,
        ),
        2 => {
            let delta = sdk::ToolUseBlockDelta::builder().input(text).build().ok()?;
            sdk::ConverseStreamOutput::ContentBlockDelta(
                sdk::ContentBlockDeltaEvent::builder()
                    .content_block_index(index)
                    .delta(sdk::ContentBlockDelta::ToolUse(delta))
                    .build()
                    .ok()?,
            )
        }
        3 => sdk::ConverseStreamOutput::ContentBlockStop(
            sdk::ContentBlockStopEvent::builder().content_block_index(index).build().ok()?,
        ),
        4 => sdk::ConverseStreamOutput::MessageStop(
            sdk::MessageStopEvent::builder().stop_reason(sdk::StopReason::from(text.as_str())).build().ok()?,
        ),
        _ => {
            let n = i32::from_le_bytes([text.len() as u8, index as u8, 0, if index % 2 == 0 { 0x80 } else { 0 }]);
            let usage = sdk::TokenUsage::builder().input_tokens(n).output_tokens(index).total_tokens(n).build().ok()?;
            let metrics = sdk::ConverseStreamMetrics::builder().latency_ms(1).build().ok()?;
            sdk::ConverseStreamOutput::Metadata(
                sdk::ConverseStreamMetadataEvent::builder().usage(usage).metrics(metrics).build(),
            )
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let mut ops = Ops(data);
    let mut decoder = StreamDecoder::default();
    while let Some(op) = ops.byte() {
        // The low three bits pick the operation, the rest a block index in -2..=29.
        let index = i32::from(op >> 3) - 2;
        let text = ops.text();
        let Some(event) = event(op & 7, index, text) else { continue };
        let _ = decoder.on_event(event);
        let _ = decoder.stopped();
    }
});
