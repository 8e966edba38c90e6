//! What moves with a session from one agent to another: the wire types live in the
//! session protocol crate ([`switchboard_protocol::handoff`]).

pub use switchboard_protocol::handoff::*;
