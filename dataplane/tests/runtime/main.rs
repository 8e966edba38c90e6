//! Runtime and local-mode tests on real sockets.

mod authority;
mod banking;
mod common;
mod compaction;
mod failures;
mod fallback;
mod limits;
mod live;
mod metrics;
mod opening;
#[path = "../support/served.rs"]
#[allow(dead_code)]
mod served;
mod tool_events;
mod trust;
