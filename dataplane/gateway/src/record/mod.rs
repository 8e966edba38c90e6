//! The conversation record as the gateway keeps it: the record itself (entries, the
//! session log, the writer, the store, prices, summaries, the end-of-call webhook) is the
//! `switchboard-record` crate, re-exported here under the paths it always had; this module
//! adds the gateway's side of it — the HTTP API that serves the record to a credential
//! allowed to read it ([`api`]), and restoring a verified caller's memory from it when the
//! gateway opens a runtime session ([`callers`]).

pub mod api;
pub mod callers;

pub use switchboard_record::*;
