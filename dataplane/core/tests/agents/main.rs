//! Property tests of the agent core (no I/O: inputs in, effects out), on the real
//! Example Bank agents resolved from examples/banking.

mod authority;
mod common;
mod compaction;
mod greeting;
mod handoffs;
mod heard;
mod live;
mod memory;
mod models;
mod pipeline;
mod sessions;
mod skills;
mod tool_events;
mod voice;
