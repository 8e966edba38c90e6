//! Switchboard's data plane runtime: the runtime server that serves one agent over the
//! session protocol ([`runtime`]), the tool executors it runs for the agent core
//! ([`tools`]), the Example Bank demo tool server ([`demo_tools`]), the web console
//! ([`console`]: local mode's page, and the gateway's with `--console`), and — with the default
//! `local` feature — local mode ([`local`]), which runs a folder of agents against the
//! Bedrock simulator. [`scenario`] runs scenario tests of agents' behaviour
//! (`switchboard test`) against local mode or a gateway.
//!
//! The layers live in crates of their own: the I/O-free agent core and the session
//! protocol in `switchboard-core`, the model clients (Bedrock Converse, OpenAI-compatible,
//! Nova Sonic) in `switchboard-models`, and the Bedrock simulator in `switchboard-sim`,
//! which the shipping build (`--no-default-features`) leaves out.

pub mod console;
pub mod demo_tools;
pub mod jwks;
#[cfg(feature = "local")]
pub mod local;
pub mod runtime;
pub mod scenario;
pub mod tools;
