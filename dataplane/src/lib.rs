//! Switchboard's data plane binary, `switchboard`, as a library: the runtime server and its
//! tool executors ([`runtime`], [`tools`]: the `switchboard-runtime` crate, re-exported here
//! under the paths they always had), the gateway's key set for JWT clients ([`jwks`]), and
//! [`scenario`], which runs scenario tests of agents' behaviour (`switchboard test`) against
//! local mode or a gateway.
//!
//! The layers live in crates of their own: the I/O-free agent core and the session
//! protocol in `switchboard-core`, the model clients (Bedrock Converse, OpenAI-compatible,
//! Nova Sonic) in `switchboard-models`, the runtime server in `switchboard-runtime`, the web
//! console in `switchboard-console` (local mode's page, and the gateway's with `--console`),
//! the Example Bank demo tool server in `switchboard-demo-tools`, and — with the default
//! `local` feature — local mode in `switchboard-local`, which runs a folder of agents against
//! the Bedrock simulator (`switchboard-sim`); the shipping build (`--no-default-features`)
//! leaves both out.

pub mod jwks;
pub use switchboard_runtime as runtime;
pub use switchboard_runtime::tools;
