//! Tool transports against real servers: MCP tools on the official MCP Python SDK's
//! Streamable HTTP server (installed by tests/tools/install.sh), HTTP tools over TLS, and
//! tool progress reaching a WebSocket client through local mode.

mod common;
mod https;
mod mcp;
mod progress;
mod secrets;
#[path = "../support/served.rs"]
#[allow(dead_code)]
mod served;
