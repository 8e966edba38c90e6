//! Outbound networking shared by tool, MCP and model clients: the HTTP(S) client with its
//! trust settings ([`client`]) and a server-sent-events parser ([`sse`]).

pub mod client;
pub mod sse;

pub use client::{HttpClient, Trust, TrustError};
pub use sse::{SseEvent, SseParser};
