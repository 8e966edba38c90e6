//! The web console: the page `switchboard local` serves, and `switchboard gateway --console`
//! on a cluster — so it is its own crate, apart from local mode, and in the shipping build
//! (no simulator). It stands on the gateway: its data routes admit a client as the gateway
//! admits a session ([`admission`]), and the live view asks the gateway's record for prices
//! and redaction ([`live`]).
//!
//! The page and its scripts and styles are plain files under `ui/`, compiled into the
//! binary ([`web`]); [`agents`] is what the Agents panel shows of each agent of a folder
//! (local mode), [`gateway`] the same list from a cluster's routing table, behind the
//! gateway's authentication.

mod admission;
pub mod agents;
pub mod gateway;
pub mod live;
pub mod web;
