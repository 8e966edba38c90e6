//! The web console: the page `switchboard local` serves, and `switchboard gateway --console`
//! on a cluster — so it is built without the `local` feature too (the shipping image). Its
//! files live beside local mode's (`src/local/`), where the page grew.

/// The Agents panel's entries, from the specs the runtimes serve.
#[path = "local/agents.rs"]
pub mod agents;
/// The console behind the gateway's authentication (`--console`).
#[path = "local/console.rs"]
pub mod gateway;
/// What the live view asks the gateway for: prices and redacted memory.
#[path = "local/live.rs"]
pub mod live;
/// The page and its assets.
#[path = "local/web.rs"]
pub mod web;
