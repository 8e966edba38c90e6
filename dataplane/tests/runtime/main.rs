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
mod tool_events;
mod trust;
