//! MCP server answers as the runtime's MCP client reads them
//! (`switchboard_runtime::tools::mcp::decode_tool_answer`): a JSON body or an event
//! stream (progress notifications, pings, other responses and the answer), then the
//! `tools/call` result (structured content, text content, `isError`, JSON-RPC errors).
//! The first byte picks the body kind and the piece size the stream arrives in.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_runtime::tools::mcp::decode_tool_answer;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    let is_stream = mode & 1 == 1;
    let piece = usize::from(mode >> 1).max(1);
    let _ = decode_tool_answer(body, is_stream, 7, piece);
});
